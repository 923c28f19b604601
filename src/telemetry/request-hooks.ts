// Traces join the tracking middleware as its begin and end hooks (docs/architecture.md "Where to add"): a
// request's trace begins when its record is made, watches the call (its attempts as spans, its finish reason
// and, under `content_mode: full`, its content) and its spans go to the exporters once its last byte is out.
import type { Scrub } from '../http/scrub.ts';
import type { AttemptWatch } from '../routing/dispatch-types.ts';
import { attemptSpans } from './attempts.ts';
import { CompletionCollector, completionOfAnswer } from './content.ts';
import { finishReasonOf } from './finish-reason.ts';
import type { Telemetry } from './telemetry.ts';
import type { RequestOutcome, RequestTrace } from './trace.ts';

/** The part of a proxy request's record the trace hooks read (src/proxy/record.ts). */
export interface TracedRecord {
  readonly requestId: string;
  /** Whether the call was dispatched as a stream. */
  readonly streamed: boolean;
  traceOutcome(status: number): RequestOutcome;
}

/** The tracking middleware's hooks for traces; nothing is traced while no exporter is configured. */
export function traceHooks(t: Pick<Telemetry, 'active' | 'begin' | 'end' | 'captureBytes'>) {
  return {
    begin(rec: TracedRecord, headers: Headers): TraceWatch | undefined {
      if (!t.active) return undefined;
      const trace = t.begin(rec.requestId, headers);
      if (!trace) return undefined;
      trace.userAgent = headers.get('user-agent') ?? undefined;
      return new TraceWatch(trace, t);
    },
    /** The request's spans to the exporters that keep it (off the request path: `end` only queues). */
    end(rec: TracedRecord, status: number, watch: unknown): void {
      if (!(watch instanceof TraceWatch)) return; // not traced: no watch, or another hook's
      const trace = watch.trace;
      if (rec.streamed) trace.serving?.extend(); // the winning stream's span lasts to the stream's end
      const outcome = rec.traceOutcome(status);
      // The span and the log line state one figure: the record's, from the serving attempt's own clock.
      if (outcome.upstreamTtftMs !== undefined && trace.serving) trace.serving.ttftMs = outcome.upstreamTtftMs;
      outcome.finishReason = trace.finishReason;
      // A 429 before any attempt is the gateway's own rate limit, not an upstream's.
      outcome.rateLimited = status === 429 && trace.attempts.length === 0;
      t.end(trace, outcome);
    },
  };
}

/**
 * What a traced call's trace learns from the answer path (src/proxy/call-watch.ts `CallWatch`): the attempts,
 * the finish reason, and under `content_mode: full` the prompt and the completion, scrubbed.
 */
class TraceWatch {
  readonly attempts: AttemptWatch;
  private collector: CompletionCollector | undefined = undefined;

  constructor(
    readonly trace: RequestTrace,
    private readonly t: Pick<Telemetry, 'captureBytes'>,
  ) {
    this.attempts = attemptSpans(trace);
  }

  get traceId(): string {
    return this.trace.traceId;
  }

  sending(body: Record<string, unknown>, scrub: () => Scrub): void {
    if (this.t.captureBytes(this.trace) !== undefined) this.trace.prompt = scrub()(JSON.stringify(body));
  }

  answered(body: string, scrub: () => Scrub): void {
    this.trace.finishReason = finishReasonOf(body);
    if (this.trace.prompt !== undefined) this.trace.completion = scrub()(completionOfAnswer(body));
  }

  streaming(): ((chunk: Uint8Array) => void) | undefined {
    if (this.trace.prompt === undefined) return undefined;
    const collector = this.collector = new CompletionCollector(1_048_576);
    return (chunk) => collector.push(chunk);
  }

  streamEnded(finishReason: string | undefined, scrub: () => Scrub): void {
    this.trace.finishReason = finishReason;
    if (this.collector) this.trace.completion = scrub()(this.collector.completion);
  }
}
