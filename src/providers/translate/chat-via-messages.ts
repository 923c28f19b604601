// An OpenAI chat-completions caller served by an Anthropic upstream: the request becomes a Messages request,
// the answer (JSON or SSE) a chat completion. What is covered and what is refused: docs/routing.md
// "Anthropic Messages".
import { type Capabilities, capabilitiesOf, cutUser, effortOf, thinkingBudget } from '../capabilities.ts';
import { dataEvent, DONE_EVENT, jsonData, parseSse } from '../sse.ts';
import { UpstreamStreamError } from '../types.ts';
import {
  type AnthropicCounts,
  anthropicCounts,
  chatCallerCounts,
  chatCallerUsage,
  foldAnthropicCounts,
  fromAnthropicCounts,
  isRecord,
  type Json,
  num,
  openaiUsage,
  parseArguments,
  str,
  toFinishReason,
  type TokenUsage,
  translatedId,
  TranslationError,
} from './shared.ts';
import { SIGNED_THINKING, signedBlocks } from './signed-thinking.ts';

/** Anthropic requires `max_tokens`; an OpenAI caller may omit it. */
export const DEFAULT_MAX_TOKENS = 4096;

/**
 * For the reshapes of the Messages request into other wires (Bedrock Converse, Gemini): no thinking and no
 * structured output, which those wires do not read from it.
 */
export const MESSAGES_SHAPE_ONLY: Capabilities = capabilitiesOf('', undefined, {
  reasoning: 'none',
  structured_output: false,
});

// ---- request ----------------------------------------------------------------------------------------------

/**
 * A chat request as Messages. What the target accepts (`caps`, by default what its model name says on
 * Anthropic's wire) decides `reasoning_effort` → `thinking`, structured output and the `user` length; with
 * `cacheTtl` (the model's `auto_prompt_caching`) a request without prompt-cache markers of its own gets two.
 */
export function chatToMessagesRequest(
  body: Json,
  caps: Capabilities = capabilitiesOf(String(body.model ?? ''), 'anthropic'),
  cacheTtl?: '5m' | '1h',
): Json {
  if (num(body.n) !== undefined && (body.n as number) > 1) {
    throw new TranslationError('`n` > 1 cannot be sent to this model');
  }
  const outputFormat = structuredOutput(body.response_format, caps);
  const system: Json[] = [];
  let systemBlocks = false;
  const messages: Json[] = [];
  const input = Array.isArray(body.messages) ? body.messages : [];
  input.forEach((m, i) => {
    if (!isRecord(m)) throw new TranslationError(`messages[${i}] must be an object`);
    if (m.role === 'system' || m.role === 'developer') {
      systemBlocks ||= Array.isArray(m.content);
      system.push(...textBlocks(m.content, `messages[${i}]`));
    } else if (m.role === 'user') messages.push({ role: 'user', content: userBlocks(m.content, i) });
    else if (m.role === 'assistant') messages.push({ role: 'assistant', content: assistantBlocks(m, i) });
    else if (m.role === 'tool') appendToolResult(messages, m, i);
    else throw new TranslationError(`messages[${i}].role "${String(m.role)}" cannot be sent to this model`);
  });
  const callerMax = num(body.max_tokens) ?? num(body.max_completion_tokens);
  const out: Json = { model: body.model, messages, max_tokens: callerMax ?? DEFAULT_MAX_TOKENS };
  // Plain strings stay one string (what Anthropic has always been sent); blocks keep their cache markers.
  if (system.length > 0) {
    out.system = systemBlocks
      ? system.filter((b) => (b.text as string).trim() !== '') // Anthropic refuses blank blocks
      : system.map((b) => b.text).join('\n\n');
  }
  if (typeof body.stop === 'string') out.stop_sequences = [body.stop];
  else if (Array.isArray(body.stop) && body.stop.length > 0) out.stop_sequences = body.stop;
  for (const k of ['temperature', 'top_p'] as const) if (body[k] !== undefined && body[k] !== null) out[k] = body[k];
  // Anthropic's own knobs in a chat body take effect, as AISIX forwards them; OpenAI has no such fields.
  if (isRecord(body.thinking)) out.thinking = body.thinking;
  if (num(body.top_k) !== undefined) out.top_k = body.top_k;
  if (typeof body.user === 'string') out.metadata = { user_id: cutUser(body.user, caps) };
  if (Array.isArray(body.tools) && body.tools.length > 0) out.tools = body.tools.map(messagesTool);
  const choice = messagesToolChoice(body.tool_choice, body.parallel_tool_calls === false);
  if (choice !== undefined) out.tool_choice = choice;
  if (outputFormat) out.output_config = { format: outputFormat };
  if (out.thinking === undefined) thinkingOfEffort(out, effortOf(body.reasoning_effort), callerMax, caps);
  if (body.stream === true) out.stream = true;
  if (cacheTtl) addCacheBreakpoints(out, cacheTtl);
  return out;
}

/**
 * AISIX's automatic prompt caching: one breakpoint on the last system block (a string system becomes one
 * block to carry it) and one on the last block of the final message, so the tools-and-system prefix and
 * the whole conversation are cached. A request with any marker of its own is left as the caller made it,
 * which also keeps it within Anthropic's four breakpoints; a blank text block never carries one (refused).
 */
function addCacheBreakpoints(out: Json, ttl: '5m' | '1h'): void {
  const messages = out.messages as Json[];
  const blocks = [
    ...(Array.isArray(out.system) ? out.system : []),
    ...messages.flatMap((m) => Array.isArray(m.content) ? m.content : []),
    ...(Array.isArray(out.tools) ? out.tools : []),
  ];
  if (blocks.some((b) => isRecord(b) && b.cache_control !== undefined)) return;
  // `5m` is Anthropic's default, written as the bare marker.
  const marker = ttl === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' };
  if (typeof out.system === 'string' && out.system.trim() !== '') out.system = [{ type: 'text', text: out.system }];
  markLast(out.system, marker);
  markLast(messages[messages.length - 1]?.content, marker);
}

function markLast(blocks: unknown, marker: Json): void {
  if (!Array.isArray(blocks)) return;
  const last = blocks[blocks.length - 1];
  if (!isRecord(last) || (last.type === 'text' && String(last.text ?? '').trim() === '')) return;
  last.cache_control = { ...marker };
}

/**
 * `response_format` as Anthropic's `output_config.format`: a JSON schema where the model has structured
 * output; plain text needs none; JSON mode, or a schema the model cannot hold to, is refused.
 */
function structuredOutput(f: unknown, caps: Capabilities): Json | undefined {
  if (!isRecord(f) || f.type === 'text') return undefined;
  if (f.type === 'json_schema' && caps.structured_output) {
    const spec = isRecord(f.json_schema) ? f.json_schema : {};
    return { type: 'json_schema', schema: isRecord(spec.schema) ? spec.schema : { type: 'object' } };
  }
  throw new TranslationError('`response_format` cannot be sent to this model');
}

/**
 * `reasoning_effort` as a `thinking` budget (docs/translation.md), kept within Anthropic's rules: the budget
 * below `max_tokens` (a caller's cap is the whole answer's, thinking included; without one the default
 * answer room is added to the budget), at least 1024, no forced tool choice, only the default sampling, and
 * none when the conversation continues an assistant tool turn that carries no thinking block (a chat caller
 * cannot send one back, and Anthropic refuses such a turn while thinking).
 */
function thinkingOfEffort(
  out: Json,
  effort: ReturnType<typeof effortOf>,
  callerMax: number | undefined,
  caps: Capabilities,
): void {
  let budget = thinkingBudget(effort, caps);
  if (budget === undefined) return;
  if (callerMax !== undefined) budget = Math.min(budget, callerMax - 1);
  if (budget < MIN_THINKING_BUDGET) return;
  const choice = isRecord(out.tool_choice) ? out.tool_choice.type : undefined;
  if (choice === 'any' || choice === 'tool') return;
  if (continuesToolTurnWithoutThinking(out.messages as Json[])) return;
  out.thinking = { type: 'enabled', budget_tokens: budget };
  if (callerMax === undefined) out.max_tokens = DEFAULT_MAX_TOKENS + budget;
  if (out.temperature !== 1) delete out.temperature;
  if (typeof out.top_p !== 'number' || out.top_p < 0.95) delete out.top_p;
  delete out.top_k;
}

/** Anthropic's least `budget_tokens`. */
const MIN_THINKING_BUDGET = 1024;

function continuesToolTurnWithoutThinking(messages: Json[]): boolean {
  const last = messages.findLast((m) => m.role === 'assistant');
  if (!last || !Array.isArray(last.content)) return false;
  const blocks = last.content as Json[];
  const first = blocks[0]?.type;
  return blocks.some((b) => b.type === 'tool_use') && first !== 'thinking' && first !== 'redacted_thinking';
}

/** A prompt-cache marker rides along on the block it marks (Anthropic reads it on text, image and tool). */
function withCacheControl(block: Json, from: Json): Json {
  return isRecord(from.cache_control) ? { ...block, cache_control: from.cache_control } : block;
}

/** Text content as Anthropic text blocks: a string is one block; parts must be text and keep their marker. */
function textBlocks(content: unknown, where: string): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  return content.map((p) => {
    if (isRecord(p) && p.type === 'text') return withCacheControl({ type: 'text', text: str(p.text) ?? '' }, p);
    throw new TranslationError(`${where}: only text content can be sent to this model here`);
  });
}

function plainText(content: unknown, where: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => {
    if (isRecord(p) && p.type === 'text') return str(p.text) ?? '';
    throw new TranslationError(`${where}: only text content can be sent to this model here`);
  }).join('');
}

/** A user turn as content blocks, as AISIX sends it: a string is one text block. */
function userBlocks(content: unknown, i: number): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) {
    throw new TranslationError(`messages[${i}].content must be a string or an array of parts`);
  }
  const blocks = content.map((p, j) => {
    const where = `messages[${i}].content[${j}]`;
    if (!isRecord(p)) throw new TranslationError(`${where} must be an object`);
    if (p.type === 'text') return withCacheControl({ type: 'text', text: str(p.text) ?? '' }, p);
    if (p.type === 'image_url') return withCacheControl(imageBlock(p, where), p);
    throw new TranslationError(`${where}: parts of type "${String(p.type)}" cannot be sent to this model`);
  });
  // Anthropic refuses blank text blocks; a message of nothing else is left for it to refuse.
  const kept = blocks.filter((b) => b.type !== 'text' || (b.text as string).trim() !== '');
  return kept.length > 0 ? kept : blocks;
}

function imageBlock(p: Json, where: string): Json {
  const url = isRecord(p.image_url) ? str(p.image_url.url) : str(p.image_url);
  if (!url) throw new TranslationError(`${where}: image_url.url is required`);
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } };
  return { type: 'image', source: { type: 'url', url } };
}

function assistantBlocks(m: Json, i: number): Json[] {
  // Claude's signed thinking, carried back from a Responses caller's reasoning item, leads the turn.
  const blocks = signedBlocks(m[SIGNED_THINKING]);
  // Anthropic refuses empty text blocks; an assistant turn of tool calls alone has none.
  blocks.push(...textBlocks(m.content, `messages[${i}]`).filter((b) => b.text !== ''));
  for (const call of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
    if (!isRecord(call) || !isRecord(call.function)) continue;
    blocks.push({
      type: 'tool_use',
      id: str(call.id) ?? '',
      name: str(call.function.name) ?? '',
      input: parseArguments(call.function.arguments),
    });
  }
  return blocks;
}

/** Consecutive `tool` messages answer one assistant turn: one user message of tool_result blocks. */
function appendToolResult(messages: Json[], m: Json, i: number): void {
  const block = {
    type: 'tool_result',
    tool_use_id: str(m.tool_call_id) ?? '',
    content: plainText(m.content, `messages[${i}]`),
  };
  const last = messages[messages.length - 1];
  if (
    last?.role === 'user' && Array.isArray(last.content) &&
    last.content.every((b) => isRecord(b) && b.type === 'tool_result')
  ) {
    last.content.push(block);
  } else messages.push({ role: 'user', content: [block] });
}

function messagesTool(t: unknown): Json {
  const tool = isRecord(t) ? t : {};
  const fn = isRecord(tool.function) ? tool.function : {};
  const out: Json = {
    name: str(fn.name) ?? '',
    ...(fn.description !== undefined ? { description: fn.description } : {}),
    input_schema: isRecord(fn.parameters) ? fn.parameters : { type: 'object', properties: {} },
  };
  // The marker may sit on the tool or on its function (clients differ).
  return withCacheControl(out, isRecord(tool.cache_control) ? tool : fn);
}

function messagesToolChoice(c: unknown, noParallel: boolean): Json | undefined {
  const extra = noParallel ? { disable_parallel_tool_use: true } : {};
  if (c === 'auto') return { type: 'auto', ...extra };
  if (c === 'required') return { type: 'any', ...extra };
  if (c === 'none') return { type: 'none' };
  if (isRecord(c) && isRecord(c.function)) return { type: 'tool', name: str(c.function.name) ?? '', ...extra };
  return noParallel ? { type: 'auto', ...extra } : undefined;
}

// ---- JSON response -----------------------------------------------------------------------------------------

/**
 * The usage a chat answer states for Anthropic's counters: AISIX's accounting for a chat caller (`prompt_tokens`
 * without the cache counts, a total with them), OpenAI's meaning for a translation that restates it
 * (ProviderCall `forTranslation`).
 */
function chatUsage(c: AnthropicCounts, forTranslation: boolean): Json {
  return forTranslation ? openaiUsage(fromAnthropicCounts(c)) : chatCallerUsage(c);
}

/** The counts the meter gets, stated as the answer states them (`chatUsage`). */
function chatCounts(c: AnthropicCounts, forTranslation: boolean): TokenUsage {
  return forTranslation ? fromAnthropicCounts(c) : chatCallerCounts(c);
}

/**
 * What the meter reads of a whole chat answer built by `messagesToChatResponse` when the answer cannot state it
 * (a chat caller's usage has no place for Anthropic's cache counts); a translation's answer states its own.
 */
export function chatAnswerCounts(msg: Json, forTranslation = false): TokenUsage | undefined {
  const c = anthropicCounts(msg.usage);
  return forTranslation || (c.cacheRead === 0 && c.cacheCreation === 0) ? undefined : chatCallerCounts(c);
}

export function messagesToChatResponse(msg: Json, model: string, forTranslation = false): Json {
  let text = '';
  let reasoning = '';
  const toolCalls: Json[] = [];
  const content = Array.isArray(msg.content) ? msg.content : [];
  for (const b of content) {
    if (!isRecord(b)) continue;
    if (b.type === 'text') text += str(b.text) ?? '';
    else if (b.type === 'thinking') reasoning += str(b.thinking) ?? '';
    else if (b.type === 'tool_use') {
      toolCalls.push({
        id: str(b.id) ?? '',
        type: 'function',
        function: { name: str(b.name) ?? '', arguments: JSON.stringify(b.input ?? {}) },
      });
    }
  }
  const message: Json = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  // Where OpenAI-compatible reasoning models put their thinking (DeepSeek's field).
  if (reasoning !== '') message.reasoning_content = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  // A translation can give the signed blocks back to its caller (a Responses reasoning item); a chat caller cannot.
  const signed = forTranslation ? signedBlocks(content) : [];
  if (signed.length > 0) message[SIGNED_THINKING] = signed;
  return {
    id: `chatcmpl-${str(msg.id) ?? translatedId('')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: str(msg.model) ?? model,
    choices: [{ index: 0, message, finish_reason: toFinishReason(msg.stop_reason ?? 'end_turn') }],
    usage: chatUsage(anthropicCounts(msg.usage), forTranslation),
  };
}

// ---- SSE ---------------------------------------------------------------------------------------------------

/**
 * Anthropic Messages events → OpenAI chat chunks ending with `data: [DONE]`; a final usage chunk when the
 * caller asked for `stream_options.include_usage`. Whether or not it asked, `onUsage` gets the stream's
 * counts as they grow, so a stream cut before its end still counts what was said. An upstream `error`
 * event, or a stream that ends before `message_stop`, throws: the caller gets an SSE error event rather than
 * a silently truncated answer. `forTranslation`: as `messagesToChatResponse`'s.
 */
export async function* messagesStreamToChat(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  includeUsage: boolean,
  onUsage?: (usage: TokenUsage) => void,
  maxEventBytes?: number,
  forTranslation = false,
): AsyncGenerator<Uint8Array> {
  let id = `chatcmpl-${translatedId('')}`;
  let upstreamModel = model;
  const created = Math.floor(Date.now() / 1000);
  let counts: AnthropicCounts = anthropicCounts(undefined);
  /** Anthropic block index → OpenAI tool-call index. */
  const toolIndex = new Map<number, number>();
  /** Anthropic block index → the thinking text so far, to sign once its signature arrives (translations only). */
  const thinking = forTranslation ? new Map<number, string>() : undefined;
  let started = false;
  const chunk = (delta: Json, finish: string | null = null): Uint8Array =>
    dataEvent({
      id,
      object: 'chat.completion.chunk',
      created,
      model: upstreamModel,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });

  for await (const ev of parseSse(chunks, maxEventBytes)) {
    const j = jsonData(ev);
    if (!j) continue;
    const type = str(j.type) ?? ev.event;
    switch (type) {
      case 'message_start': {
        const msg = isRecord(j.message) ? j.message : {};
        if (str(msg.id)) id = `chatcmpl-${msg.id as string}`;
        upstreamModel = str(msg.model) ?? upstreamModel;
        counts = anthropicCounts(msg.usage);
        onUsage?.(chatCounts(counts, forTranslation));
        started = true;
        yield chunk({ role: 'assistant', content: '' });
        break;
      }
      case 'content_block_start':
      case 'content_block_delta':
        yield* blockChunks(j, toolIndex, chunk, thinking);
        break;
      case 'message_delta': {
        const delta = isRecord(j.delta) ? j.delta : {};
        counts = foldAnthropicCounts(counts, j.usage);
        onUsage?.(chatCounts(counts, forTranslation));
        if (delta.stop_reason !== undefined && delta.stop_reason !== null) {
          yield chunk({}, toFinishReason(delta.stop_reason));
        }
        break;
      }
      case 'message_stop': {
        if (includeUsage) {
          yield dataEvent({
            id,
            object: 'chat.completion.chunk',
            created,
            model: upstreamModel,
            choices: [],
            usage: chatUsage(counts, forTranslation),
          });
        }
        yield DONE_EVENT;
        return;
      }
      case 'error': {
        const err = isRecord(j.error) ? j.error : {};
        throw new UpstreamStreamError('upstream_error', str(err.message) ?? 'upstream stream reported an error');
      }
      default:
        break; // ping, content_block_stop, unknown events
    }
  }
  if (started) throw new UpstreamStreamError('upstream_error', 'upstream stream ended before message_stop');
}

/**
 * A content block's start or delta as chat chunks: text, thinking (as `reasoning_content`) and tool calls; with
 * `thinking` (a translation), each signed thinking block once whole, as `SIGNED_THINKING`.
 */
function* blockChunks(
  j: Json,
  toolIndex: Map<number, number>,
  chunk: (delta: Json) => Uint8Array,
  thinking?: Map<number, string>,
): Generator<Uint8Array> {
  const at = num(j.index) ?? 0;
  if (j.type === 'content_block_start') {
    const block = isRecord(j.content_block) ? j.content_block : {};
    if (thinking && block.type === 'redacted_thinking') {
      const signed = signedBlocks([block]);
      if (signed.length > 0) yield chunk({ [SIGNED_THINKING]: signed });
    }
    if (block.type !== 'tool_use') return;
    const index = toolIndex.size;
    toolIndex.set(num(j.index) ?? 0, index);
    yield chunk({
      tool_calls: [{
        index,
        id: str(block.id) ?? '',
        type: 'function',
        function: { name: str(block.name) ?? '', arguments: '' },
      }],
    });
    return;
  }
  const delta = isRecord(j.delta) ? j.delta : {};
  if (delta.type === 'text_delta' && typeof delta.text === 'string') yield chunk({ content: delta.text });
  else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') {
    thinking?.set(at, (thinking.get(at) ?? '') + delta.thinking);
    yield chunk({ reasoning_content: delta.thinking });
  } else if (thinking && delta.type === 'signature_delta' && typeof delta.signature === 'string') {
    const signed = signedBlocks([{ type: 'thinking', thinking: thinking.get(at) ?? '', signature: delta.signature }]);
    if (signed.length > 0) yield chunk({ [SIGNED_THINKING]: signed });
  } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
    const index = toolIndex.get(num(j.index) ?? 0) ?? 0;
    yield chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] });
  }
}
