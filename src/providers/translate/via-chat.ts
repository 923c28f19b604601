// The translations `callProvider` (call.ts) reaches for when a target does not speak the caller's endpoint:
// `/v1/messages` and `/v1/responses` through chat completions (which every family serves), and
// `/v1/messages/count_tokens` off Anthropic's wire as a local estimate. What the target accepts comes from
// its capabilities (capabilities.ts; docs/translation.md). Upstream error answers come back as the upstream
// sent them: the HTTP layer re-wraps them (src/http/errors.ts).
import { type Capabilities, capabilitiesOfCall } from '../capabilities.ts';
import { estimatePromptTokens } from '../estimate.ts';
import { droppedHeaders, droppedMessagesTools, droppedResponsesTools } from './dropped.ts';
import {
  chatStreamToMessages,
  chatToMessagesResponse,
  messagesToChatRequest,
  translateMessagesRequest,
} from './messages-via-chat.ts';
import {
  asksSummary,
  chatStreamToResponses,
  chatToResponsesResponse,
  responsesToChatRequest,
} from './responses-via-chat.ts';
import { isRecord, type Json, parseJsonObject, type TokenUsage, TranslationError } from './shared.ts';
import { isSluiceEncrypted } from './signed-thinking.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from '../types.ts';

/** On a count_tokens answer Sluice made itself: the count is a local estimate, not the model's tokenizer. */
export const TOKENS_ESTIMATED_HEADER = 'x-sluice-tokens-estimated';

/** Whether a target answers `/v1/responses` natively: an OpenAI-wire adapter whose vendor is OpenAI itself. */
export function servesResponsesNatively(
  adapter: ProviderAdapter,
  call: Pick<ProviderCall, 'provider' | 'key'>,
): boolean {
  const vendor = (call.provider ?? call.key.provider) || call.key.adapter;
  return adapter.supports('responses') && vendor === 'openai';
}

/**
 * The call when it does not go straight to the adapter: `/v1/responses` through chat (native only on an
 * OpenAI vendor), `/v1/messages` through chat, `/v1/messages/count_tokens` estimated off
 * Anthropic's wire. Undefined: the adapter serves the endpoint itself, or nothing can (call.ts refuses).
 */
export function translatedCall(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> | undefined {
  switch (call.endpoint) {
    case 'responses':
      if (servesResponsesNatively(adapter, call)) return sluiceStateRefused(call.body);
      return adapter.supports('chat') ? viaChat(adapter, call, RESPONSES) : undefined;
    case 'messages':
      if (adapter.supports('messages')) return undefined;
      return adapter.supports('chat') ? viaChat(adapter, call, MESSAGES) : undefined;
    case 'count_tokens': {
      // Only an adapter that speaks Anthropic's Messages wire itself can ask Anthropic to count.
      if (adapter.supports('messages') && adapter.supports('count_tokens')) return undefined;
      return estimatedCount(call);
    }
    default:
      return undefined;
  }
}

/**
 * A native Responses target given back a reasoning item whose `encrypted_content` Sluice made for Claude:
 * refused, naming the item, rather than sent for OpenAI to refuse opaquely. Undefined: the adapter serves it.
 */
function sluiceStateRefused(body: Json): Promise<ProviderResult> | undefined {
  const input = Array.isArray(body.input) ? body.input : [];
  const i = input.findIndex((item) =>
    isRecord(item) && item.type === 'reasoning' && isSluiceEncrypted(item.encrypted_content)
  );
  if (i < 0) return undefined;
  const id = JSON.stringify((input[i] as Json).id ?? null);
  return Promise.resolve({
    kind: 'refused',
    message: `\`input[${i}]\`: reasoning item ${id} carries \`encrypted_content\` this gateway made for a Claude ` +
      'model, which this model cannot take back; remove the item or its `encrypted_content`, or send the ' +
      'conversation to a Claude model',
  });
}

/**
 * `/v1/messages/count_tokens` on a target that cannot count: the request as the chat prompt the target
 * would be sent, counted in the target's encoding; `{"input_tokens": N}` with `x-sluice-tokens-estimated`.
 */
async function estimatedCount(call: ProviderCall): Promise<ProviderResult> {
  const caps = capabilitiesOfCall(call);
  let chat: Json;
  try {
    chat = messagesToChatRequest(call.body, caps);
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const n = await estimatePromptTokens('chat', chat, caps.encoding, 'built-only');
  return {
    kind: 'response',
    status: 200,
    body: JSON.stringify({ input_tokens: n }),
    contentType: 'application/json',
    retryAfter: null,
    headers: { [TOKENS_ESTIMATED_HEADER]: 'true' },
  };
}

const NOTHING_REPORTED: TokenUsage = { input: 0, output: 0 };

/** One caller wire served through chat: its request, JSON answer and stream translations. */
interface ViaChat {
  /**
   * The chat request, and what of the caller's it could not carry (dropped.ts: `x-sluice-dropped`);
   * `anthropicWire`: the adapter serves the target on Anthropic's Messages wire.
   */
  request(body: Json, caps: Capabilities, anthropicWire: boolean): { body: Json; dropped: string[] };
  /** `request`: the caller's body, for what it asked of the answer's shape. */
  response(chat: Json, model: string, request: Json): Json;
  stream(
    chunks: AsyncIterable<Uint8Array>,
    model: string,
    onUsage: (u: TokenUsage) => void,
    maxEventBytes: number | undefined,
    promptTokens: (() => Promise<number>) | undefined,
    request: Json,
  ): AsyncIterable<Uint8Array>;
  /** Whether the stream states the prompt's size before the upstream does (Messages' `message_start`). */
  countsPromptFirst: boolean;
}

const MESSAGES: ViaChat = {
  request: (b, caps) => {
    const t = translateMessagesRequest(b, caps);
    return { body: t.body, dropped: [...droppedMessagesTools(b), ...t.droppedTypes.map((type) => `content:${type}`)] };
  },
  response: chatToMessagesResponse,
  stream: chatStreamToMessages,
  countsPromptFirst: true,
};

const RESPONSES: ViaChat = {
  request: (b, caps, anthropicWire) => ({
    // Only Claude on Anthropic's wire takes its signed thinking back (signed-thinking.ts).
    body: responsesToChatRequest(b, caps, anthropicWire && caps.reasoning === 'thinking'),
    dropped: droppedResponsesTools(b),
  }),
  response: (chat, model, request) => chatToResponsesResponse(chat, model, asksSummary(request)),
  stream: (chunks, model, onUsage, max, _prompt, request) =>
    chatStreamToResponses(chunks, model, onUsage, max, asksSummary(request)),
  countsPromptFirst: false,
};

/** A `/v1/messages` call through an adapter's chat (also for adapters that speak Messages for some models only). */
export function messagesViaChat(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  return viaChat(adapter, call, MESSAGES);
}

async function viaChat(adapter: ProviderAdapter, call: ProviderCall, wire: ViaChat): Promise<ProviderResult> {
  const caps = capabilitiesOfCall(call);
  let body: Json;
  let dropped: string[];
  try {
    ({ body, dropped } = wire.request(call.body, caps, adapter.supports('messages')));
  } catch (e) {
    if (!(e instanceof TranslationError)) throw e;
    return { kind: 'refused', message: e.message };
  }
  const model = call.callerModel ?? String(call.body.model ?? '');
  // Counted now, so the first event waits neither on the upstream's report nor on a tokenizer table.
  const prompt = wire.countsPromptFirst && call.stream
    ? estimatePromptTokens('chat', body, caps.encoding, 'built-only')
    : undefined;
  const r = await adapter.call({ ...call, endpoint: 'chat', body, forTranslation: true });
  const headers = droppedHeaders(dropped);
  if (r.kind === 'stream') {
    // The inner adapter's own count (e.g. Anthropic's cache parts) is richer than the chat usage chunk.
    let seen: TokenUsage | undefined;
    const promptTokens = prompt ? () => prompt : undefined;
    const upstream = call.firstUpstreamChunk ? noticingFirst(r.chunks, call.firstUpstreamChunk) : r.chunks;
    const chunks = wire.stream(
      upstream,
      model,
      (u) => {
        seen = u;
      },
      call.maxSseEventBytes,
      promptTokens,
      call.body,
    );
    // Where the stream states a local count first, the bytes are not the upstream's report: until the
    // upstream reports, the count is "nothing", so the answer is estimated as any unreported one is.
    const unreported = wire.countsPromptFirst ? NOTHING_REPORTED : undefined;
    const counted = () => r.counted?.() ?? seen ?? unreported;
    return { kind: 'stream', chunks, cancel: r.cancel, counted, ...(headers ? { headers } : {}) };
  }
  if (r.kind === 'refused' || r.status < 200 || r.status >= 300) return r;
  // A 2xx that is not JSON goes back without its body: routing counts it as the upstream failure it is.
  const json = parseJsonObject(r.body);
  if (!json) return { ...r, body: '' };
  const answer = JSON.stringify(wire.response(json, model, call.body));
  return {
    ...r,
    body: answer,
    contentType: 'application/json',
    ...(headers ? { headers: { ...r.headers, ...headers } } : {}),
  };
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
