// The one interface every provider adapter implements. Adding a provider never touches routing or
// handlers: the handler resolves a target, the adapter speaks the vendor's wire.
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import type { CapabilityOverrides } from '../resources/capabilities.ts';
import type { AdapterName, ApiKey, ProviderKey } from '../resources/schema.ts';
import { RefusedAnswer } from '../upstream-fetch.ts';
import type { FormPart } from './form.ts';
import type { CancelSignal } from '../util/cancel.ts';

/**
 * What the caller asked for, in the caller's wire: `chat`, `completions`, `embeddings` and `responses` are
 * OpenAI's, `messages` and `count_tokens` (`/v1/messages/count_tokens`) Anthropic's. An adapter that does
 * not support `messages` or `responses` is reached through the translations in `call.ts` (both through
 * OpenAI chat), so it only ever sees `chat`; `count_tokens` off Anthropic's wire is a local estimate.
 */
export type Endpoint =
  | 'chat'
  | 'completions'
  | 'embeddings'
  | 'messages'
  | 'responses'
  | 'count_tokens'
  | MediaEndpoint;

/**
 * OpenAI's audio, image and rerank endpoints (docs/media-endpoints.md): served by OpenAI-compatible adapters
 * only, never translated. Speech and the transcriptions relay the upstream's bytes as they come.
 */
export type MediaEndpoint =
  | 'audio_speech'
  | 'audio_transcriptions'
  | 'audio_translations'
  | 'images_generations'
  | 'images_edits'
  | 'rerank';

/** Read-only request headers (a `Headers` object fits). */
export interface CallerHeaders {
  get(name: string): string | null;
  forEach?(each: (value: string, name: string) => void): void;
}

export interface ProviderCall {
  endpoint: Endpoint;
  /** The caller's body in the endpoint's wire shape, with `model` already set to the upstream model name. */
  body: Record<string, unknown>;
  stream: boolean;
  key: ProviderKey;
  /** A multipart endpoint's form (`body` holds its text fields); the adapter re-encodes it with `body.model`. */
  form?: readonly FormPart[];
  /**
   * The caller's request headers, for the few an adapter forwards (e.g. `anthropic-beta`) and the key's
   * `request.forward_client_headers` (which needs `forEach`).
   */
  callerHeaders?: CallerHeaders;
  /** The caller's API key, for `request.default_headers` templates; absent on calls no caller made. */
  apiKey?: Pick<ApiKey, 'id' | 'display_name' | 'team_id' | 'user_id'>;
  /** The model row dispatched to, for `request.default_headers` templates. */
  model?: { id: string; display_name: string };
  upstream: UpstreamFetch;
  /** The W3C `traceparent` of this attempt's span, when the request is traced (docs/operations.md "Tracing"). */
  traceparent?: string;
  /** The request's id, sent as `x-aisix-request-id`: the same on every retry and failover attempt. */
  requestId?: string;
  /** Aborted on client disconnect, on the model's deadline, or on a stream's silence timeout. */
  signal: CancelSignal;
  /**
   * The model name the caller sent (an alias or a routing group), for answers Sluice builds itself that
   * must name it (translated Responses answers, refusals); absent: `body.model`.
   */
  callerModel?: string;
  /**
   * The target's effective vendor id: the model's `provider`, else the key's. Decides native Responses
   * (`openai` only) against the translation through chat; absent: the key's `provider`.
   */
  provider?: string;
  /** The model resource's `capabilities` overrides, over what its upstream name says (capabilities.ts). */
  capabilities?: CapabilityOverrides;
  /** The model's `auto_prompt_caching` when enabled: the cache TTL of the breakpoints a translation adds. */
  promptCacheTtl?: '5m' | '1h';
  /**
   * `upstream.max_sse_event_bytes`: the longest event a stream may carry where Sluice parses or edits it
   * (translations, injected usage); 0 = any. Absent: the default (src/providers/sse.ts).
   */
  maxSseEventBytes?: number;
  /**
   * The chat answer is read by another wire's translation (translate/via-chat.ts), not shown to a chat
   * caller: its usage keeps OpenAI's meaning (cached input inside `prompt_tokens`, `cached_tokens` set) for the
   * translation to restate, where a chat caller of an Anthropic-wire upstream gets AISIX's accounting.
   */
  forTranslation?: boolean;
  /**
   * Called once, when the upstream's first SSE chunk arrived, by a translation that writes nothing until
   * later (a Responses answer starts at the first text): the time to first token stops there, not at the
   * caller's first byte.
   */
  firstUpstreamChunk?(): void;
}

/**
 * Tokens one answer used, as an adapter read them from the upstream's own report (or as estimated). OpenAI's
 * meaning throughout: `input` includes cached input, `output` includes reasoning.
 */
export interface TokenCounts {
  input: number;
  output: number;
  /** Of `input`, read from the provider's prompt cache (OpenAI `cached_tokens`, Anthropic `cache_read_input_tokens`). */
  cacheRead?: number;
  /** Of `input`, written to the prompt cache (Anthropic `cache_creation_input_tokens`). */
  cacheCreation?: number;
  /**
   * The two cache counts are beside `input`, not part of it: AISIX's accounting of an Anthropic-wire upstream
   * to a chat caller, whose `input` is Anthropic's `input_tokens` alone.
   */
  cacheOutsideInput?: true;
  /** Of `output`, reasoning tokens (`completion_tokens_details.reasoning_tokens`). */
  reasoning?: number;
  /** Some counter was filled by the local estimate (estimate.ts), not reported by the upstream. */
  estimated?: boolean;
  /**
   * The total the caller was told when it is not `input + output`: AISIX's accounting of an Anthropic-wire
   * upstream to a chat caller, where `input` is the prompt without Anthropic's cache counts and the total
   * includes them.
   */
  total?: number;
}

export type ProviderResult =
  /**
   * A whole response in the endpoint's wire shape: a 2xx body, or the upstream's error status with its
   * body (an error envelope of the caller's wire when the adapter translated).
   */
  | {
    kind: 'response';
    status: number;
    body: string;
    contentType: string;
    retryAfter: string | null;
    /** Headers the gateway adds to the caller's answer (e.g. `x-sluice-tokens-estimated`). */
    headers?: Record<string, string>;
    /**
     * The tokens of a 2xx answer when its body cannot state all of them (Anthropic's cache counts on a chat
     * answer): the record's usage instead of the body's.
     */
    counted?: TokenCounts;
  }
  /**
   * A 2xx stream of SSE bytes in the endpoint's wire shape: OpenAI's `data: …\n\n` ending with
   * `data: [DONE]`, or Anthropic's named events ending with `message_stop`. Iterating may throw an
   * `UpstreamStreamError` when the upstream reports a failure inside the stream.
   */
  | {
    kind: 'stream';
    chunks: AsyncIterable<Uint8Array>;
    cancel(): Promise<void>;
    /**
     * The tokens the adapter read from the upstream stream, once `chunks` is exhausted: set when the adapter
     * withholds the usage from the caller (a usage chunk it asked for behind the caller's back) or the
     * caller's wire cannot carry all of it (cache counts on a translated stream). When set and defined it
     * is the stream's usage; otherwise the bytes the caller received are the record.
     */
    counted?: () => TokenCounts | undefined;
    /** Headers the gateway adds to the caller's answer (e.g. `x-sluice-dropped`). */
    headers?: Record<string, string>;
  }
  /**
   * The gateway refuses the call itself (e.g. a translation the target cannot express): a 400, no upstream
   * call; `unavailable`: the key has no adapter to call with, a 503 `provider_unavailable` (AISIX's status).
   */
  | { kind: 'refused'; message: string; unavailable?: true };

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
  /**
   * Rejects on transport failure or abort, and with a `RefusedAnswer` for an answer the gateway will not
   * pass on (too large, no room, a stream that is not SSE); never on an upstream HTTP status.
   */
  call(call: ProviderCall): Promise<ProviderResult>;
}

/** A 2xx answer to a streamed request that is not `text/event-stream`: an upstream failure, never relayed. */
export class UpstreamNotEventStream extends RefusedAnswer {
  override readonly name = 'UpstreamNotEventStream';
  constructor(status: number, contentType: string | null) {
    const message = `upstream answered ${status} to a stream request with ${
      contentType ? `content-type ${contentType.slice(0, 100)}` : 'no content-type'
    }, not text/event-stream`;
    super(message, { kind: 'upstream_error', status: 502, message }, true);
  }
}

/** Whether a content-type names `text/event-stream` (parameters and case aside). Pure. */
export function isEventStream(contentType: string | null): boolean {
  if (!contentType) return false;
  const semi = contentType.indexOf(';');
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase() === 'text/event-stream';
}

/**
 * An HTTP adapter's answer: a 2xx stream passes through as it arrives; anything else is read whole. Throws
 * `UpstreamNotEventStream` (its body discarded unread) for a 2xx to a stream request that is not SSE.
 */
export function upstreamResult(res: UpstreamResponse, stream: boolean): Promise<ProviderResult> {
  try {
    if (stream && res.status >= 200 && res.status < 300) {
      const contentType = res.header('content-type');
      if (!isEventStream(contentType)) {
        void res.discard().catch(() => {});
        throw new UpstreamNotEventStream(res.status, contentType);
      }
      return Promise.resolve({ kind: 'stream', chunks: res.body, cancel: () => res.discard() });
    }
    // Not an async function: the whole answer is one `then` on its text, without a frame and an await around it.
    return res.text().then((body) => wholeResult(res, body));
  } catch (e) {
    return Promise.reject(e);
  }
}

function wholeResult(res: UpstreamResponse, body: string): ProviderResult {
  return {
    kind: 'response',
    status: res.status,
    body,
    contentType: res.header('content-type') ?? 'application/json',
    retryAfter: res.header('retry-after'),
  };
}
