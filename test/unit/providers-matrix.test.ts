// Every ingress (chat, messages, responses, count_tokens) × upstream family (openai, an OpenAI-compatible
// vendor, anthropic, echo) × feature (system, tools, tool results, parallel calls, images, documents, JSON
// mode, stop, reasoning, cache markers), as tables through `callProvider` against real mock upstreams that
// record what they receive.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { callProvider } from '../../src/providers/call.ts';
import { servesResponsesNatively, TOKENS_ESTIMATED_HEADER } from '../../src/providers/translate/via-chat.ts';
import { adapterFor } from '../../src/providers/index.ts';
import type { Endpoint, ProviderAdapter, ProviderCall, ProviderResult } from '../../src/providers/types.ts';
import type { AdapterName, ProviderKey } from '../../src/resources/schema.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { COUNTED_INPUT_TOKENS, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';

type Family = 'openai' | 'compatible' | 'anthropic' | 'echo';
type Json = Record<string, unknown>;

let oai: MockUpstream;
let ant: MockAnthropic;
before(async () => {
  oai = await startMockUpstream();
  ant = await startMockAnthropic();
});
after(async () => {
  await oai.close();
  await ant.close();
});

function keyOf(family: Family): ProviderKey {
  const adapter: AdapterName = family === 'anthropic' ? 'anthropic' : family === 'echo' ? 'echo' : 'openai';
  const provider = family === 'compatible' ? 'deepseek' : adapter;
  const api_base = family === 'anthropic' ? ant.url : family === 'echo' ? undefined : oai.base;
  return { id: `k-${family}`, provider, adapter, api_key: 'sk-test', ...(api_base ? { api_base } : {}) } as ProviderKey;
}

function call(family: Family, endpoint: Endpoint, body: Json, extra: Partial<ProviderCall> = {}) {
  const key = keyOf(family);
  return callProvider(adapterFor(key.adapter)!, {
    endpoint,
    body: { model: 'up-model', ...body },
    stream: body.stream === true,
    key,
    upstream: fetchUpstream(),
    signal: new Cancel(),
    ...extra,
  });
}

/** What the upstream of `family` received last. */
function sent(family: Family): { url: string; json: Json } {
  const r = family === 'anthropic' ? ant.requests.at(-1)! : oai.requests.at(-1)!;
  return { url: r.url, json: r.json ?? {} };
}

function pick(o: Json, keys: string[]): Json {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
}

const dec = new TextDecoder();
async function text(r: ProviderResult): Promise<string> {
  assert.equal(r.kind, 'stream');
  if (r.kind !== 'stream') return '';
  let out = '';
  for await (const c of r.chunks) out += dec.decode(c);
  return out;
}

function json(r: ProviderResult): Json {
  assert.equal(r.kind, 'response');
  return r.kind === 'response' ? JSON.parse(r.body) as Json : {};
}

const TOOL = { type: 'function', function: { name: 'get', description: 'd', parameters: { type: 'object' } } };
const IMAGE = 'data:image/png;base64,AAA';

// ---- request translation --------------------------------------------------------------------------------

interface RequestRow {
  feature: string;
  ingress: Endpoint;
  family: Family;
  body: Json;
  /** The upstream path, and the members of its body this row is about. */
  path: string;
  expect: Json;
}

const REQUESTS: RequestRow[] = [
  // chat → OpenAI-wire: forwarded untouched.
  {
    feature: 'system, tools, stop, JSON mode pass through',
    ingress: 'chat',
    family: 'openai',
    path: '/v1/chat/completions',
    body: {
      messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'q' }],
      tools: [TOOL],
      stop: ['X'],
      response_format: { type: 'json_object' },
    },
    expect: {
      messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'q' }],
      tools: [TOOL],
      stop: ['X'],
      response_format: { type: 'json_object' },
    },
  },
  // chat → Anthropic.
  {
    feature: 'system: plain strings joined; blocks keep cache_control',
    ingress: 'chat',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'long', cache_control: { type: 'ephemeral' } }] },
        { role: 'system', content: 'short' },
        { role: 'user', content: 'q' },
      ],
    },
    expect: {
      system: [{ type: 'text', text: 'long', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'short' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'q' }] }],
    },
  },
  {
    feature: 'cache markers on text blocks and tools; a string user message as one text block (AISIX)',
    ingress: 'chat',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'doc', cache_control: { type: 'ephemeral' } }, {
            type: 'text',
            text: ' ',
          }],
        },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'and?' },
      ],
      tools: [{ ...TOOL, cache_control: { type: 'ephemeral', ttl: '1h' } }],
    },
    expect: {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'doc', cache_control: { type: 'ephemeral' } }] },
        { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
        { role: 'user', content: [{ type: 'text', text: 'and?' }] },
      ],
      tools: [{
        name: 'get',
        description: 'd',
        input_schema: { type: 'object' },
        cache_control: { type: 'ephemeral', ttl: '1h' },
      }],
    },
  },
  {
    feature: 'parallel tool calls and their results in one user turn',
    ingress: 'chat',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'a', type: 'function', function: { name: 'get', arguments: '{"x":1}' } },
            { id: 'b', type: 'function', function: { name: 'get', arguments: '{"x":2}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'a', content: 'ra' },
        { role: 'tool', tool_call_id: 'b', content: 'rb' },
      ],
      parallel_tool_calls: false,
      tool_choice: 'auto',
    },
    expect: {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'a', name: 'get', input: { x: 1 } },
            { type: 'tool_use', id: 'b', name: 'get', input: { x: 2 } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'a', content: 'ra' },
            { type: 'tool_result', tool_use_id: 'b', content: 'rb' },
          ],
        },
      ],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    },
  },
  {
    feature: 'images and stop',
    ingress: 'chat',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: IMAGE } }] }],
      stop: 'END',
    },
    expect: {
      messages: [{
        role: 'user',
        content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAA' } }],
      }],
      stop_sequences: ['END'],
    },
  },
  {
    feature: "reasoning: Anthropic's own thinking and top_k take effect",
    ingress: 'chat',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      messages: [{ role: 'user', content: 'q' }],
      max_tokens: 8000,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      top_k: 5,
    },
    expect: { max_tokens: 8000, thinking: { type: 'enabled', budget_tokens: 2048 }, top_k: 5 },
  },
  // messages → OpenAI-wire (translated).
  {
    feature: 'system turn inside messages kept in place; max_tokens optional',
    ingress: 'messages',
    family: 'openai',
    path: '/v1/chat/completions',
    body: {
      system: 'top',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'system', content: [{ type: 'text', text: 'mid' }] },
        { role: 'user', content: 'b' },
      ],
    },
    expect: {
      messages: [
        { role: 'system', content: 'top' },
        { role: 'user', content: 'a' },
        { role: 'system', content: 'mid' },
        { role: 'user', content: 'b' },
      ],
    },
  },
  {
    feature: 'documents, images in tool results, unknown blocks dropped, thinking → reasoning_effort',
    ingress: 'messages',
    family: 'compatible',
    path: '/v1/chat/completions',
    body: {
      max_tokens: 9,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [
        { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'shot', input: {} }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 't',
              content: [{ type: 'text', text: 'here' }, {
                type: 'image',
                source: { type: 'base64', media_type: 'image/jpeg', data: 'BBB' },
              }],
            },
            {
              type: 'document',
              title: 'a.pdf',
              source: { type: 'base64', media_type: 'application/pdf', data: 'PDF' },
            },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'notes' } },
            { type: 'server_tool_use', id: 'x' },
          ],
        },
      ],
    },
    expect: {
      max_tokens: 9,
      reasoning_effort: 'medium',
      messages: [
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 't', type: 'function', function: { name: 'shot', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 't', content: 'here' },
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,BBB' } },
            { type: 'file', file: { file_data: 'data:application/pdf;base64,PDF', filename: 'a.pdf' } },
            { type: 'text', text: 'notes' },
          ],
        },
      ],
    },
  },
  {
    feature: 'tools, tool_choice, stop, streaming asks for usage',
    ingress: 'messages',
    family: 'openai',
    path: '/v1/chat/completions',
    body: {
      max_tokens: 5,
      stream: true,
      messages: [{ role: 'user', content: 'q' }],
      tools: [{ name: 'get', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }],
      tool_choice: { type: 'any' },
      stop_sequences: ['S'],
    },
    expect: {
      tools: [{ type: 'function', function: { name: 'get', parameters: { type: 'object' } } }],
      tool_choice: 'required',
      stop: ['S'],
      stream_options: { include_usage: true },
    },
  },
  // messages → Anthropic: untouched, cache markers and all.
  {
    feature: 'pass-through keeps cache markers and thinking',
    ingress: 'messages',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      max_tokens: 5,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'q' }],
    },
    expect: {
      thinking: { type: 'enabled', budget_tokens: 1024 },
      system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
    },
  },
  // responses → OpenAI: native, untouched.
  {
    feature: 'native: body forwarded to /responses, previous_response_id included',
    ingress: 'responses',
    family: 'openai',
    path: '/v1/responses',
    body: { input: 'q', previous_response_id: 'resp_1', store: true, tools: [{ type: 'web_search' }] },
    expect: { input: 'q', previous_response_id: 'resp_1', store: true, tools: [{ type: 'web_search' }] },
  },
  // responses → chat (an OpenAI-compatible vendor, Anthropic).
  {
    feature: 'instructions, input items, function calls folded, outputs, hosted tools dropped',
    ingress: 'responses',
    family: 'compatible',
    path: '/v1/chat/completions',
    body: {
      instructions: 'be brief',
      input: [
        { role: 'developer', content: 'dev' },
        {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: 'see' }, {
            type: 'input_image',
            image_url: IMAGE,
            detail: 'low',
          }],
        },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'function_call', call_id: 'c1', name: 'get', arguments: '{"x":1}' },
        { type: 'function_call', call_id: 'c2', name: 'get', arguments: '{"x":2}' },
        { type: 'function_call_output', call_id: 'c1', output: 'r1' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'r2' }] },
      ],
      tools: [{ type: 'function', name: 'get', parameters: { type: 'object' }, strict: true }, {
        type: 'web_search',
      }],
      tool_choice: { type: 'function', name: 'get' },
      max_output_tokens: 100,
      store: false,
    },
    expect: {
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'system', content: 'dev' },
        {
          role: 'user',
          content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: IMAGE, detail: 'low' } }],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'get', arguments: '{"x":1}' } },
            { id: 'c2', type: 'function', function: { name: 'get', arguments: '{"x":2}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'r1' },
        { role: 'tool', tool_call_id: 'c2', content: 'r2' },
      ],
      tools: [{ type: 'function', function: { name: 'get', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'get' } },
      max_tokens: 100,
    },
  },
  {
    feature: 'JSON mode (text.format) and reasoning effort',
    ingress: 'responses',
    family: 'compatible',
    path: '/v1/chat/completions',
    body: {
      input: 'q',
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      reasoning: { effort: 'low' },
    },
    expect: {
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      reasoning_effort: 'low',
    },
  },
  {
    feature: 'through the Anthropic chat translation: system, tools, parallel calls and outputs',
    ingress: 'responses',
    family: 'anthropic',
    path: '/v1/messages',
    body: {
      instructions: 'sys',
      input: [
        { role: 'user', content: 'q' },
        { type: 'function_call', call_id: 'c1', name: 'get', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'get', arguments: '{"y":1}' },
        { type: 'function_call_output', call_id: 'c1', output: 'r1' },
        { type: 'function_call_output', call_id: 'c2', output: 'r2' },
      ],
      tools: [{ type: 'function', name: 'get', parameters: { type: 'object' } }],
    },
    expect: {
      system: 'sys',
      max_tokens: 4096,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'c1', name: 'get', input: {} },
            { type: 'tool_use', id: 'c2', name: 'get', input: { y: 1 } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'c1', content: 'r1' },
            { type: 'tool_result', tool_use_id: 'c2', content: 'r2' },
          ],
        },
      ],
      tools: [{ name: 'get', input_schema: { type: 'object' } }],
    },
  },
  // count_tokens → Anthropic: forwarded untouched.
  {
    feature: 'count_tokens pass-through',
    ingress: 'count_tokens',
    family: 'anthropic',
    path: '/v1/messages/count_tokens',
    body: { messages: [{ role: 'user', content: 'q' }], system: 's' },
    expect: { model: 'up-model', messages: [{ role: 'user', content: 'q' }], system: 's' },
  },
];

describe('request translation: ingress × family × feature', () => {
  for (const row of REQUESTS) {
    test(`${row.ingress} → ${row.family}: ${row.feature}`, async () => {
      const r = await call(row.family, row.ingress, row.body);
      if (r.kind === 'stream') await text(r);
      assert.notEqual(r.kind, 'refused', r.kind === 'refused' ? r.message : '');
      const up = sent(row.family);
      assert.equal(up.url, row.path);
      assert.deepEqual(pick(up.json, Object.keys(row.expect)), row.expect);
    });
  }
});

// ---- refusals -----------------------------------------------------------------------------------------------

const REFUSALS: { ingress: Endpoint; family: Family; body: Json; message: string | RegExp }[] = [
  {
    ingress: 'responses',
    family: 'anthropic',
    body: { input: 'q', previous_response_id: 'resp_1' },
    message: /^`previous_response_id` "resp_1" is not known: /,
  },
  {
    ingress: 'responses',
    family: 'compatible',
    body: { input: 'q', previous_response_id: 'resp_1' },
    message: /send the whole conversation in `input`$/,
  },
  {
    ingress: 'chat',
    family: 'anthropic',
    body: { messages: [{ role: 'user', content: 'q' }], response_format: { type: 'json_object' } },
    message: '`response_format` cannot be sent to this model',
  },
  {
    ingress: 'responses',
    family: 'anthropic',
    body: { input: 'q', text: { format: { type: 'json_object' } } },
    message: '`response_format` cannot be sent to this model',
  },
];

describe('refused without an upstream call', () => {
  for (const row of REFUSALS) {
    test(`${row.ingress} → ${row.family}: ${String(row.message).slice(0, 60)}`, async () => {
      const before = oai.requests.length + ant.requests.length;
      const r = await call(row.family, row.ingress, row.body, { callerModel: 'claude-alias' });
      assert.equal(r.kind, 'refused');
      if (r.kind !== 'refused') return;
      if (typeof row.message === 'string') assert.equal(r.message, row.message);
      else assert.match(r.message, row.message);
      assert.equal(oai.requests.length + ant.requests.length, before);
    });
  }
});

// ---- answers ------------------------------------------------------------------------------------------------

describe("answers in the caller's wire", () => {
  test('count_tokens: the upstream body byte for byte, never streamed', async () => {
    const body = { messages: [{ role: 'user', content: 'q' }] };
    const r = await call('anthropic', 'count_tokens', body, { stream: true });
    assert.equal(r.kind, 'response');
    if (r.kind === 'response') assert.equal(r.body, JSON.stringify({ input_tokens: COUNTED_INPUT_TOKENS }));
  });

  test('responses ← chat JSON: message and function calls as output items, usage, status', async () => {
    oai.script({
      body: {
        id: 'chatcmpl-1',
        model: 'up',
        choices: [{
          index: 0,
          finish_reason: 'length',
          message: {
            role: 'assistant',
            content: 'partial',
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get', arguments: '{"a":1}' } }],
          },
        }],
        usage: {
          prompt_tokens: 10,
          completion_tokens: 5,
          total_tokens: 15,
          prompt_tokens_details: { cached_tokens: 4 },
          completion_tokens_details: { reasoning_tokens: 2 },
        },
      },
    });
    const r = json(await call('compatible', 'responses', { input: 'q' }, { callerModel: 'alias' }));
    assert.match(String(r.id), /^resp_[0-9a-f]{32}$/);
    assert.equal(r.object, 'response');
    assert.equal(r.model, 'alias');
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    const output = r.output as Json[];
    assert.equal(output.length, 2);
    assert.deepEqual(output[0]!.content, [{ type: 'output_text', text: 'partial', annotations: [] }]);
    assert.deepEqual(pick(output[1]!, ['type', 'call_id', 'name', 'arguments', 'status']), {
      type: 'function_call',
      call_id: 'c1',
      name: 'get',
      arguments: '{"a":1}',
      status: 'completed',
    });
    assert.deepEqual(r.usage, {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: 15,
    });
  });

  test('responses ← Anthropic JSON: cache reads are cached input, input includes them', async () => {
    ant.script({
      body: {
        id: 'msg_1',
        type: 'message',
        model: 'claude',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 3, cache_read_input_tokens: 7, cache_creation_input_tokens: 2, output_tokens: 4 },
      },
    });
    const r = json(await call('anthropic', 'responses', { input: 'q' }));
    assert.equal(r.status, 'completed');
    assert.deepEqual(pick(r.usage as Json, ['input_tokens', 'input_tokens_details', 'output_tokens', 'total_tokens']), {
      input_tokens: 12,
      input_tokens_details: { cached_tokens: 7 },
      output_tokens: 4,
      total_tokens: 16,
    });
  });

  test("chat ← Anthropic JSON: AISIX's accounting (prompt without the cache, total with it, no details)", async () => {
    ant.script({
      body: {
        id: 'msg_2',
        model: 'claude',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 3, cache_read_input_tokens: 7, cache_creation_input_tokens: 2, output_tokens: 4 },
      },
    });
    const r = json(await call('anthropic', 'chat', { messages: [{ role: 'user', content: 'q' }] }));
    assert.deepEqual(r.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 16 });
  });

  test("native responses: the upstream's JSON and SSE bytes untouched", async () => {
    const body = { id: 'resp_up', object: 'response', model: 'gpt-x', output: [], usage: { input_tokens: 1 } };
    oai.script({ body });
    const r = await call('openai', 'responses', { input: 'q' });
    assert.equal(r.kind === 'response' ? r.body : '', JSON.stringify(body));
    const events = [{ type: 'response.created', response: { id: 'resp_up' } }, {
      type: 'response.completed',
      response: { id: 'resp_up', usage: { input_tokens: 1, output_tokens: 2 } },
    }];
    oai.script({ sse: events });
    const s = await call('openai', 'responses', { input: 'q', stream: true });
    assert.equal(await text(s), events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n');
    assert.equal(oai.requests.at(-1)!.json!.stream_options, undefined);
    // Its usage, in a shape the proxy's meter does not read, is reported from the terminal event.
    assert.deepEqual(s.kind === 'stream' ? s.counted?.() : undefined, { input: 1, output: 2 });
  });

  test("responses through echo (no network): JSON and SSE answers name the caller's model", async () => {
    const r = json(await call('echo', 'responses', { input: 'hello there' }, { callerModel: 'alias' }));
    assert.equal(r.model, 'alias');
    assert.deepEqual((r.output as Json[])[0]!.content, [{ type: 'output_text', text: 'hello there', annotations: [] }]);
    const s = await text(await call('echo', 'responses', { input: 'hello there', stream: true }));
    const last = JSON.parse(s.trimEnd().split('\n').at(-1)!.slice('data: '.length)) as Json;
    assert.equal(last.type, 'response.completed');
    assert.deepEqual(pick((last.response as Json).usage as Json, ['input_tokens', 'output_tokens']), {
      input_tokens: 2,
      output_tokens: 2,
    });
  });
});

describe('which path a call takes', () => {
  const NATIVE: { model?: string; key: string; adapter: AdapterName; native: boolean }[] = [
    { key: 'openai', adapter: 'openai', native: true },
    { key: '', adapter: 'openai', native: true }, // no vendor named: the adapter's
    { key: 'deepseek', adapter: 'openai', native: false },
    { model: 'openai', key: 'deepseek', adapter: 'openai', native: true }, // the model's provider wins
    { model: 'deepseek', key: 'openai', adapter: 'openai', native: false },
    { key: 'anthropic', adapter: 'anthropic', native: false },
  ];
  for (const n of NATIVE) {
    test(`responses native: model ${n.model ?? '-'}, key ${n.key || '""'}, adapter ${n.adapter} → ${n.native}`, () => {
      const key = { id: 'k', provider: n.key, adapter: n.adapter } as ProviderKey;
      const c = { endpoint: 'responses', key, ...(n.model ? { provider: n.model } : {}) } as ProviderCall;
      assert.equal(servesResponsesNatively(adapterFor(n.adapter)!, c), n.native);
    });
  }

  test('count_tokens never reaches an adapter that only says it serves everything but messages', async () => {
    let called = false;
    const loose: ProviderAdapter = {
      name: 'openai',
      supports: (e) => e !== 'messages',
      call: () => {
        called = true;
        return Promise.resolve({ kind: 'refused', message: 'called' });
      },
    };
    const r = await callProvider(loose, {
      endpoint: 'count_tokens',
      body: { model: 'up' },
      stream: false,
      key: keyOf('openai'),
      upstream: fetchUpstream(),
      signal: new Cancel(),
    });
    assert.equal(r.kind, 'response');
    if (r.kind === 'response') assert.equal(r.headers?.[TOKENS_ESTIMATED_HEADER], 'true');
    assert.equal(called, false);
  });

  for (const family of ['openai', 'echo'] as const) {
    test(`count_tokens → ${family}: a local estimate, marked, no upstream call`, async () => {
      const before = oai.requests.length + ant.requests.length;
      const r = await call(family, 'count_tokens', { messages: [{ role: 'user', content: 'hello there' }] });
      assert.equal(r.kind, 'response');
      if (r.kind !== 'response') return;
      assert.equal(r.status, 200);
      const n = (JSON.parse(r.body) as { input_tokens: number }).input_tokens;
      assert.ok(n > 0 && n < 20, `input_tokens ${n}`);
      assert.deepEqual(r.headers, { [TOKENS_ESTIMATED_HEADER]: 'true' });
      assert.equal(oai.requests.length + ant.requests.length, before);
    });
  }
});
