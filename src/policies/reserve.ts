// The rate-limit subjects of one gate (docs/rate-limit-policies.md "Where a policy counts"): the request gate's
// policies for the requested model, and a routing target's own layers — its inline `rate_limit` and the
// policies that reserve per target. The limiter (src/routing/rate-limit.ts) reserves them with the key's and
// the model's, all or nothing.
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { RateLimitSubject } from '../routing/rate-limit.ts';
import { policiesAt, policiesWithoutModel, policyBuckets, type PolicyModel, type PolicyRequest } from './match.ts';
import type { RateLimitPolicy } from '../resources/policy-schema.ts';

/** The model as a policy sees it; a direct model's vendor is its own `provider`, else its key's. */
function policyModel(snapshot: Snapshot, m: Model): PolicyModel {
  if (m.kind !== 'direct') return { id: m.id, name: m.display_name };
  const provider = m.provider ?? snapshot.providerKeys.get(m.provider_key_id)?.provider;
  return provider ? { id: m.id, name: m.display_name, provider } : { id: m.id, name: m.display_name };
}

function asSubjects(policies: readonly RateLimitPolicy[], req: PolicyRequest, nowMs: number): RateLimitSubject[] {
  return policyBuckets(policies, req, nowMs).map((b) => ({
    scope: 'policy',
    id: b.policy.id,
    name: b.policy.name,
    spec: b.spec,
  }));
}

function caller(key: ApiKey): Pick<PolicyRequest, 'apiKeyId' | 'teamId' | 'userId'> {
  return { apiKeyId: key.id, teamId: key.team_id, userId: key.user_id };
}

/** The policies the request meets at its gate (none when the snapshot has no policy). */
export function requestGateSubjects(snapshot: Snapshot, key: ApiKey, model: Model, nowMs: number): RateLimitSubject[] {
  const all = snapshot.policies;
  if (all.length === 0) return [];
  const at = policiesAt(all, 'request', model.kind === 'routing');
  return asSubjects(at, { ...caller(key), model: policyModel(snapshot, model) }, nowMs);
}

/**
 * The policies a request that may name no model meets at its gate (a passthrough route's: the model its body
 * names, when it is a configured one). Without a model, a policy that selects by model matches nothing.
 */
export function callerGateSubjects(
  snapshot: Snapshot,
  key: ApiKey,
  model: Model | undefined,
  nowMs: number,
): RateLimitSubject[] {
  if (model) return requestGateSubjects(snapshot, key, model, nowMs);
  return modellessSubjects(snapshot, key, nowMs, 'request_gate');
}

/**
 * Which policies a call without a model counts: those of the request gate (a policy that selects by model then
 * matches nothing), or only those that need no model (an MCP tool call, an A2A call: docs/mcp.md "Governance").
 */
export type ModellessPolicies = 'request_gate' | 'without_model';

/** The policies a call without a model meets, with the call's key, team and member. */
export function modellessSubjects(
  snapshot: Snapshot,
  key: ApiKey,
  nowMs: number,
  which: ModellessPolicies,
): RateLimitSubject[] {
  const all = snapshot.policies;
  if (all.length === 0) return [];
  const policies = which === 'request_gate' ? policiesAt(all, 'request', false) : policiesWithoutModel(all);
  return asSubjects(policies, { ...caller(key), model: { id: '', name: '' } }, nowMs);
}

/**
 * A routing target's own layers, reserved before its attempt: its inline `rate_limit` (bucket
 * `model:<target name>`), then the policies that reserve per target, seeing the target with its group.
 */
export function targetGateSubjects(
  snapshot: Snapshot,
  key: ApiKey,
  target: Model,
  group: Model,
  nowMs: number,
): RateLimitSubject[] {
  const out: RateLimitSubject[] = [];
  if (target.rate_limit) {
    out.push({ scope: 'model', id: target.id, name: target.display_name, limits: target.rate_limit });
  }
  const all = snapshot.policies;
  if (all.length === 0) return out;
  const at = policiesAt(all, 'target', true);
  out.push(
    ...asSubjects(
      at,
      { ...caller(key), model: policyModel(snapshot, target), parent: policyModel(snapshot, group) },
      nowMs,
    ),
  );
  return out;
}
