// The one interface every provider adapter implements. Adding a provider never touches routing or
// handlers: the handler resolves a target, the adapter speaks the vendor's wire.
import type { UpstreamFetch } from '../platform.ts';
import type { AdapterName, ProviderKey } from '../resources/schema.ts';

export type Endpoint = 'chat' | 'embeddings';

export interface ProviderCall {
  endpoint: Endpoint;
  /** The caller's OpenAI-shaped body with `model` already set to the upstream model name. */
  body: Record<string, unknown>;
  stream: boolean;
  key: ProviderKey;
  upstream: UpstreamFetch;
  /** Aborted on client disconnect, on the model's deadline, or on a stream's silence timeout. */
  signal: AbortSignal;
}

export type ProviderResult =
  /** A whole response: a 2xx body in OpenAI shape, or the upstream's error status and body as sent. */
  | { kind: 'response'; status: number; body: string; contentType: string; retryAfter: string | null }
  /** A 2xx stream of OpenAI-shaped SSE bytes (`data: …\n\n`, ending with `data: [DONE]`). */
  | { kind: 'stream'; chunks: AsyncIterable<Uint8Array>; cancel(): Promise<void> };

export interface ProviderAdapter {
  readonly name: AdapterName;
  supports(endpoint: Endpoint): boolean;
  /** Rejects on transport failure or abort; never on an upstream HTTP status. */
  call(call: ProviderCall): Promise<ProviderResult>;
}
