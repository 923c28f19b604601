// One finished attempt in the usage events' words (docs/usage-events.md "Attempts"): its status, AISIX's
// `error_class` for a failure, and whether any request reached the upstream at all.
import { INVALID_CREDENTIALS } from '../providers/failures.ts';
import type { AttemptFact, AttemptOutcome, Target } from './dispatch-types.ts';
import type { AttemptReport } from './retry.ts';

/** What the event says of an attempt that sent nothing because its credential could not be used. */
export const NO_UPSTREAM_REQUEST = 'no upstream request was made';

export function attemptFact(r: AttemptReport<Target, AttemptOutcome>, kind: AttemptFact['kind']): AttemptFact {
  const o = r.outcome;
  if (o.kind === 'over_limit') return fact(r, kind, 429, 'rate_limit_exceeded', o.message, true, false);
  if (o.kind === 'timeout') return fact(r, kind, 504, 'timeout', 'the upstream did not answer in time', false, false);
  if (o.kind === 'transport') {
    const decode = o.callerMessage?.includes('not JSON') === true;
    return fact(r, kind, 502, decode ? 'upstream_decode' : 'transport', o.message, o.notUpstream === true, false);
  }
  if (o.live) return fact(r, kind, o.status, undefined, undefined, false, true);
  if (o.refusal !== undefined) {
    const errorClass = o.unavailable ? 'provider_unavailable' : 'invalid_config';
    return fact(r, kind, o.unavailable ? 503 : 400, errorClass, o.refusal, true, false);
  }
  if (o.status === 401 && o.body.includes(INVALID_CREDENTIALS)) {
    const message = `${INVALID_CREDENTIALS}: ${NO_UPSTREAM_REQUEST}`;
    return fact(r, kind, 401, 'invalid_credentials', message, true, false);
  }
  if (o.status >= 400) {
    return fact(r, kind, o.status, 'upstream_status', `upstream answered ${o.status}`, false, false);
  }
  return fact(r, kind, o.status, undefined, undefined, false, false);
}

/** Every fact has one shape (the same members in the same order): one hidden class, no object spread per attempt. */
function fact(
  r: AttemptReport<Target, AttemptOutcome>,
  kind: AttemptFact['kind'],
  status: number,
  errorClass: string | undefined,
  errorMessage: string | undefined,
  noUpstreamRequest: boolean,
  live: boolean,
): AttemptFact {
  const t = r.target;
  return {
    model: t.model,
    key: t.key,
    upstreamModel: t.upstreamModel,
    kind,
    status,
    errorClass,
    errorMessage,
    noUpstreamRequest,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    live,
  };
}
