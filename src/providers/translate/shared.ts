// What both translation directions (Anthropic Messages ⇄ OpenAI chat completions) share: reading untyped
// JSON safely, the stop-reason tables and usage. The tables live here once, so the two directions cannot
// drift apart. Error envelopes are the HTTP layer's (src/http/errors.ts).

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

export interface TokenUsage {
  input: number;
  output: number;
}

export function anthropicUsage(u: TokenUsage): Json {
  return { input_tokens: u.input, output_tokens: u.output };
}

export function openaiUsage(u: TokenUsage): Json {
  return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output };
}

/** Anthropic counts cached input separately; all of it is input to an OpenAI caller. */
export function usageFromAnthropic(u: unknown): TokenUsage {
  if (!isRecord(u)) return { input: 0, output: 0 };
  const input = (num(u.input_tokens) ?? 0) + (num(u.cache_creation_input_tokens) ?? 0) +
    (num(u.cache_read_input_tokens) ?? 0);
  return { input, output: num(u.output_tokens) ?? 0 };
}

export function usageFromOpenai(u: unknown): TokenUsage | undefined {
  if (!isRecord(u)) return undefined;
  return { input: num(u.prompt_tokens) ?? 0, output: num(u.completion_tokens) ?? 0 };
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
