// The one way the core calls an adapter: straight through when the adapter speaks the caller's endpoint,
// through a translation when it does not (a `/v1/messages` or `/v1/responses` caller reaching a chat-only
// target; a `/v1/responses` caller on an OpenAI-wire target whose vendor is not OpenAI), and a refusal (a
// 400 in the caller's wire) when the target cannot serve the endpoint at all (e.g. embeddings on an
// Anthropic key, count_tokens on anything but Anthropic). Routing and handlers never know which of these
// happened. Upstream error answers come back as the upstream sent them: the HTTP layer re-wraps them
// (src/http/errors.ts).
import { parseJsonObject, type TokenUsage, TranslationError } from './translate/shared.ts';
import { chatStreamToMessages, chatToMessagesResponse, messagesToChatRequest } from './translate/messages-via-chat.ts';
import {
  chatStreamToResponses,
  chatToResponsesResponse,
  responsesToChatRequest,
} from './translate/responses-via-chat.ts';
import type { Json } from './translate/shared.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

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

export async function callProvider(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  if (call.endpoint === 'responses') {
    if (servesResponsesNatively(adapter, call)) return adapter.call(call);
    if (adapter.supports('chat')) return viaChat(adapter, call, RESPONSES);
  } else if (adapter.supports(call.endpoint)) return adapter.call(call);
  if (call.endpoint === 'messages' && adapter.supports('chat')) return viaChat(adapter, call, MESSAGES);
  if (call.endpoint === 'count_tokens') {
    return { kind: 'refused', message: countTokensRefusal(call.callerModel ?? String(call.body.model ?? '')) };
  }
  return { kind: 'refused', message: `this model (adapter "${adapter.name}") does not serve ${call.endpoint}` };
}

/** One caller wire served through chat: its request, JSON answer and stream translations. */
interface ViaChat {
  request(body: Json): Json;
  response(chat: Json, model: string): Json;
  stream(chunks: AsyncIterable<Uint8Array>, model: string, onUsage: (u: TokenUsage) => void): AsyncIterable<Uint8Array>;
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

async function viaChat(adapter: ProviderAdapter, call: ProviderCall, wire: ViaChat): Promise<ProviderResult> {
  let body: Json;
  try {
    body = wire.request(call.body);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = call.callerModel ?? String(call.body.model ?? '');
  const r = await adapter.call({ ...call, endpoint: 'chat', body });
  if (r.kind === 'stream') {
    // The inner adapter's own count (e.g. Anthropic's cache parts) is richer than the chat usage chunk.
    let seen: TokenUsage | undefined;
    const chunks = wire.stream(r.chunks, model, (u) => {
      seen = u;
    });
    return { kind: 'stream', chunks, cancel: r.cancel, counted: () => r.counted?.() ?? seen };
  }
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  // A 2xx that is not JSON goes back without its body: routing counts it as the upstream failure it is.
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' };
  return { ...r, body: JSON.stringify(wire.response(json, model)), contentType: 'application/json' };
}
