// Stateful Responses on translated targets (docs/routing.md "Responses state"): `item_reference` and
// `previous_response_id` resolved from the store of the key that asked, through app.request() against mocks
// that enforce OpenAI's and Anthropic's tool pairing; unknown, foreign, unstored and expired ids are a 400
// naming the id, never a silent drop.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicMessage } from '../support/mock-anthropic.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { BASE_CONFIG } from '../support/platform.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';
import { MemoryExactStore } from '../../src/cache/store.ts';
import { TerminalEventReader } from '../../src/responses/state.ts';
import { ResponsesStore } from '../../src/responses/store.ts';
import { until } from '../support/until.ts';

const A = 'sk-state-a';
const B = 'sk-state-b';
let nowMs = Date.UTC(2026, 0, 1, 12, 0, 0);

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: a, key_env: KEY_A, allowed_models: ["*"] }
  - { display_name: b, key_env: KEY_B, allowed_models: ["*"] }
`,
  {
    // A 1 s keep-alive: a stream whose upstream is slower is committed before any target answered.
    config: `${BASE_CONFIG}responses_store: { ttl_secs: 60 }\ndownstream: { sse_keepalive_interval_secs: 1 }\n`,
    env: { KEY_A: A, KEY_B: B },
    now: () => new Date(nowMs),
  },
  { rules: true },
);

type Json = Record<string, unknown>;
const post = async (body: Json, key = A) => {
  const res = await rig.post('/v1/responses', body, key);
  return { status: res.status, json: await res.json() as Json };
};

function toolCallAnswer(model: string, callId: string, text: string | null = null): Json {
  return {
    ...chatCompletion(model),
    choices: [{
      index: 0,
      message: {
        role: 'assistant',
        content: text,
        tool_calls: [{ id: callId, type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
      },
      finish_reason: 'tool_calls',
    }],
  };
}

const TOOLS = [{ type: 'function', name: 'weather', parameters: { type: 'object', properties: {} } }];
const SYSTEM = { role: 'system', content: 'be brief' };
const USER = { role: 'user', content: [{ type: 'input_text', text: 'weather in Oslo?' }] };

/** The output item of `type` in a Responses answer. */
function itemOf(answer: Json, type: string): Json {
  const item = (answer.output as Json[]).find((i) => i.type === type);
  assert.ok(item, `no ${type} item in ${JSON.stringify(answer.output)}`);
  return item;
}

function messageOf(answer: Json): string {
  return String((answer.error as Json | undefined)?.message);
}

describe('item_reference (the AI SDK with store: true)', () => {
  test('a function call by reference then its output: the OpenAI-wire upstream gets the call and its output', async () => {
    rig.mock.script({ body: toolCallAnswer('deep-upstream', 'call_1', 'Let me check.') });
    const turn1 = await post({ model: 'deep', input: [SYSTEM, USER], tools: TOOLS });
    assert.equal(turn1.status, 200);
    const fc = itemOf(turn1.json, 'function_call');
    const msg = itemOf(turn1.json, 'message');
    assert.match(String(fc.id), /^fc_/);

    const turn2 = await post({
      model: 'deep',
      tools: TOOLS,
      input: [
        SYSTEM,
        USER,
        { type: 'item_reference', id: msg.id },
        { type: 'item_reference', id: fc.id },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
    });
    assert.equal(turn2.status, 200, JSON.stringify(turn2.json));
    assert.deepEqual(rig.mock.requests.at(-1)!.json!.messages, [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'weather in Oslo?' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]);
  });

  test('on Anthropic: the tool_use and its tool_result pair, the text before the call is kept', async () => {
    rig.anth.script({
      body: {
        ...anthropicMessage('claude-upstream'),
        content: [
          { type: 'text', text: 'Let me check with a tool.' },
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } },
        ],
        stop_reason: 'tool_use',
      },
    });
    const turn1 = await post({ model: 'claude', input: [SYSTEM, USER], tools: TOOLS });
    assert.equal(turn1.status, 200, JSON.stringify(turn1.json));
    const refs = (turn1.json.output as Json[]).map((i) => ({ type: 'item_reference', id: i.id }));
    const turn2 = await post({
      model: 'claude',
      tools: TOOLS,
      input: [SYSTEM, USER, ...refs, { type: 'function_call_output', call_id: 'toolu_1', output: 'sunny' }],
    });
    assert.equal(turn2.status, 200, JSON.stringify(turn2.json));
    const sent = rig.anth.requests.at(-1)!.json!.messages as Json[];
    assert.deepEqual(sent.slice(1), [
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me check with a tool.' },
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
    ]);
  });

  test('a reference to an assistant message keeps its text', async () => {
    rig.mock.script({ body: chatCompletion('deep-upstream', 'Oslo is sunny.') });
    const turn1 = await post({ model: 'deep', input: 'weather?' });
    const msg = itemOf(turn1.json, 'message');
    assert.match(String(msg.id), /^msg_/);
    const turn2 = await post({
      model: 'deep',
      input: [{ role: 'user', content: 'weather?' }, { type: 'item_reference', id: msg.id }, {
        role: 'user',
        content: 'and tomorrow?',
      }],
    });
    assert.equal(turn2.status, 200, JSON.stringify(turn2.json));
    assert.deepEqual(rig.mock.requests.at(-1)!.json!.messages, [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: 'Oslo is sunny.' },
      { role: 'user', content: 'and tomorrow?' },
    ]);
  });

  test('an unknown reference: a 400 naming the item and its place, nothing sent', async () => {
    const before = rig.mock.requests.length;
    const r = await post({ model: 'deep', input: ['hi', { type: 'item_reference', id: 'fc_nope' }] });
    assert.equal(r.status, 400);
    assert.match(messageOf(r.json), /^`input\[1\]`: `item_reference` "fc_nope" is not known: /);
    assert.equal(rig.mock.requests.length, before);
  });
});

describe('previous_response_id on a translated target', () => {
  for (const stream of [false, true]) {
    test(`continues from a ${stream ? 'streamed' : 'JSON'} first turn`, async () => {
      rig.mock.script(stream ? {} : { body: chatCompletion('deep-upstream', 'hello world') });
      const res = await rig.post('/v1/responses', { model: 'deep', input: 'first', stream }, A);
      assert.equal(res.status, 200);
      const text = await res.text();
      const id = stream
        ? /"type":"response\.completed".*?"id":"(resp_[0-9a-f]+)"/.exec(text)?.[1]
        : (JSON.parse(text) as Json).id as string;
      assert.ok(id, text);
      rig.mock.script({ body: chatCompletion('deep-upstream', 'again to you') });
      const turn2 = await post({ model: 'deep', input: 'again', previous_response_id: id, instructions: 'short' });
      assert.equal(turn2.status, 200, JSON.stringify(turn2.json));
      assert.deepEqual(rig.mock.requests.at(-1)!.json!.messages, [
        { role: 'system', content: 'short' },
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'hello world' },
        { role: 'user', content: 'again' },
      ]);
      // The chain goes on: the second answer holds the whole conversation.
      const turn3 = await post({ model: 'deep', input: 'third', previous_response_id: turn2.json.id });
      assert.equal(turn3.status, 200);
      assert.equal((rig.mock.requests.at(-1)!.json!.messages as Json[]).length, 5);
    });
  }

  test('a stream committed before its target answered is kept too', async () => {
    // The upstream's head comes after the keep-alive interval: the 200 is committed before it.
    rig.mock.script({ delayMs: 1_500 });
    const res = await rig.post('/v1/responses', { model: 'deep', input: 'slow', stream: true }, A);
    const text = await res.text();
    const id = /"type":"response\.completed".*?"id":"(resp_[0-9a-f]+)"/.exec(text)?.[1];
    assert.ok(id, text);
    const r = await post({ model: 'deep', input: 'x', previous_response_id: id });
    assert.equal(r.status, 200, JSON.stringify(r.json));
  });

  // The answer's headers went out before any target answered, so no `x-sluice-dropped`; the access log, written
  // at the stream's end, still names what the serving target's translation dropped.
  test('a stream committed before its target answered names the hosted tools it dropped in the access log', async () => {
    rig.mock.script({ delayMs: 1_500 });
    const res = await rig.app.request('/v1/responses', {
      method: 'POST',
      headers: { authorization: `Bearer ${A}`, 'content-type': 'application/json', 'x-aisix-request-id': 'late-drop' },
      body: JSON.stringify({
        model: 'deep',
        input: 'slow',
        stream: true,
        tools: [{ type: 'web_search' }, ...TOOLS],
      }),
    });
    assert.equal(res.headers.get('x-sluice-dropped'), null, 'committed before the target answered');
    await res.text();
    const line = () =>
      rig.platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === 'late-drop');
    await until(() => line() !== undefined, 5_000, 'the access-log line');
    assert.equal(line()!.dropped, 'web_search');
  });

  test("another key's id: the same 400 as an unknown one, naming the id", async () => {
    const turn1 = await post({ model: 'deep', input: 'mine' }, A);
    const id = String(turn1.json.id);
    const before = rig.mock.requests.length;
    const r = await post({ model: 'deep', input: 'x', previous_response_id: id }, B);
    assert.equal(r.status, 400);
    assert.equal((r.json.error as Json).type, 'invalid_request_error');
    assert.ok(messageOf(r.json).startsWith(`\`previous_response_id\` "${id}" is not known: `), messageOf(r.json));
    const unknown = await post({ model: 'deep', input: 'x', previous_response_id: 'resp_unknown' }, B);
    assert.equal(unknown.status, 400);
    assert.equal(messageOf(unknown.json), messageOf(r.json).replace(id, 'resp_unknown'));
    assert.equal(rig.mock.requests.length, before);
  });

  test('store: false keeps nothing: its id is then unknown', async () => {
    const turn1 = await post({ model: 'deep', input: 'forget me', store: false });
    assert.equal(turn1.status, 200);
    const r = await post({ model: 'deep', input: 'x', previous_response_id: turn1.json.id });
    assert.equal(r.status, 400);
    assert.match(messageOf(r.json), /is not known/);
    const fc = itemOf(turn1.json, 'message');
    const ref = await post({ model: 'deep', input: [{ type: 'item_reference', id: fc.id }] });
    assert.equal(ref.status, 400);
  });

  test('an entry lives ttl_secs on the gateway clock', async () => {
    const turn1 = await post({ model: 'deep', input: 'soon gone' });
    nowMs += 59_000;
    assert.equal((await post({ model: 'deep', input: 'x', previous_response_id: turn1.json.id })).status, 200);
    nowMs += 2_000;
    const r = await post({ model: 'deep', input: 'x', previous_response_id: turn1.json.id });
    assert.equal(r.status, 400);
    assert.match(messageOf(r.json), /is not known/);
  });

  test('native OpenAI target: previous_response_id and references it does not know reach OpenAI unchanged', async () => {
    rig.mock.script({ body: { id: 'resp_native', object: 'response', output: [], usage: { input_tokens: 1 } } });
    const body = {
      model: 'gpt',
      input: [{ type: 'item_reference', id: 'msg_openai' }],
      previous_response_id: 'resp_o',
    };
    const r = await post(body);
    assert.equal(r.status, 200);
    const sent = rig.mock.requests.at(-1)!;
    assert.equal(sent.url, '/v1/responses');
    assert.deepEqual(sent.json!.input, body.input);
    assert.equal(sent.json!.previous_response_id, 'resp_o');
  });
});

describe('responses_store.max_entry_bytes', () => {
  const small = proxyOverMocks(
    (openaiBase, anthropicBase) =>
      `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: a, key_env: KEY_A, allowed_models: ["*"] }
`,
    { config: `${BASE_CONFIG}responses_store: { max_entry_bytes: 400 }\n`, env: { KEY_A: A } },
  );

  test('a response whose entry is over the bound is not kept; a small one is', async () => {
    const ask = async (input: string) => {
      const res = await small.post('/v1/responses', { model: 'deep', input }, A);
      const id = ((await res.json()) as Json).id;
      const next = await small.post('/v1/responses', { model: 'deep', input: 'x', previous_response_id: id }, A);
      await next.arrayBuffer();
      return next.status;
    };
    assert.equal(await ask('short'), 200);
    assert.equal(await ask('long '.repeat(100)), 400);
  });
});

describe('TerminalEventReader', () => {
  test('reads the terminal response however the bytes are cut, multi-byte text included', () => {
    const response = {
      id: 'resp_1',
      output: [{ type: 'message', content: [{ type: 'output_text', text: 'héllo ☃' }] }],
    };
    const sse = `event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1"}}\n\n` +
      `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"x"}\n\n` +
      `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response })}\n\n`;
    const bytes = new TextEncoder().encode(sse);
    for (const size of [1, 3, 7, 64, bytes.length]) {
      const reader = new TerminalEventReader();
      for (let i = 0; i < bytes.length; i += size) reader.push(bytes.subarray(i, i + size));
      assert.deepEqual(reader.response, response, `cut every ${size} bytes`);
    }
  });
});

describe("the store's owner of a key's entries", () => {
  test('the first 32 hex digits of SHA-256 of `responses\\0` and the key id, the same call after call', async () => {
    const store = new ResponsesStore({
      store: new MemoryExactStore({ maxEntries: 10, maxBytes: 1 << 20, clock: () => 0 }),
      ttlMs: 1_000,
      maxEntryBytes: 1 << 20,
    });
    const { createHash } = await import('node:crypto');
    for (const id of ['key-1', 'key-2', 'key-1']) {
      const want = createHash('sha256').update(`responses\0${id}`).digest('hex').slice(0, 32);
      assert.equal(store.owner(id), want, id);
    }
    assert.notEqual(store.owner('key-1'), store.owner('key-2'));
  });
});
