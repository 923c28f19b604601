// The SSE error events a caller receives when a stream fails after its 200: OpenAI's `data: {"error":…}`
// and Anthropic's `event: error`. Built here only; their messages are the gateway's own words or an
// upstream's message already scrubbed (scrub.ts).
import { anthropicErrorType } from './errors.ts';

const encoder = new TextEncoder();

export type StreamErrorKind = 'upstream_error' | 'upstream_timeout';

/** OpenAI's in-stream error: `data: {"error":{"message","type"}}`. */
export function sseErrorEvent(type: StreamErrorKind, message: string): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify({ error: { message, type } })}\n\n`);
}

/**
 * Anthropic's in-stream error event (`/v1/messages`). Its `error.type` is Anthropic's closed set: a failure
 * of the upstream is an `api_error` (as the 502/504 would be in the envelope).
 */
export function anthropicSseErrorEvent(type: StreamErrorKind, message: string): Uint8Array {
  const event = {
    type: 'error',
    error: { type: anthropicErrorType(type === 'upstream_timeout' ? 504 : 502), message },
  };
  return encoder.encode(`event: error\ndata: ${JSON.stringify(event)}\n\n`);
}
