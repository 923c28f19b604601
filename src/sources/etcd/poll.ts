// The etcd source by range polling (docs/workers.md "etcd on Workers: range polling"), for runtimes whose
// I/O cannot outlive a request: no watch, no timers. Each read is one full range handed to the watch
// source's row state (apply.ts), so rows, pins, rejected[] and the hashes follow its rules. A range at the
// revision already applied only refreshes `observed_at`; a failed one records the fetch failure and the
// watch source's WARN (`backoff_ms` = the interval) and leaves what serves untouched.
import { rfc3339 } from '../../config-facts.ts';
import type { Config } from '../../config/schema.ts';
import { MSG } from '../../observability/messages.ts';
import type { Platform } from '../../platform.ts';
import type { Clock } from '../../util/clock.ts';
import { type ConfigSource, deferred, type SourceSink } from '../source.ts';
import { EtcdClient, EtcdError, type EtcdFetch, type EtcdRangeResult } from './client.ts';
import { loggedEndpoints } from './connect.ts';
import { normalizePrefix } from './rows.ts';
import { createEtcdRangeApplier, type EtcdRangeApplier } from './source.ts';

export const DEFAULT_POLL_INTERVAL_MS = 10_000;

/** A poll interval setting in seconds (`name` = `value`) as ms; the report refusing it when it is not one. */
export function pollIntervalMs(name: string, value: string | undefined): number | string {
  if (value === undefined) return DEFAULT_POLL_INTERVAL_MS;
  const secs = Number(value.trim());
  if (!/^\d+(\.\d+)?$/.test(value.trim()) || !(secs > 0)) {
    return `${name}: "${value}" is not a positive number of seconds`;
  }
  return secs * 1000;
}

export interface EtcdPollSourceOptions {
  /** Minimum time between two reads (default 10 s). */
  intervalMs?: number;
  /** Replaces the transport (default: the global `fetch`). */
  fetch?: EtcdFetch;
  /** Clock for `due()` (default the gateway's). */
  now?: Clock;
  /** Called after every apply attempt (tests). */
  onCommit?: () => void;
}

const NO_TIMEOUT_MS = 2 ** 31 - 1;

/** What range polling reads and writes (the Gateway has all of it). */
export interface EtcdPollHost extends SourceSink {
  readonly config: Pick<Config, 'etcd'>;
  readonly platform: Pick<Platform, 'env'>;
}

/**
 * A `ConfigSource` whose schedule is the runtime's: `start()` and `refresh()` read once, `due()` says when
 * the next read is wanted. SIGHUP never reaches it (Workers has no signals); `reload` logs like etcd's.
 */
export class EtcdPollSource implements ConfigSource {
  readonly intervalMs: number;
  readonly firstApplied: Promise<void>;
  private readonly first = deferred();
  private readonly client: EtcdClient;
  private readonly applier: EtcdRangeApplier;
  private readonly prefix: string;
  private readonly now: () => number;
  private inFlight: Promise<void> | undefined;
  /** When the last read started; undefined before the first. */
  private lastStart: number | undefined;
  /** Revision of the last range handed to the applier. */
  private readRevision: number | undefined;
  private lastFailed = false;
  private announced = false;

  /** Throws (a message naming the setting, never a secret) when the credentials are not available. */
  constructor(private readonly gw: EtcdPollHost, opts: EtcdPollSourceOptions = {}) {
    const c = gw.config.etcd;
    this.firstApplied = this.first.promise;
    this.intervalMs = opts.intervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.now = opts.now ?? gw.clock;
    this.prefix = normalizePrefix(c.prefix);
    let password: string | undefined;
    if (c.password_env) {
      password = gw.platform.env[c.password_env];
      if (!password) {
        throw new Error(
          `etcd.password_env: variable ${c.password_env} is ${password === undefined ? 'not set' : 'empty'}`,
        );
      }
    }
    this.client = new EtcdClient({
      endpoints: c.endpoints,
      ...(c.user !== undefined ? { user: c.user } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
      tls: c.tls !== undefined,
      dialTimeoutMs: c.dial_timeout_ms || NO_TIMEOUT_MS,
      requestTimeoutMs: c.request_timeout_ms || NO_TIMEOUT_MS,
    });
    this.applier = createEtcdRangeApplier(gw, c.prefix, opts.onCommit ? { onCommit: opts.onCommit } : {});
    gw.record.connected(false);
  }

  start(): void {
    void this.refresh();
  }

  reload(): Promise<void> {
    this.gw.log.info(MSG.sighupIgnoredEtcd);
    return Promise.resolve();
  }

  /** Resolves once no read is in flight. */
  async stop(): Promise<void> {
    await this.inFlight;
  }

  /** True when no read has started yet or the last one started at least `intervalMs` ago. */
  due(): boolean {
    return this.lastStart === undefined || this.now() - this.lastStart >= this.intervalMs;
  }

  /**
   * Before a request: when a read is due, start one and hand it to `later` (Workers: `ctx.waitUntil`, so it
   * outlives this request, whose caller may leave while a later request shares the read). Until a
   * configuration has been applied the request waits for it (so the first request after one appears is
   * served by it); afterwards no caller waits.
   */
  async beforeRequest(later?: (read: Promise<void>) => void): Promise<void> {
    if (!this.due()) return;
    const read = this.refresh();
    later?.(read);
    if (!this.applied) await read;
  }

  /** Whether a configuration has been applied (and serves). */
  get applied(): boolean {
    return this.gw.facts.applied !== undefined;
  }

  /** One full range and apply; callers arriving while it runs share it. Never rejects. */
  refresh(): Promise<void> {
    this.inFlight ??= this.read().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async read(): Promise<void> {
    this.lastStart = this.now();
    const gw = this.gw;
    let range: EtcdRangeResult;
    try {
      range = await this.client.range(`${this.prefix}/`);
    } catch (e) {
      const message = e instanceof EtcdError
        ? e.message
        : this.client.redact(`etcd range failed: ${(e as Error)?.message ?? String(e)}`);
      gw.record.connected(false);
      this.lastFailed = true;
      gw.recordFailure('fetch', message);
      gw.log.warn(MSG.etcdBackoff, { error: message, backoff_ms: this.intervalMs });
      return;
    }
    gw.record.connected(true);
    if (!this.announced) {
      this.announced = true;
      gw.log.info(MSG.etcdConnected, {
        endpoints: loggedEndpoints(gw.config.etcd.endpoints),
        prefix: this.prefix,
        mode: 'poll',
        interval_ms: this.intervalMs,
      });
    }
    if (range.revision === this.readRevision && !this.lastFailed) {
      gw.record.observed({ at: rfc3339(new Date(gw.clock())) });
      return;
    }
    try {
      await this.applier.applyRange(range);
    } catch (e) {
      // A bug in the row code must not take the isolate down: what serves keeps serving.
      gw.log.error(MSG.etcdSourceFailed, { error: (e as Error)?.message ?? String(e) });
      return;
    }
    this.readRevision = range.revision;
    this.lastFailed = false;
    this.first.resolve();
  }
}
