// The caller-facing endpoints, listed once: the app's routes, the `endpoint` and `inbound_protocol` labels,
// the access log and every error envelope read this table (docs/aisix-compatibility.md "Endpoints").
import type { Wire } from '../http/errors.ts';
import type { Endpoint } from '../providers/types.ts';

interface RouteBase {
  /** The path, which is also the `endpoint` label (AISIX labels by route template). */
  readonly path: string;
  /** `ALL`: every method reaches the handler, which answers the ones it does not serve. */
  readonly method: 'GET' | 'POST' | 'ALL';
  /** The caller's wire: its error envelope, SSE error events and `inbound_protocol` label. */
  readonly wire: Wire;
  /** Counted in the `aisix_llm_*` families too (a model inference). */
  readonly inference: boolean;
  /**
   * Fixed labels for a route that is no model call (AISIX's for `/mcp`): the `endpoint` label and the access
   * log's `path` (a template, not the raw path), `inbound_protocol`, and the `provider` and `model` labels.
   */
  readonly labels?: { endpoint: string; protocol: string; provider: string; model: string };
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

/** `/mcp` and `/mcp/{server}`: MCP over Streamable HTTP (src/proxy/mcp.ts, docs/mcp.md). */
export interface McpRoute extends RouteBase {
  readonly kind: 'mcp';
  readonly call?: undefined;
  readonly streams?: undefined;
  /** `/mcp/{server}`: the path's last segment names the one server served. */
  readonly scoped: boolean;
}

/**
 * One caller-facing endpoint; its `kind` chooses its handler (app.ts). A new kind of call (MCP tools, A2A,
 * passthrough, media) is one more member here and one more entry in the app's handler table.
 */
export type Route = ModelCallRoute | ModelsListRoute | McpRoute;

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
  ...mcpRoutes(),
];

/** AISIX's MCP routes: `/mcp/` is `/mcp`; every method is answered (405 after authentication). */
function mcpRoutes(): McpRoute[] {
  const labels = (endpoint: string) => ({ endpoint, protocol: 'mcp', provider: 'mcp', model: 'mcp' });
  const base = { method: 'ALL', wire: 'openai', inference: false, kind: 'mcp' } as const;
  return [
    { ...base, path: '/mcp', scoped: false, labels: labels('/mcp') },
    { ...base, path: '/mcp/', scoped: false, labels: labels('/mcp') },
    { ...base, path: '/mcp/:server', scoped: true, labels: labels('/mcp/{server}') },
  ];
}

/** The fields of a model-call route dispatched to `call`. */
function modelCall(call: Endpoint, streams?: true): Pick<ModelCallRoute, 'kind' | 'call' | 'streams'> {
  return streams ? { kind: 'model-call', call, streams } : { kind: 'model-call', call };
}

/** The `endpoint` label of a path that is no route. */
export const OTHER_ENDPOINT = 'other';

const byPath = new Map<string, Route>(ROUTES.map((r) => [r.path, r]));

/** The routes with a `:param` segment, as segment lists. */
const patterns = ROUTES.filter((r) => r.path.includes('/:')).map((r) => ({ route: r, segments: r.path.split('/') }));

/** The route of a path (no query string): an exact one, else one whose `:param` segments match; or undefined. */
export function routeOf(path: string): Route | undefined {
  const exact = byPath.get(path);
  if (exact !== undefined || patterns.length === 0) return exact;
  const segments = path.split('/');
  for (const p of patterns) {
    if (p.segments.length !== segments.length) continue;
    if (p.segments.every((s, i) => s.startsWith(':') ? segments[i] !== '' : s === segments[i])) return p.route;
  }
  return undefined;
}

/** The wire a path speaks: its route's, OpenAI's for any other path. */
export function wireOf(path: string): Wire {
  return routeOf(path)?.wire ?? 'openai';
}
