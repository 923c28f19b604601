// An Anthropic Messages caller (`POST /v1/messages`) served by an OpenAI-style target (openai, echo): the
// request becomes a chat completion request, the answer (JSON or SSE) a Messages answer. What is covered
// and what is refused: docs/routing.md "Anthropic Messages".
import {
  acceptedToolChoice,
  type Capabilities,
  capabilitiesOf,
  chatReasoningEffort,
  cutUser,
  effortOfThinking,
} from '../capabilities.ts';
import { namedEvent } from '../sse.ts';
import { isClientTool } from './dropped.ts';
import { UpstreamStreamError } from '../types.ts';
import {
  anthropicUsage,
  chatStreamChunks,
  isRecord,
  type Json,
  num,
  parseArguments,
  str,
  type TokenUsage,
  toStopReason,
  translatedId,
  TranslationError,
  usageFromOpenai,
} from './shared.ts';

// ---- request ----------------------------------------------------------------------------------------------

/** A Messages request as chat, and the content blocks that had no chat form and were dropped. */
export interface TranslatedMessages {
  body: Json;
  droppedBlocks: number;
  /** The dropped blocks' types, each once, in order of appearance. */
  droppedTypes: string[];
}

export function messagesToChatRequest(body: Json, caps?: Capabilities): Json {
  return translateMessagesRequest(body, caps).body;
}

/**
 * What Claude Code and other Anthropic clients send, as lenient as AISIX: `system` turns inside
 * `messages[]` kept in place, `document` blocks, images inside tool results, `max_tokens` optional; a block
 * type chat cannot carry is dropped and counted. What the target accepts (`caps`, by default what its model
 * name says) decides the token-limit field, the reasoning knob, sampling, tool choice and `user`.
 */
export function translateMessagesRequest(
  body: Json,
  caps: Capabilities = capabilitiesOf(String(body.model ?? '')),
): TranslatedMessages {
  const out: Json = { model: body.model };
  const drop: Drops = { count: 0, types: new Set() };
  const messages: Json[] = [];
  const system = systemText(body.system);
  if (system) messages.push({ role: 'system', content: system });
  const turns = Array.isArray(body.messages) ? body.messages : [];
  turns.forEach((m, i) => {
    if (!isRecord(m)) throw new TranslationError(`messages[${i}] must be an object`);
    messages.push(...chatMessagesOf(m, i, drop));
  });
  out.messages = messages;
  if (body.max_tokens !== undefined) out[caps.token_limit_param] = body.max_tokens;
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) out.stop = body.stop_sequences;
  // A reasoning model takes only the default sampling: what the caller set is dropped, not refused.
  if (caps.temperature) {
    for (const k of ['temperature', 'top_p'] as const) {
      if (body[k] !== undefined) out[k] = body[k];
    }
  }
  if (isRecord(body.metadata) && typeof body.metadata.user_id === 'string') {
    out.user = cutUser(body.metadata.user_id, caps);
  }
  // Server tools run at Anthropic only: dropped, and named to the caller (dropped.ts).
  const tools = Array.isArray(body.tools) ? body.tools.filter((t) => !isRecord(t) || isClientTool(t)) : [];
  if (tools.length > 0) out.tools = tools.map(chatTool);
  const choice = acceptedToolChoice(chatToolChoice(body.tool_choice), caps);
  if (choice !== undefined) out.tool_choice = choice;
  if (isRecord(body.tool_choice) && body.tool_choice.disable_parallel_tool_use === true) {
    out.parallel_tool_calls = false;
  }
  const outputConfig = isRecord(body.output_config) ? body.output_config : {};
  const effort = chatReasoningEffort(effortOfThinking(body.thinking, outputConfig.effort), caps);
  if (effort !== undefined) out.reasoning_effort = effort;
  const format = responseFormat(outputConfig.format ?? body.output_format, caps);
  if (format !== undefined) out.response_format = format;
  if (body.stream === true) {
    out.stream = true;
    // The Messages stream ends with usage; ask for it (the caller never sees the extra chunk).
    out.stream_options = { include_usage: true };
  }
  return { body: out, droppedBlocks: drop.count, droppedTypes: [...drop.types] };
}

/**
 * Anthropic's structured output (`output_config.format`, or the beta's `output_format`) as chat's
 * `response_format`; a target without structured output refuses it rather than answer free text.
 */
function responseFormat(format: unknown, caps: Capabilities): Json | undefined {
  if (!isRecord(format) || format.type !== 'json_schema') return undefined;
  if (!caps.structured_output) {
    throw new TranslationError(
      '`output_config.format` (structured output) cannot be sent to this model: it has no JSON-schema output ' +
        '(if it does, set `capabilities.structured_output: true` on the model)',
    );
  }
  const schema = isRecord(format.schema) ? format.schema : { type: 'object' };
  return { type: 'json_schema', json_schema: { name: 'output', schema, strict: true } };
}

function systemText(system: unknown): string | undefined {
  if (typeof system === 'string') return system || undefined;
  if (!Array.isArray(system)) return undefined;
  const parts = system.map((b) => (isRecord(b) && b.type === 'text' ? str(b.text) ?? '' : ''));
  return parts.filter(Boolean).join('\n\n') || undefined;
}

/** What a tool result marked `is_error` starts with on a chat target (docs/translation.md). */
export const TOOL_ERROR_PREFIX = 'Tool error: ';

/** Blocks dropped so far (`translateMessagesRequest`'s count) and their types. */
interface Drops {
  count: number;
  types: Set<string>;
}

function dropBlock(drop: Drops, b: unknown): void {
  drop.count++;
  drop.types.add(isRecord(b) ? str(b.type) ?? 'unknown' : typeof b);
}

function chatMessagesOf(m: Json, i: number, drop: Drops): Json[] {
  const role = m.role;
  if (role !== 'user' && role !== 'assistant' && role !== 'system') {
    throw new TranslationError(`messages[${i}].role must be "user", "assistant" or "system"`);
  }
  if (typeof m.content === 'string') return [{ role, content: m.content }];
  if (!Array.isArray(m.content)) {
    throw new TranslationError(`messages[${i}].content must be a string or an array of blocks`);
  }
  if (role === 'system') {
    const text = systemText(m.content);
    return text === undefined ? [] : [{ role, content: text }];
  }
  return role === 'user' ? userMessages(m.content, i, drop) : [assistantMessage(m.content, i, drop)];
}

/**
 * Tool results become `tool` messages (first: they answer the previous assistant turn); the rest, images
 * of the tool results included (a chat tool message carries text only), one user message.
 */
function userMessages(blocks: unknown[], i: number, drop: Drops): Json[] {
  const tools: Json[] = [];
  const parts: Json[] = [];
  blocks.forEach((b, j) => {
    const where = `messages[${i}].content[${j}]`;
    if (!isRecord(b)) throw new TranslationError(`${where} must be an object`);
    if (b.type === 'tool_result') {
      const result = toolResult(b.content, drop);
      // Chat has no error flag on a tool message: the model reads it in the content instead.
      const content = b.is_error === true ? `${TOOL_ERROR_PREFIX}${result.text}` : result.text;
      tools.push({ role: 'tool', tool_call_id: str(b.tool_use_id) ?? '', content });
      parts.push(...result.images);
      return;
    }
    const part = userPart(b, drop);
    if (part) parts.push(part);
  });
  const out = [...tools];
  if (parts.length > 0) {
    const textOnly = parts.every((p) => p.type === 'text');
    out.push({ role: 'user', content: textOnly ? parts.map((p) => p.text as string).join('') : parts });
  }
  return out;
}

/** A user block as a chat part: text, image, document; anything else dropped and counted. */
function userPart(b: Json, drop: Drops): Json | undefined {
  const part = b.type === 'text'
    ? { type: 'text', text: str(b.text) ?? '' }
    : b.type === 'image'
    ? imagePart(b)
    : b.type === 'document'
    ? documentPart(b)
    : undefined;
  if (!part) dropBlock(drop, b);
  return part;
}

function assistantMessage(blocks: unknown[], i: number, drop: Drops): Json {
  let text = '';
  const toolCalls: Json[] = [];
  blocks.forEach((b, j) => {
    if (!isRecord(b)) throw new TranslationError(`messages[${i}].content[${j}] must be an object`);
    if (b.type === 'text') text += str(b.text) ?? '';
    else if (b.type === 'tool_use') {
      toolCalls.push({
        id: str(b.id) ?? '',
        type: 'function',
        function: { name: str(b.name) ?? '', arguments: JSON.stringify(b.input ?? {}) },
      });
    } else if (b.type !== 'thinking' && b.type !== 'redacted_thinking') dropBlock(drop, b);
  });
  const msg: Json = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (toolCalls.length > 0) msg.tool_calls = toolCalls;
  return msg;
}

function dataUrl(src: Json, fallbackType: string): string {
  return `data:${str(src.media_type) ?? fallbackType};base64,${str(src.data) ?? ''}`;
}

/** An image block as an `image_url` part; a source chat cannot point at (e.g. a file id): undefined. */
function imagePart(b: Json): Json | undefined {
  const src = isRecord(b.source) ? b.source : {};
  if (src.type === 'base64') return { type: 'image_url', image_url: { url: dataUrl(src, 'image/png') } };
  if (src.type === 'url') return { type: 'image_url', image_url: { url: str(src.url) ?? '' } };
  return undefined;
}

/** A document block: base64 (a PDF) as a `file` part, plain or block text as text, a URL as `image_url`. */
function documentPart(b: Json): Json | undefined {
  const src = isRecord(b.source) ? b.source : {};
  if (src.type === 'base64') {
    const file: Json = { file_data: dataUrl(src, 'application/pdf') };
    if (typeof b.title === 'string') file.filename = b.title;
    return { type: 'file', file };
  }
  if (src.type === 'text') return { type: 'text', text: str(src.data) ?? '' };
  if (src.type === 'content') {
    const text = systemText(src.content);
    return text === undefined ? undefined : { type: 'text', text };
  }
  if (src.type === 'url') return { type: 'image_url', image_url: { url: str(src.url) ?? '' } };
  return undefined;
}

/** A tool result's text (absent: `""`; text blocks joined) and its images; other blocks dropped and counted. */
function toolResult(content: unknown, drop: Drops): { text: string; images: Json[] } {
  if (content === undefined || content === null) return { text: '', images: [] };
  if (typeof content === 'string') return { text: content, images: [] };
  if (!Array.isArray(content)) {
    dropBlock(drop, content);
    return { text: '', images: [] };
  }
  let text = '';
  const images: Json[] = [];
  for (const c of content) {
    const image = isRecord(c) && c.type === 'image' ? imagePart(c) : undefined;
    if (isRecord(c) && c.type === 'text') text += str(c.text) ?? '';
    else if (image) images.push(image);
    else dropBlock(drop, c);
  }
  return { text, images };
}

function chatTool(t: unknown): Json {
  const tool = isRecord(t) ? t : {};
  return {
    type: 'function',
    function: {
      name: str(tool.name) ?? '',
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: isRecord(tool.input_schema) ? tool.input_schema : { type: 'object' },
    },
  };
}

function chatToolChoice(c: unknown): unknown {
  if (!isRecord(c)) return undefined;
  switch (c.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      return { type: 'function', function: { name: str(c.name) ?? '' } };
    default:
      return undefined;
  }
}

/** A chat message's or delta's reasoning text (`reasoning_content`, DeepSeek's and vLLM's field). */
export function reasoningOf(m: Json): string {
  return typeof m.reasoning_content === 'string' ? m.reasoning_content : '';
}

// ---- JSON response -----------------------------------------------------------------------------------------

export function chatToMessagesResponse(chat: Json, model: string): Json {
  const choice = Array.isArray(chat.choices) && isRecord(chat.choices[0]) ? chat.choices[0] : {};
  const message = isRecord(choice.message) ? choice.message : {};
  const content: Json[] = [];
  const reasoning = reasoningOf(message);
  // A chat upstream's reasoning signs nothing: the block has an empty signature (docs/translation.md "Reasoning").
  if (reasoning !== '') content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  const text = typeof message.content === 'string' ? message.content : '';
  if (text !== '') content.push({ type: 'text', text });
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    if (!isRecord(call) || !isRecord(call.function)) continue;
    content.push({
      type: 'tool_use',
      id: str(call.id) ?? translatedId('toolu_'),
      name: str(call.function.name) ?? '',
      input: parseArguments(call.function.arguments),
    });
  }
  const usage = usageFromOpenai(chat.usage) ?? { input: 0, output: 0 };
  return {
    id: translatedId('msg_'),
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: toStopReason(choice.finish_reason ?? 'stop'),
    stop_sequence: null,
    usage: anthropicUsage(usage),
  };
}

// ---- SSE ---------------------------------------------------------------------------------------------------

type BlockKind = 'thinking' | 'text' | 'tool_use';

/**
 * OpenAI chat chunks → Anthropic Messages events. Nothing is emitted before the upstream's first event, so
 * a target that fails before sending anything can still be failed over. `onUsage` gets the counts (the
 * cached part included, which the Messages events do not carry) when the upstream reports them. A chat
 * upstream reports usage only at the end, so `message_start` carries `promptTokens`' local count of the
 * prompt (0 without one); `message_delta` carries the upstream's own.
 */
export async function* chatStreamToMessages(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  onUsage?: (usage: TokenUsage) => void,
  maxEventBytes?: number,
  promptTokens?: () => Promise<number>,
): AsyncGenerator<Uint8Array> {
  let started = false;
  const blocks = new MessageBlocks();
  let stopReason: string | null = null;
  let usage: TokenUsage = { input: 0, output: 0 };
  const upstream = { done: false };
  for await (const j of chatStreamChunks(chunks, maxEventBytes, upstream)) {
    if (!started) {
      started = true;
      yield messageStart(model, promptTokens ? await promptTokens().catch(() => 0) : 0);
    }
    const reported = usageFromOpenai(j.usage);
    if (reported) {
      usage = reported;
      onUsage?.(usage);
    }
    const choice = Array.isArray(j.choices) && isRecord(j.choices[0]) ? j.choices[0] : undefined;
    if (!choice) continue;
    yield* blocks.delta(isRecord(choice.delta) ? choice.delta : {});
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      stopReason = toStopReason(choice.finish_reason);
    }
  }
  if (!started) return; // nothing arrived: the dispatcher treats an empty stream as a failed attempt
  // A cut stream is not a whole answer: no `message_stop` for it, an error event instead (as the other
  // direction does when `message_stop` never came).
  if (!upstream.done) throw new UpstreamStreamError('upstream_error', 'upstream stream ended before data: [DONE]');
  yield* blocks.close();
  yield namedEvent('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: stopReason ?? 'end_turn', stop_sequence: null },
    usage: anthropicUsage(usage),
  });
  yield namedEvent('message_stop', { type: 'message_stop' });
}

function messageStart(model: string, input: number): Uint8Array {
  return namedEvent('message_start', {
    type: 'message_start',
    message: {
      id: translatedId('msg_'),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: anthropicUsage({ input, output: 0 }),
    },
  });
}

/** The content blocks of one translated stream: one open at a time (Anthropic's), tool calls by OpenAI index. */
class MessageBlocks {
  private open: { index: number; kind: BlockKind } | undefined = undefined;
  private nextIndex = 0;
  /** OpenAI tool-call index → Anthropic block index. */
  private readonly toolBlocks = new Map<number, number>();

  *close(): Generator<Uint8Array> {
    if (!this.open) return;
    yield namedEvent('content_block_stop', { type: 'content_block_stop', index: this.open.index });
    this.open = undefined;
  }

  /** One chat delta's reasoning, text and tool-call pieces, each in its block (opened when it is new). */
  *delta(delta: Record<string, unknown>): Generator<Uint8Array> {
    const reasoning = reasoningOf(delta);
    if (reasoning !== '') {
      const index = this.open?.kind === 'thinking'
        ? this.open.index
        : yield* this.start({ type: 'thinking', thinking: '', signature: '' }, 'thinking');
      yield blockDelta(index, { type: 'thinking_delta', thinking: reasoning });
    }
    if (typeof delta.content === 'string' && delta.content !== '') {
      const index = this.open?.kind === 'text'
        ? this.open.index
        : yield* this.start({ type: 'text', text: '' }, 'text');
      yield blockDelta(index, { type: 'text_delta', text: delta.content });
    }
    for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
      if (!isRecord(call)) continue;
      const toolIndex = num(call.index) ?? 0;
      const fn = isRecord(call.function) ? call.function : {};
      let index = this.toolBlocks.get(toolIndex);
      if (index === undefined) {
        index = yield* this.start({
          type: 'tool_use',
          id: str(call.id) ?? translatedId('toolu_'),
          name: str(fn.name) ?? '',
          input: {},
        }, 'tool_use');
        this.toolBlocks.set(toolIndex, index);
      }
      if (typeof fn.arguments === 'string' && fn.arguments !== '') {
        yield blockDelta(index, { type: 'input_json_delta', partial_json: fn.arguments });
      }
    }
  }

  private *start(block: Json, kind: BlockKind): Generator<Uint8Array, number> {
    yield* this.close();
    const index = this.nextIndex++;
    this.open = { index, kind };
    yield namedEvent('content_block_start', { type: 'content_block_start', index, content_block: block });
    return index;
  }
}

function blockDelta(index: number, delta: Json): Uint8Array {
  return namedEvent('content_block_delta', { type: 'content_block_delta', index, delta });
}
