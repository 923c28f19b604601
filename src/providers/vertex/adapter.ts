// Google Vertex AI (`adapter: vertex`; docs/configuration.md "Vertex AI"): one publisher rail per model id
// prefix — Gemini (`generateContent`, translated), Claude (`rawPredict`, Messages), the OpenAI-compatible
// MaaS shim, Mistral and AI21 (OpenAI bodies) — under `/v1/projects/<p>/locations/<r>/`, with a bearer
// token (configured, or minted from a service account). `/v1/messages` native to Claude, through chat for
// the others; embeddings through `:predict`. Error answers are canned: Vertex's text names projects.
import { cloudClaudeCapabilities } from '../capabilities.ts';
import { messagesViaChat } from '../translate/via-chat.ts';
import { cannedUpstreamError, errorJson, invalidConfig } from '../failures.ts';
import { MintFailed } from '../mint.ts';
import { normaliseChatResult } from '../openai-quirks.ts';
import {
  chatAnswerCounts,
  chatToMessagesRequest,
  messagesStreamToChat,
  messagesToChatResponse,
} from '../translate/chat-via-messages.ts';
import { isRecord, type Json, num, parseJsonObject, translatedId, TranslationError } from '../translate/shared.ts';
import {
  type ProviderAdapter,
  type ProviderCall,
  type ProviderResult,
  type TokenCounts,
  upstreamResult,
} from '../types.ts';
import { addKeyHeaders } from '../upstream-headers.ts';
import { pathSegment, urlUnder } from '../url-segment.ts';
import { VERTEX_MODEL_ID, type VertexCredential, vertexCredential, vertexToken } from './auth.ts';
import { chatToGemini, geminiStreamToChat, geminiToChat } from './gemini.ts';

type Rail = 'gemini' | 'claude' | 'shim' | 'mistralai' | 'ai21';

/** The rail of a model id (lower-cased prefix), or undefined for a publisher Vertex is not reached through. */
export function vertexRail(model: string): Rail | undefined {
  const m = model.toLowerCase();
  if (m.startsWith('gemini-')) return 'gemini';
  if (m.startsWith('claude-')) return 'claude';
  if (m.startsWith('mistral-') || m.startsWith('codestral-')) return 'mistralai';
  if (m.startsWith('jamba-')) return 'ai21';
  const shim = ['meta/', 'llama', 'deepseek', 'qwen', 'openai/gpt-oss', 'minimaxai/', 'moonshotai/', 'zai-org/'];
  return shim.some((p) => m.startsWith(p)) ? 'shim' : undefined;
}

/** Vertex's gRPC status name (the only part of its error body kept) as OpenAI's code. */
const STATUS_CODES: Record<string, string> = {
  RESOURCE_EXHAUSTED: 'rate_limit_exceeded',
  PERMISSION_DENIED: 'permission_denied',
  UNAUTHENTICATED: 'invalid_api_key',
  NOT_FOUND: 'model_not_found',
  UNAVAILABLE: 'overloaded',
  DEADLINE_EXCEEDED: 'timeout',
};

function vertexError(status: number, contentType: string, body: string, retryAfter: string | null): ProviderResult {
  const err = errorJson(contentType, body)?.error;
  const grpc = isRecord(err) && typeof err.status === 'string' ? STATUS_CODES[err.status] : undefined;
  return cannedUpstreamError(status, { 404: 'upstream model or endpoint not found' }, grpc, retryAfter);
}

interface Post {
  c: ProviderCall;
  cred: VertexCredential;
  /** After `/v1/projects/<p>/locations/<r>/`, its segments encoded. */
  tail: string;
  body: Json;
  stream: boolean;
}

/** One authorised POST; an error status comes back canned, a 2xx as the adapter's raw result. */
async function post(p: Post): Promise<ProviderResult> {
  const url = urlUnder('vertex', p.cred.base, p.cred.prefix, p.tail);
  if (typeof url !== 'string') return url;
  let token: string;
  try {
    token = await vertexToken(p.c, p.cred);
  } catch (e) {
    if (e instanceof MintFailed) return e.answer;
    throw e;
  }
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    ...(p.c.traceparent ? { traceparent: p.c.traceparent } : {}),
    ...(p.c.requestId ? { 'x-aisix-request-id': p.c.requestId } : {}),
  };
  addKeyHeaders(headers, p.c);
  const res = await p.c.upstream({
    url,
    method: 'POST',
    headers,
    body: JSON.stringify(p.body),
    signal: p.c.signal,
    tls: p.c.key.tls,
  });
  const r = await upstreamResult(res, p.stream);
  if (r.kind !== 'response' || (r.status >= 200 && r.status < 300)) return r;
  return vertexError(r.status, r.contentType, r.body, r.retryAfter);
}

function includeUsage(body: Json): boolean {
  return isRecord(body.stream_options) && body.stream_options.include_usage === true;
}

/** A translated 2xx JSON answer (or the failure it already is). */
function translated(
  r: ProviderResult,
  to: (json: Json) => Json,
  counts?: (json: Json) => TokenCounts | undefined,
): ProviderResult {
  if (r.kind !== 'response' || r.status < 200 || r.status >= 300) return r;
  const json = parseJsonObject(r.body);
  const counted = json ? counts?.(json) : undefined;
  return {
    ...r,
    body: json ? JSON.stringify(to(json)) : '',
    contentType: 'application/json',
    ...(counted ? { counted } : {}),
  };
}

async function gemini(c: ProviderCall, cred: VertexCredential, model: string, seg: string): Promise<ProviderResult> {
  const id = `chatcmpl-${translatedId('')}`;
  const op = c.stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
  const r = await post({
    c,
    cred,
    tail: `publishers/google/models/${seg}:${op}`,
    body: chatToGemini(c.body),
    stream: c.stream,
  });
  if (r.kind === 'stream') {
    return { ...r, chunks: geminiStreamToChat(r.chunks, model, id, includeUsage(c.body), c.maxSseEventBytes) };
  }
  return translated(r, (json) => geminiToChat(json, model, id));
}

async function claude(c: ProviderCall, cred: VertexCredential, model: string, seg: string): Promise<ProviderResult> {
  const { model: _m, stream: _s, ...rest } = chatToMessagesRequest(c.body, cloudClaudeCapabilities(c));
  const body: Json = { ...rest, anthropic_version: 'vertex-2023-10-16', ...(c.stream ? { stream: true } : {}) };
  const op = c.stream ? 'streamRawPredict' : 'rawPredict';
  const r = await post({ c, cred, tail: `publishers/anthropic/models/${seg}:${op}`, body, stream: c.stream });
  if (r.kind === 'stream') {
    // The counts reach the meter whatever the caller asked (it sees no usage chunk unless it asked).
    let counted: TokenCounts | undefined;
    const onUsage = (u: TokenCounts) => {
      counted = u;
    };
    const chunks = messagesStreamToChat(
      r.chunks,
      model,
      includeUsage(c.body),
      onUsage,
      c.maxSseEventBytes,
      c.forTranslation,
    );
    return { ...r, chunks, counted: () => counted };
  }
  return translated(
    r,
    (json) => messagesToChatResponse(json, model, c.forTranslation),
    (json) => chatAnswerCounts(json, c.forTranslation),
  );
}

/** `/v1/messages` to Claude on Vertex, natively: the caller's body (cache_control, thinking) with Vertex's version. */
function claudeMessages(c: ProviderCall, cred: VertexCredential, seg: string): Promise<ProviderResult> {
  const { model: _m, stream: _s, ...rest } = c.body;
  const body: Json = { ...rest, anthropic_version: 'vertex-2023-10-16', ...(c.stream ? { stream: true } : {}) };
  const op = c.stream ? 'streamRawPredict' : 'rawPredict';
  return post({ c, cred, tail: `publishers/anthropic/models/${seg}:${op}`, body, stream: c.stream });
}

/** The OpenAI wire on Vertex (the MaaS shim, Mistral, AI21): answers normalised as any OpenAI-wire vendor's. */
async function openaiWire(c: ProviderCall, cred: VertexCredential, seg: string, rail: Rail): Promise<ProviderResult> {
  const op = c.stream ? 'streamRawPredict' : 'rawPredict';
  const tail = rail === 'shim' ? 'endpoints/openapi/chat/completions' : `publishers/${rail}/models/${seg}:${op}`;
  return normaliseChatResult(await post({ c, cred, tail, body: c.body, stream: c.stream }), c.maxSseEventBytes);
}

async function embeddings(c: ProviderCall, cred: VertexCredential, seg: string): Promise<ProviderResult> {
  const input = c.body.input;
  const texts = typeof input === 'string'
    ? [input]
    : Array.isArray(input) && input.every((t) => typeof t === 'string')
    ? input
    : undefined;
  if (!texts || texts.length === 0) {
    return { kind: 'refused', message: '`input` must be a string or an array of strings for this model' };
  }
  const body: Json = { instances: texts.map((content) => ({ content })) };
  if (num(c.body.dimensions) !== undefined) body.parameters = { outputDimensionality: c.body.dimensions };
  const r = await post({ c, cred, tail: `publishers/google/models/${seg}:predict`, body, stream: false });
  return translated(r, (json) => {
    const predictions = Array.isArray(json.predictions) ? json.predictions : [];
    let tokens = 0;
    const data = predictions.map((p, index) => {
      const e = isRecord(p) && isRecord(p.embeddings) ? p.embeddings : {};
      tokens += isRecord(e.statistics) ? num(e.statistics.token_count) ?? 0 : 0;
      return { object: 'embedding', index, embedding: Array.isArray(e.values) ? e.values : [] };
    });
    return {
      object: 'list',
      model: String(c.body.model),
      data,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  });
}

async function call(c: ProviderCall): Promise<ProviderResult> {
  const cred = vertexCredential(c.key);
  if ('kind' in cred) return cred;
  const model = String(c.body.model ?? '');
  const rail = c.endpoint === 'embeddings' ? 'gemini' : vertexRail(model);
  if (!rail) {
    return invalidConfig(
      `vertex publisher unknown for upstream model id "${model}"; expected one of gemini-* / claude-* / meta/llama-* or llama* / mistral-* / jamba-*`,
    );
  }
  // The shim names the model in the body; every other rail puts it in the path, as one checked segment.
  const seg = rail === 'shim' ? '' : pathSegment('vertex', VERTEX_MODEL_ID, model);
  if (typeof seg !== 'string') return seg;
  if (c.endpoint === 'messages') {
    // Claude speaks Messages natively; every other rail is reached through chat.
    return rail === 'claude' ? claudeMessages(c, cred, seg) : messagesViaChat(vertexAdapter, c);
  }
  try {
    if (c.endpoint === 'embeddings') return await embeddings(c, cred, seg);
    if (rail === 'gemini') return await gemini(c, cred, model, seg);
    if (rail === 'claude') return await claude(c, cred, model, seg);
    return await openaiWire(c, cred, seg, rail);
  } catch (e) {
    if (e instanceof TranslationError) return { kind: 'refused', message: e.message };
    throw e;
  }
}

export const vertexAdapter: ProviderAdapter = {
  name: 'vertex',
  supports: (endpoint) => endpoint === 'chat' || endpoint === 'embeddings' || endpoint === 'messages',
  call,
};
