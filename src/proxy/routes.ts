// The caller-facing endpoints, listed once: the app's routes, the `endpoint` and `inbound_protocol` labels,
// the access log and every error envelope read this table (docs/aisix-compatibility.md "Endpoints").
import type { Wire } from '../http/errors.ts';
import type { Endpoint } from '../providers/types.ts';

interface RouteBase {
  /** The path, which is also the `endpoint` label (AISIX labels by route template). */
  readonly path: string;
  readonly method: 'GET' | 'POST' | 'ALL';
  /** The caller's wire: its error envelope, SSE error events and `inbound_protocol` label. */
  readonly wire: Wire;
  /** Counted in the `aisix_llm_*` families too (a model inference). */
  readonly inference: boolean;
  /** The `inbound_protocol` label when it is not the wire's name. */
  readonly protocol?: string;
}

/** A route that dispatches a model call through the request pipeline (pipeline.ts). */
export interface ModelCallRoute extends RouteBase {
  readonly kind: 'model-call';
  /** The adapter endpoint the call is dispatched to. */
  readonly call: Endpoint;
  /** The caller may ask for an SSE answer (`"stream": true`); otherwise every answer is one JSON body. */
  readonly streams?: boolean;
}

/** `GET /v1/models`: the models the caller's key may use. */
export interface ModelsListRoute extends RouteBase {
  readonly kind: 'models-list';
  readonly call?: undefined;
  readonly streams?: undefined;
}

/**
 * Passthrough routes (src/passthrough/, docs/endpoints.md "Passthrough routes"): any method on a host or path
 * prefix a `passthrough_routes` resource claims, relayed to its upstream. It has no path of its own: the app
 * mounts its handler before the typed routes (a claimed host) and after them (a claimed path prefix); `path`
 * is AISIX's `endpoint` label, its errors are OpenAI's envelope whatever the upstream speaks.
 */
export interface PassthroughRouteKind extends RouteBase {
  readonly kind: 'passthrough';
  readonly call?: undefined;
  readonly streams?: undefined;
}

/**
 * One caller-facing endpoint; its `kind` chooses its handler (app.ts). A new kind of call (MCP tools, A2A,
 * passthrough, media) is one more member here and one more entry in the app's handler table.
 */
export type Route = ModelCallRoute | ModelsListRoute | PassthroughRouteKind;

export type RouteKind = Route['kind'];

export const ROUTES: readonly Route[] = [
  { path: '/v1/chat/completions', method: 'POST', wire: 'openai', inference: true, ...modelCall('chat', true) },
  { path: '/v1/completions', method: 'POST', wire: 'openai', inference: true, ...modelCall('completions', true) },
  { path: '/v1/embeddings', method: 'POST', wire: 'openai', inference: true, ...modelCall('embeddings') },
  { path: '/v1/responses', method: 'POST', wire: 'openai', inference: true, ...modelCall('responses', true) },
  { path: '/v1/messages', method: 'POST', wire: 'anthropic', inference: true, ...modelCall('messages', true) },
  // Counting is no model inference (AISIX counts it under `endpoint` only) and is never streamed.
  {
    path: '/v1/messages/count_tokens',
    method: 'POST',
    wire: 'anthropic',
    inference: false,
    ...modelCall('count_tokens'),
  },
  { path: '/v1/models', method: 'GET', wire: 'openai', inference: false, kind: 'models-list' },
];

/** Every passthrough route's request: counted as a proxy request, never as a model inference (AISIX's). */
export const PASSTHROUGH_ROUTE: PassthroughRouteKind = {
  path: '/passthrough_route',
  method: 'ALL',
  wire: 'openai',
  inference: false,
  protocol: 'passthrough',
  kind: 'passthrough',
};

/** The fields of a model-call route dispatched to `call`. */
function modelCall(call: Endpoint, streams?: true): Pick<ModelCallRoute, 'kind' | 'call' | 'streams'> {
  return streams ? { kind: 'model-call', call, streams } : { kind: 'model-call', call };
}

/** The `endpoint` label of a path that is no route. */
export const OTHER_ENDPOINT = 'other';

const byPath = new Map<string, Route>(ROUTES.map((r) => [r.path, r]));

/** The route of an exact path (no query string), or undefined. */
export function routeOf(path: string): Route | undefined {
  return byPath.get(path);
}

/** The wire a path speaks: its route's, OpenAI's for any other path. */
export function wireOf(path: string): Wire {
  return byPath.get(path)?.wire ?? 'openai';
}
