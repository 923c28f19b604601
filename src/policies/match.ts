// Which rate-limit policies a request meets, where, and in which bucket (docs/rate-limit-policies.md): the
// condition tree, the two gates (the request, and each routing target), AISIX's bucket names. Pure.
import type { BucketSpec } from '../routing/rate-limit.ts';
import { bucketSpec } from '../routing/rate-limit.ts';
import { suspended } from './schedule.ts';
import {
  type ClassicPolicy,
  compileRegex,
  type ConditionalPolicy,
  type ConditionNode,
  type Dimension,
  GROUP_BY,
  type PolicyLimits,
  type RateLimitPolicy,
} from '../resources/policy-schema.ts';

/** A model as a policy sees it. */
export interface PolicyModel {
  id: string;
  name: string;
  /** The vendor id of a direct model (`provider`); absent on a routing model. */
  provider?: string;
}

/** The caller and the model of one gate. */
export interface PolicyRequest {
  apiKeyId: string;
  teamId?: string | null;
  userId?: string | null;
  /**
   * The request gate: the requested model (direct or routing). A target gate: the target, with the requested
   * routing model as `parent`.
   */
  model: PolicyModel;
  parent?: PolicyModel;
}

/** One policy's bucket for one request: what to reserve, and what to name in a refusal. */
export interface PolicyBucket {
  policy: { id: string; name: string };
  spec: BucketSpec;
}

export type Gate = 'request' | 'target';

const MODEL_DIMS: readonly Dimension[] = ['model', 'model_name', 'provider'];

/** Whether a conditional policy needs the concrete model (its conditions or group_by name one). */
function mentionsModel(p: ConditionalPolicy): boolean {
  const walk = (n: ConditionNode): boolean => 'logic' in n ? n.children.some(walk) : MODEL_DIMS.includes(n.dimension);
  return (p.conditions ?? []).some(walk) || (p.group_by ?? []).some((d) => d === 'model' || d === 'provider');
}

/**
 * The policies a call without a model meets (an MCP tool call): every one that names no model dimension — a
 * classic `model` row, or a conditional row whose conditions or `group_by` read the model or its provider,
 * cannot match a call that has none.
 */
export function policiesWithoutModel(policies: readonly RateLimitPolicy[]): RateLimitPolicy[] {
  return policies.filter((p) => (p.form === 'classic' ? p.scope !== 'model' : !mentionsModel(p)));
}

/**
 * The policies that reserve at `gate`, for a request whose requested model is routing (`routed`) or direct. A
 * classic `model` row: the request gate (the requested id, a group's included) and, routed, each target gate
 * (the target's id). A conditional row that names the model: the target gates when routed, else the request
 * gate. Every other row: the request gate once.
 */
export function policiesAt(policies: readonly RateLimitPolicy[], gate: Gate, routed: boolean): RateLimitPolicy[] {
  return policies.filter((p) => {
    if (p.form === 'classic') return gate === 'request' || (routed && p.scope === 'model');
    return (mentionsModel(p) && routed ? 'target' : 'request') === gate;
  });
}

/** The buckets of `policies` (those of one gate) the request meets at `nowMs`; a suspended policy reserves nothing. */
export function policyBuckets(
  policies: readonly RateLimitPolicy[],
  req: PolicyRequest,
  nowMs: number,
): PolicyBucket[] {
  const out: PolicyBucket[] = [];
  for (const p of policies) {
    if (suspended(p.schedules, nowMs)) continue;
    const bucket = p.form === 'classic' ? classicBucket(p, req) : conditionalBucket(p, req);
    if (bucket === undefined) continue;
    const spec = bucketSpec(bucket, p.form === 'classic' ? classicLimits(p) : p.limits);
    if (spec) out.push({ policy: { id: p.id, name: p.name }, spec });
  }
  return out;
}

function classicBucket(p: ClassicPolicy, req: PolicyRequest): string | undefined {
  const base = `policy:${p.scope}:${p.scope_ref}:${p.id}`;
  switch (p.scope) {
    case 'api_key':
      return req.apiKeyId === p.scope_ref ? base : undefined;
    case 'team':
      return req.teamId === p.scope_ref ? base : undefined;
    case 'member':
      return req.userId === p.scope_ref ? base : undefined;
    case 'team_member':
      return req.teamId === p.scope_ref && req.userId ? `${base}:${req.userId}` : undefined;
    case 'model':
      // The request gate sees the requested model (a group id included); a target gate the target only.
      return req.model.id === p.scope_ref ? base : undefined;
  }
}

/** `max_requests` / `max_tokens` over `window`; tokens are counted per minute and per day only (AISIX's). */
function classicLimits(p: ClassicPolicy): PolicyLimits {
  const req = { second: 'rps', minute: 'rpm', hour: 'rph', day: 'rpd' } as const;
  const tok = { minute: 'tpm', day: 'tpd' } as const;
  const out: PolicyLimits = {};
  if (p.max_requests !== undefined) out[req[p.window]] = p.max_requests;
  if (p.max_tokens !== undefined && (p.window === 'minute' || p.window === 'day')) out[tok[p.window]] = p.max_tokens;
  return out;
}

function escapeValue(v: string): string {
  return v.replaceAll('%', '%25').replaceAll(':', '%3A').replaceAll('=', '%3D');
}

function conditionalBucket(p: ConditionalPolicy, req: PolicyRequest): string | undefined {
  if (!(p.conditions ?? []).every((n) => holds(n, req))) return undefined;
  let bucket = `policy:v2:${p.id}`;
  for (const dim of GROUP_BY) {
    if (!p.group_by?.includes(dim)) continue;
    const value = groupValue(dim, req);
    if (value === undefined) return undefined; // a request without the dimension is not subject to the policy
    bucket += `:${dim}=${escapeValue(value)}`;
  }
  return bucket;
}

function groupValue(dim: (typeof GROUP_BY)[number], req: PolicyRequest): string | undefined {
  switch (dim) {
    case 'team':
      return req.teamId ?? undefined;
    case 'member':
      return req.userId ?? undefined;
    case 'api_key':
      return req.apiKeyId;
    case 'model':
      return req.model.id;
    case 'provider':
      return req.model.provider;
  }
}

/** The values a leaf compares: one, or for `model`/`model_name` at a target gate the target and its parent. */
function valuesOf(dim: Dimension, req: PolicyRequest): string[] {
  const pair = req.parent ? [req.model, req.parent] : [req.model];
  switch (dim) {
    case 'team':
      return req.teamId ? [req.teamId] : [];
    case 'member':
      return req.userId ? [req.userId] : [];
    case 'api_key':
      return [req.apiKeyId];
    case 'model':
      return pair.map((m) => m.id);
    case 'model_name':
      return pair.map((m) => m.name);
    case 'provider':
      return req.model.provider ? [req.model.provider] : [];
  }
}

const regexCache = new Map<string, RegExp | undefined>();

function test1(operator: string, expected: string | string[], actual: string): boolean {
  switch (operator) {
    case '==':
    case '~=':
      return actual === expected;
    case 'in':
      return (expected as string[]).includes(actual);
    default: {
      const key = `${operator}\0${expected as string}`;
      if (!regexCache.has(key)) regexCache.set(key, compileRegex(expected as string, operator === '~*'));
      return regexCache.get(key)?.test(actual) ?? false;
    }
  }
}

/**
 * A leaf on a dimension the request lacks is false, negated or not. Over the pair, a positive operator matches
 * when either value does; `~=` only when both differ; `negate` flips the combined result.
 */
export function holds(n: ConditionNode, req: PolicyRequest): boolean {
  if ('logic' in n) {
    const r = n.logic === 'and' ? n.children.every((c) => holds(c, req)) : n.children.some((c) => holds(c, req));
    return n.negate ? !r : r;
  }
  const values = valuesOf(n.dimension, req);
  if (values.length === 0) return false;
  const r = n.operator === '~='
    ? values.every((v) => !test1('==', n.value, v))
    : values.some((v) => test1(n.operator, n.value, v));
  return n.negate ? !r : r;
}
