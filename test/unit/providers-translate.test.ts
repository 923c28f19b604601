// The Anthropic Messages ⇄ OpenAI chat translation, as pure functions: requests (system, images, tools,
// tool results), JSON answers (content blocks, stop reasons, usage) and SSE in both directions, including
// events split across network chunks, tool-call deltas and in-stream errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseSse } from '../../src/providers/sse.ts';
import {
  chatStreamToMessages,
  chatToMessagesResponse,
  messagesToChatRequest,
  translateMessagesRequest,
} from '../../src/providers/translate/messages-via-chat.ts';
import {
  chatToMessagesRequest,
  messagesStreamToChat,
  messagesToChatResponse,
} from '../../src/providers/translate/chat-via-messages.ts';
import { TranslationError } from '../../src/providers/translate/shared.ts';
import { UpstreamStreamError } from '../../src/providers/types.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();

async function* bytes(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield enc.encode(p);
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<string> {
  let out = '';
  for await (const c of it) out += dec.decode(c);
  return out;
}

test('parseSse: events split anywhere, CRLF, comments, multi-line data, a last event without its blank line', async () => {
  const events = [];
  for await (
    const e of parseSse(
      bytes(': hi\r\n\r\nevent: a\r\nda', 'ta: {"x":1}\r\n\r\ndata: one\ndata: two\n\n', 'data: tail'),
    )
  ) events.push(e);
  assert.deepEqual(events, [{ event: 'a', data: '{"x":1}' }, { data: 'one\ntwo' }, { data: 'tail' }]);
});

test('Messages request → chat request: system blocks, images, tool_use and tool_result turns, tools, tool_choice', () => {
  const out = messagesToChatRequest({
    model: 'm',
    max_tokens: 10,
    system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }],
    messages: [
      {
        role: 'user',
        content: [{ type: 'text', text: 'look' }, {
          type: 'image',
          source: { type: 'base64', media_type: 'image/png', data: 'AAA' },
        }],
      },
      {
        role: 'assistant',
        content: [{ type: 'text', text: 'calling' }, { type: 'tool_use', id: 't1', name: 'get', input: { q: 1 } }],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'result' }] }, {
          type: 'text',
          text: 'thanks',
        }],
      },
    ],
    tools: [{ name: 'get', description: 'd', input_schema: { type: 'object', properties: {} } }],
    tool_choice: { type: 'tool', name: 'get', disable_parallel_tool_use: true },
    top_k: 5,
  });
  assert.deepEqual(out, {
    model: 'm',
    max_tokens: 10,
    messages: [
      { role: 'system', content: 'a\n\nb' },
      {
        role: 'user',
        content: [{ type: 'text', text: 'look' }, {
          type: 'image_url',
          image_url: { url: 'data:image/png;base64,AAA' },
        }],
      },
      {
        role: 'assistant',
        content: 'calling',
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'get', arguments: '{"q":1}' } }],
      },
      { role: 'tool', tool_call_id: 't1', content: 'result' },
      { role: 'user', content: 'thanks' },
    ],
    tools: [{
      type: 'function',
      function: { name: 'get', description: 'd', parameters: { type: 'object', properties: {} } },
    }],
    tool_choice: { type: 'function', function: { name: 'get' } },
    parallel_tool_calls: false,
  });
  // A block chat cannot carry is dropped and counted, not refused.
  const dropped = translateMessagesRequest({
    model: 'm',
    messages: [{ role: 'user', content: [{ type: 'document', source: {} }, { type: 'text', text: 'x' }] }],
  });
  assert.equal(dropped.droppedBlocks, 1);
  assert.deepEqual(dropped.body.messages, [{ role: 'user', content: 'x' }]);
});

test('chat answer → Messages answer: tool calls become tool_use blocks; finish reasons map', () => {
  const m = chatToMessagesResponse({
    model: 'up',
    usage: { prompt_tokens: 3, completion_tokens: 2 },
    choices: [{
      index: 0,
      finish_reason: 'tool_calls',
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":2}' } }],
      },
    }],
  }, 'req');
  assert.deepEqual(m.content, [{ type: 'tool_use', id: 'c1', name: 'f', input: { a: 2 } }]);
  assert.equal(m.stop_reason, 'tool_use');
  assert.deepEqual(m.usage, { input_tokens: 3, output_tokens: 2 });
  assert.equal(
    chatToMessagesResponse({ choices: [{ finish_reason: 'length', message: { content: 'x' } }] }, 'req').stop_reason,
    'max_tokens',
  );
});

test('chat SSE → Messages SSE: text then a streamed tool call, usage at the end', async () => {
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ model: 'up', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const out = await collect(chatStreamToMessages(
    bytes(
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hi' }),
      chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, 'tool_calls'),
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 6 } })}\n\n`,
      'data: [DONE]\n\n',
    ),
    'req',
  ));
  const events = out.split('\n\n').filter(Boolean).map((e) =>
    JSON.parse(e.split('\n')[1]!.slice(6)) as Record<string, unknown>
  );
  assert.deepEqual(events.map((e) => e.type), [
    'message_start',
    'content_block_start',
    'content_block_delta',
    'content_block_stop',
    'content_block_start',
    'content_block_delta',
    'content_block_delta',
    'content_block_stop',
    'message_delta',
    'message_stop',
  ]);
  assert.deepEqual(events[4]!.content_block, { type: 'tool_use', id: 'c1', name: 'f', input: {} });
  assert.deepEqual(events[6]!.delta, { type: 'input_json_delta', partial_json: '1}' });
  assert.deepEqual(events[8], {
    type: 'message_delta',
    delta: { stop_reason: 'tool_use', stop_sequence: null },
    usage: { input_tokens: 4, output_tokens: 6 },
  });
});

test('chat SSE → Messages SSE: nothing at all is emitted for an empty upstream stream; an error chunk throws', async () => {
  assert.equal(await collect(chatStreamToMessages(bytes(), 'm')), '');
  await assert.rejects(
    collect(chatStreamToMessages(bytes('data: {"error":{"message":"boom"}}\n\n'), 'm')),
    (e: unknown) => e instanceof UpstreamStreamError && e.message === 'boom',
  );
  // A stream cut before `data: [DONE]` is no whole answer: no message_stop, an error instead.
  const chunk = JSON.stringify({ id: 'c1', model: 'm', choices: [{ index: 0, delta: { content: 'hi' } }] });
  await assert.rejects(
    collect(chatStreamToMessages(bytes(`data: ${chunk}\n\n`), 'm')),
    (e: unknown) => e instanceof UpstreamStreamError && e.message === 'upstream stream ended before data: [DONE]',
  );
});

test('chat request → Messages request: system/developer, tool messages merged, max_tokens default, stop, n > 1 refused', () => {
  const out = chatToMessagesRequest({
    model: 'c',
    messages: [
      { role: 'developer', content: 'dev' },
      {
        role: 'user',
        content: [{ type: 'text', text: 'q' }, { type: 'image_url', image_url: { url: 'https://x/img.png' } }],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }, {
          id: 'b',
          type: 'function',
          function: { name: 'g', arguments: '{"z":1}' },
        }],
      },
      { role: 'tool', tool_call_id: 'a', content: 'ra' },
      { role: 'tool', tool_call_id: 'b', content: 'rb' },
    ],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
    tool_choice: 'required',
    stop: ['S'],
    temperature: 0.5,
  });
  assert.deepEqual(out, {
    model: 'c',
    max_tokens: 4096,
    system: 'dev',
    messages: [
      {
        role: 'user',
        content: [{ type: 'text', text: 'q' }, { type: 'image', source: { type: 'url', url: 'https://x/img.png' } }],
      },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'a', name: 'f', input: {} }, {
          type: 'tool_use',
          id: 'b',
          name: 'g',
          input: { z: 1 },
        }],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 'a', content: 'ra' }, {
          type: 'tool_result',
          tool_use_id: 'b',
          content: 'rb',
        }],
      },
    ],
    stop_sequences: ['S'],
    temperature: 0.5,
    tools: [{ name: 'f', input_schema: { type: 'object', properties: {} } }],
    tool_choice: { type: 'any' },
  });
  assert.throws(() => chatToMessagesRequest({ model: 'c', n: 2, messages: [] }), TranslationError);
});

test("Messages answer → chat answer: text and tool_use, stop reasons, AISIX's usage (a translation's: OpenAI's)", () => {
  const r = messagesToChatResponse({
    id: 'msg_1',
    model: 'claude',
    stop_reason: 'tool_use',
    content: [{ type: 'text', text: 'let me' }, { type: 'tool_use', id: 't', name: 'f', input: { a: 1 } }],
    usage: { input_tokens: 2, cache_read_input_tokens: 3, output_tokens: 4 },
  }, 'req');
  assert.deepEqual(r.choices, [{
    index: 0,
    finish_reason: 'tool_calls',
    message: {
      role: 'assistant',
      content: 'let me',
      tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
    },
  }]);
  // A chat caller: the prompt without the cache read, a total with it, no details (AISIX's accounting).
  assert.deepEqual(r.usage, { prompt_tokens: 2, completion_tokens: 4, total_tokens: 9 });
  assert.equal(r.id, 'chatcmpl-msg_1');
  // A translation that restates it reads OpenAI's meaning: cached input inside the prompt.
  const forTranslation = messagesToChatResponse(
    {
      id: 'msg_1',
      model: 'claude',
      usage: { input_tokens: 2, cache_read_input_tokens: 3, output_tokens: 4 },
    },
    'req',
    true,
  );
  assert.deepEqual(forTranslation.usage, {
    prompt_tokens: 5,
    completion_tokens: 4,
    total_tokens: 9,
    prompt_tokens_details: { cached_tokens: 3 },
  });
});

test('Messages SSE → chat SSE: tool-call deltas, finish, usage chunk, [DONE]; a cut stream or an error event throws', async () => {
  const ev = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  const out = await collect(messagesStreamToChat(
    bytes(
      ev('message_start', {
        type: 'message_start',
        message: { id: 'msg_9', model: 'claude', usage: { input_tokens: 7, output_tokens: 1 } },
      }),
      ev('content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id: 'tu', name: 'f', input: {} },
      }),
      ev('content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'input_json_delta', partial_json: '{"a":1}' },
      }),
      ev('content_block_stop', { type: 'content_block_stop', index: 0 }),
      ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } }),
      ev('message_stop', { type: 'message_stop' }),
    ),
    'req',
    true,
  ));
  const datas = out.split('\n\n').filter(Boolean).map((e) => e.slice(6));
  assert.equal(datas.at(-1), '[DONE]');
  const chunks = datas.slice(0, -1).map((d) =>
    JSON.parse(d) as {
      id: string;
      model: string;
      choices: { delta: unknown; finish_reason: string | null }[];
      usage?: unknown;
    }
  );
  assert.equal(chunks[0]!.id, 'chatcmpl-msg_9');
  assert.deepEqual(chunks[1]!.choices[0]!.delta, {
    tool_calls: [{ index: 0, id: 'tu', type: 'function', function: { name: 'f', arguments: '' } }],
  });
  assert.deepEqual(chunks[2]!.choices[0]!.delta, { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] });
  assert.equal(chunks[3]!.choices[0]!.finish_reason, 'tool_calls');
  assert.deepEqual(chunks[4]!.usage, { prompt_tokens: 7, completion_tokens: 9, total_tokens: 16 });

  await assert.rejects(
    collect(messagesStreamToChat(bytes(ev('message_start', { type: 'message_start', message: {} })), 'm', false)),
    UpstreamStreamError,
  );
  await assert.rejects(
    collect(
      messagesStreamToChat(
        bytes(ev('error', { type: 'error', error: { type: 'overloaded_error', message: 'busy' } })),
        'm',
        false,
      ),
    ),
    (e: unknown) => e instanceof UpstreamStreamError && e.message === 'busy',
  );
});
