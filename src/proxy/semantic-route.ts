// The admit step's part for a semantic router (docs/routing.md "Semantic routing"): the router's own
// `allowed_cidrs`, then the target src/routing/semantic.ts picks, which becomes the call's one routing target;
// and the `x-aisix-route` header naming the route that served.
import { errors, ProxyError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { Model } from '../resources/schema.ts';
import type { Dispatcher } from '../routing/dispatch.ts';
import type { ModelHealth } from '../routing/health.ts';
import { type SemanticModel, SemanticRouter } from '../routing/semantic.ts';
import { embedTextsThrough } from '../routing/semantic-embed.ts';
import { ipAllowed } from '../util/cidr.ts';
import { slotKey } from './call-state.ts';
import type { ModelCall, StepResult } from './pipeline.ts';

/**
 * The router the admit step asks, embedding through the gateway's own dispatch and calling a classifier on
 * the gateway's upstream transport; it costs nothing until used.
 */
export function semanticRouter(
  d: { log: Logger; health: Pick<ModelHealth, 'state'>; upstreamTimeoutMs: number; upstream: UpstreamFetch },
  dispatcher: Pick<Dispatcher, 'dispatch'>,
): SemanticRouter {
  const log = d.log.withTarget('aisix_proxy::semantic');
  return new SemanticRouter({
    embed: embedTextsThrough(dispatcher),
    upstream: d.upstream,
    health: d.health,
    upstreamTimeoutMs: d.upstreamTimeoutMs,
    warn: (message, fields) => log.warn(message, fields),
  });
}

/** The name of the route that served the call, when one did. */
export const SEMANTIC_ROUTE = slotKey<string>('semantic route');

export const ROUTE_HEADER = 'x-aisix-route';

/**
 * Admits `call` to the router `model`: sets `call.resolved` to the router narrowed to the target it chose
 * (so dispatch makes one routing attempt on it, with the target's own limits and `x-aisix-served-by`).
 */
export async function admitSemantic(
  call: ModelCall,
  resolved: { model: SemanticModel; upstreamModel?: string },
  clientIp: string | undefined,
  router: SemanticRouter,
  log: Logger,
): Promise<StepResult> {
  const m = resolved.model;
  // AISIX serves a semantic router on chat completions only; elsewhere it has no provider of its own.
  if (call.route.call !== 'chat') {
    return errors.badRequest(
      `request payload is invalid: model "${m.display_name}" has no provider (routing models can't be dispatched directly)`,
    );
  }
  const refuse = (target: Model | undefined) => {
    log.warn('request rejected: client IP not in model allowed_cidrs', {
      model: (target ?? m).display_name,
      source_ip: clientIp,
      request_id: call.rec.requestId,
    });
    return errors.ipRestricted();
  };
  if (!ipAllowed(m.allowed_cidrs, clientIp)) return refuse(undefined);
  const choice = await router.choose(call.caller.snapshot, m, call.body, clientIp);
  // Every member excluded: the router's own 403, which names no member.
  if (choice.kind === 'ip_restricted') return refuse(undefined);
  if (choice.kind === 'unavailable') {
    return new ProxyError(503, 'provider_unavailable', 'no bridge registered for provider');
  }
  if (choice.kind === 'unknown_target') {
    return errors.badRequest(
      `request payload is invalid: semantic router target ${
        JSON.stringify(choice.target)
      } does not resolve to a known model`,
    );
  }
  const targets = [{ model: choice.target, weight: 1, priority: 0 }];
  call.resolved = { ...resolved, model: { ...m, routing: { ...m.routing, targets } } };
  call.clientIp = clientIp;
  if (choice.route !== undefined) call.state.set(SEMANTIC_ROUTE, choice.route);
  return undefined;
}

/** `x-aisix-route` on the answer of a call a semantic route served. */
export function semanticRouteHeader(call: ModelCall): Record<string, string> {
  const route = call.state.get(SEMANTIC_ROUTE);
  return route === undefined ? {} : { [ROUTE_HEADER]: route };
}
