// Anthropic's Messages API (`adapter: anthropic`; `api_base` without `/v1`). A `/v1/messages` caller passes
// through untouched, and so does `/v1/messages/count_tokens`; an OpenAI chat caller is translated both ways
// (docs/routing.md "Anthropic Messages").
import { capabilitiesOfCall } from './capabilities.ts';
import { parseJsonObject, TranslationError } from './translate/shared.ts';
import {
  chatAnswerCounts,
  chatToMessagesRequest,
  messagesStreamToChat,
  messagesToChatResponse,
} from './translate/chat-via-messages.ts';
import {
  type ProviderAdapter,
  type ProviderCall,
  type ProviderResult,
  type TokenCounts,
  upstreamResult,
} from './types.ts';
import { addKeyHeaders } from './upstream-headers.ts';

export const ANTHROPIC_VERSION = '2023-06-01';

const PATHS = { messages: '/v1/messages', count_tokens: '/v1/messages/count_tokens' } as const;

async function send(
  c: ProviderCall,
  body: Record<string, unknown>,
  path: string = PATHS.messages,
): Promise<ProviderResult> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: c.stream ? 'text/event-stream' : 'application/json',
    'anthropic-version': ANTHROPIC_VERSION,
  };
  if (c.key.api_key) headers['x-api-key'] = c.key.api_key;
  if (c.traceparent) headers.traceparent = c.traceparent;
  if (c.requestId) headers['x-aisix-request-id'] = c.requestId;
  addKeyHeaders(headers, c);
  // The caller's beta opt-ins (e.g. extended context, prompt-caching variants) apply upstream as asked,
  // unless the key's operator set the header: it ranks as a forwarded header.
  const beta = c.callerHeaders?.get('anthropic-beta');
  if (beta && !Object.hasOwn(headers, 'anthropic-beta')) headers['anthropic-beta'] = beta;
  const res = await c.upstream({
    url: `${c.key.api_base}${path}`,
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: c.signal,
    tls: c.key.tls,
  });
  return upstreamResult(res, c.stream);
}

/** An OpenAI chat request to an Anthropic upstream, and its answer back in OpenAI's shape. */
async function chatViaMessages(c: ProviderCall): Promise<ProviderResult> {
  let body: Record<string, unknown>;
  try {
    body = chatToMessagesRequest(c.body, capabilitiesOfCall(c), c.promptCacheTtl);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = String(c.body.model ?? '');
  const r = await send(c, body);
  if (r.kind === 'stream') {
    const includeUsage = typeof c.body.stream_options === 'object' && c.body.stream_options !== null &&
      (c.body.stream_options as { include_usage?: unknown }).include_usage === true;
    // The counts reach the meter whatever the caller asked, as the answer states them.
    let counted: TokenCounts | undefined;
    const chunks = messagesStreamToChat(
      r.chunks,
      model,
      includeUsage,
      (u) => {
        counted = u;
      },
      c.maxSseEventBytes,
      c.forTranslation,
    );
    return { kind: 'stream', chunks, cancel: r.cancel, counted: () => counted };
  }
  // An error status goes back as the upstream sent it (the HTTP layer re-wraps it in the caller's envelope);
  // a 2xx that is not JSON without its body (routing counts it as the upstream failure it is).
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' }; // not JSON: routing's check fails it, whatever its shape
  const counted = chatAnswerCounts(json, c.forTranslation);
  return {
    ...r,
    body: JSON.stringify(messagesToChatResponse(json, model, c.forTranslation)),
    contentType: 'application/json',
    ...(counted ? { counted } : {}),
  };
}

export const anthropicAdapter: ProviderAdapter = {
  name: 'anthropic',
  supports: (endpoint) => endpoint === 'chat' || endpoint === 'messages' || endpoint === 'count_tokens',
  call(c: ProviderCall): Promise<ProviderResult> {
    if (c.endpoint === 'messages') return send(c, c.body);
    // Never streamed: the answer is one JSON object (`{"input_tokens": N}`), passed on byte for byte.
    if (c.endpoint === 'count_tokens') return send({ ...c, stream: false }, c.body, PATHS.count_tokens);
    return chatViaMessages(c);
  },
};
