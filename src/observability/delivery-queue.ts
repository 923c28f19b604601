// The delivery pipeline every exporter shares, off the request path (docs/operations.md "Tracing",
// docs/usage-events.md "Delivery"): AISIX's numbers — a bounded queue of 1024 records, batches of at most 100
// sent at least once a second, transient failures retried 4 times with backoff (200 ms doubling, at most 5 s),
// everything not delivered counted as dropped. `offer` never waits: a full or closed queue refuses the record
// without building it and says why.
import type { Logger } from './logger.ts';
import { MSG } from './messages.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import { sleep } from '../util/sleep.ts';

export const MAX_QUEUE_RECORDS = 1024;
export const MAX_BATCH_RECORDS = 100;
export const FLUSH_INTERVAL_MS = 1000;
export const MAX_RETRIES = 4;
export const BACKOFF_BASE_MS = 200;
export const BACKOFF_MAX_MS = 5000;
export const POST_TIMEOUT_MS = 5000;

/** One batch's delivery: `ok`, or a failure worth a retry (`transient`) or not; `error` for the log. */
export type DeliveryResult = { ok: true } | { ok: false; transient: boolean; error: string };

/** What a kind of exporter does with one batch; a throw is a transient failure. */
export type Deliver<R> = (records: readonly R[], signal: CancelSignal) => Promise<DeliveryResult>;

/** Why queued records were not delivered. */
export type QueueDropReason = 'queue_full' | 'rejected' | 'retries_exhausted' | 'shutdown';

/** Counts in the queue's unit of weight (records, or an OTLP record's spans). */
export interface QueueMetrics {
  delivered(exporter: string, weight: number): void;
  failed(exporter: string): void;
  dropped(exporter: string, reason: QueueDropReason, weight: number): void;
}

export interface QueueDeps {
  metrics: QueueMetrics;
  log: Logger;
  /** Workers' `waitUntil`: given, a record is sent as soon as it is queued instead of on the timer. */
  keepAlive?: (delivery: Promise<void>) => void;
  /** Backoff waits (tests inject one that does not wait). */
  sleep?: (ms: number, signal: CancelSignal) => Promise<void>;
}

export interface QueueShape<R> {
  /** A record's weight in the metrics (default 1). */
  weigh?: (record: R) => number;
  /** How records an adopting queue has no room for are counted (default `queue_full`). */
  overflow?: QueueDropReason;
}

export class DeliveryQueue<R> {
  private queue: R[] = [];
  private running: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Aborted when the queue is closed past its deadline: waits and deliveries stop, the rest is dropped. */
  private readonly stop = new Cancel();
  private closed = false;
  /** While flushing (drain), partial batches go out at once instead of waiting for the timer. */
  private flushing = false;

  constructor(
    readonly name: string,
    private readonly deliver: Deliver<R>,
    private readonly deps: QueueDeps,
    private readonly shape: QueueShape<R> = {},
  ) {
    deps.log.info(MSG.sinkStarted, {
      sink: name,
      max_batch: MAX_BATCH_RECORDS,
      flush_interval_secs: FLUSH_INTERVAL_MS / 1000,
      max_retries: MAX_RETRIES,
    });
  }

  /** Records waiting (not counting a batch being delivered). */
  get queued(): number {
    return this.queue.length;
  }

  /** Queue one record, built by `build` only when there is room; why it was refused otherwise. Never waits. */
  offer(build: () => R): 'full' | 'closed' | undefined {
    if (this.closed) return 'closed';
    if (this.queue.length >= MAX_QUEUE_RECORDS) {
      this.deps.log.debug(MSG.sinkQueueFull, { sink: this.name });
      return 'full';
    }
    this.queue.push(build());
    if (this.deps.keepAlive || this.queue.length >= MAX_BATCH_RECORDS) void this.kick();
    else this.schedule();
    return undefined;
  }

  /** Takes the records still queued (a rebuilt exporter continues them); this one accepts no more. */
  handOver(): R[] {
    const q = this.queue;
    this.queue = [];
    this.closed = true;
    this.clearTimer();
    return q;
  }

  /** Records handed over by the queue this one replaces go first; what does not fit is dropped (counted). */
  adopt(records: R[]): void {
    const room = MAX_QUEUE_RECORDS - this.queue.length;
    const cut = Math.max(0, records.length - room);
    if (cut > 0) this.drop(this.shape.overflow ?? 'queue_full', records.slice(0, cut));
    this.queue = [...records.slice(cut), ...this.queue];
    if (this.queue.length > 0) this.deps.keepAlive ? void this.kick() : this.schedule();
  }

  /** Deliver what is queued now without closing (tests, Workers). */
  flush(): Promise<void> {
    this.flushing = true;
    return this.kick().finally(() => {
      this.flushing = false;
    });
  }

  /** Deliver everything within `deadlineMs`, then accept nothing; what is left is dropped (`shutdown`). */
  async close(deadlineMs: number): Promise<void> {
    this.closed = true;
    this.flushing = true;
    this.clearTimer();
    const deadline = setTimeout(() => this.stop.abort(new Error('drain deadline')), deadlineMs);
    try {
      await this.kick();
      while (this.running) await this.running;
    } finally {
      clearTimeout(deadline);
    }
    if (this.queue.length > 0) {
      this.drop('shutdown', this.queue);
      this.queue = [];
    }
  }

  private weight(records: readonly R[]): number {
    const weigh = this.shape.weigh;
    if (!weigh) return records.length;
    let n = 0;
    for (const r of records) n += weigh(r);
    return n;
  }

  private drop(reason: QueueDropReason, records: readonly R[]): void {
    this.deps.metrics.dropped(this.name, reason, this.weight(records));
  }

  private schedule(): void {
    if (this.timer !== undefined || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.kick();
    }, FLUSH_INTERVAL_MS);
    // Never what keeps a process alive: the drain flushes explicitly (duck-typed: Node and Bun timers have it).
    (this.timer as { unref?: () => void }).unref?.();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private kick(): Promise<void> {
    this.clearTimer();
    if (!this.running) {
      const run = this.run().finally(() => {
        this.running = undefined;
        if (this.queue.length > 0 && !this.stop.aborted) {
          if (this.flushing || this.deps.keepAlive || this.queue.length >= MAX_BATCH_RECORDS) void this.kick();
          else this.schedule();
        }
      });
      this.running = run;
      this.deps.keepAlive?.(run);
    }
    return this.running;
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0 && !this.stop.aborted) {
      await this.send(this.queue.splice(0, MAX_BATCH_RECORDS));
      if (!this.flushing && !this.deps.keepAlive && this.queue.length < MAX_BATCH_RECORDS) return;
    }
  }

  private async send(batch: R[]): Promise<void> {
    const wait = this.deps.sleep ?? sleep;
    const m = this.deps.metrics;
    for (let attempt = 0;; attempt++) {
      const r = await this.once(batch);
      if (r.ok) return m.delivered(this.name, this.weight(batch));
      m.failed(this.name);
      if (this.stop.aborted) return this.drop('shutdown', batch);
      if (!r.transient || attempt >= MAX_RETRIES) {
        this.deps.log.warn(MSG.sinkDropped, {
          sink: this.name,
          dropped: batch.length,
          transient: r.transient,
          error: r.error,
        });
        return this.drop(r.transient ? 'retries_exhausted' : 'rejected', batch);
      }
      this.deps.log.warn(MSG.sinkRetrying, { sink: this.name, attempt: attempt + 1, error: r.error });
      await wait(Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt), this.stop);
    }
  }

  /** One delivery bounded by the per-POST timeout and by `stop`. */
  private async once(batch: R[]): Promise<DeliveryResult> {
    const cancel = new Cancel();
    const onStop = () => cancel.abort(this.stop.reason);
    this.stop.addEventListener('abort', onStop);
    const timer = setTimeout(() => cancel.abort(new Error(`no answer within ${POST_TIMEOUT_MS} ms`)), POST_TIMEOUT_MS);
    try {
      return await this.deliver(batch, cancel);
    } catch (e) {
      return { ok: false, transient: true, error: (e as Error)?.message ?? String(e) };
    } finally {
      clearTimeout(timer);
      this.stop.removeEventListener('abort', onStop);
    }
  }
}
