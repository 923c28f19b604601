// The caller-facing endpoints, listed once: the app's routes, the `endpoint` and `inbound_protocol` labels,
// the access log and every error envelope read this table (docs/aisix-compatibility.md "Endpoints").
import type { Wire } from '../http/errors.ts';
import type { Endpoint } from '../providers/types.ts';

/** One caller-facing endpoint. */
export interface Route {
  /** The path, which is also the `endpoint` label (AISIX labels by route template). */
  readonly path: string;
  readonly method: 'GET' | 'POST';
  /** The caller's wire: its error envelope, SSE error events and `inbound_protocol` label. */
  readonly wire: Wire;
  /** Counted in the `aisix_llm_*` families too (a model inference). */
  readonly inference: boolean;
  /** The adapter endpoint a model call on this path is dispatched to; undefined for other endpoints. */
  readonly call?: Endpoint;
  /** The caller may ask for an SSE answer (`"stream": true`); otherwise every answer is one JSON body. */
  readonly streams?: boolean;
}

/** A route that dispatches a model call. */
export type ModelCallRoute = Route & { readonly call: Endpoint };

export const ROUTES: readonly Route[] = [
  { path: '/v1/chat/completions', method: 'POST', wire: 'openai', inference: true, call: 'chat', streams: true },
  { path: '/v1/completions', method: 'POST', wire: 'openai', inference: true, call: 'completions', streams: true },
  { path: '/v1/embeddings', method: 'POST', wire: 'openai', inference: true, call: 'embeddings' },
  { path: '/v1/responses', method: 'POST', wire: 'openai', inference: true, call: 'responses', streams: true },
  { path: '/v1/messages', method: 'POST', wire: 'anthropic', inference: true, call: 'messages', streams: true },
  // Counting is no model inference (AISIX counts it under `endpoint` only) and is never streamed.
  { path: '/v1/messages/count_tokens', method: 'POST', wire: 'anthropic', inference: false, call: 'count_tokens' },
  { path: '/v1/models', method: 'GET', wire: 'openai', inference: false },
];

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

export function isModelCall(r: Route): r is ModelCallRoute {
  return r.call !== undefined;
}
