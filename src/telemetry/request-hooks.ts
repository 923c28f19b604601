// Traces join the tracking middleware as its begin and end hooks (docs/architecture.md "A request"): a
// request's trace begins when its record is made and its spans go to the exporters once its last byte is out.
import type { Telemetry } from './telemetry.ts';
import type { RequestOutcome, RequestTrace } from './trace.ts';

/** The part of a proxy request's record the trace hooks read and write (src/proxy/record.ts). */
export interface TracedRecord {
  readonly requestId: string;
  trace: RequestTrace | undefined;
  /** Whether the call was dispatched as a stream. */
  readonly streamed: boolean;
  traceOutcome(status: number): RequestOutcome;
}

/** The tracking middleware's hooks for traces; nothing is traced while no exporter is configured. */
export function traceHooks(t: Pick<Telemetry, 'active' | 'begin' | 'end'>) {
  return {
    begin(rec: TracedRecord, headers: Headers): void {
      if (!t.active) return;
      const trace = rec.trace = t.begin(rec.requestId, headers);
      if (trace) trace.userAgent = headers.get('user-agent') ?? undefined;
    },
    /** The request's spans to the exporters that keep it (off the request path: `end` only queues). */
    end(rec: TracedRecord, status: number): void {
      const trace = rec.trace;
      if (!trace) return;
      if (rec.streamed) trace.serving?.extend(); // the winning stream's span lasts to the stream's end
      t.end(trace, rec.traceOutcome(status));
    },
  };
}
