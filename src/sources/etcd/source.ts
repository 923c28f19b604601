// The etcd watch source (docs/etcd.md, docs/operations.md "Boot and lifecycle"): restores the snapshot cache,
// then keeps EtcdSupervisor (range → watch → resync/backoff) running and hands each delivery to the
// per-key state (apply.ts), which applies it; after each apply the cache is written (coalesced, ../cache.ts).
// Fetch errors (etcd unreachable, auth refused, a missing TLS file …) set `connected=false` and
// `last_failure.last_error_kind="fetch"` and log the backoff WARN; what serves and readiness are untouched.
//
// `SLUICE_ETCD_IDLE_TIMEOUT_MS` (environment) shortens the watch's idle watchdog (watch.ts), so a
// black-box test can prove that a put after a long silence still arrives.
import { rfc3339 } from '../../config-facts.ts';
import type { Config } from '../../config/schema.ts';
import { MSG } from '../../observability/messages.ts';
import { sleep } from '../../util/sleep.ts';
import { type CacheWriteReport, SnapshotCache } from '../cache.ts';
import { type ConfigSource, deferred, type SourceSink } from '../source.ts';
import { EtcdRows } from './apply.ts';
import { RestoredRows } from './cache-rows.ts';
import type { EtcdFetch } from './client.ts';
import { clientOptions, type EtcdPlatform, loggedEndpoints, positiveInt } from './connect.ts';
import { normalizePrefix } from './rows.ts';
import {
  backoffDelay,
  type BackoffPolicy,
  DEFAULT_BACKOFF,
  type EtcdSnapshot,
  EtcdSupervisor,
  type EtcdSupervisorOptions,
} from './supervisor.ts';

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

/** What the etcd source reads and writes (the Gateway has all of it). */
export interface EtcdSourceHost extends SourceSink, CacheWriteReport {
  readonly config: Pick<Config, 'etcd' | 'managed'>;
  readonly platform: EtcdPlatform;
}

export interface EtcdConfigSource extends ConfigSource {
  /** Resolves once every scheduled snapshot-cache write has finished. */
  flushCache(): Promise<void>;
}

export function createEtcdSource(host: EtcdSourceHost, opts: EtcdSourceOptions = {}): EtcdConfigSource {
  return new EtcdSource(host, opts);
}

/**
 * The per-key state and row rules without the watch, for runtimes that poll with ranges instead (Workers,
 * poll.ts): each `applyRange` is applied exactly as a range of the watch source. Nothing is started and
 * no cache is written; connection facts and fetch failures are the caller's to record.
 */
export interface EtcdRangeApplier {
  applyRange(range: EtcdSnapshot): Promise<void>;
}

export function createEtcdRangeApplier(
  sink: SourceSink,
  prefix: string,
  opts: Pick<EtcdSourceOptions, 'onCommit'> = {},
): EtcdRangeApplier {
  const rows = new EtcdRows(sink, normalizePrefix(prefix), () => opts.onCommit?.());
  return { applyRange: (range) => rows.applyRange(range) };
}

class EtcdSource implements EtcdConfigSource {
  readonly firstApplied: Promise<void>;
  readonly localRestore: Promise<void>;
  private readonly first = deferred();
  private readonly restored = deferred();
  private readonly rows: EtcdRows;
  private readonly cache: SnapshotCache | undefined;
  private readonly ctrl = new AbortController();
  private supervisor: EtcdSupervisor | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly host: EtcdSourceHost, private readonly opts: EtcdSourceOptions) {
    this.firstApplied = this.first.promise;
    this.localRestore = this.restored.promise;
    this.cache = SnapshotCache.open(host.platform.files, host.config.managed.snapshot_cache_path, host.log, host);
    this.rows = new EtcdRows(host, normalizePrefix(host.config.etcd.prefix), (writeCache) => {
      if (writeCache) this.cache?.schedule(() => this.rows.cacheDocument());
      this.first.resolve();
      this.opts.onCommit?.();
    });
    host.record.connected(false);
  }

  start(): void {
    this.loop ??= this.run().catch((e: unknown) => {
      // A bug here must not take the gateway down: it keeps serving what it has.
      this.host.log.error(MSG.etcdSourceFailed, { error: (e as Error)?.message ?? String(e) });
    });
  }

  /** etcd is the source of truth: a SIGHUP changes nothing. */
  reload(): Promise<void> {
    this.host.log.info(MSG.sighupIgnoredEtcd);
    return Promise.resolve();
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
      // The boot waits for this before deciding whether to log the wait for a first configuration.
      this.restored.resolve();
    }
    const supervisor = await this.connectable();
    if (!supervisor) return;
    this.supervisor = supervisor;
    supervisor.start();
  }

  /** Boot: a usable cache is applied before etcd is read (the proxy binds at once); anything else is ignored. */
  private async restoreCache(): Promise<void> {
    if (!this.cache) return;
    const restored = new RestoredRows(this.rows.prefix);
    const doc = await this.cache.read(this.rows.prefix, (d) => restored.verify(d));
    if (!doc || this.ctrl.signal.aborted) return;
    this.host.log.info(MSG.cacheRestored, {
      path: this.cache.path,
      revision: doc.revision,
      written_at: doc.written_at,
      resources: restored.values.size,
    });
    await this.rows.applyRestored(restored, doc);
  }

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
        this.host.recordFailure('fetch', message);
        const delay = backoffDelay(attempt, policy);
        this.host.log.warn(MSG.etcdBackoff, { error: message, backoff_ms: delay });
        await sleep(delay, this.ctrl.signal);
      }
    }
    return undefined;
  }

  private async supervisorOptions(): Promise<EtcdSupervisorOptions> {
    const { host, rows } = this;
    const c = host.config.etcd;
    const idle = this.opts.idleTimeoutMs ?? positiveInt(host.platform.env.SLUICE_ETCD_IDLE_TIMEOUT_MS);
    return {
      ...(await clientOptions(c, host.platform, this.opts.fetch)),
      prefix: `${rows.prefix}/`,
      ...(idle !== undefined ? { idleTimeoutMs: idle } : {}),
      backoff: this.opts.backoff ?? DEFAULT_BACKOFF,
      clock: host.clock,
      onSnapshot: (s) => rows.applyRange(s),
      onRange: (r) => rows.applyPages(r),
      onEvents: (b) => rows.applyEvents(b),
      onError: (e) => host.recordFailure('fetch', e.message),
      onBackoff: (e, ms) => host.log.warn(MSG.etcdBackoff, { error: e.message, backoff_ms: ms }),
      onConnected: (connected) => {
        host.record.connected(connected);
        if (connected) {
          host.log.info(MSG.etcdConnected, { endpoints: loggedEndpoints(c.endpoints), prefix: rows.prefix });
        }
      },
      onProgress: () => host.record.observed({ at: rfc3339(new Date(host.clock())) }),
      onRewatch: (from) => host.log.debug(MSG.etcdRewatch, { from_revision: from }),
    };
  }
}
