// The answers the cloud adapters give when they cannot or may not call, and the canned shape of a cloud's
// error answer (docs/aisix-compatibility.md "Providers"): the upstream's own text never reaches the caller,
// because Bedrock, Vertex and Azure put account ids, ARNs and project names in it.
import type { ProviderResult } from './types.ts';

/** A whole answer an adapter gives without calling (or in place of the upstream's own). */
type ProviderAnswer = Extract<ProviderResult, { kind: 'response' }>;

/** How an unusable credential's answer starts: no upstream request was made (the usage event says so). */
export const INVALID_CREDENTIALS = 'invalid upstream credentials';

/** A credential that is missing or does not parse: 401 `authentication_error`, no upstream call. */
export function invalidCredentials(detail: string): ProviderAnswer {
  return errorAnswer(401, 'authentication_error', `${INVALID_CREDENTIALS}: ${detail}`);
}

/** A key the operator must fix (no base URL, a bad deployment name, …): 400, no upstream call. */
export function invalidConfig(detail: string): ProviderResult {
  return { kind: 'refused', message: `invalid upstream configuration: ${detail}` };
}

/** What a family tells the caller for an upstream 4xx status it has no special phrase for. */
export type CannedMessages = Partial<Record<number, string>>;

const COMMON: CannedMessages = {
  401: 'upstream authentication failed',
  403: 'upstream authentication failed',
  408: 'upstream request timeout',
  429: 'upstream rate limited',
};

/**
 * An upstream's error status as the caller sees it: a 4xx keeps its status with the family's canned
 * message and the derived `code`; a 5xx keeps its status for routing (retried, and answered 502); anything
 * else that is not 2xx counts as a 502.
 */
export function cannedUpstreamError(
  status: number,
  messages: CannedMessages,
  code: string | undefined,
  retryAfter: string | null,
): ProviderResult {
  const s = status >= 400 && status < 600 ? status : 502;
  const message = messages[s] ?? COMMON[s] ?? `upstream returned ${s}`;
  return errorAnswer(s, 'upstream_error', message, code, retryAfter);
}

function errorAnswer(
  status: number,
  type: string,
  message: string,
  code?: string,
  retryAfter: string | null = null,
): ProviderAnswer {
  const error: Record<string, string> = { message, type };
  if (code) error.code = code;
  return { kind: 'response', status, body: JSON.stringify({ error }), contentType: 'application/json', retryAfter };
}

/** The most of an error body read for its error token; the rest is never looked at. */
const MAX_ERROR_BODY = 64 * 1024;

/** An upstream error body as JSON, when it says it is JSON and fits; read only for its error token. */
export function errorJson(contentType: string | null, body: string): Record<string, unknown> | undefined {
  if (!contentType?.toLowerCase().includes('json') || body.length > MAX_ERROR_BODY) return undefined;
  try {
    const v: unknown = JSON.parse(body);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
