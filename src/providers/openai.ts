// Any OpenAI-compatible upstream (`api_base` includes `/v1`). Bodies are forwarded as JSON and SSE bytes
// are passed through untouched (no parse, no re-serialisation), except that a stream whose caller sent no
// `stream_options` is asked for usage and the usage chunk is withheld from it (injected-usage.ts). A
// native Responses stream's usage is read from its terminal event (responses-usage.ts).
import { callMedia, isMediaEndpoint, mediaPath } from './media.ts';
import { INJECTED_STREAM_OPTIONS, injectsUsage, withoutInjectedUsage } from './injected-usage.ts';
import { observeResponsesUsage } from './responses-usage.ts';
import { directUrl } from './direct-url.ts';
import {
  type ProviderAdapter,
  type ProviderCall,
  type ProviderResult,
  type TokenCounts,
  upstreamResult,
} from './types.ts';
import { addKeyHeaders } from './upstream-headers.ts';
import type { ProviderKey } from '../resources/schema.ts';

const PATHS = {
  chat: '/chat/completions',
  completions: '/completions',
  embeddings: '/embeddings',
  responses: '/responses',
} as const;

function served(endpoint: string): endpoint is keyof typeof PATHS {
  return endpoint in PATHS;
}

/**
 * A key's strings every call sends, joined once per key rather than on every call; made again if the key's
 * secret or base is not the one they were made from.
 */
interface KeyStrings {
  apiKey: string | undefined;
  apiBase: string | undefined;
  authorization: string | undefined;
  urls: { -readonly [E in keyof typeof PATHS]?: string };
}
const KEY_STRINGS = new WeakMap<ProviderKey, KeyStrings>();

function keyStrings(key: ProviderKey): KeyStrings {
  let s = KEY_STRINGS.get(key);
  if (s === undefined || s.apiKey !== key.api_key || s.apiBase !== key.api_base) {
    const authorization = key.api_key ? `Bearer ${key.api_key}` : undefined;
    s = { apiKey: key.api_key, apiBase: key.api_base, authorization, urls: {} };
    KEY_STRINGS.set(key, s);
  }
  return s;
}

export const openaiAdapter: ProviderAdapter = {
  name: 'openai',
  supports: (endpoint) => served(endpoint) || isMediaEndpoint(endpoint),
  async call(c: ProviderCall): Promise<ProviderResult> {
    if (isMediaEndpoint(c.endpoint)) {
      return callMedia(
        c,
        `${c.key.api_base}${mediaPath(c.endpoint)}`,
        c.key.api_key ? { authorization: `Bearer ${c.key.api_key}` } : {},
      );
    }
    const strings = keyStrings(c.key);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: c.stream ? 'text/event-stream' : 'application/json',
    };
    if (strings.authorization) headers.authorization = strings.authorization;
    if (c.traceparent) headers.traceparent = c.traceparent;
    if (c.requestId) headers['x-aisix-request-id'] = c.requestId;
    addKeyHeaders(headers, c);
    // Native Responses always reports usage at its end: nothing to ask for there.
    const inject = (c.endpoint === 'chat' || c.endpoint === 'completions') && injectsUsage(c.body, c.stream);
    const body = inject ? { ...c.body, stream_options: INJECTED_STREAM_OPTIONS } : c.body;
    const res = await c.upstream({
      // Native Responses joins as AISIX's direct-HTTP families do (a bare host gets `/v1`); chat keeps the base.
      url: strings.urls[c.endpoint as keyof typeof PATHS] ??= c.endpoint === 'responses'
        ? directUrl(c.key.api_base ?? '', PATHS.responses)
        : `${c.key.api_base}${PATHS[c.endpoint as keyof typeof PATHS]}`,
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: c.signal,
      tls: c.key.tls,
    });
    const r = await upstreamResult(res, c.stream);
    if (r.kind !== 'stream' || (!inject && c.endpoint !== 'responses')) return r;
    let counted: TokenCounts | undefined;
    const onUsage = (u: TokenCounts) => {
      counted = u;
    };
    const chunks = inject
      ? withoutInjectedUsage(r.chunks, onUsage, c.maxSseEventBytes)
      : observeResponsesUsage(r.chunks, onUsage, c.maxSseEventBytes);
    return { ...r, chunks, counted: () => counted };
  },
};
