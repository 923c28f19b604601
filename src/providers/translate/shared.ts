// What both translation directions (Anthropic Messages ⇄ OpenAI chat completions) share: reading untyped
// JSON safely, the stop-reason tables, usage and the reading of a chat stream. The tables live here once, so
// the two directions cannot drift apart. Error envelopes are the HTTP layer's (src/http/errors.ts).
import { jsonData, parseSse } from '../sse.ts';
import { type TokenCounts, UpstreamStreamError } from '../types.ts';

export type Json = Record<string, unknown>;

export function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function parseJsonObject(text: string): Json | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return isRecord(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The JSON chunks of an OpenAI chat stream, in order, until its `data: [DONE]` (which sets `end.done`);
 * events that are not JSON objects are skipped, and an error chunk throws `UpstreamStreamError`.
 */
export async function* chatStreamChunks(
  chunks: AsyncIterable<Uint8Array>,
  maxEventBytes: number | undefined,
  end: { done: boolean },
): AsyncGenerator<Json> {
  for await (const ev of parseSse(chunks, maxEventBytes)) {
    if (ev.data === '[DONE]') {
      end.done = true;
      return;
    }
    const j = jsonData(ev);
    if (!j) continue;
    if (isRecord(j.error)) {
      throw new UpstreamStreamError('upstream_error', str(j.error.message) ?? 'upstream stream reported an error');
    }
    yield j;
  }
}

/** A translation the target cannot express: the caller gets 400 `invalid_request_error`. */
export class TranslationError extends Error {
  override readonly name = 'TranslationError';
}

// ---- stop reasons -----------------------------------------------------------------------------------------

/** OpenAI `finish_reason` → Anthropic `stop_reason`. */
export function toStopReason(finish: unknown): string | null {
  switch (finish) {
    case null:
    case undefined:
      return null;
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn'; // 'stop' and anything unknown
  }
}

/** Anthropic `stop_reason` → OpenAI `finish_reason`. */
export function toFinishReason(stop: unknown): string | null {
  switch (stop) {
    case null:
    case undefined:
      return null;
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop'; // end_turn, stop_sequence, pause_turn and anything unknown
  }
}

// ---- usage -----------------------------------------------------------------------------------------------

/** The counts both directions carry; OpenAI's meaning (types.ts `TokenCounts`). */
export type TokenUsage = TokenCounts;

export function anthropicUsage(u: TokenUsage): Json {
  return { input_tokens: u.input, output_tokens: u.output };
}

/**
 * OpenAI's usage object: `prompt_tokens` includes cached input, `total_tokens` = prompt + completion, and
 * the cache-read and reasoning parts in their details only when non-zero (as OpenAI itself reports them).
 */
export function openaiUsage(u: TokenUsage): Json {
  const out: Json = { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output };
  if (u.cacheRead) out.prompt_tokens_details = { cached_tokens: u.cacheRead };
  if (u.reasoning) out.completion_tokens_details = { reasoning_tokens: u.reasoning };
  return out;
}

/** Anthropic's counters as sent: `input_tokens` excludes both cache counts. */
export interface AnthropicCounts {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

export function anthropicCounts(u: unknown): AnthropicCounts {
  const r = isRecord(u) ? u : {};
  return {
    input: num(r.input_tokens) ?? 0,
    output: num(r.output_tokens) ?? 0,
    cacheRead: num(r.cache_read_input_tokens) ?? 0,
    cacheCreation: num(r.cache_creation_input_tokens) ?? 0,
  };
}

/**
 * A stream's counters folded with a later report: per counter the larger value wins, so a `message_delta`
 * that repeats `input_tokens` without the cache counts keeps the `message_start` ones (and a relay that
 * reports input only at the end is still counted).
 */
export function foldAnthropicCounts(so: AnthropicCounts, u: unknown): AnthropicCounts {
  const r = isRecord(u) ? u : {};
  const max = (a: number, v: unknown) => Math.max(a, num(v) ?? 0);
  return {
    input: max(so.input, r.input_tokens),
    output: max(so.output, r.output_tokens),
    cacheRead: max(so.cacheRead, r.cache_read_input_tokens),
    cacheCreation: max(so.cacheCreation, r.cache_creation_input_tokens),
  };
}

/** Anthropic counts cached input separately; all of it is input to an OpenAI caller (cache parts kept). */
export function fromAnthropicCounts(c: AnthropicCounts): TokenUsage {
  const u: TokenUsage = { input: c.input + c.cacheRead + c.cacheCreation, output: c.output };
  if (c.cacheRead > 0) u.cacheRead = c.cacheRead;
  if (c.cacheCreation > 0) u.cacheCreation = c.cacheCreation;
  return u;
}

export function usageFromAnthropic(u: unknown): TokenUsage {
  return fromAnthropicCounts(anthropicCounts(u));
}

/**
 * AISIX's usage object to a chat caller of an Anthropic-wire upstream: `prompt_tokens` = `input_tokens`
 * (without the cache counts), `total_tokens` = input + output + cache writes + cache reads, no details.
 */
export function chatCallerUsage(c: AnthropicCounts): Json {
  const u = chatCallerCounts(c);
  return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.total };
}

/** The same counts as `chatCallerUsage` states them, for the meter, with the cache counts it cannot state. */
export function chatCallerCounts(c: AnthropicCounts): TokenUsage {
  const u: TokenUsage = { input: c.input, output: c.output, total: c.input + c.output + c.cacheCreation + c.cacheRead };
  if (c.cacheRead > 0) u.cacheRead = c.cacheRead;
  if (c.cacheCreation > 0) u.cacheCreation = c.cacheCreation;
  if (c.cacheRead > 0 || c.cacheCreation > 0) u.cacheOutsideInput = true;
  return u;
}

/**
 * OpenAI's usage object read back; cached input from `prompt_tokens_details.cached_tokens`, else DeepSeek's
 * `prompt_cache_hit_tokens`. Undefined when there is no usage object (`null` included).
 */
export function usageFromOpenai(u: unknown): TokenUsage | undefined {
  if (!isRecord(u)) return undefined;
  const out: TokenUsage = { input: num(u.prompt_tokens) ?? 0, output: num(u.completion_tokens) ?? 0 };
  const prompt = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const cached = num(prompt.cached_tokens) || num(u.prompt_cache_hit_tokens);
  if (cached) out.cacheRead = cached;
  const completion = isRecord(u.completion_tokens_details) ? u.completion_tokens_details : {};
  const reasoning = num(completion.reasoning_tokens);
  if (reasoning) out.reasoning = reasoning;
  return out;
}

/** The Responses API's usage object read back (`input_tokens` includes cached input, as OpenAI counts). */
export function usageFromResponses(u: unknown): TokenUsage | undefined {
  if (!isRecord(u)) return undefined;
  const out: TokenUsage = { input: num(u.input_tokens) ?? 0, output: num(u.output_tokens) ?? 0 };
  const cached = isRecord(u.input_tokens_details) ? num(u.input_tokens_details.cached_tokens) : undefined;
  if (cached) out.cacheRead = cached;
  const reasoning = isRecord(u.output_tokens_details) ? num(u.output_tokens_details.reasoning_tokens) : undefined;
  if (reasoning) out.reasoning = reasoning;
  return out;
}

/**
 * A `usage` object of any wire Sluice serves, as counts with their cache and reasoning parts: OpenAI chat
 * and legacy completions (`prompt_tokens`), the Responses API (`input_tokens_details` or `total_tokens`
 * beside `input_tokens`), else Anthropic's (cache counts beside `input_tokens`). Undefined when it is none.
 */
export function countsOfUsage(u: unknown): TokenUsage | undefined {
  if (!isRecord(u)) return undefined;
  if (num(u.prompt_tokens) !== undefined || num(u.completion_tokens) !== undefined) return usageFromOpenai(u);
  if (num(u.input_tokens) === undefined && num(u.output_tokens) === undefined) return undefined;
  if (isRecord(u.input_tokens_details) || num(u.total_tokens) !== undefined) return usageFromResponses(u);
  return usageFromAnthropic(u);
}

let idCounter = 0;
/** Ids for translated responses: unique within the process, no crypto needed. */
export function translatedId(prefix: string): string {
  idCounter = (idCounter + 1) % 1e9;
  return `${prefix}${Date.now().toString(36)}${idCounter.toString(36)}`;
}

/** A tool call's `arguments` string as JSON; an empty or malformed one is `{}`. */
export function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string' || args === '') return {};
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}
