// One OTLP/HTTP exporter's delivery pipeline (docs/operations.md "Tracing"), off the request path: a bounded
// queue of records (a record = one request's spans), batches of at most 100 records POSTed at least once a
// second, transient failures (5xx, 408, 429, transport, timeout) retried 4 times with backoff (200 ms
// doubling, at most 5 s), everything not delivered counted as dropped. Enqueueing never blocks or waits. A
// record is serialized once, when it is queued: a batch is a join of those texts, the same bytes on every
// retry, and a record the full queue refuses is never built.
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import { headerSecrets, type Needles, needlesOf, redactWith } from '../util/redact.ts';
import { sleep } from '../util/sleep.ts';
import { exportBodyOf, serializeRecord, USER_AGENT } from './otlp.ts';
import type { OtlpSpan } from './spans.ts';

export const MAX_QUEUE_RECORDS = 1024;
export const MAX_BATCH_RECORDS = 100;
export const FLUSH_INTERVAL_MS = 1000;
export const MAX_RETRIES = 4;
export const BACKOFF_BASE_MS = 200;
export const BACKOFF_MAX_MS = 5000;
export const POST_TIMEOUT_MS = 5000;
const MAX_LOGGED_ERROR = 600;

/** One POST: its HTTP status, or a throw for a transport failure or the timeout. */
export type PostFn = (
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: CancelSignal,
) => Promise<number>;

/** Why spans were not delivered (`aisix_otlp_fanout_drops_total{reason}`). */
export type DropReason = 'queue_full' | 'rejected' | 'retries_exhausted' | 'shutdown';

export interface ExporterMetrics {
  dropped(exporter: string, reason: DropReason, spans: number): void;
  failed(exporter: string): void;
  delivered(exporter: string, spans: number): void;
}

export interface ExporterDeps {
  post: PostFn;
  metrics: ExporterMetrics;
  log: Logger;
  /**
   * Where a runtime whose work ends with its request (Workers' `waitUntil`) takes each delivery: given, a
   * record is sent as soon as it is queued instead of on the one-second timer.
   */
  keepAlive?: (delivery: Promise<void>) => void;
  /** Backoff waits (injectable so tests do not wait); default `sleep`. */
  sleep?: (ms: number, signal: CancelSignal) => Promise<void>;
}

export interface ExporterSettings {
  name: string;
  endpoint: string;
  headers: Record<string, string>;
}

/** Transient: worth a retry. */
export function transientStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

/** One queued request: its spans as JSON text (`serializeRecord`) and how many they are. */
export interface QueuedRecord {
  readonly json: string;
  readonly spans: number;
}

function spanCount(records: readonly QueuedRecord[]): number {
  let n = 0;
  for (const r of records) n += r.spans;
  return n;
}

export class OtlpExporter {
  private queue: QueuedRecord[] = [];
  private running: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Aborted when the exporter is closed past its deadline: waits and POSTs stop, the rest is dropped. */
  private readonly stop = new Cancel();
  private closed = false;
  /** While flushing (drain), partial batches go out at once instead of waiting for the timer. */
  private flushing = false;
  private readonly postHeaders: Record<string, string>;
  private readonly headerNeedles: Needles;

  constructor(readonly settings: ExporterSettings, private readonly deps: ExporterDeps) {
    this.postHeaders = { ...settings.headers, 'content-type': 'application/json', 'user-agent': USER_AGENT };
    this.headerNeedles = needlesOf(headerSecrets(settings.headers));
    deps.log.info(MSG.sinkStarted, {
      sink: settings.name,
      max_batch: MAX_BATCH_RECORDS,
      flush_interval_secs: FLUSH_INTERVAL_MS / 1000,
      max_retries: MAX_RETRIES,
    });
  }

  /** Records waiting (not counting a batch being delivered). */
  get queued(): number {
    return this.queue.length;
  }

  /** Queue one request's spans; a full queue drops them (counted). Never waits. */
  offer(spans: readonly OtlpSpan[]): void {
    this.offerBuilt(spans.length, () => spans);
  }

  /**
   * Queue one request's `count` spans, built by `build` only when the queue takes them (a full or closed
   * exporter counts them dropped without building them). Never waits.
   */
  offerBuilt(count: number, build: () => readonly OtlpSpan[]): void {
    if (this.closed) return this.deps.metrics.dropped(this.settings.name, 'shutdown', count);
    if (this.queue.length >= MAX_QUEUE_RECORDS) {
      this.deps.metrics.dropped(this.settings.name, 'queue_full', count);
      this.deps.log.debug(MSG.sinkQueueFull, { sink: this.settings.name });
      return;
    }
    const spans = build();
    this.queue.push({ json: serializeRecord(spans), spans: spans.length });
    if (this.deps.keepAlive || this.queue.length >= MAX_BATCH_RECORDS) this.kick();
    else this.schedule();
  }

  /** Takes the records still queued (a rebuilt exporter continues them); this one accepts no more. */
  handOver(): QueuedRecord[] {
    const q = this.queue;
    this.queue = [];
    this.closed = true;
    this.clearTimer();
    return q;
  }

  /** Records handed over by the exporter this one replaces go first. */
  adopt(records: QueuedRecord[]): void {
    const room = MAX_QUEUE_RECORDS - this.queue.length;
    const kept = records.slice(Math.max(0, records.length - room));
    if (kept.length < records.length) {
      this.deps.metrics.dropped(
        this.settings.name,
        'queue_full',
        spanCount(records.slice(0, records.length - kept.length)),
      );
    }
    this.queue = [...kept, ...this.queue];
    if (this.queue.length > 0) this.deps.keepAlive ? this.kick() : this.schedule();
  }

  /**
   * Deliver everything queued now, then accept nothing more; past `deadlineMs` waits and POSTs stop and what
   * is left is dropped (`shutdown`). Resolves when nothing is left.
   */
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
      this.deps.metrics.dropped(this.settings.name, 'shutdown', spanCount(this.queue));
      this.queue = [];
    }
  }

  /** Deliver what is queued now without closing (tests, Workers). */
  flush(): Promise<void> {
    this.flushing = true;
    return this.kick().finally(() => {
      this.flushing = false;
    });
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
      const batch = this.queue.splice(0, MAX_BATCH_RECORDS);
      await this.deliver(batch);
      if (!this.flushing && !this.deps.keepAlive && this.queue.length < MAX_BATCH_RECORDS) return;
    }
  }

  private async deliver(batch: QueuedRecord[]): Promise<void> {
    const { name, endpoint } = this.settings;
    const spans = spanCount(batch);
    const body = exportBodyOf(batch.map((r) => r.json));
    const wait = this.deps.sleep ?? sleep;
    for (let attempt = 0;; attempt++) {
      let transient: boolean;
      let error: string;
      try {
        const status = await this.post(endpoint, body);
        if (status >= 200 && status < 300) return this.deps.metrics.delivered(name, spans);
        transient = transientStatus(status);
        error = `collector answered ${status}`;
      } catch (e) {
        transient = true;
        error = (e as Error)?.message ?? String(e);
      }
      this.deps.metrics.failed(name);
      // The collector's or the transport's words never carry the exporter's own header tokens into a log.
      const logged = redactWith(error, this.headerNeedles, MAX_LOGGED_ERROR);
      if (this.stop.aborted) return this.deps.metrics.dropped(name, 'shutdown', spans);
      if (!transient || attempt >= MAX_RETRIES) {
        this.deps.log.warn(MSG.sinkDropped, { sink: name, dropped: batch.length, transient, error: logged });
        return this.deps.metrics.dropped(name, transient ? 'retries_exhausted' : 'rejected', spans);
      }
      this.deps.log.warn(MSG.sinkRetrying, { sink: name, attempt: attempt + 1, error: logged });
      await wait(Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt), this.stop);
    }
  }

  /** One POST bounded by the per-POST timeout and by `stop`. */
  private async post(endpoint: string, body: string): Promise<number> {
    const cancel = new Cancel();
    const onStop = () => cancel.abort(this.stop.reason);
    this.stop.addEventListener('abort', onStop);
    const timer = setTimeout(() => cancel.abort(new Error(`no answer within ${POST_TIMEOUT_MS} ms`)), POST_TIMEOUT_MS);
    try {
      return await this.deps.post(endpoint, this.postHeaders, body, cancel);
    } finally {
      clearTimeout(timer);
      this.stop.removeEventListener('abort', onStop);
    }
  }
}
