// Planning a dispatch (docs/routing.md "Strategies", docs/aisix-compatibility.md "Resources"): which targets,
// in which order, with which deadlines. A direct model is a one-target plan; a routing model's targets are
// filtered (`allowed_cidrs`, usable provider key) and ordered by its strategy.
import type { Config } from '../config/schema.ts';
import { deploymentLabels } from '../observability/gateway-metrics.ts';
import { adapterFor } from '../providers/index.ts';
import type { DirectModel, RoutingModel, RoutingTarget } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { ipAllowed } from '../util/cidr.ts';
import {
  allUnavailable,
  type DispatchFailure,
  type DispatchInput,
  type Plan,
  type Target,
  type TimeoutBudget,
  upstreamFailure,
} from './dispatch-types.ts';
import type { ModelHealth } from './health.ts';
import { pickTargets, type RoutingState, usableCandidates } from './strategies.ts';
import { anyTagged, requestTags, tagEligible } from './strategy-tag.ts';

/** What planning reads. */
export interface PlanDeps {
  upstream: Config['upstream'];
  health: Pick<ModelHealth, 'state'>;
  routing: RoutingState;
}

/**
 * Resolve a target's deadlines: `timeout` target → group → `upstream.timeout_ms` (an explicit 0 = no deadline
 * and stops the chain); the stream budget from the resources' `stream_timeout` (0 or absent defers), else the
 * resource-resolved `timeout`, else `upstream.stream_timeout_ms` || `upstream.timeout_ms`.
 */
export function timeoutBudget(
  target: { timeout?: number; stream_timeout?: number },
  group: { timeout?: number; stream_timeout?: number } | undefined,
  upstream: { timeout_ms: number; stream_timeout_ms: number },
): TimeoutBudget {
  const requestLevel = target.timeout ?? group?.timeout;
  const timeoutMs = requestLevel ?? upstream.timeout_ms;
  const resourceStream = positive(target.stream_timeout) ?? positive(group?.stream_timeout);
  if (resourceStream !== undefined) return { timeoutMs, silenceMs: resourceStream, streamConfigured: true };
  if (requestLevel !== undefined) return { timeoutMs, silenceMs: requestLevel, streamConfigured: requestLevel > 0 };
  return { timeoutMs, silenceMs: upstream.stream_timeout_ms || upstream.timeout_ms, streamConfigured: false };
}

const positive = (ms: number | undefined): number | undefined => (ms !== undefined && ms > 0 ? ms : undefined);

/**
 * The targets of `input` in attempt order, or why there are none. A direct model in cooldown is still
 * planned (it is the only candidate); one marked unhealthy by its background check is not.
 */
export function planTargets(d: PlanDeps, input: DispatchInput): Plan | DispatchFailure {
  const m = input.model;
  if (m.kind === 'direct') {
    const t = target(d, input.snapshot, m, input.upstreamModel ?? m.model_name, undefined);
    if (!t) return upstreamFailure(`model "${m.display_name}" has no usable provider key`);
    if (!usableCandidates([t], 'fail')) return allUnavailable(m.display_name);
    return { order: [t] };
  }
  const candidates: Target[] = [];
  // The request's tags first (docs/routing.md "Tag routing"): the admit step already refused a request they
  // leave no target for.
  const routed = m.routing.targets;
  for (const rt of anyTagged(routed) ? tagEligible(routed, requestTags(input.headers)) : routed) {
    const tm = input.snapshot.modelByName(rt.model);
    // AISIX drops a target whose own allowed_cidrs exclude the caller before the strategy picks.
    if (tm?.kind !== 'direct' || !ipAllowed(tm.allowed_cidrs, input.clientIp)) continue;
    const t = target(d, input.snapshot, tm, tm.model_name, m, rt);
    if (t) candidates.push(t);
  }
  // Anthropic's own count beats a local estimate: count_tokens tries only the targets that can ask it,
  // when the group has any (docs/translation.md "Estimated tokens").
  if (input.endpoint === 'count_tokens' && candidates.some(countsTokens)) {
    candidates.splice(0, candidates.length, ...candidates.filter(countsTokens));
  }
  if (candidates.length === 0) {
    return upstreamFailure(`no target of model "${m.display_name}" has a usable provider key`);
  }
  const picked = pickTargets(m.routing, candidates, {
    routingModelId: m.id,
    state: d.routing,
    headers: input.headers,
    apiKeyId: input.apiKeyId,
    clientIp: input.clientIp,
  });
  if (picked.kind === 'all_unavailable') return allUnavailable(m.display_name);
  return { order: picked.order, routing: m.routing };
}

/** Only a target speaking Anthropic's Messages wire itself can ask the model to count tokens. */
function countsTokens(t: Target): boolean {
  return t.adapter.supports('messages') && t.adapter.supports('count_tokens');
}

function target(
  d: PlanDeps,
  snapshot: Snapshot,
  model: DirectModel,
  upstreamModel: string,
  group: RoutingModel | undefined,
  rt?: RoutingTarget,
): Target | undefined {
  const key = snapshot.providerKeys.get(model.provider_key_id);
  const adapter = key ? adapterFor(key.adapter) : undefined;
  if (!key || !adapter) return undefined;
  const budget = timeoutBudget(model, group, d.upstream);
  return {
    modelId: model.id,
    weight: rt?.weight ?? 1,
    priority: rt?.priority ?? 0,
    health: d.health.state(model),
    cost: costPer1k(model.cost),
    model,
    upstreamModel,
    key,
    adapter,
    labels: deploymentLabels(model, key),
    // Its members, not a spread: JavaScriptCore copies a spread through a slow path, on every request.
    timeoutMs: budget.timeoutMs,
    silenceMs: budget.silenceMs,
    streamConfigured: budget.streamConfigured,
  };
}

/** least_cost's key: `cost.input_per_1k + cost.output_per_1k` (AISIX `cost_key`); undefined without a cost. */
function costPer1k(cost: Record<string, number> | undefined): number | undefined {
  if (!cost) return undefined;
  return (cost.input_per_1k ?? 0) + (cost.output_per_1k ?? 0);
}
