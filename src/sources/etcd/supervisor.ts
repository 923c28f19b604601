// The etcd watch loop (docs/etcd.md "How it reads"): full range → `onSnapshot`, then a watch from
// revision + 1 → `onEvents`; compaction → a full range again; any error → `onConnected(false)`, `onError`,
// `onBackoff`, a wait, and a full range again. While etcd is unreachable a cheap status call is probed
// during the wait, so the backoff paces the WARN lines and not the recovery. Handlers are awaited (batches
// in order, never overlapping); messages given to callbacks never hold the password or a token.
import { EtcdClient, type EtcdClientOptions, EtcdError, type EtcdKv, type EtcdPagedRange } from './client.ts';
import { type WatchEvent, watchPrefix } from './watch.ts';
import { type Clock, systemClock } from '../../util/clock.ts';
import { sleep } from '../../util/sleep.ts';

/** Keys per page of a paged range unless `rangePageSize` says otherwise. */
export const RANGE_PAGE_KEYS = 20_000;

export interface EtcdSnapshot {
  /** Store revision the range was read at. */
  revision: number;
  kvs: EtcdKv[];
}

export interface EtcdEventBatch {
  /** mod_revision of the last event in the batch. */
  revision: number;
  events: WatchEvent[];
}

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 60_000 };
export const DEFAULT_PROBE_INTERVAL_MS = 500;
export const DEFAULT_PROBE_TIMEOUT_MS = 1000;

/** Whether `err` says etcd could not be reached (rather than that it answered with a refusal). Pure. */
export function isUnreachable(err: EtcdError): boolean {
  if (err.kind === 'transport' || err.kind === 'timeout') return true;
  if (err.kind !== 'server') return false;
  return err.status === 502 || err.status === 503 || err.status === 504 || err.grpcCode === 14;
}

/** The client's own options (endpoints, auth, transport, timeouts) plus what the watch loop needs. */
export interface EtcdSupervisorOptions extends EtcdClientOptions {
  /** Used verbatim: pass `/aisix/` (with the slash) so `/aisix2/…` is not included. */
  prefix: string;
  idleTimeoutMs?: number;
  /** Keep-alive interval under a created watch (watch.ts); 0 = none. Default 5000. */
  keepAliveMs?: number;
  keepAliveTimeoutMs?: number;
  backoff?: BackoffPolicy;
  /** While waiting out a backoff after etcd was unreachable, probe this often; 0 = never. Default 500. */
  probeIntervalMs?: number;
  /** Bound on one probe. Default 1000. */
  probeTimeoutMs?: number;
  /** The gateway's clock, for the backoff's deadline (default the system's). */
  clock?: Clock;
  onSnapshot(snapshot: EtcdSnapshot): void | Promise<void>;
  /**
   * Given: each full range is read in pages of `rangePageSize` keys and handed over as it is read, instead of
   * as one response to `onSnapshot`.
   */
  onRange?(range: EtcdPagedRange): Promise<void>;
  /**
   * Keys per page of a paged range (default 20,000): a page stays a few MB of JSON. What each request makes etcd
   * walk is bounded by the range's plan (range-plan.ts) whatever the page size.
   */
  rangePageSize?: number;
  onEvents(batch: EtcdEventBatch): void | Promise<void>;
  onError?(error: EtcdError): void;
  /** Log WARN `etcd watch failed; backing off before reconnect` with error and backoff_ms. */
  onBackoff?(error: EtcdError, backoffMs: number): void;
  /** Called when the connection state changes (true after a range or watch creation succeeded). */
  onConnected?(connected: boolean): void;
  /** Progress notification: everything up to `revision` has been delivered. */
  onProgress?(revision: number): void;
  /** The idle watchdog re-opened the watch from `fromRevision`. */
  onRewatch?(fromRevision: number): void;
}

/** Delay before reconnect attempt `attempt` (0-based): initial·2^attempt, capped. Pure. */
export function backoffDelay(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempt, 52));
}

export class EtcdSupervisor {
  private readonly opts: EtcdSupervisorOptions;
  private readonly client: EtcdClient;
  private readonly ctrl = new AbortController();
  private loop: Promise<void> | undefined;
  private isConnected = false;

  constructor(opts: EtcdSupervisorOptions) {
    this.opts = opts;
    this.client = new EtcdClient({
      endpoints: opts.endpoints,
      ...(opts.user !== undefined ? { user: opts.user } : {}),
      ...(opts.password !== undefined ? { password: opts.password } : {}),
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
      ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
      ...(opts.dialTimeoutMs !== undefined ? { dialTimeoutMs: opts.dialTimeoutMs } : {}),
      ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    });
  }

  get connected(): boolean {
    return this.isConnected;
  }

  /** Starts the loop (idempotent). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Interrupts any wait or request; resolves once the loop has exited. */
  async stop(): Promise<void> {
    this.ctrl.abort();
    await this.loop;
  }

  private setConnected(value: boolean): void {
    if (this.isConnected === value) return;
    this.isConnected = value;
    this.notify(() => this.opts.onConnected?.(value));
  }

  /** Observer callbacks must not break the loop. */
  private notify(fn: () => void): void {
    try {
      fn();
    } catch {
      // A throwing logger or metrics hook is the caller's bug; the source keeps running.
    }
  }

  private toEtcdError(err: unknown): EtcdError {
    if (err instanceof EtcdError) {
      const message = this.client.redact(err.message);
      return message === err.message ? err : new EtcdError(message, err.kind, {
        ...(err.status !== undefined ? { status: err.status } : {}),
        ...(err.grpcCode !== undefined ? { grpcCode: err.grpcCode } : {}),
      });
    }
    const detail = err instanceof Error ? err.message : String(err);
    return new EtcdError(this.client.redact(`etcd source handler failed: ${detail}`), 'protocol');
  }

  private async run(): Promise<void> {
    const signal = this.ctrl.signal;
    const policy = this.opts.backoff ?? DEFAULT_BACKOFF;
    let attempt = 0;
    while (!signal.aborted) {
      try {
        await this.syncAndWatch(signal, () => {
          attempt = 0;
        });
      } catch (err) {
        if (signal.aborted) break;
        const error = this.toEtcdError(err);
        this.setConnected(false);
        this.notify(() => this.opts.onError?.(error));
        const delay = backoffDelay(attempt++, policy);
        this.notify(() => this.opts.onBackoff?.(error, delay));
        await this.pause(delay, isUnreachable(error), signal);
      }
    }
    this.setConnected(false);
  }

  /** Waits `delay`, or less: with `probe`, until a status call finds etcd answering again. */
  private async pause(delay: number, probe: boolean, signal: AbortSignal): Promise<void> {
    const every = this.opts.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS;
    if (!probe || every <= 0) {
      await sleep(delay, signal);
      return;
    }
    const timeoutMs = this.opts.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
    const now = this.opts.clock ?? systemClock;
    const deadline = now() + delay;
    for (;;) {
      const left = deadline - now();
      if (left <= 0 || signal.aborted) return;
      await sleep(Math.min(every, left), signal);
      if (signal.aborted || now() >= deadline) return;
      try {
        await this.client.ping({ timeoutMs: Math.min(timeoutMs, Math.max(1, deadline - now())), signal });
        return;
      } catch {
        // Still away: the next probe, or the end of the backoff.
      }
    }
  }

  /** One full range, handed to `onRange` a page at a time or to `onSnapshot` whole; its revision. */
  private async fullRange(signal: AbortSignal): Promise<number> {
    const { onRange, prefix } = this.opts;
    if (onRange) {
      const range = await this.client.rangePaged(prefix, { signal, limit: this.opts.rangePageSize ?? RANGE_PAGE_KEYS });
      this.setConnected(true);
      await onRange(range);
      return range.revision;
    }
    const snapshot = await this.client.range(prefix, { signal });
    this.setConnected(true);
    await this.opts.onSnapshot(snapshot);
    return snapshot.revision;
  }

  /** One full range + watch. Returns after a compaction (caller loops into a new range); throws on error. */
  private async syncAndWatch(signal: AbortSignal, onHealthy: () => void): Promise<void> {
    const revision = await this.fullRange(signal);
    const watchOpts = {
      prefix: this.opts.prefix,
      startRevision: revision + 1,
      signal,
      ...(this.opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: this.opts.idleTimeoutMs } : {}),
      ...(this.opts.keepAliveMs !== undefined ? { keepAliveMs: this.opts.keepAliveMs } : {}),
      ...(this.opts.keepAliveTimeoutMs !== undefined ? { keepAliveTimeoutMs: this.opts.keepAliveTimeoutMs } : {}),
    };
    for await (const msg of watchPrefix(this.client, watchOpts)) {
      switch (msg.type) {
        case 'created':
          this.setConnected(true);
          onHealthy();
          break;
        case 'events':
          await this.opts.onEvents({ revision: msg.revision, events: msg.events });
          break;
        case 'progress':
          this.notify(() => this.opts.onProgress?.(msg.revision));
          break;
        case 'rewatch':
          this.notify(() => this.opts.onRewatch?.(msg.fromRevision));
          break;
        case 'compacted':
          return;
      }
    }
  }
}
