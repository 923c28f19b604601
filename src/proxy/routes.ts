// The caller-facing endpoints, listed once: the app's routes, the `endpoint` and `inbound_protocol` labels,
// the access log and every error envelope read this table (docs/aisix-compatibility.md "Endpoints").
import type { Wire } from '../http/errors.ts';
import type { Endpoint, MediaEndpoint } from '../providers/types.ts';

export type RouteMethod = 'GET' | 'POST' | 'DELETE';

interface RouteBase {
  /** The path, which is also the `endpoint` label (AISIX labels by route template). */
  readonly path: string;
  /** One method, the methods one path serves (`GET` and `POST` on `/v1/files`), or `ALL`: every method reaches
   * the handler, which answers the ones it does not serve. */
  readonly method: RouteMethod | readonly RouteMethod[] | 'ALL';
  /** The caller's wire: its error envelope, SSE error events and `inbound_protocol` label. */
  readonly wire: Wire;
  /** Counted in the `aisix_llm_*` families too (a model inference). */
  readonly inference: boolean;
  /**
   * Fixed labels for a route that is no model call: the `endpoint` label and the access log's `path` (a
   * template, not the raw path: `/a2a`, `/mcp/{server}`), `inbound_protocol`, and the `provider` and `model`
   * labels, so no caller-chosen name grows the series (AISIX's).
   */
  readonly labels?: { endpoint: string; protocol: string; provider?: string; model?: string };
  /** The `inbound_protocol` label when it is not the wire's name and the route has no fixed `labels`. */
  readonly protocol?: string;
}

/** A route that dispatches a model call through the request pipeline (pipeline.ts). */
export interface ModelCallRoute extends RouteBase {
  readonly kind: 'model-call';
  /** The adapter endpoint the call is dispatched to. */
  readonly call: Endpoint;
  /** The caller may ask for an SSE answer (`"stream": true`); otherwise every answer is one JSON body. */
  readonly streams?: boolean;
  /** The body is `multipart/form-data`, not JSON (docs/media-endpoints.md "Multipart bodies"). */
  readonly form?: true;
  /** The upstream's 2xx answer is relayed as bytes as they come: audio, or a transcription in any format. */
  readonly relay?: true;
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
 * `POST /a2a/{agent}` (a JSON-RPC call relayed to an A2A agent) and `GET /a2a/{agent}/.well-known/agent-card.json`
 * (its card, pointing at the gateway): src/proxy/a2a.ts, docs/a2a.md.
 */
export interface A2aRoute extends RouteBase {
  readonly kind: 'a2a-call' | 'a2a-card';
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

/** `GET /v1/realtime`: a WebSocket session relayed to an OpenAI Realtime upstream (src/realtime/, docs/realtime.md). */
export interface RealtimeRoute extends RouteBase {
  readonly kind: 'realtime';
  readonly call?: undefined;
  readonly streams?: undefined;
}

/**
 * The files, batches and fine-tuning routes: a model row chosen by a routed id, a hint or a default, one upstream
 * call relayed (src/endpoints/jobs.ts, docs/batch-files-endpoints.md).
 */
export interface JobsRoute extends RouteBase {
  readonly kind: 'jobs';
  readonly family: 'files' | 'batches' | 'fine_tuning';
  readonly call?: undefined;
  readonly streams?: undefined;
}

/** `POST /v1/videos`, its poll and its content (src/endpoints/videos.ts, docs/batch-files-endpoints.md). */
export interface VideosRoute extends RouteBase {
  readonly kind: 'videos';
  readonly call?: undefined;
  readonly streams?: undefined;
}

/**
 * One caller-facing endpoint; its `kind` chooses its handler (app.ts). A new kind of call (MCP tools, A2A,
 * passthrough, media) is one more member here and one more entry in the app's handler table.
 */
export type Route =
  | ModelCallRoute
  | ModelsListRoute
  | McpRoute
  | A2aRoute
  | PassthroughRouteKind
  | JobsRoute
  | VideosRoute
  | RealtimeRoute;

export type RouteKind = Route['kind'];

/** AISIX labels every `/a2a/*` request `/a2a`, protocol `a2a`, provider and model `a2a`. */
const A2A_LABELS = { endpoint: '/a2a', protocol: 'a2a', provider: 'a2a', model: 'a2a' } as const;

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
  { path: '/a2a/:agent', method: 'POST', wire: 'openai', inference: false, kind: 'a2a-call', labels: A2A_LABELS },
  {
    path: '/a2a/:agent/.well-known/agent-card.json',
    method: 'GET',
    wire: 'openai',
    inference: false,
    kind: 'a2a-card',
    labels: A2A_LABELS,
  },
  // Audio, images and rerank (docs/media-endpoints.md).
  { path: '/v1/audio/speech', method: 'POST', wire: 'openai', inference: true, ...media('audio_speech', {}, true) },
  ...(['transcriptions', 'translations'] as const).map((n): Route => ({
    path: `/v1/audio/${n}`,
    method: 'POST',
    wire: 'openai',
    inference: true,
    ...media(`audio_${n}`, { form: true }, true),
  })),
  { path: '/v1/images/generations', method: 'POST', wire: 'openai', inference: true, ...media('images_generations') },
  {
    path: '/v1/images/edits',
    method: 'POST',
    wire: 'openai',
    inference: true,
    ...media('images_edits', { form: true }),
  },
  { path: '/v1/rerank', method: 'POST', wire: 'openai', inference: true, ...media('rerank') },
  ...mcpRoutes(),
  ...jobs('files', '/v1/files', ['GET', 'POST'], ['GET', 'DELETE'], true),
  ...jobs('batches', '/v1/batches', ['GET', 'POST'], 'GET', false),
  ...jobs('fine_tuning', '/v1/fine_tuning/jobs', ['GET', 'POST'], 'GET', false),
  { path: '/v1/videos', method: 'POST', wire: 'openai', inference: true, kind: 'videos' },
  { path: '/v1/videos/:id', method: 'GET', wire: 'openai', inference: true, kind: 'videos' },
  {
    path: '/v1/videos/:id/content',
    method: 'GET',
    wire: 'openai',
    inference: true,
    kind: 'videos',
    labels: { endpoint: '/v1/videos/:id', protocol: 'openai' },
  },
  { path: '/v1/realtime', method: 'GET', wire: 'openai', inference: true, protocol: 'realtime', kind: 'realtime' },
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

/**
 * A jobs family's rows: the collection, one item, and its content (files) or cancel (batches, fine-tuning).
 * AISIX labels an item's sub-path by the item's template; `provider` and `model` are the family until a model
 * row is chosen.
 */
function jobs(
  family: JobsRoute['family'],
  base: string,
  collection: readonly RouteMethod[],
  item: RouteMethod | readonly RouteMethod[],
  content: boolean,
): JobsRoute[] {
  const common = { wire: 'openai', inference: false, kind: 'jobs', family } as const;
  const labels = (endpoint: string) => ({ endpoint, protocol: 'openai', provider: family, model: family });
  return [
    { path: base, method: collection, ...common, labels: labels(base) },
    { path: `${base}/:id`, method: item, ...common, labels: labels(`${base}/:id`) },
    content
      ? { path: `${base}/:id/content`, method: 'GET', ...common, labels: labels(`${base}/:id`) }
      : { path: `${base}/:id/cancel`, method: 'POST', ...common, labels: labels(`${base}/:id`) },
  ];
}

/** The fields of a model-call route dispatched to `call`. */
function modelCall(call: Endpoint, streams?: true): Pick<ModelCallRoute, 'kind' | 'call' | 'streams'> {
  return streams ? { kind: 'model-call', call, streams } : { kind: 'model-call', call };
}

/** The fields of a media route dispatched to `call`: a multipart body, a relayed answer. */
function media(
  call: MediaEndpoint,
  body: { form?: true } = {},
  relay?: true,
): Pick<ModelCallRoute, 'kind' | 'call' | 'form' | 'relay'> {
  return { kind: 'model-call', call, ...body, ...(relay ? { relay } : {}) };
}

/** The `endpoint` label of a path that is no route. */
export const OTHER_ENDPOINT = 'other';

const byPath = new Map<string, Route>(ROUTES.map((r) => [r.path, r]));
/** The routes whose path has `:name` segments, each matching one non-empty segment. */
const templated = ROUTES.filter((r) => r.path.includes('/:')).map((r) => ({ route: r, parts: r.path.split('/') }));

/** The route of a path (no query string): its exact row, else a row with parameters it fills; or undefined. */
export function routeOf(path: string): Route | undefined {
  const exact = byPath.get(path);
  if (exact !== undefined || templated.length === 0) return exact;
  const parts = path.split('/');
  return templated.find((t) =>
    t.parts.length === parts.length && t.parts.every((s, i) => s.startsWith(':') ? parts[i] !== '' : s === parts[i])
  )?.route;
}

/** The wire a path speaks: its route's, OpenAI's for any other path. */
export function wireOf(path: string): Wire {
  return routeOf(path)?.wire ?? 'openai';
}
