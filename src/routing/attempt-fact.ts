// One finished attempt in the usage events' words (docs/usage-events.md "Attempts"): its status, AISIX's
// `error_class` for a failure, and whether any request reached the upstream at all.
import { INVALID_CREDENTIALS } from '../providers/failures.ts';
import type { AttemptFact, AttemptOutcome, Target } from './dispatch-types.ts';
import type { AttemptReport } from './retry.ts';

/** What the event says of an attempt that sent nothing because its credential could not be used. */
export const NO_UPSTREAM_REQUEST = 'no upstream request was made';

export function attemptFact(r: AttemptReport<Target, AttemptOutcome>, kind: AttemptFact['kind']): AttemptFact {
  const t = r.target;
  const base = {
    model: t.model,
    key: t.key,
    upstreamModel: t.upstreamModel,
    kind,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
  };
  const o = r.outcome;
  if (o.kind === 'over_limit') {
    return { ...base, status: 429, errorClass: 'rate_limit_exceeded', errorMessage: o.message, ...unsent };
  }
  if (o.kind === 'timeout') {
    const message = 'the upstream did not answer in time';
    return { ...base, status: 504, errorClass: 'timeout', errorMessage: message, ...sent };
  }
  if (o.kind === 'transport') {
    const decode = o.callerMessage?.includes('not JSON') === true;
    const fields = { status: 502, errorClass: decode ? 'upstream_decode' : 'transport', errorMessage: o.message };
    return { ...base, ...fields, noUpstreamRequest: o.notUpstream === true, live: false };
  }
  if (o.live) return { ...base, status: o.status, ...sent, live: true };
  if (o.refusal !== undefined) {
    const errorClass = o.unavailable ? 'provider_unavailable' : 'invalid_config';
    return { ...base, status: o.unavailable ? 503 : 400, errorClass, errorMessage: o.refusal, ...unsent };
  }
  if (o.status === 401 && o.body.includes(INVALID_CREDENTIALS)) {
    const errorMessage = `${INVALID_CREDENTIALS}: ${NO_UPSTREAM_REQUEST}`;
    return { ...base, status: 401, errorClass: 'invalid_credentials', errorMessage, ...unsent };
  }
  if (o.status >= 400) {
    return {
      ...base,
      status: o.status,
      errorClass: 'upstream_status',
      errorMessage: `upstream answered ${o.status}`,
      ...sent,
    };
  }
  return { ...base, status: o.status, ...sent };
}

const sent = { noUpstreamRequest: false, live: false } as const;
const unsent = { noUpstreamRequest: true, live: false } as const;
