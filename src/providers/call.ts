// The one way the core calls an adapter: straight through when the adapter speaks the caller's endpoint,
// through the Anthropic ⇄ OpenAI translation when a `/v1/messages` caller reaches an OpenAI-style target,
// and a refusal (a 400 in the caller's wire) when the target cannot serve the endpoint at all (e.g.
// embeddings on an Anthropic key). Routing and handlers never know which of these happened. Upstream error
// answers come back as the upstream sent them: the HTTP layer re-wraps them (src/http/errors.ts).
import { parseJsonObject, TranslationError } from './translate/shared.ts';
import { chatStreamToMessages, chatToMessagesResponse, messagesToChatRequest } from './translate/messages-via-chat.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

export async function callProvider(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  if (adapter.supports(call.endpoint)) return adapter.call(call);
  if (call.endpoint === 'messages' && adapter.supports('chat')) return messagesViaChat(adapter, call);
  return { kind: 'refused', message: `this model (adapter "${adapter.name}") does not serve ${call.endpoint}` };
}

/** A `/v1/messages` call served through an adapter's chat (also for adapters that speak Messages for some models only). */
export async function messagesViaChat(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  let body: Record<string, unknown>;
  try {
    body = messagesToChatRequest(call.body);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = String(call.body.model ?? '');
  const r = await adapter.call({ ...call, endpoint: 'chat', body });
  if (r.kind === 'stream') return { kind: 'stream', chunks: chatStreamToMessages(r.chunks, model), cancel: r.cancel };
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  // A 2xx that is not JSON goes back without its body: routing counts it as the upstream failure it is.
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' }; // not JSON: routing's check fails it, whatever its shape
  return { ...r, body: JSON.stringify(chatToMessagesResponse(json, model)), contentType: 'application/json' };
}
