// Every error a caller can receive is built here, from a value with a kind a caller can act on
// (docs/routing.md "Errors and secrets", docs/aisix-compatibility.md "Endpoints"). The envelope is the
// caller's wire's (src/proxy/routes.ts): OpenAI's, or Anthropic's with AISIX's `error.type` by status; a
// caller never sees a stack trace, a runtime's advice text or a configured secret (scrub.ts).
import type { DispatchFailure } from '../routing/dispatch.ts';
import { MAX_UPSTREAM_MESSAGE, upstreamErrorParts } from '../providers/upstream-error.ts';
import type { Scrub } from './scrub.ts';

export type ErrorType =
  | 'invalid_api_key'
  | 'permission_denied'
  | 'model_not_found'
  | 'invalid_request_error'
  | 'rate_limit_exceeded'
  | 'all_candidates_unavailable'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'service_unavailable'
  /** The target's provider key names no adapter (AISIX's kind): 503, nothing sent. */
  | 'provider_unavailable'
  | 'not_found'
  | 'method_not_allowed'
  | 'internal_error'
  /** A guardrail refused the request or the answer (422; docs/guardrails.md). */
  | 'content_filter'
  /** The identity provider's signing keys cannot be had (503; docs/identity.md). */
  | 'api_error'
  /** A hard budget refused the call (429; docs/budgets.md), AISIX's managed-mode type. */
  | 'billing_error'
  /** A passthrough route's upstream exchange ran out of time (504) or failed in transport (502): AISIX's kinds. */
  | 'timeout'
  | 'transport_error'
  /** A video id that names no video the caller may see (404; docs/batch-files-endpoints.md). */
  | 'video_not_found'
  /** An endpoint the model's vendor is not served on (501; docs/batch-files-endpoints.md). */
  | 'not_implemented'
  /** `/v1/realtime` asked without a WebSocket upgrade (400; docs/realtime.md), AISIX's kind. */
  | 'websocket_upgrade_required';

export class ProxyError {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly message: string,
    readonly code?: string,
    readonly headers?: Record<string, string>,
    /** More members of the OpenAI envelope's `error` (AISIX's `policy` on a policy refusal). */
    readonly members?: Record<string, unknown>,
  ) {}
}

export const errors = {
  missingAuth: () =>
    new ProxyError(401, 'invalid_api_key', 'missing API key: send Authorization: Bearer <key> or x-api-key'),
  unknownKey: () => new ProxyError(401, 'invalid_api_key', 'invalid API key'),
  expiredKey: () => new ProxyError(401, 'invalid_api_key', 'API key has expired', 'api_key_expired'),
  disabledKey: () => new ProxyError(401, 'invalid_api_key', 'API key is disabled', 'api_key_disabled'),
  // A JWT caller's refusals (docs/identity.md "Errors"), AISIX's words and codes.
  jwtInvalid: () => new ProxyError(401, 'invalid_api_key', 'invalid JWT', 'jwt_invalid'),
  jwtExpired: () => new ProxyError(401, 'invalid_api_key', 'JWT has expired', 'jwt_expired'),
  jwtIdentityUnmapped: () =>
    new ProxyError(401, 'invalid_api_key', 'no API key is bound to this JWT identity', 'jwt_identity_unmapped'),
  jwtClaimsRejected: () =>
    new ProxyError(
      403,
      'permission_denied',
      'JWT does not satisfy the required scopes or claims',
      'jwt_claims_rejected',
    ),
  jwksUnavailable: () =>
    new ProxyError(503, 'api_error', "unable to fetch the identity provider's signing keys", 'jwks_unavailable'),
  modelNotAllowed: (model: string) =>
    new ProxyError(403, 'permission_denied', `this API key may not use model "${model}"`),
  /** AISIX's wording: generic on purpose, never echoing the configured ranges (`allowed_cidrs`). */
  ipRestricted: () =>
    new ProxyError(
      403,
      'permission_denied',
      'Access denied: your client IP is not allowed to access this model',
      'ip_restricted',
    ),
  /** AISIX's wording (its `ModelNotFound`). */
  unknownModel: (model: string) => new ProxyError(404, 'model_not_found', `model "${model}" not found`),
  badRequest: (message: string) => new ProxyError(400, 'invalid_request_error', message),
  tooLarge: (limit: number) => new ProxyError(413, 'invalid_request_error', `request body exceeds ${limit}-byte limit`),
  rateLimited: (retryAfterSecs: number, what: string) =>
    new ProxyError(
      429,
      'rate_limit_exceeded',
      `rate limit exceeded (${what}); retry after ${retryAfterSecs} s`,
      undefined,
      { 'retry-after': String(retryAfterSecs) },
    ),
  upstream: (message: string) => new ProxyError(502, 'upstream_error', message),
  notFound: (path: string) => new ProxyError(404, 'not_found', `no route for ${path}`),
  methodNotAllowed: (method: string, path: string) =>
    new ProxyError(405, 'method_not_allowed', `${method} is not allowed on ${path}`),
  readOnlyAdmin: () =>
    new ProxyError(
      405,
      'method_not_allowed',
      'the admin API is read-only: change resources in the resources file (then SIGHUP) or in etcd',
    ),
  /** Workers in etcd mode before the first configuration arrived (runtimes/workers-handler.ts). */
  notConfigured: (retryAfterSecs: string) =>
    new ProxyError(
      503,
      'service_unavailable',
      'no configuration has been applied yet: the etcd source has not delivered one',
      undefined,
      { 'retry-after': retryAfterSecs },
    ),
  internal: () => new ProxyError(500, 'internal_error', 'internal error; see the gateway log for this request id'),
};

/** Routing's failure value as the caller's error: the only place a dispatch failure becomes HTTP. */
export function fromFailure(f: DispatchFailure): ProxyError {
  const headers = f.retryAfterSecs !== undefined ? { 'retry-after': String(f.retryAfterSecs) } : undefined;
  const type: ErrorType = f.kind === 'invalid_request' ? 'invalid_request_error' : f.kind;
  return new ProxyError(f.status, type, f.message, undefined, headers);
}

export function openaiEnvelope(e: ProxyError): string {
  return JSON.stringify({
    error: { message: e.message, type: e.type, ...(e.code ? { code: e.code } : {}), ...e.members },
  });
}

/**
 * Anthropic's `error.type` for a status (AISIX's mapping, docs/aisix-compatibility.md "Endpoints"): the Anthropic SDKs treat
 * the type as a closed set, so the gateway's own kinds never appear there.
 */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 422:
    case 431: // Sluice's header limits (AISIX's parser refuses without an envelope): a malformed request
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 408:
      return 'timeout_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}

export function anthropicEnvelope(e: ProxyError): string {
  return JSON.stringify({ type: 'error', error: { type: anthropicErrorType(e.status), message: e.message } });
}

/** The caller's wire, which picks its envelope; each path's is in src/proxy/routes.ts. */
export type Wire = 'openai' | 'anthropic';

export function envelopeFor(wire: Wire): (e: ProxyError) => string {
  return wire === 'anthropic' ? anthropicEnvelope : openaiEnvelope;
}

export function errorResponse(e: ProxyError, envelope: (e: ProxyError) => string = openaiEnvelope): Response {
  return new Response(envelope(e), {
    status: e.status,
    headers: { 'content-type': 'application/json', ...e.headers },
  });
}

// ---- upstream error bodies ------------------------------------------------------------------------------

/**
 * An upstream's error answer (4xx passed back to the caller) re-wrapped in the caller's envelope: the
 * upstream's status, type and message kept (OpenAI's `param` and `code` too), nothing else of its body —
 * and every configured secret scrubbed from each (`scrub`), before each is cut to `MAX_UPSTREAM_MESSAGE`.
 */
export function upstreamErrorBody(
  wire: Wire,
  status: number,
  body: string,
  scrub: Scrub,
): string {
  const p = upstreamErrorParts(body);
  const cut = (s: string) => scrub(s, MAX_UPSTREAM_MESSAGE);
  const message = cut(p.message);
  if (wire === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: anthropicErrorType(status), message } });
  }
  const error: Record<string, unknown> = { message, type: p.type !== undefined ? cut(p.type) : 'upstream_error' };
  if ('param' in p) error.param = typeof p.param === 'string' ? cut(p.param) : p.param;
  if ('code' in p) error.code = typeof p.code === 'string' ? cut(p.code) : p.code;
  return JSON.stringify({ error });
}

/** AISIX's longest upstream body kept inside `error.message` by the direct-HTTP families. */
export const MAX_RAW_UPSTREAM_MESSAGE = 1024;

/**
 * An upstream error of a direct-HTTP family (audio, image edits, rerank: docs/endpoints.md "Path parameters and
 * upstream bases") as AISIX answers it: a 4xx keeps its status with the upstream's body text inside
 * `error.message` (type `upstream_error`), scrubbed of every secret before it is cut; a 429's `Retry-After` is
 * kept; a 5xx becomes 502 `upstream returned <status>`.
 */
export function rawUpstreamError(status: number, body: string, scrub: Scrub, retryAfter?: string | null): ProxyError {
  if (status >= 500) return new ProxyError(502, 'upstream_error', `upstream returned ${status}`);
  const headers = status === 429 && retryAfter && /^\d+$/.test(retryAfter.trim())
    ? { 'retry-after': retryAfter.trim() }
    : undefined;
  return new ProxyError(status, 'upstream_error', scrub(body, MAX_RAW_UPSTREAM_MESSAGE), undefined, headers);
}
