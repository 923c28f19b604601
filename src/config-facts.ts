// What configuration this instance observed and serves (docs/operations.md, docs/etcd.md "Hashes and
// status"): sources record facts through `ConfigFactsRecorder`; `/status/config`, the admin app and the
// aisix_config_* metrics read a read-only view; the `state` is derived by one pure function.
import type { ResourceKind } from './resources/kinds.ts';

export type ConfigStateName = 'synced' | 'degraded' | 'out_of_sync' | 'empty' | 'never_loaded';
export type FailureKind = 'fetch' | 'parse' | 'validate' | 'apply';

export interface RejectedRow {
  resource_kind: string;
  resource_id: string;
  last_error_kind: string;
  last_error: string;
  first_seen_at: string;
  last_seen_at: string;
  /** Set while a previous good value of this key keeps serving (last-known-good pin). */
  serving_stale_since?: string;
}

export interface Applied {
  applied_revision?: number;
  config_hash: string;
  apply_seq: number;
  applied_at: string;
  /** Only the kinds that have resources (AISIX). */
  resource_counts: Partial<Record<ResourceKind, number>>;
}

/** Every timestamp of `/status/config`: RFC 3339, UTC, whole seconds (`2026-01-02T03:04:05Z`). */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** What a source says about a snapshot it hands to `apply`. */
export interface ApplyMeta {
  configHash: string;
  revision?: number;
  /**
   * A counted reload (`aisix_config_reloads_total`): a full sync of the source or a file load; an etcd
   * watch event or a cache restore is not. Default true.
   */
  counted?: boolean;
}

export interface ConfigFacts {
  sourceType: 'file' | 'etcd';
  connected?: boolean;
  observedRevision?: number;
  sourceHash?: string;
  observedAt?: string;
  applied?: Applied;
  /** File mode: the latest load of the file failed (a bad SIGHUP reload). */
  latestLoadFailed: boolean;
  /** The latest load (full sync, watch event, file load) or fetch: successful iff nothing is rejected. */
  lastReload?: { successful: boolean; at: string };
  /** When the latest clean load happened (`aisix_config_last_reload_success_timestamp_seconds`). */
  lastSuccessAt?: string;
  /**
   * Sticky: the latest failure. A fetch/parse/validate failure of the source, or the first rejected row of
   * a load that left rows rejected (`last_error_kind` is then the row's, e.g. `schema_failed`).
   */
  lastFailure: { at: string; last_error_kind: FailureKind | string; last_error: string } | null;
  rejected: RejectedRow[];
  partiallyCompatible: { resource_kind: string; field: string; count: number }[];
  /** Per kind, how many served rows are partially compatible (a row with two ignored fields counts once). */
  partiallyCompatibleRows: Record<string, number>;
  /** etcd mode with `managed.snapshot_cache_path`: whether the latest write of the cache succeeded. */
  snapshotCache?: SnapshotCacheHealth;
  /** Where rate-limit counters live and whether they are shared right now (`rate_limit_store`). */
  rateLimitStore?: { backend: 'memory' | 'redis'; shared: boolean; since?: string };
}

/** `/status/config` `snapshot_cache`: the path (no content), and the latest write's outcome. */
export interface SnapshotCacheHealth {
  path: string;
  /** False from a failed write until the next successful one; true before the first write. */
  healthy: boolean;
  last_error?: string;
  last_written_at?: string;
}

/** What readers get: the facts, not a handle to change them. */
export type ConfigFactsView = DeepReadonly<ConfigFacts>;
type DeepReadonly<T> = T extends (infer E)[] ? readonly DeepReadonly<E>[]
  : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
  : T;

/** The one writer of the config facts; each method is something a source (or the gateway) observed. */
export class ConfigFactsRecorder {
  private readonly f: ConfigFacts;

  constructor(sourceType: 'file' | 'etcd') {
    this.f = {
      sourceType,
      latestLoadFailed: false,
      lastFailure: null,
      rejected: [],
      partiallyCompatible: [],
      partiallyCompatibleRows: {},
    };
  }

  get view(): ConfigFactsView {
    return this.f;
  }

  /** The source read its content: `source_hash` / `observed_revision` when known, `observed_at` always. */
  observed(o: { at: string; sourceHash?: string; revision?: number }): void {
    if (o.sourceHash !== undefined) this.f.sourceHash = o.sourceHash;
    if (o.revision !== undefined) this.f.observedRevision = o.revision;
    this.f.observedAt = o.at;
  }

  /** etcd: whether the source is connected right now. */
  connected(yes: boolean): void {
    this.f.connected = yes;
  }

  /** The rows the latest load could not accept (the load is successful iff there are none). */
  rejected(rows: RejectedRow[]): void {
    this.f.rejected = rows;
  }

  /** Served rows with fields Sluice ignores, and kinds it accepts and does not serve. */
  partiallyCompatible(fields: ConfigFacts['partiallyCompatible'], rows: Record<string, number>): void {
    this.f.partiallyCompatible = fields;
    this.f.partiallyCompatibleRows = rows;
  }

  /** File mode: the latest load of the file failed (true) or applied (false). */
  latestLoadFailed(yes: boolean): void {
    this.f.latestLoadFailed = yes;
  }

  /**
   * A snapshot was applied (after `rejected`): `applied`, `last_reload` and, by whether rows were
   * rejected, `last_success_at` or the sticky `last_failure` from the first rejected row.
   */
  applied(a: Applied, at: string): void {
    this.f.applied = a;
    const rejected = this.f.rejected;
    const clean = rejected.length === 0;
    this.f.lastReload = { successful: clean, at };
    if (clean) this.f.lastSuccessAt = at;
    else {
      const first = rejected[0]!; // non-null: not clean
      this.f.lastFailure = { at, last_error_kind: first.last_error_kind, last_error: first.last_error };
    }
  }

  /** A load or fetch failed; the served snapshot is untouched. `last_failure` is sticky. */
  failed(kind: FailureKind, error: string, at: string): void {
    this.f.lastReload = { successful: false, at };
    this.f.lastFailure = { at, last_error_kind: kind, last_error: error };
  }

  rateLimitStore(s: NonNullable<ConfigFacts['rateLimitStore']>): void {
    this.f.rateLimitStore = s;
  }

  /** The snapshot cache is configured (etcd mode): healthy until a write fails. */
  cacheConfigured(path: string): void {
    this.f.snapshotCache = { path, healthy: true };
  }

  cacheWritten(path: string, at: string): void {
    this.f.snapshotCache = { path, healthy: true, last_written_at: at };
  }

  cacheWriteFailed(path: string, error: string): void {
    const prev = this.f.snapshotCache;
    this.f.snapshotCache = {
      path,
      healthy: false,
      last_error: error,
      ...(prev?.last_written_at ? { last_written_at: prev.last_written_at } : {}),
    };
  }
}

/** docs/operations.md: first match wins. */
export function deriveConfigState(f: ConfigFactsView): ConfigStateName {
  if (!f.applied) return 'never_loaded';
  if (f.latestLoadFailed) return 'out_of_sync';
  const serving = total(f.applied.resource_counts) > 0;
  if (f.rejected.length > 0) return serving ? 'degraded' : 'out_of_sync';
  if (!serving) return 'empty';
  return 'synced';
}

function total(counts: Readonly<Record<string, number>>): number {
  let n = 0;
  for (const v of Object.values(counts)) n += v;
  return n;
}

/** The `/status/config` body. `now` is used for `serving_stale_age_seconds`. */
export function configStatusBody(f: ConfigFactsView, now: Date): Record<string, unknown> {
  const source: Record<string, unknown> = { type: f.sourceType };
  if (f.sourceType === 'etcd') {
    source.connected = f.connected ?? false;
    if (f.observedRevision !== undefined) source.observed_revision = f.observedRevision;
  }
  if (f.sourceHash !== undefined) source.source_hash = f.sourceHash;
  if (f.observedAt !== undefined) source.observed_at = f.observedAt;
  const body: Record<string, unknown> = { state: deriveConfigState(f), source };
  if (f.applied) {
    const a = f.applied;
    body.applied = {
      ...(a.applied_revision !== undefined ? { applied_revision: a.applied_revision } : {}),
      config_hash: a.config_hash,
      apply_seq: a.apply_seq,
      applied_at: a.applied_at,
      resource_counts: a.resource_counts,
    };
  }
  if (f.lastReload) body.last_reload = f.lastReload;
  body.last_failure = f.lastFailure;
  body.rejected = f.rejected.map((
    r,
  ) => (r.serving_stale_since
    ? {
      ...r,
      serving_stale_age_seconds: Math.max(0, Math.floor((now.getTime() - Date.parse(r.serving_stale_since)) / 1000)),
    }
    : r)
  );
  body.partially_compatible = f.partiallyCompatible;
  if (f.rateLimitStore) body.rate_limit_store = f.rateLimitStore;
  if (f.snapshotCache) body.snapshot_cache = f.snapshotCache;
  return body;
}
