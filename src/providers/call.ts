// The one way the core calls an adapter: straight through when the adapter speaks the caller's endpoint,
// through the Anthropic ⇄ OpenAI translation when a `/v1/messages` caller reaches an OpenAI-style target,
// and a 400 in the caller's wire when the target cannot serve the endpoint at all (e.g. embeddings on an
// Anthropic key). Routing and handlers never know which of these happened.
import { anthropicErrorBody, parseJsonObject, TranslationError } from './translate/shared.ts';
import { chatStreamToMessages, chatToMessagesResponse, messagesToChatRequest } from './translate/messages-via-chat.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

export async function callProvider(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  if (adapter.supports(call.endpoint)) return adapter.call(call);
  if (call.endpoint === 'messages' && adapter.supports('chat')) return messagesViaChat(adapter, call);
  return badRequest(call, `this model (adapter "${adapter.name}") does not serve ${call.endpoint}`);
}

async function messagesViaChat(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  let body: Record<string, unknown>;
  try {
    body = messagesToChatRequest(call.body);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return badRequest(call, e.message);
  }
  const model = String(call.body.model ?? '');
  const r = await adapter.call({ ...call, endpoint: 'chat', body });
  if (r.kind === 'stream') return { kind: 'stream', chunks: chatStreamToMessages(r.chunks, model), cancel: r.cancel };
  if (r.status < 200 || r.status >= 300) {
    return { ...r, body: anthropicErrorBody(r.body), contentType: 'application/json' };
  }
  const json = parseJsonObject(r.body);
  if (!json) {
    return {
      ...r,
      status: 502,
      body: anthropicErrorBody('the upstream answered 2xx with a body that is not JSON'),
      contentType: 'application/json',
    };
  }
  return { ...r, body: JSON.stringify(chatToMessagesResponse(json, model)), contentType: 'application/json' };
}

function badRequest(call: ProviderCall, message: string): ProviderResult {
  const body = call.endpoint === 'messages'
    ? JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message } })
    : JSON.stringify({ error: { message, type: 'invalid_request_error' } });
  return { kind: 'response', status: 400, body, contentType: 'application/json', retryAfter: null };
}
