// One usage exporter's delivery, off the request path (docs/usage-events.md "Delivery"): AISIX's pipeline — a
// queue of 1024 records, batches of at most 100 sent at least once a second, transient failures retried 4
// times with backoff (200 ms doubling, at most 5 s) — as the OTLP exporter does it (src/telemetry/exporter.ts).
// `offer` never waits: a full or closed queue refuses the record and says why, and the caller counts it.
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import { sleep } from '../util/sleep.ts';
import type { RecordDropReason } from './metrics.ts';

export const MAX_QUEUE_RECORDS = 1024;
export const MAX_BATCH_RECORDS = 100;
export const FLUSH_INTERVAL_MS = 1000;
export const MAX_RETRIES = 4;
export const BACKOFF_BASE_MS = 200;
export const BACKOFF_MAX_MS = 5000;
export const POST_TIMEOUT_MS = 5000;

/** One batch's delivery: `ok`, or a failure that is worth a retry (`transient`) or not; `error` for the log. */
export type DeliveryResult = { ok: true } | { ok: false; transient: boolean; error: string };

/** What a kind of exporter does with one batch of its records (Datadog: a gzipped JSON array). */
export type Deliver = (records: readonly string[], signal: CancelSignal) => Promise<DeliveryResult>;

export interface PipelineMetrics {
  delivered(exporter: string, records: number): void;
  failed(exporter: string): void;
  dropped(exporter: string, reason: RecordDropReason, records: number): void;
}

export interface PipelineDeps {
  metrics: PipelineMetrics;
  log: Logger;
  /** Workers' `waitUntil`: given, a record is sent as soon as it is queued instead of on the timer. */
  keepAlive?: (delivery: Promise<void>) => void;
  /** Backoff waits (tests inject one that does not wait). */
  sleep?: (ms: number, signal: CancelSignal) => Promise<void>;
}

export class UsagePipeline {
  private queue: string[] = [];
  private running: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly stop = new Cancel();
  private closed = false;
  private flushing = false;

  constructor(readonly name: string, private readonly deliver: Deliver, private readonly deps: PipelineDeps) {
    deps.log.info(MSG.sinkStarted, {
      sink: name,
      max_batch: MAX_BATCH_RECORDS,
      flush_interval_secs: FLUSH_INTERVAL_MS / 1000,
      max_retries: MAX_RETRIES,
    });
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Queue one record, built by `build` only when there is room; the reason when it is refused. Never waits. */
  offer(build: () => string): 'sink_full' | 'sink_closed' | undefined {
    if (this.closed) return 'sink_closed';
    if (this.queue.length >= MAX_QUEUE_RECORDS) {
      this.deps.log.debug(MSG.sinkQueueFull, { sink: this.name });
      return 'sink_full';
    }
    this.queue.push(build());
    if (this.deps.keepAlive || this.queue.length >= MAX_BATCH_RECORDS) void this.kick();
    else this.schedule();
    return undefined;
  }

  /** Takes the records still queued (a rebuilt exporter continues them); this one accepts no more. */
  handOver(): string[] {
    const q = this.queue;
    this.queue = [];
    this.closed = true;
    this.clearTimer();
    return q;
  }

  /** Records handed over by the pipeline this one replaces go first; what does not fit is dropped. */
  adopt(records: string[]): void {
    const room = MAX_QUEUE_RECORDS - this.queue.length;
    const kept = records.slice(Math.max(0, records.length - room));
    if (kept.length < records.length) this.deps.metrics.dropped(this.name, 'shutdown', records.length - kept.length);
    this.queue = [...kept, ...this.queue];
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
      this.deps.metrics.dropped(this.name, 'shutdown', this.queue.length);
      this.queue = [];
    }
  }

  private schedule(): void {
    if (this.timer !== undefined || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.kick();
    }, FLUSH_INTERVAL_MS);
    // Never what keeps a process alive: the drain flushes explicitly.
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

  private async send(batch: string[]): Promise<void> {
    const wait = this.deps.sleep ?? sleep;
    const m = this.deps.metrics;
    for (let attempt = 0;; attempt++) {
      const r = await this.once(batch);
      if (r.ok) return m.delivered(this.name, batch.length);
      m.failed(this.name);
      if (this.stop.aborted) return m.dropped(this.name, 'shutdown', batch.length);
      if (!r.transient || attempt >= MAX_RETRIES) {
        this.deps.log.warn(MSG.sinkDropped, {
          sink: this.name,
          dropped: batch.length,
          transient: r.transient,
          error: r.error,
        });
        return m.dropped(this.name, r.transient ? 'retries_exhausted' : 'rejected', batch.length);
      }
      this.deps.log.warn(MSG.sinkRetrying, { sink: this.name, attempt: attempt + 1, error: r.error });
      await wait(Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt), this.stop);
    }
  }

  /** One delivery bounded by the per-POST timeout and by `stop`; a throw is a transient failure. */
  private async once(batch: string[]): Promise<DeliveryResult> {
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
