// The one call every path that spends makes (docs/budgets.md "Joining budgets"): before the upstream call,
// reserve the call's most expensive outcome on every budget its caller and model meet — or get the caller's
// error — and when the answer ended, settle the hold at what was spent. The model-call pipeline's step
// (src/proxy/budgets.ts) is one user; a kind of call without a model passes its own `amount`.
import type { ProxyError } from '../http/errors.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Budgets } from './budgets.ts';
import { priceOf, reservationOf } from './estimate.ts';
import { budgetRefusal, budgetUnavailable } from './refusal.ts';
import type { Amount } from './store.ts';

export interface SpendRequest {
  key: ApiKey;
  snapshot: Snapshot;
  /** The model called, for its budgets and prices; absent for a call without one. */
  model?: Model;
  /** The route's kind of call (`chat`, `messages`, …): which body field states the maximum output. */
  call: string;
  body: Record<string, unknown>;
  /** The reservation when the caller knows it (a call without a model, a fixed price); else from the body. */
  amount?: Amount;
}

/** A reservation to settle once, when the answer ended however it ended. */
export interface SpendHold {
  /** Settle at `actual`: what the answer used, priced; the rest of the reservation is released. */
  commit(actual: Amount): Promise<void>;
  /** The reservation's prompt part: a fair charge for a call the caller left before any answer. */
  readonly prompt: Amount;
}

/** undefined: no budget covers the call (nothing to settle). */
export async function reserveSpend(
  budgets: Budgets,
  nowMs: () => number,
  r: SpendRequest,
): Promise<SpendHold | ProxyError | undefined> {
  const subjects = budgets.subjectsOf(r.key, r.model);
  if (subjects.length === 0) return undefined;
  const price = r.model ? priceOf(r.snapshot, r.model) : undefined;
  const estimate = r.amount
    ? { amount: r.amount, prompt: r.amount }
    : reservationOf(r.call, r.body, price, budgets.settings.default_max_output_tokens);
  const a = await budgets.admit(subjects, estimate.amount, r.key);
  if (a.kind === 'refused') return budgetRefusal(a.refusal, nowMs());
  if (a.kind === 'unavailable') return budgetUnavailable();
  return { commit: (actual) => a.hold.commit(actual), prompt: estimate.prompt };
}

/** The least a reservation can hold: what a budget with no room left refuses. */
const LEAST: Amount = { microUsd: 1, tokens: 1 };

/**
 * For a session whose cost is known only when it ends (a Realtime session): admitted while every budget it meets
 * has room, then settled at what it spent. One session may pass the limit by its own spend
 * (docs/budgets.md "Joining budgets").
 */
export function reserveSession(
  budgets: Budgets,
  nowMs: () => number,
  r: Pick<SpendRequest, 'key' | 'snapshot' | 'model'>,
): Promise<SpendHold | ProxyError | undefined> {
  return reserveSpend(budgets, nowMs, { ...r, call: 'none', body: {}, amount: LEAST });
}

/**
 * For a call that spends nothing itself (an MCP tool call, an A2A call): the caller's error when a hard budget
 * of its key, team or user has no room left, so a spent key does not keep using the gateway; it is charged 0.
 */
export async function refuseWhenSpent(
  budgets: Budgets,
  nowMs: () => number,
  key: ApiKey,
  snapshot: Snapshot,
): Promise<ProxyError | undefined> {
  const hold = await reserveSpend(budgets, nowMs, { key, snapshot, call: 'none', body: {}, amount: LEAST });
  if (hold === undefined) return undefined;
  if ('commit' in hold) {
    await hold.commit({ microUsd: 0, tokens: 0 });
    return undefined;
  }
  return hold;
}
