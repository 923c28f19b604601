// The etcd configuration source (docs/etcd.md, docs/operations.md), on top of EtcdSupervisor (range → watch →
// resync/backoff). This file keeps the per-key state and turns each delivery into an applied snapshot:
//
// - `observed`: the latest value of every key under `<prefix>/`, parsed once when it changes (rows.ts);
// - `served`: the value each key serves (its latest, or a pinned last-known-good). Each row is judged
//   alone (rows.ts `judgeKey`), so a batch re-judges only the keys it touched: a watch event on a
//   20,000-row prefix parses one row, then rebuilds the Snapshot and the two docs/etcd.md hashes from what is
//   already in memory;
// - every range and every watch batch is one load (`applied_revision` = the batch's revision; `apply_seq`
//   moves when the served `config_hash` changes), rejected rows included, followed by a (coalesced)
//   snapshot-cache write. A range is a counted reload (`aisix_config_reloads_total`), a watch batch is not;
// - the first successful read applies, even of an empty prefix (state `empty`, ready: the proxy binds);
// - rows loaded with ignored fields log AISIX's WARN once per (kind, field set); rows of kinds Sluice
//   accepts and does not serve log a WARN once per kind;
// - fetch errors (etcd unreachable, auth refused, missing TLS file …) set `connected=false` and
//   `last_failure.last_error_kind="fetch"` and log the backoff WARN; what serves and readiness are untouched.
//
// Test knob: `SLUICE_ETCD_IDLE_TIMEOUT_MS` (environment) shortens the watch's idle watchdog (default
// 120 s, see watch.ts), so a black-box test can prove that a put after a long silence still arrives.
import type { Gateway } from '../../gateway.ts';
import { MSG } from '../../observability/messages.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import { type RejectedRow, rfc3339 } from '../../config-facts.ts';
import { CACHE_FORMAT, CACHE_VERSION, type CachedPin, type CacheHeader, encodeCache, SnapshotCache } from '../cache.ts';
import type { ConfigSource } from '../source.ts';
import type { EtcdFetch, EtcdKv } from './client.ts';
import {
  compareKeys,
  hashLines,
  judgeKey,
  normalizePrefix,
  partialCompatibility,
  type Problem,
  resourceSet,
  type RowValue,
  rowValue,
  type ServedValue,
} from './rows.ts';
import {
  backoffDelay,
  type BackoffPolicy,
  DEFAULT_BACKOFF,
  type EtcdEventBatch,
  type EtcdSnapshot,
  EtcdSupervisor,
  type EtcdSupervisorOptions,
} from './supervisor.ts';
import { sleep } from '../../util/sleep.ts';

export interface EtcdSourceOptions {
  /** Reconnect backoff (default 1 s doubling to 60 s). */
  backoff?: BackoffPolicy;
  /** Watch idle watchdog; default: `SLUICE_ETCD_IDLE_TIMEOUT_MS` from the environment, else 120 s. */
  idleTimeoutMs?: number;
  /** Called after every apply attempt (range, watch batch, cache restore); tests use it as a latch. */
  onCommit?: () => void;
  /** Replaces the transport (tests hold requests back with it); TLS settings are then ignored. */
  fetch?: EtcdFetch;
}

export interface EtcdConfigSource extends ConfigSource {
  /** Resolves once every scheduled snapshot-cache write has finished. */
  flushCache(): Promise<void>;
}

export function createEtcdSource(gw: Gateway, opts: EtcdSourceOptions = {}): EtcdConfigSource {
  return new EtcdSource(gw, opts);
}

/**
 * The etcd source's per-key state and row rules without its watch: each `applyRange` is one full-range
 * delivery, judged, hashed, pinned and applied exactly as a range of the watch source (the same
 * `onSnapshot` → commit → publish path; an empty prefix applies as state `empty`). For runtimes that cannot hold a watch and poll with ranges instead (Workers, see poll.ts).
 * Nothing is started; connection facts and fetch failures are the caller's to record.
 */
export interface EtcdRangeApplier {
  applyRange(range: EtcdSnapshot): Promise<void>;
}

export function createEtcdRangeApplier(gw: Gateway, opts: Pick<EtcdSourceOptions, 'onCommit'> = {}): EtcdRangeApplier {
  const source = new EtcdSource(gw, opts);
  // Settled at once, in the creator's context: nothing awaits them here, and on Workers a later apply
  // would otherwise resolve a promise of a request that has finished (workerd logs that as an error).
  source.settleLatches();
  return { applyRange: (range) => source.applyRange(range) };
}

const NO_TIMEOUT_MS = 2 ** 31 - 1;

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Index of `key` in sorted `keys`, or of where it would be inserted. */
function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(keys[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

class EtcdSource implements EtcdConfigSource {
  readonly firstApplied: Promise<void>;
  readonly localRestore: Promise<void>;
  private readonly first = deferred();
  private readonly restored = deferred();
  private readonly prefix: string;
  private readonly cache: SnapshotCache | undefined;
  private readonly ctrl = new AbortController();
  private supervisor: EtcdSupervisor | undefined;
  private loop: Promise<void> | undefined;

  /** key → latest observed value; `keys` is the same set in etcd key order. */
  private readonly observed = new Map<string, RowValue>();
  /** key → its latest mod_revision (the admin lists' `revision`); entries of deleted keys are never read. */
  private readonly modRevisions = new Map<string, number>();
  private keys: string[] = [];
  /** key → the value it serves (latest or pinned). */
  private served = new Map<string, ServedValue>();
  /** key → why its latest value does not serve. */
  private problems = new Map<string, Problem>();
  /** WARN-once memory: `kind \0 ignored fields` of partially compatible rows, and kinds not served. */
  private readonly warned = new Set<string>();
  /** Keys in the order `served` was decided over (equal to `keys` once etcd has been read). */
  private servedOrder: readonly string[] = [];
  private rejected = new Map<string, RejectedRow>();
  private snapshot: Snapshot | undefined;
  private configHash: string | undefined;
  private appliedRevision = 0;

  constructor(private readonly gw: Gateway, private readonly opts: EtcdSourceOptions) {
    this.firstApplied = this.first.promise;
    this.localRestore = this.restored.promise;
    this.prefix = normalizePrefix(gw.config.etcd.prefix);
    this.cache = SnapshotCache.open(gw.platform.files, gw.config.managed.snapshot_cache_path, gw.log, gw);
    gw.record.connected(false);
  }

  start(): void {
    this.loop ??= this.run().catch((e: unknown) => {
      // A bug here must not take the gateway down: it keeps serving what it has.
      this.gw.log.error(MSG.etcdSourceFailed, { error: (e as Error)?.message ?? String(e) });
    });
  }

  async stop(): Promise<void> {
    this.ctrl.abort();
    this.restored.resolve();
    await this.loop;
    await this.supervisor?.stop();
    await this.cache?.flush();
  }

  async flushCache(): Promise<void> {
    await this.cache?.flush();
  }

  private async run(): Promise<void> {
    try {
      await this.restoreCache();
    } finally {
      // main.ts waits for this before deciding whether to log the wait for a first configuration.
      this.restored.resolve();
    }
    const supervisor = await this.connectable();
    if (!supervisor) return;
    this.supervisor = supervisor;
    supervisor.start();
  }

  // -- connecting ------------------------------------------------------------------------------------

  /**
   * Reads the credentials and TLS files and builds the supervisor. Anything missing is a fetch error,
   * retried on the reconnect backoff (a certificate mounted late by a sidecar is picked up).
   */
  private async connectable(): Promise<EtcdSupervisor | undefined> {
    const policy = this.opts.backoff ?? DEFAULT_BACKOFF;
    for (let attempt = 0; !this.ctrl.signal.aborted; attempt++) {
      try {
        return new EtcdSupervisor(await this.supervisorOptions());
      } catch (e) {
        const message = (e as Error).message;
        this.gw.recordFailure('fetch', message);
        const delay = backoffDelay(attempt, policy);
        this.gw.log.warn(MSG.etcdBackoff, { error: message, backoff_ms: delay });
        await sleep(delay, this.ctrl.signal);
      }
    }
    return undefined;
  }

  private async supervisorOptions(): Promise<EtcdSupervisorOptions> {
    const c = this.gw.config.etcd;
    const env = this.gw.platform.env;
    let password: string | undefined;
    if (c.password_env) {
      password = env[c.password_env];
      if (!password) {
        throw new Error(
          `etcd.password_env: environment variable ${c.password_env} is ${
            password === undefined ? 'not set' : 'empty'
          }`,
        );
      }
    }
    const { fetch, tls } = this.opts.fetch ? { fetch: this.opts.fetch, tls: false } : await this.transport();
    const idle = this.opts.idleTimeoutMs ?? positiveInt(env.SLUICE_ETCD_IDLE_TIMEOUT_MS);
    return {
      endpoints: c.endpoints,
      prefix: `${this.prefix}/`,
      ...(c.user !== undefined ? { user: c.user } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(fetch ? { fetch } : {}),
      tls,
      dialTimeoutMs: c.dial_timeout_ms || NO_TIMEOUT_MS,
      requestTimeoutMs: c.request_timeout_ms || NO_TIMEOUT_MS,
      ...(idle !== undefined ? { idleTimeoutMs: idle } : {}),
      backoff: this.opts.backoff ?? DEFAULT_BACKOFF,
      onSnapshot: (s) => this.onSnapshot(s),
      onEvents: (b) => this.onEvents(b),
      onError: (e) => this.gw.recordFailure('fetch', e.message),
      onBackoff: (e, ms) => this.gw.log.warn(MSG.etcdBackoff, { error: e.message, backoff_ms: ms }),
      onConnected: (connected) => {
        this.gw.record.connected(connected);
        // Userinfo in an endpoint URL would be a credential: never logged.
        if (connected) {
          this.gw.log.info(MSG.etcdConnected, {
            endpoints: c.endpoints.map((e) => e.replace(/\/\/[^@/]*@/, '//')),
            prefix: this.prefix,
          });
        }
      },
      onProgress: () => {
        this.gw.record.observed({ at: rfc3339(this.gw.now()) });
      },
      onRewatch: (from) => this.gw.log.debug(MSG.etcdRewatch, { from_revision: from }),
    };
  }

  /** The fetch to talk to etcd with: the global one, or the platform's TLS fetch with the configured files. */
  private async transport(): Promise<{ fetch?: EtcdFetch; tls: boolean }> {
    const t = this.gw.config.etcd.tls;
    if (!t) return { tls: false };
    const paths = { ca: t.ca_cert_file, cert: t.client_cert_file, key: t.client_key_file };
    if (!paths.ca && !paths.cert && !paths.key) return { tls: true };
    if (Boolean(paths.cert) !== Boolean(paths.key)) {
      throw new Error('etcd.tls: client_cert_file and client_key_file must be given together');
    }
    const files = this.gw.platform.files;
    if (!files) {
      throw new Error('etcd.tls: reading certificate files needs file access, which this runtime does not have');
    }
    const read = async (path: string | undefined, field: string): Promise<Uint8Array | undefined> => {
      if (!path) return undefined;
      try {
        return await files.read(path);
      } catch (e) {
        throw new Error(`etcd.tls.${field}: cannot read ${path}: ${(e as Error).message}`);
      }
    };
    const material = {
      ca: await read(paths.ca, 'ca_cert_file'),
      cert: await read(paths.cert, 'client_cert_file'),
      key: await read(paths.key, 'client_key_file'),
    };
    const withTls = this.gw.platform.fetchWithTls;
    if (!withTls) {
      throw new Error(
        `etcd.tls: the ${this.gw.platform.name} runtime cannot use a private CA or client certificate for etcd`,
      );
    }
    const fetch: EtcdFetch = withTls({
      ...(material.ca ? { ca: material.ca } : {}),
      ...(material.cert ? { cert: material.cert } : {}),
      ...(material.key ? { key: material.key } : {}),
    });
    return { fetch, tls: true };
  }

  // -- deliveries ------------------------------------------------------------------------------------

  /** `firstApplied` and `localRestore` resolve now (range polling has no start-up sequence to wait for). */
  settleLatches(): void {
    this.restored.resolve();
    this.first.resolve();
  }

  /** A full range from outside the supervisor (range polling, `createEtcdRangeApplier`). */
  applyRange(range: EtcdSnapshot): Promise<void> {
    return this.onSnapshot(range);
  }

  /** Records a put; parses only when the value changed. Returns whether the key is new. */
  private observe(kv: EtcdKv): boolean {
    this.modRevisions.set(kv.key, kv.modRevision);
    const old = this.observed.get(kv.key);
    if (old && old.raw === kv.value && !kv.invalidUtf8) return false;
    const serving = this.served.get(kv.key);
    const value = serving && serving.raw === kv.value && !kv.invalidUtf8
      ? serving
      : rowValue(this.prefix, kv.key, kv.value, {
        ...(kv.invalidUtf8 ? { invalidUtf8: true } : {}),
        rev: kv.modRevision,
      });
    this.observed.set(kv.key, value);
    return old === undefined;
  }

  /** Keeps `keys` sorted after membership changes of `changed` keys. */
  private reindex(changed: readonly string[]): void {
    if (changed.length > 64) {
      this.keys = [...this.observed.keys()].sort(compareKeys);
      return;
    }
    for (const key of changed) {
      const i = lowerBound(this.keys, key);
      const present = this.keys[i] === key;
      if (this.observed.has(key) && !present) this.keys.splice(i, 0, key);
      else if (!this.observed.has(key) && present) this.keys.splice(i, 1);
    }
  }

  private async onSnapshot(s: EtcdSnapshot): Promise<void> {
    const seen = new Set<string>();
    const touched = new Set<string>();
    const membership: string[] = [];
    for (const kv of s.kvs) {
      seen.add(kv.key);
      const before = this.observed.get(kv.key);
      if (this.observe(kv)) membership.push(kv.key);
      if (this.observed.get(kv.key) !== before) touched.add(kv.key);
    }
    for (const key of [...this.observed.keys()]) {
      if (seen.has(key)) continue;
      this.observed.delete(key);
      membership.push(key);
      touched.add(key);
    }
    this.reindex(membership);
    await this.commit(s.revision, touched, true);
  }

  private async onEvents(b: EtcdEventBatch): Promise<void> {
    const touched = new Set<string>();
    const membership: string[] = [];
    for (const ev of b.events) {
      touched.add(ev.key);
      if (ev.type === 'put') {
        if (this.observe(ev)) membership.push(ev.key);
      } else if (this.observed.delete(ev.key)) {
        membership.push(ev.key);
      }
    }
    this.reindex(membership);
    await this.commit(b.revision, touched, false);
  }

  private async commit(revision: number, touched: ReadonlySet<string>, fullRead: boolean): Promise<void> {
    // Each row is judged alone: only the touched keys can change.
    const served = new Map(this.served);
    const problems = new Map(this.problems);
    const changedKeys = new Set<string>();
    for (const key of touched) {
      const before = served.get(key);
      const { served: after, problem } = judgeKey(this.observed.get(key), before);
      if (after) served.set(key, after);
      else served.delete(key);
      if (problem) problems.set(key, problem);
      else problems.delete(key);
      if (after !== before) changedKeys.add(key);
    }
    await this.publish(served, problems, changedKeys, this.keys, revision, {
      touched,
      allSeen: fullRead,
      sourceLines: this.keys.map((k) => this.observed.get(k)!.line), // non-null: keys mirrors observed
      counted: fullRead,
      writeCache: true,
      logLevel: fullRead ? 'info' : 'debug',
    });
  }

  /**
   * Swaps in what serves: hashes first (the only awaits), then every fact and the snapshot in one
   * synchronous step, so `/status/config` never shows half of an apply.
   */
  private async publish(
    served: Map<string, ServedValue>,
    problems: Map<string, Problem>,
    changedKeys: ReadonlySet<string>,
    order: readonly string[],
    revision: number,
    o: {
      touched: ReadonlySet<string>;
      allSeen: boolean;
      sourceLines?: Uint8Array[];
      counted: boolean;
      writeCache: boolean;
      logLevel: 'info' | 'debug';
    },
  ): Promise<void> {
    const changed = !this.snapshot || this.configHash === undefined || changedKeys.size > 0;
    let snapshot = this.snapshot;
    let configHash = this.configHash;
    // Both digests run off the main thread where the runtime's Web Crypto does (Node: the libuv pool).
    const [sourceHash, newConfigHash] = await Promise.all([
      o.sourceLines ? hashLines(o.sourceLines) : undefined,
      changed ? hashLines(order.filter((k) => served.has(k)).map((k) => served.get(k)!.line)) : undefined,
    ]);
    if (changed || !snapshot || configHash === undefined) {
      snapshot = new Snapshot(resourceSet(order, served));
      configHash = newConfigHash;
      for (const [key, v] of served) {
        const rev = this.modRevisions.get(key);
        if (rev !== undefined) snapshot.revisions.set(`${v.parsed.kind}/${v.parsed.id}`, rev);
      }
    }
    const now = rfc3339(this.gw.now());
    const rejected = this.rejectedRows(problems, o.touched, o.allSeen, now);

    // Synchronous from here on.
    const record = this.gw.record;
    if (changed) {
      const pc = partialCompatibility(served.values());
      record.partiallyCompatible(pc.fields, pc.rows);
      for (const key of changedKeys) this.warnPartial(served.get(key));
    }
    this.served = served;
    this.problems = problems;
    this.servedOrder = order;
    this.rejected = rejected;
    record.rejected([...rejected].sort(([a], [b]) => compareKeys(a, b)).map(([, r]) => r));
    if (sourceHash !== undefined) record.observed({ sourceHash, revision, at: now });
    this.snapshot = snapshot;
    this.configHash = configHash;
    this.appliedRevision = revision;
    // non-null: computed above whenever unset
    this.gw.apply(snapshot, { configHash: configHash!, revision, counted: o.counted });
    this.gw.log.log(o.logLevel, MSG.etcdApplied, {
      revision,
      apply_seq: this.gw.facts.applied?.apply_seq,
      resources: snapshot.size,
      rejected: rejected.size,
      config_hash: configHash,
    });
    if (o.writeCache) this.cache?.schedule(() => this.encodeCacheDocument());
    this.first.resolve();
    this.opts.onCommit?.();
  }

  /** AISIX's WARN for a row loaded with ignored fields, once per (kind, field set); once per kind not served. */
  private warnPartial(v: ServedValue | undefined): void {
    if (!v || v.parsed.unknownFields.length === 0) return;
    const p = v.parsed;
    if (p.resource === undefined) {
      if (this.warned.has(p.kind)) return;
      this.warned.add(p.kind);
      this.gw.log.warn(MSG.kindNotServed, { key: v.key, kind: p.kind });
      return;
    }
    const fields = p.unknownFields.join(',');
    const id = `${p.kind}\0${fields}`;
    if (this.warned.has(id)) return;
    if (this.warned.size < 1024) this.warned.add(id);
    this.gw.log.warn(MSG.partiallyCompatibleRow, { key: v.key, kind: p.kind, ignored_fields: fields });
  }

  /** `rejected[]` rows with their timestamps; logs each row that is newly rejected or fails differently. */
  private rejectedRows(
    problems: ReadonlyMap<string, Problem>,
    touched: ReadonlySet<string>,
    allSeen: boolean,
    now: string,
  ): Map<string, RejectedRow> {
    const out = new Map<string, RejectedRow>();
    for (const [key, p] of problems) {
      const old = this.rejected.get(key);
      const same = old !== undefined && old.last_error === p.error && old.last_error_kind === p.errorKind;
      const row: RejectedRow = {
        resource_kind: p.kind,
        resource_id: p.id,
        last_error_kind: p.errorKind,
        last_error: p.error,
        first_seen_at: old?.first_seen_at ?? now,
        last_seen_at: !same || allSeen || touched.has(key) ? now : old.last_seen_at,
      };
      if (p.pinned) row.serving_stale_since = old?.serving_stale_since ?? now;
      out.set(key, row);
      if (!same || p.pinned !== (old.serving_stale_since !== undefined)) {
        this.gw.log.warn(MSG.etcdRowRejected, {
          key,
          resource_kind: p.kind,
          resource_id: p.id,
          error_kind: p.errorKind,
          error: p.error,
          serving_stale: p.pinned,
        });
      }
    }
    return out;
  }

  // -- snapshot cache --------------------------------------------------------------------------------

  /** The cache file's bytes for what serves now; each row's JSON text is memoised on its value. */
  private encodeCacheDocument(): Uint8Array {
    const pins: Record<string, CachedPin> = {};
    const served = this.served;
    for (const [key, r] of this.rejected) {
      if (r.serving_stale_since === undefined || !served.has(key)) continue;
      pins[key] = {
        since: r.serving_stale_since,
        resource_kind: r.resource_kind,
        resource_id: r.resource_id,
        last_error_kind: r.last_error_kind,
        last_error: r.last_error,
        first_seen_at: r.first_seen_at,
        last_seen_at: r.last_seen_at,
      };
    }
    const header: CacheHeader = {
      format: CACHE_FORMAT,
      version: CACHE_VERSION,
      prefix: this.prefix,
      revision: this.appliedRevision,
      written_at: rfc3339(this.gw.now()),
      config_hash: this.configHash ?? '',
      pins,
    };
    const order = this.servedOrder;
    function* rows(): Generator<[string, string]> {
      for (const key of order) {
        const v = served.get(key);
        if (v) yield [key, v.json ??= JSON.stringify(v.raw)];
      }
    }
    return encodeCache(header, rows());
  }

  /** Boot: a usable cache is applied before etcd is read (the proxy binds at once); anything else is ignored. */
  private async restoreCache(): Promise<void> {
    if (!this.cache) return;
    let values = new Map<string, ServedValue>();
    let keys: string[] = [];
    const doc = await this.cache.read(this.prefix, async (d) => {
      values = new Map();
      for (const [key, raw] of Object.entries(d.rows)) {
        const v = rowValue(this.prefix, key, raw);
        if (!v.parsed.ok) return `corrupt: row ${key} does not validate (${v.parsed.error})`;
        values.set(key, v as ServedValue);
      }
      keys = [...values.keys()].sort(compareKeys);
      const hash = await hashLines(keys.map((k) => values.get(k)!.line));
      return hash === d.config_hash ? undefined : 'corrupt: config_hash does not match its rows';
    });
    if (!doc || this.ctrl.signal.aborted) return;
    // A pinned key's latest value was rejected: it serves its cached value, with what the cache says about it.
    const problems = new Map<string, Problem>();
    for (const [key, p] of Object.entries(doc.pins)) {
      if (!values.has(key)) continue;
      problems.set(key, {
        kind: p.resource_kind,
        id: p.resource_id,
        errorKind: p.last_error_kind as Problem['errorKind'],
        error: p.last_error,
        pinned: true,
      });
      this.rejected.set(key, {
        resource_kind: p.resource_kind,
        resource_id: p.resource_id,
        last_error_kind: p.last_error_kind,
        last_error: p.last_error,
        first_seen_at: p.first_seen_at,
        last_seen_at: p.last_seen_at,
        serving_stale_since: p.since,
      });
    }
    this.gw.log.info(MSG.cacheRestored, {
      path: this.cache.path,
      revision: doc.revision,
      written_at: doc.written_at,
      resources: values.size,
    });
    await this.publish(values, problems, new Set(values.keys()), keys, doc.revision, {
      touched: new Set(),
      allSeen: false,
      counted: false,
      writeCache: false,
      logLevel: 'debug',
    });
  }
}

function positiveInt(v: string | undefined): number | undefined {
  if (v === undefined || !/^\d+$/.test(v.trim())) return undefined;
  const n = Number(v.trim());
  return n > 0 ? n : undefined;
}
