// The one interface every provider adapter implements. Adding a provider never touches routing or
// handlers: the handler resolves a target, the adapter speaks the vendor's wire.
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import type { AdapterName, ProviderKey } from '../resources/schema.ts';
import type { CancelSignal } from '../util/cancel.ts';

/**
 * What the caller asked for, in the caller's wire: `chat` and `embeddings` are OpenAI's, `messages` is
 * Anthropic's Messages API. An adapter that does not support `messages` is reached through the
 * translation in `call.ts` (Anthropic wire ⇄ OpenAI chat), so it only ever sees `chat`.
 */
export type Endpoint = 'chat' | 'completions' | 'embeddings' | 'messages';

export interface ProviderCall {
  endpoint: Endpoint;
  /** The caller's body in the endpoint's wire shape, with `model` already set to the upstream model name. */
  body: Record<string, unknown>;
  stream: boolean;
  key: ProviderKey;
  /** The caller's request headers, for the few an adapter forwards (e.g. `anthropic-beta`). */
  callerHeaders?: { get(name: string): string | null };
  upstream: UpstreamFetch;
  /** The W3C `traceparent` of this attempt's span, when the request is traced (docs/operations.md "Tracing"). */
  traceparent?: string;
  /** Aborted on client disconnect, on the model's deadline, or on a stream's silence timeout. */
  signal: CancelSignal;
}

export type ProviderResult =
  /**
   * A whole response in the endpoint's wire shape: a 2xx body, or the upstream's error status with its
   * body (an error envelope of the caller's wire when the adapter translated).
   */
  | { kind: 'response'; status: number; body: string; contentType: string; retryAfter: string | null }
  /**
   * A 2xx stream of SSE bytes in the endpoint's wire shape: OpenAI's `data: …\n\n` ending with
   * `data: [DONE]`, or Anthropic's named events ending with `message_stop`. Iterating may throw an
   * `UpstreamStreamError` when the upstream reports a failure inside the stream.
   */
  | { kind: 'stream'; chunks: AsyncIterable<Uint8Array>; cancel(): Promise<void> }
  /** The gateway refuses the call itself (e.g. a translation the target cannot express): a 400, no upstream call. */
  | { kind: 'refused'; message: string };

/** How a caller's stream ended: whole, cut by our silence deadline, failed upstream, or left by the caller. */
export type StreamEnd = 'complete' | 'upstream_timeout' | 'upstream_error' | 'client_closed';

/** A failure after a stream started: the caller sees it as an SSE error event of its wire. */
export class UpstreamStreamError extends Error {
  constructor(readonly kind: 'upstream_error' | 'upstream_timeout', message: string) {
    super(message);
    this.name = 'UpstreamStreamError';
  }
}

export interface ProviderAdapter {
  readonly name: AdapterName;
  supports(endpoint: Endpoint): boolean;
  /** Rejects on transport failure or abort; never on an upstream HTTP status. */
  call(call: ProviderCall): Promise<ProviderResult>;
}

/** An HTTP adapter's answer: a 2xx stream passes through as it arrives; anything else is read whole. */
export async function upstreamResult(res: UpstreamResponse, stream: boolean): Promise<ProviderResult> {
  if (stream && res.status >= 200 && res.status < 300) {
    return { kind: 'stream', chunks: res.body, cancel: () => res.discard() };
  }
  return {
    kind: 'response',
    status: res.status,
    body: await res.text(),
    contentType: res.header('content-type') ?? 'application/json',
    retryAfter: res.header('retry-after'),
  };
}
