// The built-in offline provider (`adapter: echo`): it echoes the last user message (legacy completions: the
// prompt; embeddings: a deterministic vector), so the bundled example answers with no network and no key.
// Never a stand-in for an HTTP upstream in tests or benchmarks: it skips the transport they must exercise.
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

const encoder = new TextEncoder();

function lastUserText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown };
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) {
      return m.content.map((
        p: { type?: unknown; text?: unknown },
      ) => (p?.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('');
    }
  }
  return '';
}

function countTokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function chatJson(model: string, text: string, prompt: string): string {
  const p = countTokens(prompt);
  const c = countTokens(text);
  return JSON.stringify({
    id: `chatcmpl-echo-${crypto.randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c },
  });
}

async function* chatStream(model: string, text: string, includeUsage: boolean): AsyncGenerator<Uint8Array> {
  const id = `chatcmpl-echo-${crypto.randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const event = (payload: Record<string, unknown>) => encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    event({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  yield chunk({ role: 'assistant', content: '' }, null);
  for (const piece of text.match(/\S+\s*|\s+/g) ?? []) yield chunk({ content: piece }, null);
  yield chunk({}, 'stop');
  if (includeUsage) {
    const n = countTokens(text);
    yield event({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [],
      usage: { prompt_tokens: n, completion_tokens: n, total_tokens: 2 * n },
    });
  }
  yield encoder.encode('data: [DONE]\n\n');
}

/** Legacy completions (`/v1/completions`): the prompt echoed back as a `text_completion`, JSON or SSE. */
function completion(c: ProviderCall, model: string): ProviderResult {
  const prompt = Array.isArray(c.body.prompt) ? c.body.prompt.map(String).join('\n') : String(c.body.prompt ?? '');
  const id = `cmpl-echo-${crypto.randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const n = countTokens(prompt);
  const usage = { prompt_tokens: n, completion_tokens: n, total_tokens: 2 * n };
  const payload = (text: string, finish: string | null, extra: Record<string, unknown> = {}) => ({
    id,
    object: 'text_completion',
    created,
    model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
    ...extra,
  });
  if (!c.stream) {
    const body = JSON.stringify(payload(prompt, 'stop', { usage }));
    return { kind: 'response', status: 200, body, contentType: 'application/json', retryAfter: null };
  }
  const includeUsage = (c.body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    const event = (p: Record<string, unknown>) => encoder.encode(`data: ${JSON.stringify(p)}\n\n`);
    for (const piece of prompt.match(/\S+\s*|\s+/g) ?? []) yield event(payload(piece, null));
    yield event(payload('', 'stop'));
    if (includeUsage) yield event({ ...payload('', null), choices: [], usage });
    yield encoder.encode('data: [DONE]\n\n');
  }
  return { kind: 'stream', chunks: chunks(), cancel: async () => {} };
}

/** A deterministic 8-dimensional vector per input, so `/v1/embeddings` answers offline too. */
function embed(text: string): number[] {
  const v = new Array<number>(8).fill(0);
  for (let i = 0; i < text.length; i++) v[i % 8]! += text.charCodeAt(i) / 1000;
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => Number((x / norm).toFixed(6)));
}

export const echoAdapter: ProviderAdapter = {
  name: 'echo',
  supports: (endpoint) => endpoint === 'chat' || endpoint === 'completions' || endpoint === 'embeddings',
  async call(c: ProviderCall): Promise<ProviderResult> {
    const model = String(c.body.model ?? 'echo');
    if (c.endpoint === 'embeddings') {
      const input = c.body.input;
      const inputs = Array.isArray(input) ? input.map(String) : [String(input ?? '')];
      const body = JSON.stringify({
        object: 'list',
        model,
        data: inputs.map((t, index) => ({ object: 'embedding', index, embedding: embed(t) })),
        usage: {
          prompt_tokens: inputs.reduce((n, t) => n + countTokens(t), 0),
          total_tokens: inputs.reduce((n, t) => n + countTokens(t), 0),
        },
      });
      return { kind: 'response', status: 200, body, contentType: 'application/json', retryAfter: null };
    }
    if (c.endpoint === 'completions') return completion(c, model);
    const text = lastUserText(c.body);
    if (c.stream) {
      const options = c.body.stream_options as { include_usage?: unknown } | undefined;
      return {
        kind: 'stream',
        chunks: chatStream(model, text, options?.include_usage === true),
        cancel: async () => {},
      };
    }
    return {
      kind: 'response',
      status: 200,
      body: chatJson(model, text, text),
      contentType: 'application/json',
      retryAfter: null,
    };
  },
};
