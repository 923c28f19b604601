// A traced request's upstream attempts as spans (docs/operations.md "Tracing"): the watch dispatch tells of each
// attempt (src/routing/dispatch-types.ts `AttemptWatch`), so routing knows nothing of traces.
import type { AttemptOutcome, AttemptWatch, DispatchInput, Target, WatchedAttempt } from '../routing/dispatch-types.ts';
import type { AttemptSpan, RequestTrace } from './trace.ts';

/** The attempts of `trace`'s request, each an `AttemptSpan`. */
export function attemptSpans(trace: RequestTrace): AttemptWatch {
  return {
    attempt: (input, t) => watched(spanOf(trace, input, t)),
    firstChunk: () => trace.serving?.firstByte(),
  };
}

function watched(span: AttemptSpan): WatchedAttempt {
  return {
    traceparent: span.traceparent,
    firstByte: () => span.firstByte(),
    settled: (o) => settleSpan(span, o),
  };
}

/**
 * The span of an attempt about to start on `t`: `initial` first, `retry` on the target of the previous
 * attempt, `fallback` on another. `aisix.attempt_model` names routing targets only (AISIX's).
 */
function spanOf(trace: RequestTrace, input: DispatchInput, t: Target): AttemptSpan {
  const previous = trace.attempts[trace.attempts.length - 1];
  const model = input.model.kind === 'routing' ? t.model.display_name : '';
  const kind = previous === undefined ? 'initial' : previous.targetId === t.model.id ? 'retry' : 'fallback';
  return trace.attempt(kind, { id: t.model.id, model, provider: t.labels[0], url: t.key.api_base });
}

/** How an attempt settled, on its span: the status the caller would see and, when it failed, why. */
function settleSpan(span: AttemptSpan, o: AttemptOutcome): void {
  if (o.kind === 'over_limit') return; // never called: no span was opened for it
  if (o.kind === 'timeout') {
    return span.settle(504, { errorClass: 'timeout', message: 'the upstream did not answer in time' });
  }
  if (o.kind === 'transport') {
    const decode = o.callerMessage?.includes('not JSON') === true;
    return span.settle(502, { errorClass: decode ? 'upstream_decode' : 'transport', message: o.message });
  }
  if (!o.live && o.refusal !== undefined) return span.settle(400, { errorClass: 'config', message: o.refusal });
  if (o.status >= 400) {
    return span.settle(o.status, { errorClass: 'upstream_status', message: `upstream answered ${o.status}` });
  }
  span.settle(o.status);
}
