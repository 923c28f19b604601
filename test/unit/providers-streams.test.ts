// Streams through the adapters against real mock upstreams: usage counted on every stream (the injected
// `include_usage` chunk withheld, Anthropic usage read whatever the caller asked, cache counts kept), and
// the Responses event sequence built from chat chunks of each family.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { callProvider } from '../../src/providers/call.ts';
import { adapterFor } from '../../src/providers/index.ts';
import { chatStreamToResponses } from '../../src/providers/translate/responses-via-chat.ts';
import { type Endpoint, type ProviderResult, UpstreamStreamError } from '../../src/providers/types.ts';
import type { ProviderKey } from '../../src/resources/schema.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { anthropicEvents, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';

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

function stream(family: 'openai' | 'compatible' | 'anthropic', endpoint: Endpoint, body: Json, forTranslation = false) {
  const adapter = family === 'anthropic' ? 'anthropic' : 'openai';
  const key = {
    id: 'k',
    provider: family === 'compatible' ? 'deepseek' : adapter,
    adapter,
    api_key: 'sk',
    api_base: family === 'anthropic' ? ant.url : oai.base,
  } as ProviderKey;
  return callProvider(adapterFor(adapter)!, {
    endpoint,
    body: { model: 'up', stream: true, ...body },
    stream: true,
    key,
    upstream: fetchUpstream(),
    signal: new Cancel(),
    callerModel: 'alias',
    forTranslation,
  });
}

const dec = new TextDecoder();
async function drain(r: ProviderResult): Promise<string> {
  assert.equal(r.kind, 'stream');
  if (r.kind !== 'stream') return '';
  let out = '';
  for await (const c of r.chunks) out += dec.decode(c);
  return out;
}

const sse = (events: unknown[]) => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
const renamed = (text: string) => text.replaceAll('"model":"up"', '"model":"alias"');
const USAGE = {
  id: 'chatcmpl-mock',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'up',
  choices: [],
  usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13, prompt_tokens_details: { cached_tokens: 8 } },
};
const finish = { ...chunk('up', ''), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] };

describe('usage on every OpenAI-wire stream', () => {
  const CASES: {
    name: string;
    endpoint: Endpoint;
    options?: unknown;
    injected: boolean;
    callerSeesUsage: boolean;
  }[] = [
    { name: 'chat, no stream_options', endpoint: 'chat', injected: true, callerSeesUsage: false },
    {
      name: 'chat, include_usage false',
      endpoint: 'chat',
      options: { include_usage: false },
      injected: false,
      callerSeesUsage: false,
    },
    {
      name: 'chat, include_usage true',
      endpoint: 'chat',
      options: { include_usage: true },
      injected: false,
      callerSeesUsage: true,
    },
    { name: 'legacy completions, no stream_options', endpoint: 'completions', injected: true, callerSeesUsage: false },
  ];
  for (const c of CASES) {
    test(c.name, async () => {
      const asked = c.injected || (c.options as { include_usage?: boolean } | undefined)?.include_usage === true;
      const events = [chunk('up', 'hel'), chunk('up', 'lo'), finish, ...(asked ? [USAGE] : [])];
      oai.script({ sse: events });
      const body = c.options === undefined ? {} : { stream_options: c.options };
      const r = await stream('openai', c.endpoint, { messages: [], prompt: 'p', ...body });
      const got = await drain(r);
      assert.deepEqual(oai.requests.at(-1)!.json!.stream_options, c.injected ? { include_usage: true } : c.options);
      const expected = sse(c.callerSeesUsage || !asked ? events : events.slice(0, -1));
      // Every other byte as the upstream sent it; a chat chunk names the caller's model.
      assert.equal(got, c.endpoint === 'chat' ? renamed(expected) : expected);
      const counted = r.kind === 'stream' ? r.counted?.() : undefined;
      assert.deepEqual(counted, c.injected ? { input: 11, output: 2, cacheRead: 8 } : undefined);
    });
  }

  test('a usage that rides on a content chunk is counted and left in place', async () => {
    const last = { ...finish, usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } };
    oai.script({ sse: [chunk('up', 'x'), last] });
    const r = await stream('openai', 'chat', { messages: [] });
    assert.equal(await drain(r), renamed(sse([chunk('up', 'x'), last])));
    assert.deepEqual(r.kind === 'stream' ? r.counted?.() : undefined, { input: 3, output: 1 });
  });
});

describe('usage on every Anthropic stream', () => {
  const start = (usage: Json) =>
    ['message_start', {
      type: 'message_start',
      message: { id: 'msg_1', model: 'claude', content: [], usage },
    }] as [string, unknown];
  const text = anthropicEvents('claude').slice(1, -2);
  const end = (usage: Json) =>
    [
      ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage }],
      ['message_stop', { type: 'message_stop' }],
    ] as [string, unknown][];

  // `counted`: as a chat caller is told (AISIX's accounting: the prompt without the cache counts, a total with
  // them), the cache counts beside it for the usage event; `translated`: as a translation restating the answer reads it (OpenAI's meaning, cache parts kept).
  const CASES: { name: string; start: Json; delta: Json; counted: Json; translated: Json }[] = [
    {
      name: 'cache counts from message_start survive a message_delta that repeats input_tokens',
      start: { input_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 1 },
      delta: { input_tokens: 5, output_tokens: 9 },
      counted: { input: 5, output: 9, total: 134, cacheRead: 100, cacheCreation: 20, cacheOutsideInput: true },
      translated: { input: 125, output: 9, cacheRead: 100, cacheCreation: 20 },
    },
    {
      name: 'a relay that reports only at the end is counted',
      start: { input_tokens: 0, output_tokens: 0 },
      delta: { input_tokens: 30, cache_read_input_tokens: 10, output_tokens: 4 },
      counted: { input: 30, output: 4, total: 44, cacheRead: 10, cacheOutsideInput: true },
      translated: { input: 40, output: 4, cacheRead: 10 },
    },
  ];
  for (const c of CASES) {
    for (const forTranslation of [false, true]) {
      test(`${forTranslation ? 'a translation' : 'chat caller'} without include_usage: ${c.name}`, async () => {
        ant.script({ events: [start(c.start), ...text, ...end(c.delta)] });
        const r = await stream('anthropic', 'chat', { messages: [{ role: 'user', content: 'q' }] }, forTranslation);
        const got = await drain(r);
        assert.doesNotMatch(got, /"usage"/); // the caller did not ask
        assert.deepEqual(r.kind === 'stream' ? r.counted?.() : undefined, forTranslation ? c.translated : c.counted);
      });
    }
  }

  test('a stream cut before message_stop still counts what message_start said', async () => {
    ant.script({ events: [start({ input_tokens: 50, cache_read_input_tokens: 5 }), ...text] });
    const r = await stream('anthropic', 'chat', { messages: [] });
    await assert.rejects(drain(r), UpstreamStreamError);
    assert.deepEqual(r.kind === 'stream' ? r.counted?.() : undefined, {
      input: 50,
      output: 0,
      total: 55,
      cacheRead: 5,
      cacheOutsideInput: true,
    });
  });

  test("chat caller with include_usage: AISIX's usage chunk (a translation's: OpenAI's)", async () => {
    ant.script({
      events: [start({ input_tokens: 5, cache_read_input_tokens: 100 }), ...text, ...end({ output_tokens: 3 })],
    });
    const got = await drain(
      await stream('anthropic', 'chat', { messages: [], stream_options: { include_usage: true } }),
    );
    const usage = got.split('\n\n').filter((e) => e.includes('"usage"')).map((e) => JSON.parse(e.slice(6)).usage);
    assert.deepEqual(usage, [{ prompt_tokens: 5, completion_tokens: 3, total_tokens: 108 }]);
  });

  test('a translation with include_usage: cached_tokens in the usage chunk', async () => {
    ant.script({
      events: [start({ input_tokens: 5, cache_read_input_tokens: 100 }), ...text, ...end({ output_tokens: 3 })],
    });
    const got = await drain(
      await stream('anthropic', 'chat', { messages: [], stream_options: { include_usage: true } }, true),
    );
    const usage = got.split('\n\n').filter((e) => e.includes('"usage"')).map((e) => JSON.parse(e.slice(6)).usage);
    assert.deepEqual(usage, [{
      prompt_tokens: 105,
      completion_tokens: 3,
      total_tokens: 108,
      prompt_tokens_details: { cached_tokens: 100 },
    }]);
  });

  test('messages caller on an OpenAI-wire target: the cached part reaches counted()', async () => {
    oai.script({ sse: [chunk('up', 'hi'), finish, USAGE] });
    const r = await stream('openai', 'messages', { max_tokens: 5, messages: [{ role: 'user', content: 'q' }] });
    const got = await drain(r);
    assert.match(got, /"usage":\{"input_tokens":11,"output_tokens":2\}/);
    assert.deepEqual(r.kind === 'stream' ? r.counted?.() : undefined, { input: 11, output: 2, cacheRead: 8 });
  });
});

// ---- Responses SSE ------------------------------------------------------------------------------------------

interface Ev {
  event: string;
  data: Json;
}
function events(text: string): Ev[] {
  return text.split('\n\n').filter(Boolean).map((block) => {
    const [ev, data] = block.split('\n');
    return { event: ev!.slice('event: '.length), data: JSON.parse(data!.slice('data: '.length)) as Json };
  });
}

const toolDelta = (tc: Json, finishReason: string | null = null) => ({
  id: 'c',
  model: 'up',
  choices: [{ index: 0, delta: { tool_calls: [tc] }, finish_reason: finishReason }],
});

describe('Responses events from chat streams', () => {
  test("text then a tool call: OpenAI's sequence (each item closed before the next), usage, no [DONE]", async () => {
    oai.script({
      sse: [
        { ...chunk('up', ''), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
        chunk('up', 'Hel'),
        chunk('up', 'lo'),
        toolDelta({ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '' } }),
        toolDelta({ index: 0, function: { arguments: '{"a":' } }),
        toolDelta({ index: 0, function: { arguments: '1}' } }, 'tool_calls'),
        USAGE,
      ],
    });
    const got = await drain(await stream('compatible', 'responses', { input: 'q' }));
    assert.doesNotMatch(got, /\[DONE\]/);
    const evs = events(got);
    assert.deepEqual(evs.map((e) => e.event), [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    assert.deepEqual(evs.map((e) => e.data.sequence_number), evs.map((_, i) => i));
    assert.ok(evs.every((e) => e.data.type === e.event));
    const created = evs[0]!.data.response as Json;
    assert.deepEqual(
      { status: created.status, model: created.model, output: created.output, object: created.object },
      { status: 'in_progress', model: 'alias', output: [], object: 'response' },
    );
    assert.equal(evs[9]!.data.output_index, 1);
    assert.deepEqual(evs[12]!.data.arguments, '{"a":1}');
    const done = evs.at(-1)!.data.response as Json;
    assert.equal(done.id, created.id);
    assert.equal(done.status, 'completed');
    const output = done.output as Json[];
    assert.deepEqual(output.map((o) => o.type), ['message', 'function_call']);
    assert.deepEqual(output[0]!.content, [{ type: 'output_text', text: 'Hello', annotations: [] }]);
    assert.deepEqual(
      [output[1]!.call_id, output[1]!.name, output[1]!.arguments, output[1]!.status],
      ['call_1', 'get', '{"a":1}', 'completed'],
    );
    assert.deepEqual(done.usage, {
      input_tokens: 11,
      input_tokens_details: { cached_tokens: 8 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 13,
    });
  });

  test('through Anthropic: text events, usage with the cache part, counted()', async () => {
    ant.script({
      events: anthropicEvents('claude').map(([n, p]) =>
        n === 'message_start'
          ? [n, { type: n, message: { id: 'm', usage: { input_tokens: 2, cache_read_input_tokens: 6 } } }]
          : [n, p]
      ),
    });
    const r = await stream('anthropic', 'responses', { input: 'q' });
    const evs = events(await drain(r));
    const deltas = evs.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta);
    assert.deepEqual(deltas, ['hello', ' world']);
    const usage = (evs.at(-1)!.data.response as Json).usage as Json;
    assert.deepEqual([usage.input_tokens, usage.input_tokens_details, usage.output_tokens], [
      8,
      { cached_tokens: 6 },
      7,
    ]);
    assert.deepEqual(r.kind === 'stream' ? r.counted?.() : undefined, { input: 8, output: 7, cacheRead: 6 });
  });

  test('a length finish ends in response.incomplete', async () => {
    oai.script({
      sse: [chunk('up', 'cut'), { ...finish, choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }],
    });
    const evs = events(await drain(await stream('compatible', 'responses', { input: 'q' })));
    assert.equal(evs.at(-1)!.event, 'response.incomplete');
    assert.deepEqual((evs.at(-1)!.data.response as Json).incomplete_details, { reason: 'max_output_tokens' });
  });

  const enc = new TextEncoder();
  async function* bytes(...parts: string[]): AsyncGenerator<Uint8Array> {
    for (const p of parts) yield enc.encode(p);
  }
  const collect = async (it: AsyncIterable<Uint8Array>) => {
    let s = '';
    for await (const c of it) s += dec.decode(c);
    return s;
  };

  test('nothing before the first text, call or finish; a cut stream and an error chunk throw', async () => {
    const role = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant' } }] })}\n\n`;
    assert.equal(await collect(chatStreamToResponses(bytes(role, 'data: [DONE]\n\n'), 'm')), '');
    await assert.rejects(
      collect(chatStreamToResponses(bytes(`data: ${JSON.stringify(chunk('m', 'x'))}\n\n`), 'm')),
      (e: unknown) => e instanceof UpstreamStreamError && /before data: \[DONE\]/.test(e.message),
    );
    await assert.rejects(
      collect(chatStreamToResponses(bytes('data: {"error":{"message":"boom"}}\n\n'), 'm')),
      (e: unknown) => e instanceof UpstreamStreamError && e.message === 'boom',
    );
  });

  test('argument fragments before the name wait for it, then go out as one delta', async () => {
    const frag = (tc: Json) => `data: ${JSON.stringify(toolDelta(tc))}\n\n`;
    const out = events(
      await collect(chatStreamToResponses(
        bytes(
          frag({ index: 0, function: { arguments: '{"k"' } }),
          frag({ index: 0, id: 'c9', function: { name: 'f', arguments: ':2}' } }),
          'data: [DONE]\n\n',
        ),
        'm',
      )),
    );
    const deltas = out.filter((e) => e.event === 'response.function_call_arguments.delta').map((e) => e.data.delta);
    assert.deepEqual(deltas, ['{"k":2}']);
    const item = ((out.at(-1)!.data.response as Json).output as Json[])[0]!;
    assert.deepEqual([item.call_id, item.arguments], ['c9', '{"k":2}']);
  });
});
