// One OTLP/HTTP exporter (docs/operations.md "Tracing"): a record is one request's spans, serialized once when
// it is queued, so a batch is a join of those texts, the same bytes on every retry, and a record the full queue
// refuses is never built. Queueing, batching, retries and drops are the shared delivery queue's
// (src/observability/delivery-queue.ts), counted in spans.
import type { Logger } from '../observability/logger.ts';
import type { CancelSignal } from '../util/cancel.ts';
import { DeliveryQueue, type DeliveryResult, type QueueDropReason } from '../observability/delivery-queue.ts';
import { headerSecrets, type Needles, needlesOf, redactWith } from '../util/redact.ts';
import { exportBodyOf, serializeRecord, USER_AGENT } from './otlp.ts';
import type { OtlpSpan } from './spans.ts';

const MAX_LOGGED_ERROR = 600;

/** One POST: its HTTP status, or a throw for a transport failure or the timeout. */
export type PostFn = (
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: CancelSignal,
) => Promise<number>;

/** Why spans were not delivered (`aisix_otlp_fanout_drops_total{reason}`). */
export type DropReason = QueueDropReason;

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

export class OtlpExporter {
  private readonly queue: DeliveryQueue<QueuedRecord>;

  constructor(readonly settings: ExporterSettings, private readonly deps: ExporterDeps) {
    const postHeaders = { ...settings.headers, 'content-type': 'application/json', 'user-agent': USER_AGENT };
    const needles = needlesOf(headerSecrets(settings.headers));
    const deliver = (batch: readonly QueuedRecord[], signal: CancelSignal) =>
      postBatch(batch, settings.endpoint, postHeaders, needles, deps.post, signal);
    this.queue = new DeliveryQueue(settings.name, deliver, deps, { weigh: (r) => r.spans });
  }

  /** Records waiting (not counting a batch being delivered). */
  get queued(): number {
    return this.queue.queued;
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
    const refused = this.queue.offer(() => {
      const spans = build();
      return { json: serializeRecord(spans), spans: spans.length };
    });
    if (refused) this.deps.metrics.dropped(this.settings.name, refused === 'full' ? 'queue_full' : 'shutdown', count);
  }

  /** Takes the records still queued (a rebuilt exporter continues them); this one accepts no more. */
  handOver(): QueuedRecord[] {
    return this.queue.handOver();
  }

  /** Records handed over by the exporter this one replaces go first. */
  adopt(records: QueuedRecord[]): void {
    this.queue.adopt(records);
  }

  /**
   * Deliver everything queued now, then accept nothing more; past `deadlineMs` waits and POSTs stop and what
   * is left is dropped (`shutdown`). Resolves when nothing is left.
   */
  close(deadlineMs: number): Promise<void> {
    return this.queue.close(deadlineMs);
  }

  /** Deliver what is queued now without closing (tests, Workers). */
  flush(): Promise<void> {
    return this.queue.flush();
  }
}

/** One batch as one POST; the collector's or the transport's words never carry the exporter's header tokens. */
async function postBatch(
  batch: readonly QueuedRecord[],
  endpoint: string,
  headers: Record<string, string>,
  needles: Needles,
  post: PostFn,
  signal: CancelSignal,
): Promise<DeliveryResult> {
  try {
    const status = await post(endpoint, headers, exportBodyOf(batch.map((r) => r.json)), signal);
    if (status >= 200 && status < 300) return { ok: true };
    return {
      ok: false,
      transient: transientStatus(status),
      error: redactWith(`collector answered ${status}`, needles, MAX_LOGGED_ERROR),
    };
  } catch (e) {
    return {
      ok: false,
      transient: true,
      error: redactWith((e as Error)?.message ?? String(e), needles, MAX_LOGGED_ERROR),
    };
  }
}
