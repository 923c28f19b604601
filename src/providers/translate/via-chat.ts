// The translations `callProvider` (call.ts) reaches for when a target does not speak the caller's endpoint:
// `/v1/messages` and `/v1/responses` through chat completions (which every family serves), and the
// refusal of `/v1/messages/count_tokens` off Anthropic's wire. Upstream error answers come back as the
// upstream sent them: the HTTP layer re-wraps them (src/http/errors.ts).
import { chatStreamToMessages, chatToMessagesResponse, messagesToChatRequest } from './messages-via-chat.ts';
import { chatStreamToResponses, chatToResponsesResponse, responsesToChatRequest } from './responses-via-chat.ts';
import { type Json, parseJsonObject, type TokenUsage, TranslationError } from './shared.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from '../types.ts';

/** AISIX's refusal of `/v1/messages/count_tokens` on a model with no Anthropic-wire target. */
export function countTokensRefusal(model: string): string {
  return `request payload is invalid: model \`${model}\` is not backed by an Anthropic-protocol upstream; ` +
    '/v1/messages/count_tokens requires a model whose provider key uses the anthropic adapter';
}

/** Whether a target answers `/v1/responses` natively: an OpenAI-wire adapter whose vendor is OpenAI itself. */
export function servesResponsesNatively(adapter: ProviderAdapter, call: ProviderCall): boolean {
  const vendor = (call.provider ?? call.key.provider) || call.key.adapter;
  return adapter.supports('responses') && vendor === 'openai';
}

/**
 * The call when it does not go straight to the adapter: `/v1/responses` (native only on an OpenAI
 * vendor, else through chat), `/v1/messages` through chat, `/v1/messages/count_tokens` refused off
 * Anthropic's wire. Undefined: the adapter serves the endpoint itself, or nothing can (call.ts refuses).
 */
export function translatedCall(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> | undefined {
  switch (call.endpoint) {
    case 'responses':
      if (servesResponsesNatively(adapter, call)) return adapter.call(call);
      return adapter.supports('chat') ? viaChat(adapter, call, RESPONSES) : undefined;
    case 'messages':
      if (adapter.supports('messages')) return undefined;
      return adapter.supports('chat') ? viaChat(adapter, call, MESSAGES) : undefined;
    case 'count_tokens': {
      // Only an adapter that speaks Anthropic's Messages wire itself can ask Anthropic to count.
      if (adapter.supports('messages') && adapter.supports('count_tokens')) return undefined;
      const model = call.callerModel ?? String(call.body.model ?? '');
      return Promise.resolve({ kind: 'refused', message: countTokensRefusal(model) });
    }
    default:
      return undefined;
  }
}

/** One caller wire served through chat: its request, JSON answer and stream translations. */
interface ViaChat {
  request(body: Json): Json;
  response(chat: Json, model: string): Json;
  stream(
    chunks: AsyncIterable<Uint8Array>,
    model: string,
    onUsage: (u: TokenUsage) => void,
    maxEventBytes?: number,
  ): AsyncIterable<Uint8Array>;
}

const MESSAGES: ViaChat = {
  request: messagesToChatRequest,
  response: chatToMessagesResponse,
  stream: chatStreamToMessages,
};

const RESPONSES: ViaChat = {
  request: responsesToChatRequest,
  response: chatToResponsesResponse,
  stream: chatStreamToResponses,
};

/** A `/v1/messages` call through an adapter's chat (also for adapters that speak Messages for some models only). */
export function messagesViaChat(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  return viaChat(adapter, call, MESSAGES);
}

async function viaChat(adapter: ProviderAdapter, call: ProviderCall, wire: ViaChat): Promise<ProviderResult> {
  let body: Json;
  try {
    body = wire.request(call.body);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = call.callerModel ?? String(call.body.model ?? '');
  const r = await adapter.call({ ...call, endpoint: 'chat', body, forTranslation: true });
  if (r.kind === 'stream') {
    // The inner adapter's own count (e.g. Anthropic's cache parts) is richer than the chat usage chunk.
    let seen: TokenUsage | undefined;
    const upstream = call.firstUpstreamChunk ? noticingFirst(r.chunks, call.firstUpstreamChunk) : r.chunks;
    const chunks = wire.stream(upstream, model, (u) => {
      seen = u;
    }, call.maxSseEventBytes);
    return { kind: 'stream', chunks, cancel: r.cancel, counted: () => r.counted?.() ?? seen };
  }
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  // A 2xx that is not JSON goes back without its body: routing counts it as the upstream failure it is.
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' };
  return { ...r, body: JSON.stringify(wire.response(json, model)), contentType: 'application/json' };
}

/** The chunks as they come; `onFirst` once the first has arrived (the time to first token stops there). */
function noticingFirst(chunks: AsyncIterable<Uint8Array>, onFirst: () => void): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = chunks[Symbol.asyncIterator]();
      let waiting = true;
      return {
        next() {
          if (!waiting) return it.next();
          return it.next().then((r) => {
            if (!r.done) {
              waiting = false;
              onFirst();
            }
            return r;
          });
        },
        return: () => it.return?.() ?? Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}
