// The scripted upstream of the client matrix (test/clients, docs/translation.md "Tested clients"): one real HTTP
// server speaking OpenAI chat (JSON and SSE, `tool_calls`), OpenAI Responses (JSON and SSE, with a store that
// resolves `previous_response_id` and `item_reference` as OpenAI does with `store: true`) and Anthropic Messages
// (JSON and SSE, `tool_use`, signed `thinking` when asked), refusing what the real APIs refuse (api-rules.ts and
// `responsesViolation` below; a continued tool turn must lead with a thinking block it signed). The script: a
// turn that offers tools and carries no tool result asks for one tool call (after a line of text); once a tool
// result is in the conversation it answers `FINAL ANSWER. The tool returned: "<result>"`. Every request is
// recorded with the status it got.
import { anthropicViolation, openaiViolation, type Violation } from './api-rules.ts';
import { sleep } from './until.ts';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

type Json = Record<string, unknown>;

export interface ScriptedRequest {
  /** `chat`, `responses`, `messages` or `count_tokens`; `other` for a path the mock does not serve. */
  api: 'chat' | 'responses' | 'messages' | 'count_tokens' | 'other';
  url: string;
  headers: http.IncomingHttpHeaders;
  json: Json | undefined;
  status: number;
  /** The refusal's message when the mock answered 400. */
  refusal?: string;
  /** Responses: the whole conversation the request stands for (its stored chain and references resolved). */
  conversation?: Json[];
  /** What the script did: asked for `tool`, or answered with text. */
  action?: { tool: string } | { text: string };
}

export interface ScriptedUpstream {
  url: string;
  /** `${url}/v1`: an OpenAI-style provider key's `api_base`. */
  base: string;
  requests: ScriptedRequest[];
  /**
   * The arguments the script calls a tool with, by tool name; the default covers `get_weather`, Claude Code's
   * `Read`, Codex's `exec_command` and `shell` on `file`.
   */
  toolArgs: (name: string) => Json;
  /** The file the default `toolArgs` read. */
  file: string;
  close(): Promise<void>;
}

/** The text the script writes before its tool call. */
export const PREAMBLE_TEXT = 'Let me check with a tool.';
/** The head of the script's answer once a tool result came back. */
export const FINAL_ANSWER = 'FINAL ANSWER. The tool returned:';
/** What the script streams as reasoning (`reasoning_content`, `thinking`) on a model that reasons. */
export const REASONING_TEXT = 'The user wants the tool result; I will call the tool.';

/** A request that holds this word is streamed a chunk a second: time for its caller to leave mid-stream. */
export const SLOW_PROMPT = 'SLOW-STREAM';
const SLOW_PACE_MS = 1000;

/** Tools the script prefers, in order, when a request offers several. */
const PREFERRED = ['get_weather', 'Read', 'exec_command', 'shell', 'read_file'];

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const records = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isRecord) : []);

/** The text of a tool result in any wire's shape (a string, or parts carrying `text`). */
function resultText(v: unknown): string {
  if (typeof v === 'string') return v;
  return records(v).map((p) => (typeof p.text === 'string' ? p.text : '')).join('');
}

/** A model the OpenAI-compatible vendor serves: it streams DeepSeek-style `reasoning_content`. */
const reasons = (model: string) => model.startsWith('compat');

/** The tool names a request offers (function tools only) and the last tool result it carries, per wire. */
function scriptInput(api: ScriptedRequest['api'], body: Json, conversation: Json[]): {
  tools: string[];
  result: string | undefined;
} {
  let tools: string[] = [];
  let result: string | undefined;
  if (api === 'chat') {
    tools = records(body.tools).map((t) => String(isRecord(t.function) ? t.function.name : t.name));
    for (const m of records(body.messages)) if (m.role === 'tool') result = resultText(m.content);
  } else if (api === 'responses') {
    tools = records(body.tools).filter((t) => t.type === 'function').map((t) => String(t.name));
    for (const item of conversation) {
      if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
        result = resultText(item.output);
      }
    }
  } else {
    tools = records(body.tools).map((t) => String(t.name));
    for (const m of records(body.messages)) {
      for (const b of records(m.content)) if (b.type === 'tool_result') result = resultText(b.content);
    }
  }
  return { tools, result };
}

/**
 * What the script answers: a tool call (with text before it) or the final text; `signature`: the one the
 * answer's thinking block carries (Messages with thinking on).
 */
type Action = { text: string; call?: { name: string; args: string }; reasoning?: string; signature?: string };

export async function startScriptedUpstream(opts: { paceMs?: number } = {}): Promise<ScriptedUpstream> {
  const pace = opts.paceMs ?? 5;
  const requests: ScriptedRequest[] = [];
  const items = new Map<string, Json>();
  const responses = new Map<string, Json[]>();
  // The thinking signatures given out: Anthropic takes back, on a continued tool turn, only the ones it signed.
  const issued = new Set<string>();
  let n = 0;

  const rig: ScriptedUpstream = {
    url: '',
    base: '',
    requests,
    file: '/dev/null',
    toolArgs: (name) => {
      if (name === 'get_weather') return { city: 'Paris' };
      if (name === 'Read' || name === 'read_file') return { file_path: rig.file };
      if (name === 'exec_command') return { cmd: `cat ${rig.file}` };
      if (name === 'shell') return { command: ['cat', rig.file] };
      return {};
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };

  function act(api: ScriptedRequest['api'], body: Json, conversation: Json[]): Action {
    const { tools, result } = scriptInput(api, body, conversation);
    const model = String(body.model ?? '');
    const reasoning = reasons(model) || isThinking(body) ? REASONING_TEXT : undefined;
    if (result !== undefined) {
      return { text: `${FINAL_ANSWER} "${result.trim().slice(0, 400)}"`, reasoning };
    }
    if (tools.length === 0) return { text: 'OK', reasoning };
    const name = PREFERRED.find((p) => tools.includes(p)) ?? tools[0]!;
    return { text: PREAMBLE_TEXT, call: { name, args: JSON.stringify(rig.toolArgs(name)) }, reasoning };
  }

  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    let json: Json | undefined;
    try {
      json = JSON.parse(Buffer.concat(parts).toString('utf8'));
    } catch {
      json = undefined;
    }
    const path = (req.url ?? '').replace(/\?.*$/, '');
    const api: ScriptedRequest['api'] = path === '/v1/chat/completions'
      ? 'chat'
      : path === '/v1/responses'
      ? 'responses'
      : path === '/v1/messages'
      ? 'messages'
      : path === '/v1/messages/count_tokens'
      ? 'count_tokens'
      : 'other';
    const rec: ScriptedRequest = { api, url: req.url ?? '', headers: req.headers, json, status: 200 };
    requests.push(rec);
    const refuse = (v: Violation) => {
      rec.status = v.status;
      const err = v.body.error;
      rec.refusal = isRecord(err) ? String(err.message) : JSON.stringify(v.body);
      res.writeHead(v.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(v.body));
    };
    if (api === 'other') {
      rec.status = 404;
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' } }));
      return;
    }
    const violation = api === 'chat'
      ? openaiViolation(lenient(json))
      : api === 'messages' || api === 'count_tokens'
      ? anthropicViolation(
        withBetas(json, String(req.headers['anthropic-beta'] ?? '')),
        api === 'count_tokens',
        api === 'messages' ? issued : undefined,
      )
      : undefined;
    if (violation) return refuse(violation);
    const body = json!;
    if (api === 'count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: tokens(body) }));
      return;
    }
    let conversation: Json[] = [];
    if (api === 'responses') {
      const resolved = resolveResponses(body, items, responses);
      if ('status' in resolved) return refuse(resolved);
      conversation = rec.conversation = resolved.conversation;
    }
    const a = act(api, body, conversation);
    rec.action = a.call ? { tool: a.call.name } : { text: a.text };
    const id = ++n;
    if (api === 'messages' && a.reasoning && isThinking(body)) {
      a.signature = `sig-${id}-${Math.random().toString(36).slice(2, 10)}`;
      issued.add(a.signature);
    }
    const delay = JSON.stringify(body).includes(SLOW_PROMPT) ? SLOW_PACE_MS : pace;
    const write = async (chunks: string[]) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      for (const c of chunks) {
        if (res.destroyed) return;
        res.write(c);
        if (delay) await sleep(delay);
      }
      res.end();
    };
    const stream = body.stream === true;
    if (api === 'chat') {
      if (stream) return write(chatStream(body, a, id));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(chatJson(body, a, id)));
      return;
    }
    if (api === 'messages') {
      if (stream) return write(messagesStream(body, a, id));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(messagesJson(body, a, id)));
      return;
    }
    const response = responsesJson(body, a, id);
    if (body.store !== false) {
      for (const item of records(response.output)) items.set(String(item.id), item);
      responses.set(String(response.id), [...conversation, ...records(response.output)]);
    }
    if (stream) return write(responsesStream(response));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(response));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  rig.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  rig.base = `${rig.url}/v1`;
  return rig;
}

/** The compat vendor, like vLLM, sets no length on `user` (OpenAI's own limit is in api-rules.ts). */
function lenient(body: Json | undefined): Json | undefined {
  return body && reasons(String(body.model ?? '')) ? { ...body, user: undefined } : body;
}

/**
 * The request as the rules judge it under its betas: with `mid-conversation-system-*` (Claude Code 2.1.197
 * names it) Anthropic takes `system` turns among the messages.
 */
function withBetas(body: Json | undefined, betas: string): Json | undefined {
  if (!body || !betas.includes('mid-conversation-system')) return body;
  return { ...body, messages: records(body.messages).filter((m) => m.role !== 'system') };
}

function isThinking(body: Json): boolean {
  const t = body.thinking;
  return isRecord(t) && (t.type === 'enabled' || t.type === 'adaptive');
}

/** A rough count, as a mock may: a token per four characters of the request. */
const tokens = (body: unknown) => Math.max(1, Math.ceil(JSON.stringify(body).length / 4));

function openaiError(message: string, param: string | null, code: string | null): Violation {
  return { status: 400, body: { error: { message, type: 'invalid_request_error', param, code } } };
}

/**
 * The Responses request's whole conversation (the `previous_response_id` chain, then `input` with each
 * `item_reference` resolved from the store), or the 400 OpenAI answers: an unknown id, a function call output
 * with no call before it, `reasoning.effort` to a gpt-4-family model, a chat-only token limit.
 */
export function resolveResponses(
  body: Json,
  items: Map<string, Json>,
  responses: Map<string, Json[]>,
): { conversation: Json[] } | Violation {
  const model = String(body.model ?? '');
  if (/^gpt-4/.test(model) && isRecord(body.reasoning) && body.reasoning.effort !== undefined) {
    return openaiError(
      "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
      'reasoning.effort',
      'unsupported_parameter',
    );
  }
  for (const k of ['max_tokens', 'max_completion_tokens', 'messages']) {
    if (body[k] !== undefined) return openaiError(`Unsupported parameter: '${k}'.`, k, 'unsupported_parameter');
  }
  const conversation: Json[] = [];
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    const prior = responses.get(String(body.previous_response_id));
    if (!prior) {
      return openaiError(
        `Previous response with id '${String(body.previous_response_id)}' not found.`,
        'previous_response_id',
        'previous_response_not_found',
      );
    }
    conversation.push(...prior);
  }
  const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : records(body.input);
  for (const item of input) {
    if (item.type === 'item_reference') {
      const found = items.get(String(item.id));
      if (!found) return openaiError(`Item with id '${String(item.id)}' not found.`, 'input', null);
      conversation.push(found);
    } else conversation.push(item);
  }
  const calls = new Set<string>();
  for (const item of conversation) {
    if (item.type === 'function_call' || item.type === 'custom_tool_call') calls.add(String(item.call_id));
    if (
      (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') &&
      !calls.has(String(item.call_id))
    ) {
      return openaiError(
        `No tool call found for function call output with call_id ${String(item.call_id)}.`,
        'input',
        null,
      );
    }
  }
  return { conversation };
}

// --- OpenAI chat ---

function chatUsage(body: Json, a: Action) {
  const prompt = tokens(body.messages);
  const completion = Math.ceil((a.text.length + (a.call?.args.length ?? 0)) / 4);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function chatJson(body: Json, a: Action, id: number): Json {
  const message: Json = { role: 'assistant', content: a.text };
  if (a.reasoning && reasons(String(body.model))) message.reasoning_content = a.reasoning;
  if (a.call) {
    message.tool_calls = [{
      id: `call_${id}`,
      type: 'function',
      function: { name: a.call.name, arguments: a.call.args },
    }];
  }
  return {
    id: `chatcmpl-${id}`,
    object: 'chat.completion',
    created: 1,
    model: body.model,
    choices: [{ index: 0, message, finish_reason: a.call ? 'tool_calls' : 'stop' }],
    usage: chatUsage(body, a),
  };
}

/** Halves of `s`, so a stream carries each piece in more than one delta. */
const halves = (s: string) => [s.slice(0, Math.ceil(s.length / 2)), s.slice(Math.ceil(s.length / 2))];

function chatStream(body: Json, a: Action, id: number): string[] {
  const withUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
  const frame = (delta: Json, finish: string | null = null) => {
    const c: Json = {
      id: `chatcmpl-${id}`,
      object: 'chat.completion.chunk',
      created: 1,
      model: body.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    };
    if (withUsage) c.usage = null;
    return `data: ${JSON.stringify(c)}\n\n`;
  };
  const out = [frame({ role: 'assistant', content: '' })];
  if (a.reasoning && reasons(String(body.model))) {
    for (const r of halves(a.reasoning)) out.push(frame({ reasoning_content: r }));
  }
  for (const t of halves(a.text)) out.push(frame({ content: t }));
  if (a.call) {
    out.push(frame({
      tool_calls: [{ index: 0, id: `call_${id}`, type: 'function', function: { name: a.call.name, arguments: '' } }],
    }));
    for (const piece of halves(a.call.args)) {
      out.push(frame({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
    }
  }
  out.push(frame({}, a.call ? 'tool_calls' : 'stop'));
  if (withUsage) {
    out.push(
      `data: ${
        JSON.stringify({
          id: `chatcmpl-${id}`,
          object: 'chat.completion.chunk',
          created: 1,
          model: body.model,
          choices: [],
          usage: chatUsage(body, a),
        })
      }\n\n`,
    );
  }
  out.push('data: [DONE]\n\n');
  return out;
}

// --- Anthropic Messages ---

function messagesBlocks(a: Action, id: number): Json[] {
  const blocks: Json[] = [];
  if (a.signature) blocks.push({ type: 'thinking', thinking: a.reasoning, signature: a.signature });
  blocks.push({ type: 'text', text: a.text });
  if (a.call) blocks.push({ type: 'tool_use', id: `toolu_${id}`, name: a.call.name, input: JSON.parse(a.call.args) });
  return blocks;
}

function messagesJson(body: Json, a: Action, id: number): Json {
  return {
    id: `msg_${id}`,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content: messagesBlocks(a, id),
    stop_reason: a.call ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: tokens(body.messages), output_tokens: Math.ceil(a.text.length / 4) + 5 },
  };
}

function messagesStream(body: Json, a: Action, id: number): string[] {
  const ev = (name: string, data: Json) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
  const input = tokens(body.messages);
  const out = [
    ev('message_start', {
      message: {
        ...messagesJson(body, a, id),
        content: [],
        stop_reason: null,
        usage: { input_tokens: input, output_tokens: 1 },
      },
    }),
  ];
  messagesBlocks(a, id).forEach((b, index) => {
    if (b.type === 'thinking') {
      out.push(ev('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }));
      for (const t of halves(String(b.thinking))) {
        out.push(ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: t } }));
      }
      out.push(ev('content_block_delta', { index, delta: { type: 'signature_delta', signature: b.signature } }));
    } else if (b.type === 'text') {
      out.push(ev('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      for (const t of halves(String(b.text))) {
        out.push(ev('content_block_delta', { index, delta: { type: 'text_delta', text: t } }));
      }
    } else {
      out.push(ev('content_block_start', { index, content_block: { ...b, input: {} } }));
      for (const piece of halves(JSON.stringify(b.input))) {
        out.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }));
      }
    }
    out.push(ev('content_block_stop', { index }));
  });
  out.push(ev('message_delta', {
    delta: { stop_reason: a.call ? 'tool_use' : 'end_turn', stop_sequence: null },
    usage: { input_tokens: input, output_tokens: Math.ceil(a.text.length / 4) + 5 },
  }));
  out.push(ev('message_stop', {}));
  return out;
}

// --- OpenAI Responses ---

function responsesJson(body: Json, a: Action, id: number): Json {
  const output: Json[] = [{
    type: 'message',
    id: `msg_${id}`,
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: a.text, annotations: [], logprobs: [] }],
  }];
  if (a.call) {
    output.push({
      type: 'function_call',
      id: `fc_${id}`,
      call_id: `call_${id}`,
      name: a.call.name,
      arguments: a.call.args,
      status: 'completed',
    });
  }
  const input = tokens(body.input);
  const out = Math.ceil((a.text.length + (a.call?.args.length ?? 0)) / 4);
  return {
    id: `resp_${id}`,
    object: 'response',
    created_at: 1,
    status: 'completed',
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    store: body.store !== false,
    tools: body.tools ?? [],
    usage: {
      input_tokens: input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: out,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + out,
    },
  };
}

function responsesStream(response: Json): string[] {
  let seq = 0;
  const ev = (type: string, data: Json) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const pending = { ...response, status: 'in_progress', output: [], usage: null };
  const out = [ev('response.created', { response: pending }), ev('response.in_progress', { response: pending })];
  records(response.output).forEach((item, output_index) => {
    if (item.type === 'message') {
      const text = String(records(item.content)[0]!.text);
      out.push(ev('response.output_item.added', {
        output_index,
        item: { ...item, status: 'in_progress', content: [] },
      }));
      const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
      out.push(ev('response.content_part.added', { item_id: item.id, output_index, content_index: 0, part }));
      for (const delta of halves(text)) {
        out.push(ev('response.output_text.delta', {
          item_id: item.id,
          output_index,
          content_index: 0,
          delta,
          logprobs: [],
        }));
      }
      out.push(
        ev('response.output_text.done', { item_id: item.id, output_index, content_index: 0, text, logprobs: [] }),
      );
      out.push(ev('response.content_part.done', {
        item_id: item.id,
        output_index,
        content_index: 0,
        part: { ...part, text },
      }));
    } else {
      out.push(ev('response.output_item.added', {
        output_index,
        item: { ...item, status: 'in_progress', arguments: '' },
      }));
      for (const delta of halves(String(item.arguments))) {
        out.push(ev('response.function_call_arguments.delta', { item_id: item.id, output_index, delta }));
      }
      out.push(ev('response.function_call_arguments.done', {
        item_id: item.id,
        output_index,
        arguments: item.arguments,
      }));
    }
    out.push(ev('response.output_item.done', { output_index, item }));
  });
  out.push(ev('response.completed', { response }));
  return out;
}
