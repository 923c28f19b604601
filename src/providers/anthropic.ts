// Anthropic's Messages API (`adapter: anthropic`; `api_base` without `/v1`). A `/v1/messages` caller passes
// through untouched; an OpenAI chat caller is translated both ways (docs/routing.md "Anthropic Messages").
import { parseJsonObject, TranslationError } from './translate/shared.ts';
import { chatToMessagesRequest, messagesStreamToChat, messagesToChatResponse } from './translate/chat-via-messages.ts';
import { type ProviderAdapter, type ProviderCall, type ProviderResult, upstreamResult } from './types.ts';

export const ANTHROPIC_VERSION = '2023-06-01';

async function send(c: ProviderCall, body: Record<string, unknown>): Promise<ProviderResult> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: c.stream ? 'text/event-stream' : 'application/json',
    'anthropic-version': ANTHROPIC_VERSION,
  };
  if (c.key.api_key) headers['x-api-key'] = c.key.api_key;
  // The caller's beta opt-ins (e.g. extended context, prompt-caching variants) apply upstream as asked.
  const beta = c.callerHeaders?.get('anthropic-beta');
  if (beta) headers['anthropic-beta'] = beta;
  if (c.traceparent) headers.traceparent = c.traceparent;
  const res = await c.upstream({
    url: `${c.key.api_base}/v1/messages`,
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: c.signal,
  });
  return upstreamResult(res, c.stream);
}

/** An OpenAI chat request to an Anthropic upstream, and its answer back in OpenAI's shape. */
async function chatViaMessages(c: ProviderCall): Promise<ProviderResult> {
  let body: Record<string, unknown>;
  try {
    body = chatToMessagesRequest(c.body);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = String(c.body.model ?? '');
  const r = await send(c, body);
  if (r.kind === 'stream') {
    const includeUsage = typeof c.body.stream_options === 'object' && c.body.stream_options !== null &&
      (c.body.stream_options as { include_usage?: unknown }).include_usage === true;
    return { kind: 'stream', chunks: messagesStreamToChat(r.chunks, model, includeUsage), cancel: r.cancel };
  }
  // An error status goes back as the upstream sent it (the HTTP layer re-wraps it in the caller's envelope);
  // a 2xx that is not JSON without its body (routing counts it as the upstream failure it is).
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' }; // not JSON: routing's check fails it, whatever its shape
  return { ...r, body: JSON.stringify(messagesToChatResponse(json, model)), contentType: 'application/json' };
}

export const anthropicAdapter: ProviderAdapter = {
  name: 'anthropic',
  supports: (endpoint) => endpoint === 'chat' || endpoint === 'messages',
  call(c: ProviderCall): Promise<ProviderResult> {
    return c.endpoint === 'messages' ? send(c, c.body) : chatViaMessages(c);
  },
};
