// An OpenAI Responses caller (`POST /v1/responses`) served through chat completions: the request becomes a
// chat request (which every chat-serving adapter takes, Anthropic through its own translation), the answer
// (JSON or SSE) a Responses answer with AISIX's event sequence. Stored state was resolved before this (an id
// still in the body is unknown, refused with a 400 naming it).
// What is covered and what is dropped: docs/routing.md "OpenAI Responses".
import {
  acceptedToolChoice,
  type Capabilities,
  capabilitiesOf,
  chatReasoningEffort,
  cutUser,
  effortOf,
} from '../capabilities.ts';
import { UpstreamStreamError } from '../types.ts';
import {
  chatStreamChunks,
  isRecord,
  type Json,
  num,
  str,
  type TokenUsage,
  TranslationError,
  usageFromOpenai,
} from './shared.ts';
import { encryptedContentOf, SIGNED_THINKING, signedBlocks, thinkingOfEncrypted } from './signed-thinking.ts';

/** Longest `max_output_tokens` passed on: the upstreams' 32-bit bound (a larger one is dropped, not wrapped). */
const MAX_OUTPUT_TOKENS = 2 ** 32 - 1;

/** `<prefix><32 hex>`, the ids a translated answer names (AISIX's shape). */
export function responsesId(prefix: 'resp_' | 'msg_' | 'fc_' | 'call_' | 'rs_'): string {
  return prefix + crypto.randomUUID().replaceAll('-', '');
}

// ---- request ----------------------------------------------------------------------------------------------

/**
 * A Responses request as chat. What the target accepts (`caps`, by default what its model name says)
 * decides the token-limit field, the effort knob, sampling, tool choice and `user`; on a `thinking` target
 * (Claude) the effort stays `reasoning_effort`, which the Anthropic translation turns into a budget.
 * `signedThinking`: the target is Claude on Anthropic's wire, which takes its signed thinking back from a
 * reasoning item's `encrypted_content` (and refuses any other provider's).
 */
export function responsesToChatRequest(
  body: Json,
  caps: Capabilities = capabilitiesOf(String(body.model ?? '')),
  signedThinking = false,
): Json {
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    throw new TranslationError(
      `\`previous_response_id\` ${JSON.stringify(body.previous_response_id)} is not known: ${UNKNOWN_STATE}`,
    );
  }
  const messages: Json[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '') {
    messages.push({ role: 'system', content: body.instructions });
  }
  if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else if (Array.isArray(body.input)) {
    body.input.forEach((item, i) => appendInputItem(messages, item, i, signedThinking));
  }
  const out: Json = { model: body.model, messages };
  // A reasoning model takes only the default sampling: what the caller set is dropped, not refused.
  const copied = caps.temperature ? ['temperature', 'top_p', 'parallel_tool_calls'] : ['parallel_tool_calls'];
  for (const k of copied) if (body[k] !== undefined && body[k] !== null) out[k] = body[k];
  if (typeof body.user === 'string') out.user = cutUser(body.user, caps);
  const max = num(body.max_output_tokens) ?? num(body.max_tokens);
  if (max !== undefined && max <= MAX_OUTPUT_TOKENS) out[caps.token_limit_param] = max;
  const tools = Array.isArray(body.tools) ? body.tools.map(chatTool).filter((t) => t !== undefined) : [];
  if (tools.length > 0) out.tools = tools;
  const choice = acceptedToolChoice(chatToolChoice(body.tool_choice), caps);
  if (choice !== undefined) out.tool_choice = choice;
  const format = isRecord(body.text) ? responseFormat(body.text.format) : undefined;
  if (format !== undefined) out.response_format = format;
  const wanted = isRecord(body.reasoning) ? effortOf(body.reasoning.effort) : undefined;
  const effort = caps.reasoning === 'thinking' ? wanted : chatReasoningEffort(wanted, caps);
  if (effort !== undefined) out.reasoning_effort = effort;
  if (body.stream === true) {
    out.stream = true;
    // The terminal event carries usage: ask for it (the caller never sees the chat usage chunk).
    out.stream_options = { include_usage: true };
  }
  return out;
}

/**
 * Why an id the request names is not resolved: the gateway resolves what it stored (src/proxy/responses-state.ts)
 * before a translation sees the body, so what is left was never stored for this key or is gone.
 */
const UNKNOWN_STATE = 'the gateway stores the responses it translates for the API key that asked, for ' +
  '`responses_store.ttl_secs`, unless `store` was false; this id expired, was never stored, or belongs to ' +
  'another key; send the whole conversation in `input`';

/**
 * One `input[]` item onto the chat messages; consecutive function calls fold into one assistant turn. An
 * `item_reference` still here names nothing stored: refused, never dropped (the model would lose its turn).
 */
function appendInputItem(messages: Json[], item: unknown, index: number, signedThinking: boolean): void {
  if (typeof item === 'string') {
    messages.push({ role: 'user', content: item });
    return;
  }
  if (!isRecord(item)) return;
  if (item.type === 'reasoning') {
    if (signedThinking) appendSignedThinking(messages, item, index);
    return;
  }
  if (item.type === 'function_call') {
    const call = {
      id: str(item.call_id) ?? str(item.id) ?? '',
      type: 'function',
      function: { name: str(item.name) ?? '', arguments: str(item.arguments) ?? '' },
    };
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant') (last.tool_calls as Json[] | undefined ?? (last.tool_calls = [])).push(call);
    else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    return;
  }
  if (item.type === 'function_call_output') {
    messages.push({ role: 'tool', tool_call_id: str(item.call_id) ?? '', content: outputText(item.output) });
    return;
  }
  if (item.type === 'item_reference') {
    throw new TranslationError(
      `\`input[${index}]\`: \`item_reference\` ${JSON.stringify(item.id)} is not known: ${UNKNOWN_STATE}`,
    );
  }
  if (item.type !== undefined && item.type !== 'message') return; // hosted-tool items: nothing chat can carry
  const role = item.role === 'assistant'
    ? 'assistant'
    : item.role === 'system' || item.role === 'developer'
    ? 'system'
    : 'user';
  const content = messageContent(item.content, role === 'user');
  if (content === undefined) return;
  const last = messages[messages.length - 1];
  // The text of the turn a reasoning item opened joins it, as Claude answered both in one message.
  if (role === 'assistant' && last !== undefined && thinkingOnly(last)) last.content = content;
  else messages.push({ role, content });
}

/** An assistant turn that so far holds only signed thinking (a reasoning item read back). */
function thinkingOnly(m: Json): boolean {
  return m.role === 'assistant' && m[SIGNED_THINKING] !== undefined && m.content === null && !m.tool_calls;
}

/**
 * A reasoning item sent back to Claude: the thinking blocks its `encrypted_content` carries open the assistant
 * turn (the calls and text that follow join it). Another provider's state is refused, naming the item; an item
 * without any is dropped (Claude then thinks afresh, or not at all on a continued tool turn).
 */
function appendSignedThinking(messages: Json[], item: Json, index: number): void {
  const blocks = thinkingOfEncrypted(item.encrypted_content);
  if (blocks === undefined) return;
  if (blocks === 'foreign') {
    throw new TranslationError(
      `\`input[${index}]\`: reasoning item ${JSON.stringify(item.id ?? null)} carries \`encrypted_content\` ` +
        'another provider made (not this gateway for a Claude model), which this model cannot take back; ' +
        'remove the item or its `encrypted_content`, or send the conversation to the model that made it',
    );
  }
  if (blocks.length === 0) return;
  const last = messages[messages.length - 1];
  if (last !== undefined && thinkingOnly(last)) (last[SIGNED_THINKING] as Json[]).push(...blocks);
  else messages.push({ role: 'assistant', content: null, [SIGNED_THINKING]: blocks });
}

/** A message item's content: its text (parts joined), or text and image parts on a user turn; none: undefined. */
function messageContent(content: unknown, images: boolean): string | Json[] | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const parts: Json[] = [];
  for (const p of content) {
    if (!isRecord(p)) continue;
    if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') && typeof p.text === 'string') {
      parts.push({ type: 'text', text: p.text });
    } else if (images && p.type === 'input_image' && typeof p.image_url === 'string') {
      const image: Json = { url: p.image_url };
      if (typeof p.detail === 'string') image.detail = p.detail;
      parts.push({ type: 'image_url', image_url: image });
    }
  }
  if (parts.length === 0) return undefined;
  if (parts.every((p) => p.type === 'text')) return parts.map((p) => p.text as string).join('');
  return parts;
}

/** A function call's output as text: a string as is, text parts joined, anything else as JSON. */
function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) {
    return output.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join('');
  }
  return output === undefined || output === null ? '' : JSON.stringify(output);
}

/** A Responses function tool as a chat tool; hosted tools (web search, file search, …) have no chat form. */
function chatTool(t: unknown): Json | undefined {
  if (!isRecord(t) || t.type !== 'function') return undefined;
  const fn: Json = { name: str(t.name) ?? '' };
  if (t.description !== undefined) fn.description = t.description;
  if (isRecord(t.parameters)) fn.parameters = t.parameters;
  if (typeof t.strict === 'boolean') fn.strict = t.strict;
  return { type: 'function', function: fn };
}

function chatToolChoice(c: unknown): unknown {
  if (typeof c === 'string') return c;
  if (isRecord(c) && c.type === 'function' && typeof c.name === 'string') {
    return { type: 'function', function: { name: c.name } };
  }
  return undefined; // hosted-tool choices
}

/** `text.format` → chat `response_format`: JSON mode and structured outputs; plain text needs none. */
function responseFormat(f: unknown): Json | undefined {
  if (!isRecord(f)) return undefined;
  if (f.type === 'json_object') return { type: 'json_object' };
  if (f.type !== 'json_schema') return undefined;
  const schema: Json = { name: str(f.name) ?? 'response' };
  for (const k of ['description', 'schema', 'strict'] as const) if (f[k] !== undefined) schema[k] = f[k];
  return { type: 'json_schema', json_schema: schema };
}

// ---- JSON response -----------------------------------------------------------------------------------------

/** Responses' usage object: input includes cached input (OpenAI's meaning); total = input + output. */
export function responsesUsage(u: TokenUsage): Json {
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cacheRead ?? 0 },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning ?? 0 },
    total_tokens: u.input + u.output,
  };
}

/** A chat `finish_reason` as the answer's status: cut by length or a filter is `incomplete`. */
function statusOf(finish: unknown): { status: string; incomplete_details: Json | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

function messageItem(id: string, text: string, status: string): Json {
  const content = status === 'completed' ? [{ type: 'output_text', text, annotations: [] }] : [];
  return { type: 'message', id, status, role: 'assistant', content };
}

/**
 * A `reasoning` item: a chat upstream's reasoning is the model's own text, so it is a `reasoning_text` part (as
 * vLLM's Responses API gives it); `text` undefined: none yet. `summary`: the caller asked for one, and the same
 * text is its summary too (Codex and the Agents SDK show only summaries); else the summary is empty.
 */
function reasoningItem(id: string, text: string | undefined, signed: Json[] = [], summary = false): Json {
  const item: Json = {
    type: 'reasoning',
    id,
    summary: summary && text ? [{ type: 'summary_text', text }] : [],
    content: text === undefined ? [] : [{ type: 'reasoning_text', text }],
  };
  // Claude's signed thinking, for the caller to send back (docs/translation.md "Signed thinking on the Responses path").
  if (signed.length > 0) item.encrypted_content = encryptedContentOf(signed);
  return item;
}

function functionCallItem(id: string, callId: string, name: string, args: string, status: string): Json {
  return { type: 'function_call', id, call_id: callId, name, arguments: args, status };
}

function responseObject(id: string, createdAt: number, model: string, rest: Json): Json {
  return { id, object: 'response', created_at: createdAt, model, ...rest };
}

/**
 * Whether a Responses request asks for reasoning summaries (`reasoning.summary`: `auto`, `concise` or
 * `detailed`; Codex always does).
 */
export function asksSummary(body: Json): boolean {
  const summary = isRecord(body.reasoning) ? body.reasoning.summary : undefined;
  return summary === 'auto' || summary === 'concise' || summary === 'detailed';
}

/** A chat answer as the Responses answer; `summary`: the caller asked for reasoning summaries. */
export function chatToResponsesResponse(chat: Json, model: string, summary = false): Json {
  const choice = Array.isArray(chat.choices) && isRecord(chat.choices[0]) ? chat.choices[0] : {};
  const message = isRecord(choice.message) ? choice.message : {};
  const output: Json[] = [];
  const reasoning = typeof message.reasoning_content === 'string' ? message.reasoning_content : '';
  const signed = signedBlocks(message[SIGNED_THINKING]);
  if (reasoning !== '' || signed.length > 0) {
    output.push(reasoningItem(responsesId('rs_'), reasoning, signed, summary));
  }
  const text = typeof message.content === 'string' ? message.content : '';
  if (text !== '') output.push(messageItem(responsesId('msg_'), text, 'completed'));
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    if (!isRecord(call) || !isRecord(call.function)) continue;
    const args = str(call.function.arguments) ?? '';
    output.push(
      functionCallItem(responsesId('fc_'), str(call.id) ?? '', str(call.function.name) ?? '', args, 'completed'),
    );
  }
  const usage = usageFromOpenai(chat.usage) ?? { input: 0, output: 0 };
  return responseObject(responsesId('resp_'), Math.floor(Date.now() / 1000), model, {
    ...statusOf(choice.finish_reason),
    error: null,
    output,
    usage: responsesUsage(usage),
  });
}

// ---- SSE ---------------------------------------------------------------------------------------------------

const encoder = new TextEncoder();

/** A function call being streamed: announced once its name is known, keyed by the chat tool-call index. */
interface StreamedCall {
  itemId: string;
  callId?: string;
  name?: string;
  args: string;
  outputIndex?: number;
}

/** The output item being streamed: one at a time, closed (its `*.done` events) before the next is added. */
type OpenItem =
  | TextItem
  | { kind: 'call'; call: AnnouncedCall };

/** A message or reasoning item being streamed; `summarized`: its summary part is open (reasoning, when asked). */
interface TextItem {
  kind: 'reasoning' | 'message';
  id: string;
  index: number;
  text: string;
  signed: Json[];
  summarized?: boolean;
}

/** A call once announced: its output index, id and name are set. */
type AnnouncedCall = StreamedCall & { outputIndex: number; callId: string; name: string };

/**
 * The Responses event encoder of one answer: sequence numbers, output indexes, the items as they grow. As
 * OpenAI streams, each item is closed before the next is added; the output order is the stream's.
 */
class ResponsesEvents {
  private seq = 0;
  private nextIndex = 0;
  readonly id = responsesId('resp_');
  readonly createdAt = Math.floor(Date.now() / 1000);
  started = false;
  private open: OpenItem | undefined;
  /** The items closed so far, in output order. */
  private readonly closed: Json[] = [];
  private readonly calls = new Map<number, StreamedCall>();

  /** `summary`: the caller asked for reasoning summaries, so reasoning text streams as the summary too. */
  constructor(readonly model: string, private readonly summary = false) {}

  event(type: string, data: Json): Uint8Array {
    const payload = { type, sequence_number: this.seq++, ...data };
    return encoder.encode(`event: ${type}\ndata: ${JSON.stringify(payload)}\n\n`);
  }

  response(rest: Json): Json {
    return responseObject(this.id, this.createdAt, this.model, rest);
  }

  *start(): Generator<Uint8Array> {
    if (this.started) return;
    this.started = true;
    const response = this.response({ status: 'in_progress', output: [] });
    yield this.event('response.created', { response });
    yield this.event('response.in_progress', { response });
  }

  /** Reasoning text (chat `reasoning_content`) as a `reasoning` item's `reasoning_text` part. */
  *reasoning(delta: string): Generator<Uint8Array> {
    const item = yield* this.textItem('reasoning');
    item.text += delta;
    yield this.event('response.reasoning_text.delta', {
      item_id: item.id,
      output_index: item.index,
      content_index: 0,
      delta,
    });
    if (!this.summary) return;
    const base = { item_id: item.id, output_index: item.index, summary_index: 0 };
    if (!item.summarized) {
      item.summarized = true;
      yield this.event('response.reasoning_summary_part.added', { ...base, part: { type: 'summary_text', text: '' } });
    }
    yield this.event('response.reasoning_summary_text.delta', { ...base, delta });
  }

  /** Claude's signed thinking blocks (a translation's private field): the open reasoning item carries them. */
  *signedThinking(blocks: Json[]): Generator<Uint8Array> {
    const item = yield* this.textItem('reasoning');
    item.signed.push(...blocks);
  }

  *text(delta: string): Generator<Uint8Array> {
    const item = yield* this.textItem('message');
    item.text += delta;
    yield this.event('response.output_text.delta', {
      item_id: item.id,
      output_index: item.index,
      content_index: 0,
      delta,
    });
  }

  /** The open item of `kind`, or a new one (the open item closed first) with its empty content part. */
  private *textItem(kind: 'reasoning' | 'message'): Generator<Uint8Array, TextItem> {
    if (this.open?.kind === kind) return this.open;
    yield* this.close();
    const id = responsesId(kind === 'message' ? 'msg_' : 'rs_');
    const item: TextItem = { kind, id, index: this.nextIndex++, text: '', signed: [] };
    this.open = item;
    const added = kind === 'message' ? messageItem(item.id, '', 'in_progress') : reasoningItem(item.id, undefined);
    yield this.event('response.output_item.added', { output_index: item.index, item: added });
    yield this.event('response.content_part.added', {
      item_id: item.id,
      output_index: item.index,
      content_index: 0,
      part: textPart(kind, ''),
    });
    return item;
  }

  /**
   * A tool-call delta; argument fragments before the name is known are kept for `arguments` but not sent.
   * Fragments of a call already closed (an upstream that interleaves calls) reach no event.
   */
  *call(chatIndex: number, d: { id?: string; name?: string; args?: string }): Generator<Uint8Array> {
    let c = this.calls.get(chatIndex);
    if (!c) this.calls.set(chatIndex, c = { itemId: responsesId('fc_'), args: '' });
    c.callId ??= d.id;
    c.name ??= d.name;
    if (d.args) c.args += d.args;
    if (c.outputIndex === undefined) {
      if (c.name === undefined) return;
      yield* this.close();
      const open: AnnouncedCall = Object.assign(c, {
        outputIndex: this.nextIndex++,
        callId: c.callId ?? responsesId('call_'),
        name: c.name,
      });
      this.open = { kind: 'call', call: open };
      const item = functionCallItem(c.itemId, open.callId, c.name, '', 'in_progress');
      yield this.event('response.output_item.added', { output_index: open.outputIndex, item });
      if (c.args !== '') yield* this.argsDelta(c.itemId, open.outputIndex, c.args);
    } else if (d.args && this.open?.kind === 'call' && this.open.call === c) {
      yield* this.argsDelta(c.itemId, c.outputIndex, d.args);
    }
  }

  private *argsDelta(itemId: string, outputIndex: number, delta: string): Generator<Uint8Array> {
    yield this.event('response.function_call_arguments.delta', { item_id: itemId, output_index: outputIndex, delta });
  }

  /** The open item's `*.done` events, in OpenAI's order (text, part, item). */
  *close(): Generator<Uint8Array> {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    let item: Json;
    let index: number;
    if (open.kind === 'call') {
      const c = open.call;
      const base = { item_id: c.itemId, output_index: c.outputIndex };
      yield this.event('response.function_call_arguments.done', { ...base, arguments: c.args });
      item = functionCallItem(c.itemId, c.callId, c.name, c.args, 'completed');
      index = c.outputIndex;
    } else {
      const { kind, id, text, signed, summarized } = open;
      index = open.index;
      const base = { item_id: id, output_index: index, content_index: 0 };
      const done = kind === 'message' ? 'response.output_text.done' : 'response.reasoning_text.done';
      yield this.event(done, { ...base, text });
      yield this.event('response.content_part.done', { ...base, part: textPart(kind, text) });
      if (summarized) {
        const summary = { item_id: id, output_index: index, summary_index: 0 };
        yield this.event('response.reasoning_summary_text.done', { ...summary, text });
        yield this.event('response.reasoning_summary_part.done', { ...summary, part: { type: 'summary_text', text } });
      }
      item = kind === 'message' ? messageItem(id, text, 'completed') : reasoningItem(id, text, signed, summarized);
    }
    yield this.event('response.output_item.done', { output_index: index, item });
    this.closed.push(item);
  }

  /** The last item closed, then `response.completed` or `response.incomplete` with the whole output and usage. */
  *finish(finish: unknown, usage: TokenUsage): Generator<Uint8Array> {
    yield* this.start();
    yield* this.close();
    const state = statusOf(finish);
    const response = this.response({ ...state, error: null, output: this.closed, usage: responsesUsage(usage) });
    yield this.event(state.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  }
}

/** The content part a text item streams into: `output_text` of a message, `reasoning_text` of reasoning. */
function textPart(kind: 'reasoning' | 'message', text: string): Json {
  return kind === 'message' ? { type: 'output_text', text, annotations: [] } : { type: 'reasoning_text', text };
}

/**
 * Chat chunks → Responses events (no `data: [DONE]`). Nothing is written before the first chunk that
 * carries text, a tool call or a finish reason, so a target that fails before that can still be failed
 * over. The terminal event goes out at the upstream's `[DONE]`, after its usage chunk; `onUsage` gets the
 * counts when the upstream reports them. An error chunk, or a stream cut before `[DONE]` and a finish reason, throws.
 */
export async function* chatStreamToResponses(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  onUsage?: (usage: TokenUsage) => void,
  maxEventBytes?: number,
  summary = false,
): AsyncGenerator<Uint8Array> {
  const out = new ResponsesEvents(model, summary);
  let finish: unknown;
  let usage: TokenUsage = { input: 0, output: 0 };
  const upstream = { done: false };
  for await (const j of chatStreamChunks(chunks, maxEventBytes, upstream)) {
    const reported = usageFromOpenai(j.usage);
    if (reported) {
      usage = reported;
      onUsage?.(usage);
    }
    const choice = Array.isArray(j.choices) && isRecord(j.choices[0]) ? j.choices[0] : undefined;
    if (!choice) continue;
    yield* chunkEvents(out, choice);
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) finish = choice.finish_reason;
  }
  if (!out.started && finish === undefined) return; // nothing arrived: the dispatcher fails the attempt over
  if (!upstream.done && finish === undefined) {
    throw new UpstreamStreamError('upstream_error', 'upstream stream ended before data: [DONE]');
  }
  yield* out.finish(finish, usage);
}

/** One chat choice's delta as Responses events (the created pair first, once something is there to say). */
function* chunkEvents(out: ResponsesEvents, choice: Json): Generator<Uint8Array> {
  const delta = isRecord(choice.delta) ? choice.delta : {};
  const calls = Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isRecord) : [];
  const reasoning = typeof delta.reasoning_content === 'string' ? delta.reasoning_content : '';
  const text = typeof delta.content === 'string' ? delta.content : '';
  const signed = signedBlocks(delta[SIGNED_THINKING]);
  const finishes = choice.finish_reason !== null && choice.finish_reason !== undefined;
  if (reasoning === '' && signed.length === 0 && text === '' && calls.length === 0 && !finishes) return;
  yield* out.start();
  if (reasoning !== '') yield* out.reasoning(reasoning);
  if (signed.length > 0) yield* out.signedThinking(signed);
  if (text !== '') yield* out.text(text);
  for (const call of calls) {
    const fn = isRecord(call.function) ? call.function : {};
    yield* out.call(num(call.index) ?? 0, { id: str(call.id), name: str(fn.name), args: str(fn.arguments) });
  }
}

/**
 * The in-stream error event of a Responses stream (AISIX's shape): `event: error` with
 * `{"type":"error","code","message"}`; `code` is the failure's class (`upstream_error`, `timeout`, …).
 */
export function responsesErrorEvent(kind: 'upstream_error' | 'upstream_timeout', message: string): Uint8Array {
  const code = kind === 'upstream_timeout' ? 'timeout' : 'upstream_error';
  return encoder.encode(`event: error\ndata: ${JSON.stringify({ type: 'error', code, message })}\n\n`);
}
