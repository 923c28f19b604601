// The pipeline's budget step (pipeline.ts; docs/budgets.md): after the rate-limit reservation, the call's
// most expensive outcome is reserved on every budget it meets, or the call is refused; the permit then carries
// the charge, so whatever ends the call (its last byte, an abort, a refusal after this step) settles the
// reservation at what the record says was spent. In a snapshot's pipeline only while a budget is configured.
import type { Budgets } from '../budgets/budgets.ts';
import { reserveSpend, type SpendHold } from '../budgets/spend.ts';
import type { Amount } from '../budgets/store.ts';
import { ProxyError } from '../http/errors.ts';
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
      const hold = await reserveSpend(budgets, clock, {
        key,
        snapshot,
        model: call.resolved.model,
        call: call.route.call,
        body: call.body,
      });
      if (hold === undefined || hold instanceof ProxyError) return hold;
      call.permit = new ChargingPermit(call.permit, call, hold);
      return undefined;
    },
  };
  return (snapshot) => (budgets.configuredFor(snapshot) ? [step] : undefined);
}

/**
 * The call's permit, which also settles the budget hold when it ends: at the record's spend (the usage read or
 * estimated before every `end`), the prompt's reservation for a caller who left before any answer, else 0. A
 * class: an object literal with a getter is made in dictionary mode, and what its getter reached (the whole call)
 * outlived every young collection until a full one (docs/performance.md "Budgets on the request path").
 */
class ChargingPermit implements Permit {
  constructor(private readonly inner: Permit, private readonly call: ModelCall, private readonly hold: SpendHold) {}

  get chargesTokens(): boolean {
    return this.inner.chargesTokens;
  }

  async end(tokens?: number): Promise<void> {
    await this.inner.end(tokens);
    const rec = this.call.rec;
    await this.hold.commit(rec.spent() ?? (rec.abandoned ? this.hold.prompt : NOTHING));
  }
}
