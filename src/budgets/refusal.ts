// A budget's refusal as the caller's error (docs/budgets.md "Refusals"): 429 with AISIX's managed-mode
// envelope (`billing_error`, `budget_exceeded`, the budget's fields flattened into `error`, USD as 2-decimal
// strings), `Retry-After` until the reset, and headers naming the budget and its reset; the Anthropic envelope
// carries the message only. A store that does not answer: 503, nothing dispatched.
import { ProxyError } from '../http/errors.ts';
import { budgetName } from '../resources/budget-schema.ts';
import { type BudgetRefusal, resetsAt } from './budgets.ts';

/** The header naming the budget that refused (`<scope>:<id>:<budget>`). */
export const BUDGET_HEADER = 'x-sluice-budget';
/** The header saying when that budget's period resets (RFC 3339; absent when it never does). */
export const BUDGET_RESET_HEADER = 'x-sluice-budget-reset';

const usd = (micro: number) => (micro / 1e6).toFixed(2);
const SCOPE_WORD = { api_key: 'API key', team: 'team', user: 'user', model: 'model' } as const;

export function budgetRefusal(r: BudgetRefusal, nowMs: number): ProxyError {
  const { subject, state, amount, period } = r;
  const b = subject.budget;
  const name = budgetName(b);
  const resets = resetsAt(period);
  const retryAfter = resets === null ? undefined : Math.max(1, Math.ceil((period.endMs - nowMs) / 1000));
  const who = `${SCOPE_WORD[subject.scope]} '${subject.id}' budget '${name}'`;
  const until = resets === null ? 'it does not reset' : `it resets at ${resets}`;
  let message: string;
  if (r.unit === 'usd') {
    const limit = Math.round(b.limit_usd! * 1e6);
    const left = limit - state.spentMicroUsd - state.reservedMicroUsd;
    message = state.spentMicroUsd >= limit
      ? `budget exceeded: ${who} spent $${usd(state.spentMicroUsd)} of $${usd(limit)}; ${until}`
      : `budget exceeded: ${who} has $${usd(Math.max(0, left))} of $${usd(limit)} left and this call may cost up ` +
        `to $${usd(amount.microUsd)}; lower max_tokens or wait: ${until}`;
  } else {
    const limit = b.limit_tokens!;
    const left = limit - state.spentTokens - state.reservedTokens;
    message = state.spentTokens >= limit
      ? `budget exceeded: ${who} used ${state.spentTokens} of ${limit} tokens; ${until}`
      : `budget exceeded: ${who} has ${Math.max(0, left)} of ${limit} tokens left and this call may use up to ` +
        `${amount.tokens}; lower max_tokens or wait: ${until}`;
  }
  const members: Record<string, unknown> = {
    scope: subject.scope,
    scope_ref: subject.id,
    budget: name,
    period: b.window,
  };
  if (b.limit_usd !== undefined) {
    const limit = Math.round(b.limit_usd * 1e6);
    members.limit_usd = usd(limit);
    members.spent_usd = usd(state.spentMicroUsd);
    members.remaining_usd = usd(Math.max(0, limit - state.spentMicroUsd));
  }
  if (b.limit_tokens !== undefined) {
    members.limit_tokens = b.limit_tokens;
    members.spent_tokens = state.spentTokens;
  }
  if (resets !== null) members.period_resets_at = resets;
  if (retryAfter !== undefined) members.retry_after_seconds = retryAfter;
  const headers: Record<string, string> = { [BUDGET_HEADER]: `${subject.scope}:${subject.id}:${name}` };
  if (resets !== null) headers[BUDGET_RESET_HEADER] = resets;
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  return new ProxyError(429, 'billing_error', message, 'budget_exceeded', headers, members);
}

/** The budget store did not answer and a hard budget covers the call (`on_store_unavailable: refuse`). */
export function budgetUnavailable(): ProxyError {
  return new ProxyError(
    503,
    'service_unavailable',
    'budget store unavailable: a hard budget covers this call and its spend cannot be checked; retry shortly ' +
      '(the operator can set budgets.on_store_unavailable: allow)',
    'budget_store_unavailable',
    { 'retry-after': '1' },
  );
}
