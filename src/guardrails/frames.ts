// What the caller reads when a guardrail refuses (docs/guardrails.md "What the caller sees"): a 422 in the
// caller's envelope before any byte of an answer, or an `event: error` frame ending a stream that has
// already answered 200 (no `data: [DONE]` after it).
import { blockMessage } from './messages.ts';
import type { GuardedEndpoint } from './slots.ts';

export type GuardWire = 'openai' | 'anthropic';

export const BLOCK_STATUS = 422;

/** The 422 body of a block (`side`: the request's input or the answer's output). */
export function blockBody(wire: GuardWire, side: 'request' | 'response', name: string | undefined): string {
  const message = blockMessage(side, name);
  return wire === 'anthropic'
    ? JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message } })
    : JSON.stringify({ error: { message, type: 'content_filter' } });
}

export function blockResponse(
  wire: GuardWire,
  side: 'request' | 'response',
  name: string | undefined,
  headers: Record<string, string> = {},
): Response {
  return new Response(blockBody(wire, side, name), {
    status: BLOCK_STATUS,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/**
 * The frame that ends a blocked stream; `name` undefined when no member is attributable (the hold-back cap).
 * A `/v1/responses` stream gets its wire's error event (AISIX's `code: content_filter`), whatever the target.
 */
export function streamBlockFrame(wire: GuardWire, name: string | undefined, endpoint?: GuardedEndpoint): string {
  const message = blockMessage('response', name);
  const data = endpoint === 'responses'
    ? { type: 'error', code: 'content_filter', message }
    : wire === 'anthropic'
    ? { type: 'error', error: { type: 'content_filter', message } }
    : { error: { message, type: 'content_filter' } };
  return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
}
