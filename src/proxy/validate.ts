// What each endpoint requires of a request body before anything is routed: a 400 `invalid_request_error`
// naming the first missing or mistyped member, in the caller's envelope.
import type { Endpoint } from '../providers/types.ts';

/**
 * The longest `model` a caller may send (docs/security.md "What callers cannot grow"): a name reaches the
 * access log, error messages, traces and (through a wildcard alias) the upstream, so its length is bounded
 * before anything reads it.
 */
export const MAX_MODEL_NAME = 256;

/** The first problem with `body` for `endpoint`, or undefined when it may be dispatched. */
export function validateBody(endpoint: Endpoint, body: Record<string, unknown>): string | undefined {
  if (typeof body.model !== 'string' || body.model === '') return '`model` is required and must be a string';
  if (body.model.length > MAX_MODEL_NAME) {
    return `\`model\` must be at most ${MAX_MODEL_NAME} characters (it has ${body.model.length})`;
  }
  if (endpoint === 'chat') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return '`messages` is required and must be a non-empty array';
    }
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  if (endpoint === 'completions') {
    if (body.prompt === undefined) return '`prompt` is required';
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  if (endpoint === 'embeddings' && body.input === undefined) return '`input` is required';
  if (endpoint === 'messages' || endpoint === 'count_tokens') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return '`messages` is required and must be a non-empty array';
    }
  }
  if (endpoint === 'messages') {
    // Optional as on AISIX: the upstream (or the chat translation) applies its own default when absent.
    const max = body.max_tokens;
    if (max !== undefined && (typeof max !== 'number' || !Number.isInteger(max) || max < 1)) {
      return '`max_tokens` must be a positive integer';
    }
  }
  if (endpoint === 'messages' || endpoint === 'responses') {
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  // Partial images come as SSE, which this JSON endpoint does not relay (docs/media-endpoints.md "Answers").
  if (endpoint === 'images_generations' && body.stream === true) {
    return 'request payload is invalid: `stream` is not supported on /v1/images/generations';
  }
  return undefined;
}
