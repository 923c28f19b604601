// The caller's rate limits and budgets on the routes the model pipeline does not serve (docs/rate-limit-policies.md
// "Where a policy counts", docs/budgets.md): the subjects a call reserves, all or nothing, and the refusal its
// caller reads. A model call's own steps are admission.ts and budgets.ts.
import type { Budgets } from '../budgets/budgets.ts';
import { refuseWhenSpent } from '../budgets/spend.ts';
import type { ProxyError } from '../http/errors.ts';
import { modellessSubjects } from '../policies/reserve.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Permit, RateLimitDecision, RateLimiter, RateLimitSubject } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import { rateLimitRefusal } from './admission.ts';

/** How a route words the limiter's refusal (the pipeline's by default). */
export type RateLimitRefusal = (r: Extract<RateLimitDecision, { allowed: false }>) => ProxyError;

/** The key's own limits and, when the call names one, the model's. */
export function keyAndModelSubjects(
  key: ApiKey,
  model?: Pick<Model, 'id' | 'display_name' | 'rate_limit'>,
): RateLimitSubject[] {
  const subjects: RateLimitSubject[] = [{ scope: 'api_key', id: key.id, limits: key.rate_limit }];
  if (model) subjects.push({ scope: 'model', id: model.id, name: model.display_name, limits: model.rate_limit });
  return subjects;
}

/** The subjects' permit, or the caller's 429. */
export async function acquirePermit(
  limiter: Pick<RateLimiter, 'acquire'>,
  subjects: RateLimitSubject[],
  refusal: RateLimitRefusal = rateLimitRefusal,
): Promise<Permit | ProxyError> {
  const decision = await limiter.acquire(subjects);
  return decision.allowed ? decision.permit : refusal(decision);
}

/** What holding a modelless call's quota reads. */
export interface ModellessQuotaDeps {
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly clock: Clock;
  readonly budgets?: { readonly budgets: Budgets };
}

/**
 * A call that spends nothing itself and names no model (an MCP tool call, an A2A call): refused while a budget
 * of its key, team or user has no room left; then its key's limits, the route's own buckets (`own`) and every
 * policy that needs no model, reserved together. The permit, or the refusal.
 */
export async function holdModellessQuota(
  d: ModellessQuotaDeps,
  caller: { readonly key: ApiKey; readonly snapshot: Snapshot },
  own: readonly RateLimitSubject[],
  refusal: RateLimitRefusal = rateLimitRefusal,
): Promise<Permit | ProxyError> {
  const { key, snapshot } = caller;
  const spent = d.budgets && await refuseWhenSpent(d.budgets.budgets, d.clock, key, snapshot);
  if (spent) return spent;
  const policies = modellessSubjects(snapshot, key, d.clock(), 'without_model');
  return acquirePermit(d.rateLimiter, [...keyAndModelSubjects(key), ...own, ...policies], refusal);
}
