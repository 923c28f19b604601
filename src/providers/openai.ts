// Any OpenAI-compatible upstream (`api_base` includes `/v1`). Bodies are forwarded as JSON and SSE bytes
// are passed through untouched: no parse, no re-serialisation.
import { type ProviderAdapter, type ProviderCall, type ProviderResult, upstreamResult } from './types.ts';

const PATHS = { chat: '/chat/completions', completions: '/completions', embeddings: '/embeddings' } as const;

export const openaiAdapter: ProviderAdapter = {
  name: 'openai',
  supports: (endpoint) => endpoint !== 'messages',
  async call(c: ProviderCall): Promise<ProviderResult> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: c.stream ? 'text/event-stream' : 'application/json',
    };
    if (c.key.api_key) headers.authorization = `Bearer ${c.key.api_key}`;
    if (c.traceparent) headers.traceparent = c.traceparent;
    const res = await c.upstream({
      url: `${c.key.api_base}${PATHS[c.endpoint as keyof typeof PATHS]}`,
      method: 'POST',
      headers,
      body: JSON.stringify(c.body),
      signal: c.signal,
    });
    return upstreamResult(res, c.stream);
  },
};
