// What configuration this instance observed and serves (SPEC §8). The sources record facts here; the
// `state` is derived by one pure function from those facts, never tracked as a flag of its own.
import type { ResourceKind } from '../resources/schema.ts';

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

/** SPEC §8: first match wins. */
export function deriveConfigState(f: ConfigFacts): ConfigStateName {
  if (!f.applied) return 'never_loaded';
  if (f.latestLoadFailed) return 'out_of_sync';
  const serving = total(f.applied.resource_counts) > 0;
  if (f.rejected.length > 0) return serving ? 'degraded' : 'out_of_sync';
  if (!serving) return 'empty';
  return 'synced';
}

function total(counts: Record<string, number>): number {
  let n = 0;
  for (const v of Object.values(counts)) n += v;
  return n;
}

/** The `/status/config` body. `now` is used for `serving_stale_age_seconds`. */
export function configStatusBody(f: ConfigFacts, now: Date): Record<string, unknown> {
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
