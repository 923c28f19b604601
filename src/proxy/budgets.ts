// The pipeline's budget step (pipeline.ts; docs/budgets.md): after the rate-limit reservation, the call's
// most expensive outcome is reserved on every budget it meets, or the call is refused; the permit then carries
// the charge, so whatever ends the call (its last byte, an abort, a refusal after this step) settles the
// reservation at what the record says was spent. In a snapshot's pipeline only while a budget is configured.
import { budgetRefusal, budgetUnavailable } from '../budgets/refusal.ts';
import type { BudgetHold, Budgets } from '../budgets/budgets.ts';
import { priceOf, reservationOf } from '../budgets/estimate.ts';
import type { Amount } from '../budgets/store.ts';
import type { Permit } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import type { ModelCall, SnapshotFeature, Step } from './pipeline.ts';

const NOTHING: Amount = { microUsd: 0, tokens: 0 };

export function budgetStep(budgets: Budgets, clock: Clock): SnapshotFeature {
  const step: Step = {
    name: 'budget',
    async run(call) {
      // Counting tokens spends nothing.
      if (call.route.call === 'count_tokens') return undefined;
      const { key, snapshot } = call.caller;
      const subjects = budgets.subjectsOf(key, call.resolved.model);
      if (subjects.length === 0) return undefined;
      const price = priceOf(snapshot, call.resolved.model);
      const r = reservationOf(call.route.call, call.body, price, budgets.settings.default_max_output_tokens);
      const a = await budgets.admit(subjects, r.amount, key);
      if (a.kind === 'refused') return budgetRefusal(a.refusal, clock());
      if (a.kind === 'unavailable') return budgetUnavailable();
      call.permit = charging(call, a.hold, r.prompt);
      return undefined;
    },
  };
  return (snapshot) => (budgets.configuredFor(snapshot) ? [step] : undefined);
}

/**
 * The call's permit, which also settles the budget hold when it ends: at the record's spend (the usage read or
 * estimated before every `end`), the prompt's reservation for a caller who left before any answer, else 0.
 */
function charging(call: ModelCall, hold: BudgetHold, prompt: Amount): Permit {
  const inner = call.permit;
  return {
    get chargesTokens() {
      return inner.chargesTokens;
    },
    async end(tokens) {
      await inner.end(tokens);
      await hold.commit(call.rec.spent() ?? (call.rec.abandoned ? prompt : NOTHING));
    },
  };
}
