// Reasoning across translations (docs/translation.md "Reasoning"): a vLLM-style upstream's `reasoning_content`
// as Anthropic `thinking` blocks and Responses `reasoning` items, Claude's thinking as Responses reasoning,
// read by the official SDKs through app.request(); a translated Responses stream's item order checked against
// OpenAI's documented sequence; the model every endpoint's answer names; and what a translation drops named in
// `x-sluice-dropped` and the access log (docs/translation.md "Nothing dropped in silence").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { anthropicMessage } from '../support/mock-anthropic.ts';
import { chunk } from '../support/mock-upstream.ts';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';
import { until } from '../support/until.ts';

type Json = Record<string, unknown>;

const CALLER = 'sk-reasoning-caller';

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: vl, provider: vllm, adapter: openai, api_key: k-vl, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicBase}" }
models:
  - { display_name: r1, provider_key: vl, model_name: deepseek-r1-mock, retries: 0 }
  - { display_name: gpt4o, provider_key: oa, model_name: gpt-4o-mock, retries: 0 }
  - { display_name: emb, provider_key: oa, model_name: embed-mock, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-sonnet-4-5-mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
  { env: { CALLER } },
  { rules: true },
);

const viaApp = (input: string | URL | Request, init?: RequestInit) =>
  Promise.resolve(rig.app.request(input instanceof Request ? input : String(input), init));
const anthropic = () => new Anthropic({ apiKey: CALLER, baseURL: 'http://sluice.test', maxRetries: 0, fetch: viaApp });
const openai = () => new OpenAI({ apiKey: CALLER, baseURL: 'http://sluice.test/v1', maxRetries: 0, fetch: viaApp });

const delta = (d: Json, finish: string | null = null) => ({
  ...chunk('deepseek-r1-mock', ''),
  choices: [{ index: 0, delta: d, finish_reason: finish }],
});
const USAGE = {
  id: 'c',
  model: 'deepseek-r1-mock',
  choices: [],
  usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15 },
};
/** What vLLM and DeepSeek stream: the reasoning first, then the answer. */
const REASONING_STREAM = [
  delta({ role: 'assistant', reasoning_content: 'Think' }),
  delta({ reasoning_content: 'ing.' }),
  delta({ content: 'Ans' }),
  delta({ content: 'wer' }, 'stop'),
  USAGE,
];
const REASONING_JSON = {
  id: 'chatcmpl-r',
  object: 'chat.completion',
  created: 1,
  model: 'deepseek-r1-mock',
  choices: [{
    index: 0,
    message: { role: 'assistant', content: 'Answer', reasoning_content: 'Thinking.' },
    finish_reason: 'stop',
  }],
  usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15 },
};

describe('reasoning_content → Anthropic thinking blocks', () => {
  test('JSON: a thinking block before the text, read by @anthropic-ai/sdk', async () => {
    rig.mock.script({ body: REASONING_JSON });
    const msg = await anthropic().messages.create({
      model: 'r1',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'q' }],
    });
    assert.deepEqual(msg.content, [
      { type: 'thinking', thinking: 'Thinking.', signature: '' },
      { type: 'text', text: 'Answer' },
    ]);
    assert.equal(msg.model, 'r1', "the caller's model name");
  });

  test('SSE: a thinking block streamed, then the text block; the SDK folds both', async () => {
    rig.mock.script({ sse: REASONING_STREAM });
    const stream = anthropic().messages.stream({
      model: 'r1',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'q' }],
    });
    const thinking: string[] = [];
    stream.on('thinking', (d) => thinking.push(d));
    const msg = await stream.finalMessage();
    assert.deepEqual(thinking, ['Think', 'ing.']);
    assert.deepEqual(msg.content.map((b) => b.type), ['thinking', 'text']);
    assert.equal((msg.content[0] as Anthropic.ThinkingBlock).thinking, 'Thinking.');
    assert.equal((msg.content[1] as Anthropic.TextBlock).text, 'Answer');
    assert.equal(msg.model, 'r1');
  });
});

describe('reasoning_content → Responses reasoning items', () => {
  test('JSON: a reasoning item with a reasoning_text part before the message', async () => {
    rig.mock.script({ body: REASONING_JSON });
    const r = await openai().responses.create({ model: 'r1', input: 'q' });
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    const reasoning = r.output[0] as OpenAI.Responses.ResponseReasoningItem;
    assert.match(reasoning.id, /^rs_[0-9a-f]{32}$/);
    assert.deepEqual(reasoning.summary, []);
    assert.deepEqual(reasoning.content, [{ type: 'reasoning_text', text: 'Thinking.' }]);
    assert.equal(r.output_text, 'Answer');
    assert.equal(r.model, 'r1');
  });

  test('SSE: the openai SDK streams reasoning_text deltas and folds the item', async () => {
    rig.mock.script({ sse: REASONING_STREAM });
    const stream = openai().responses.stream({ model: 'r1', input: 'q' });
    const deltas: string[] = [];
    stream.on('response.reasoning_text.delta', (e) => deltas.push(e.delta));
    const r = await stream.finalResponse();
    assert.deepEqual(deltas, ['Think', 'ing.']);
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.deepEqual((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content, [
      { type: 'reasoning_text', text: 'Thinking.' },
    ]);
    assert.deepEqual((r.output[1] as OpenAI.Responses.ResponseOutputMessage).content, [
      { type: 'output_text', text: 'Answer', annotations: [], parsed: null },
    ]);
  });
});

// Codex always asks `reasoning.summary: "auto"` and shows only summaries by default; the Agents SDK reads only
// `summary`. Asked for one, the reasoning text is also the item's summary.
describe('reasoning_content → a Responses reasoning summary, when the caller asks for one', () => {
  test('JSON: the text as the summary too; none without the ask', async () => {
    rig.mock.script({ body: REASONING_JSON });
    const r = await openai().responses.create({ model: 'r1', input: 'q', reasoning: { summary: 'auto' } });
    const reasoning = r.output[0] as OpenAI.Responses.ResponseReasoningItem;
    assert.deepEqual(reasoning.summary, [{ type: 'summary_text', text: 'Thinking.' }]);
    assert.deepEqual(reasoning.content, [{ type: 'reasoning_text', text: 'Thinking.' }]);
    assert.equal(rig.mock.requests.at(-1)!.json!.reasoning, undefined, 'the ask itself is not sent to chat');
  });

  test("SSE: summary events in OpenAI's order; the openai SDK folds the summary", async () => {
    rig.mock.script({ sse: REASONING_STREAM });
    const stream = openai().responses.stream({ model: 'r1', input: 'q', reasoning: { summary: 'detailed' } });
    const deltas: string[] = [];
    stream.on('response.reasoning_summary_text.delta', (e) => deltas.push(e.delta));
    const r = await stream.finalResponse();
    assert.deepEqual(deltas, ['Think', 'ing.']);
    const reasoning = r.output[0] as OpenAI.Responses.ResponseReasoningItem;
    assert.deepEqual(reasoning.summary, [{ type: 'summary_text', text: 'Thinking.' }]);
    assert.deepEqual(reasoning.content, [{ type: 'reasoning_text', text: 'Thinking.' }]);

    rig.mock.script({ sse: REASONING_STREAM });
    const events = await responsesEvents({ model: 'r1', input: 'q', reasoning: { summary: 'auto' } });
    assertOpenAiOrder(events);
    const types = events.map((e) => String(e.type)).filter((t) => t.includes('reasoning_summary'));
    assert.deepEqual(types, [
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
    ]);
    const done = events.find((e) => e.type === 'response.reasoning_summary_part.done')!;
    assert.deepEqual(done.part, { type: 'summary_text', text: 'Thinking.' });
    assert.equal(done.summary_index, 0);
  });

  test('SSE without the ask: no summary events, an empty summary', async () => {
    rig.mock.script({ sse: REASONING_STREAM });
    const events = await responsesEvents({ model: 'r1', input: 'q' });
    assert.equal(events.filter((e) => String(e.type).includes('reasoning_summary')).length, 0);
    const item = events.find((e) => e.type === 'response.output_item.done')!.item as Json;
    assert.deepEqual(item.summary, []);
  });
});

describe("Claude's thinking → Responses reasoning items", () => {
  const thinkingMessage = {
    ...anthropicMessage('claude-sonnet-4-5-mock'),
    content: [
      { type: 'thinking', thinking: 'Let me see.', signature: 'sig' },
      { type: 'text', text: 'Yes.' },
    ],
  };

  test('JSON', async () => {
    rig.anth.script({ body: thinkingMessage });
    const r = await openai().responses.create({ model: 'claude', input: 'q', reasoning: { effort: 'high' } });
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.deepEqual((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content, [
      { type: 'reasoning_text', text: 'Let me see.' },
    ]);
    assert.equal(r.output_text, 'Yes.');
    assert.equal(r.model, 'claude');
  });

  test('SSE', async () => {
    const start = { ...thinkingMessage, content: [], stop_reason: null, usage: { input_tokens: 5, output_tokens: 1 } };
    rig.anth.script({
      events: [
        ['message_start', { type: 'message_start', message: start }],
        ['content_block_start', {
          type: 'content_block_start',
          index: 0,
          content_block: { type: 'thinking', thinking: '', signature: '' },
        }],
        ['content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'thinking_delta', thinking: 'Let me see.' },
        }],
        ['content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'signature_delta', signature: 'sig' },
        }],
        ['content_block_stop', { type: 'content_block_stop', index: 0 }],
        ['content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Yes.' } }],
        ['content_block_stop', { type: 'content_block_stop', index: 1 }],
        ['message_delta', {
          type: 'message_delta',
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: 7 },
        }],
        ['message_stop', { type: 'message_stop' }],
      ],
    });
    const r = await openai().responses.stream({ model: 'claude', input: 'q' }).finalResponse();
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.deepEqual((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content, [
      { type: 'reasoning_text', text: 'Let me see.' },
    ]);
    assert.deepEqual((r.output[1] as OpenAI.Responses.ResponseOutputMessage).content, [
      { type: 'output_text', text: 'Yes.', annotations: [], parsed: null },
    ]);
  });
});

/**
 * OpenAI's documented streaming sequence (platform.openai.com "Streaming API responses"): an item is added,
 * its content parts added, deltas, then its `*.done` events and `output_item.done`, before the next item is
 * added; output indexes count up from 0; every delta names the open item.
 */
function assertOpenAiOrder(events: Json[]): void {
  let open: { id: string; index: number } | undefined;
  let next = 0;
  for (const [i, e] of events.entries()) {
    const type = String(e.type);
    const at = `event ${i} (${type})`;
    if (type === 'response.output_item.added') {
      assert.equal(open, undefined, `${at}: added while item ${open?.id} is still open`);
      const item = e.item as Json;
      assert.equal(e.output_index, next++, at);
      open = { id: String(item.id), index: Number(e.output_index) };
    } else if (type === 'response.output_item.done') {
      assert.equal((e.item as Json).id, open?.id, at);
      open = undefined;
    } else if ('item_id' in e) {
      assert.equal(e.item_id, open?.id, `${at}: names a closed item`);
      assert.equal(e.output_index, open?.index, at);
    }
  }
  assert.equal(open, undefined, 'every item is closed');
  assert.ok(['response.completed', 'response.incomplete'].includes(String(events.at(-1)!.type)));
}

async function responsesEvents(body: Json): Promise<Json[]> {
  const res = await rig.post('/v1/responses', { ...body, stream: true }, CALLER);
  assert.equal(res.status, 200);
  return (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
}

describe("a translated Responses stream in OpenAI's order", () => {
  test('reasoning, text, two tool calls: each item done before the next is added', async () => {
    const call = (index: number, id: string | undefined, name: string | undefined, args: string) =>
      delta({ tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { name, arguments: args } }] });
    rig.mock.script({
      sse: [
        delta({ role: 'assistant', reasoning_content: 'Hmm.' }),
        delta({ content: 'Calling.' }),
        call(0, 'call_a', 'get', '{"a":'),
        call(0, undefined, undefined, '1}'),
        call(1, 'call_b', 'put', '{}'),
        delta({}, 'tool_calls'),
        USAGE,
      ],
    });
    const events = await responsesEvents({ model: 'r1', input: 'q' });
    assertOpenAiOrder(events);
    assert.deepEqual(
      events.filter((e) => e.type === 'response.output_item.done').map((e) => (e.item as Json).type),
      ['reasoning', 'message', 'function_call', 'function_call'],
    );
    const done = events.at(-1)!.response as Json;
    const output = done.output as Json[];
    assert.deepEqual(output.map((o) => o.type), ['reasoning', 'message', 'function_call', 'function_call']);
    assert.deepEqual(output.slice(2).map((o) => o.arguments), ['{"a":1}', '{}']);
  });
});

describe("every endpoint's answer names the caller's model", () => {
  const sseModels = (text: string) =>
    text.split('\n').filter((l) => l.startsWith('data: {')).flatMap((l) => {
      const j = JSON.parse(l.slice(6)) as Json;
      const answer = (j.message ?? j.response ?? j) as Json;
      return typeof answer.model === 'string' ? [answer.model] : [];
    });
  const cases: { name: string; path: string; body: Json; model: string; upstream: () => void }[] = [
    {
      name: 'native Responses',
      path: '/v1/responses',
      body: { input: 'q' },
      model: 'gpt4o',
      upstream: () => {
        const response = { id: 'resp_1', object: 'response', model: 'gpt-4o-2024-08-06', output: [] };
        rig.mock.script({
          body: { ...response, status: 'completed' },
        }, {
          sse: [
            { type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress' } },
            { type: 'response.completed', sequence_number: 1, response: { ...response, status: 'completed' } },
          ],
        });
      },
    },
    {
      name: '/v1/messages pass-through',
      path: '/v1/messages',
      body: { max_tokens: 10, messages: [{ role: 'user', content: 'q' }] },
      model: 'claude',
      upstream: () => rig.anth.script({ body: anthropicMessage('claude-sonnet-4-5-20250929') }, {}),
    },
    {
      name: '/v1/messages translated',
      path: '/v1/messages',
      body: { max_tokens: 10, messages: [{ role: 'user', content: 'q' }] },
      model: 'r1',
      upstream: () => rig.mock.script({ body: REASONING_JSON }, { sse: REASONING_STREAM }),
    },
    {
      name: 'translated Responses',
      path: '/v1/responses',
      body: { input: 'q' },
      model: 'r1',
      upstream: () => rig.mock.script({ body: REASONING_JSON }, { sse: REASONING_STREAM }),
    },
  ];
  for (const c of cases) {
    test(`${c.name}: JSON and SSE`, async () => {
      c.upstream();
      const json = await rig.post(c.path, { ...c.body, model: c.model }, CALLER);
      assert.equal(json.status, 200);
      assert.equal((await json.json() as Json).model, c.model);
      const sse = await rig.post(c.path, { ...c.body, model: c.model, stream: true }, CALLER);
      assert.equal(sse.status, 200);
      const models = sseModels(await sse.text());
      assert.ok(models.length > 0, 'the stream names a model');
      assert.deepEqual(new Set(models), new Set([c.model]));
    });
  }

  test('embeddings', async () => {
    rig.mock.script({
      body: {
        object: 'list',
        model: 'text-embedding-3-small',
        data: [{ object: 'embedding', index: 0, embedding: [0] }],
      },
    });
    const res = await rig.post('/v1/embeddings', { model: 'emb', input: 'q' }, CALLER);
    assert.equal(res.status, 200);
    assert.equal((await res.json() as Json).model, 'emb');
  });
});

describe('hosted tools a translated target cannot run are named, not dropped in silence', () => {
  const completed = () => rig.platform.logs.filter((l) => l.msg === 'proxy request completed');
  const completedLog = () => completed().at(-1)!;
  const fn = { type: 'function', name: 'shell', parameters: { type: 'object', properties: {} } };
  /** What Codex sends besides its function tools. */
  const codexTools = [fn, { type: 'web_search' }, { type: 'namespace', name: 'multi_agent_v1', tools: [] }];

  for (const stream of [false, true]) {
    test(`/v1/responses to a chat target (${stream ? 'SSE' : 'JSON'}): x-sluice-dropped and the access log`, async () => {
      rig.mock.script(stream ? { sse: REASONING_STREAM } : { body: REASONING_JSON });
      const lines = completed().length;
      const res = await rig.post('/v1/responses', { model: 'r1', input: 'q', tools: codexTools, stream }, CALLER);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-sluice-dropped'), 'web_search, namespace:multi_agent_v1');
      const sent = rig.mock.requests.at(-1)!.json!.tools as Json[];
      assert.deepEqual(sent.map((t) => (t.function as Json).name), ['shell']);
      await until(() => completed().length > lines, 2000, 'the access-log line');
      assert.equal(completedLog().dropped, 'web_search, namespace:multi_agent_v1');
    });
  }

  test('/v1/messages to a chat target: Anthropic server tools', async () => {
    rig.mock.script({ body: REASONING_JSON });
    const res = await rig.post('/v1/messages', {
      model: 'r1',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'q' }],
      tools: [
        { name: 'get_weather', input_schema: { type: 'object' } },
        { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
      ],
    }, CALLER);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-sluice-dropped'), 'web_search_20250305:web_search');
    const sent = rig.mock.requests.at(-1)!.json!.tools as Json[];
    assert.deepEqual(sent.map((t) => (t.function as Json).name), ['get_weather']);
    assert.equal(completedLog().dropped, 'web_search_20250305:web_search');
  });

  test('/v1/messages to a chat target: content blocks chat cannot carry are named too', async () => {
    rig.mock.script({ body: REASONING_JSON });
    const res = await rig.post('/v1/messages', {
      model: 'r1',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'search it' },
        {
          role: 'assistant',
          content: [
            { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' } },
            { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
            { type: 'text', text: 'found it' },
          ],
        },
        { role: 'user', content: 'thanks' },
      ],
    }, CALLER);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-sluice-dropped'), 'content:server_tool_use, content:web_search_tool_result');
    assert.equal(completedLog().dropped, 'content:server_tool_use, content:web_search_tool_result');
  });

  test('a native target keeps them: no header, no field', async () => {
    rig.mock.script({ body: { id: 'resp_1', object: 'response', model: 'gpt-4o', status: 'completed', output: [] } });
    const res = await rig.post('/v1/responses', { model: 'gpt4o', input: 'q', tools: codexTools }, CALLER);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-sluice-dropped'), null);
    assert.equal((rig.mock.requests.at(-1)!.json!.tools as Json[]).length, 3);
    assert.equal(completedLog().dropped, undefined);
  });
});

describe("Claude's signed thinking round trip on the Responses path", () => {
  const TOOLS: OpenAI.Responses.Tool[] = [
    { type: 'function', name: 'weather', strict: false, parameters: { type: 'object', properties: {} } },
  ];
  /** Claude's first turn: signed thinking, then a tool call (as the mock answers it, JSON or stream). */
  const toolTurn = (signature: string) => ({
    ...anthropicMessage('claude-sonnet-4-5-mock'),
    content: [
      { type: 'thinking', thinking: 'I need the weather.', signature },
      { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } },
    ],
    stop_reason: 'tool_use',
  });
  const toolTurnEvents = (signature: string): [string, unknown][] => {
    const start = {
      ...toolTurn(signature),
      content: [],
      stop_reason: null,
      usage: { input_tokens: 5, output_tokens: 1 },
    };
    const block = (index: number, content_block: Json): [string, unknown] => [
      'content_block_start',
      { type: 'content_block_start', index, content_block },
    ];
    const delta = (index: number, d: Json): [string, unknown] => [
      'content_block_delta',
      { type: 'content_block_delta', index, delta: d },
    ];
    const stop = (index: number): [string, unknown] => ['content_block_stop', { type: 'content_block_stop', index }];
    return [
      ['message_start', { type: 'message_start', message: start }],
      block(0, { type: 'thinking', thinking: '', signature: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'I need ' }),
      delta(0, { type: 'thinking_delta', thinking: 'the weather.' }),
      delta(0, { type: 'signature_delta', signature }),
      stop(0),
      block(1, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: {} }),
      delta(1, { type: 'input_json_delta', partial_json: '{"city":"Oslo"}' }),
      stop(1),
      ['message_delta', {
        type: 'message_delta',
        delta: { stop_reason: 'tool_use', stop_sequence: null },
        usage: { output_tokens: 7 },
      }],
      ['message_stop', { type: 'message_stop' }],
    ];
  };
  const answer = { ...anthropicMessage('claude-sonnet-4-5-mock', 'Sunny.') };

  /** What the second turn sent Claude: thinking on, and the tool turn led by the first turn's signed block. */
  function assertSignedReplay(signature: string): void {
    const sent = rig.anth.requests.at(-1)!.json!;
    assert.equal((sent.thinking as Json | undefined)?.type, 'enabled', JSON.stringify(sent));
    const turns = sent.messages as Json[];
    const assistant = turns.findLast((m) => m.role === 'assistant')!;
    assert.deepEqual((assistant.content as Json[])[0], {
      type: 'thinking',
      thinking: 'I need the weather.',
      signature,
    });
    assert.equal((assistant.content as Json[])[1]?.type, 'tool_use');
  }

  for (const stream of [false, true]) {
    test(`${stream ? 'SSE' : 'JSON'}: the reasoning item replayed in input keeps its signature`, async () => {
      const signature = `sig-input-${stream}`;
      rig.anth.script(stream ? { events: toolTurnEvents(signature) } : { body: toolTurn(signature) });
      const params = {
        model: 'claude',
        input: 'weather in Oslo?',
        tools: TOOLS,
        reasoning: { effort: 'high' as const },
      };
      const r1 = stream
        ? await openai().responses.stream(params).finalResponse()
        : await openai().responses.create(params);
      assert.deepEqual(r1.output.map((o) => o.type), ['reasoning', 'function_call']);
      const reasoning = r1.output[0] as OpenAI.Responses.ResponseReasoningItem;
      assert.match(String(reasoning.encrypted_content), /^sluice\.anthropic\.v1\./);
      assert.deepEqual(reasoning.content, [{ type: 'reasoning_text', text: 'I need the weather.' }]);
      const call = r1.output[1] as OpenAI.Responses.ResponseFunctionToolCall;

      rig.anth.script({ body: answer });
      const r2 = await openai().responses.create({
        ...params,
        store: false,
        input: [
          { role: 'user', content: 'weather in Oslo?' },
          ...r1.output as OpenAI.Responses.ResponseInputItem[],
          { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"clear"}' },
        ],
      });
      assert.equal(r2.output_text, 'Sunny.');
      assertSignedReplay(signature);
    });
  }

  test('via previous_response_id: the stored reasoning item keeps its signature', async () => {
    rig.anth.script({ body: toolTurn('sig-stored') });
    const params = { model: 'claude', tools: TOOLS, reasoning: { effort: 'high' as const } };
    const r1 = await openai().responses.create({ ...params, input: 'weather in Oslo?' });
    const call = r1.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    rig.anth.script({ body: answer });
    const r2 = await openai().responses.create({
      ...params,
      previous_response_id: r1.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"sky":"clear"}' }],
    });
    assert.equal(r2.output_text, 'Sunny.');
    assertSignedReplay('sig-stored');
  });

  test("another provider's encrypted_content sent to Claude: a 400 naming the item", async () => {
    const before = rig.anth.requests.length;
    const res = await rig.post('/v1/responses', {
      model: 'claude',
      reasoning: { effort: 'high' },
      input: [
        { role: 'user', content: 'q' },
        { type: 'reasoning', id: 'rs_openai', summary: [], encrypted_content: 'gAAAAABopenaiopaque' },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'clear' },
      ],
    }, CALLER);
    assert.equal(res.status, 400);
    const message = String(((await res.json()) as { error: Json }).error.message);
    assert.match(message, /^`input\[1\]`: reasoning item "rs_openai" carries `encrypted_content`/);
    assert.equal(rig.anth.requests.length, before, 'nothing reached Claude');
  });

  test("Sluice's encrypted_content sent to a native OpenAI target: a 400 naming the item", async () => {
    rig.anth.script({ body: toolTurn('sig-native') });
    const r1 = await openai().responses.create({ model: 'claude', input: 'q', reasoning: { effort: 'high' } });
    const before = rig.mock.requests.length;
    const res = await rig.post('/v1/responses', {
      model: 'gpt4o',
      input: [{ role: 'user', content: 'q' }, r1.output[0]],
    }, CALLER);
    assert.equal(res.status, 400);
    const message = String(((await res.json()) as { error: Json }).error.message);
    assert.match(message, /^`input\[1\]`: reasoning item "rs_[0-9a-f]+" carries `encrypted_content` this gateway made/);
    assert.equal(rig.mock.requests.length, before, 'nothing reached OpenAI');
  });

  test('a chat caller gets the thinking text only: the private field stays inside the gateway', async () => {
    rig.anth.script({ body: toolTurn('sig-chat-caller') });
    const res = await rig.post('/v1/chat/completions', {
      model: 'claude',
      messages: [{ role: 'user', content: 'q' }],
      reasoning_effort: 'high',
    }, CALLER);
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const message = ((JSON.parse(text) as Json).choices as Json[])[0]!.message as Json;
    assert.equal(message.reasoning_content, 'I need the weather.');
    assert.ok(!text.includes('sig-chat-caller'), text);
    rig.anth.script({ events: toolTurnEvents('sig-chat-stream') });
    const sse = await rig.post('/v1/chat/completions', {
      model: 'claude',
      messages: [{ role: 'user', content: 'q' }],
      reasoning_effort: 'high',
      stream: true,
    }, CALLER);
    const events = await sse.text();
    assert.match(events, /"reasoning_content":"I need "/);
    assert.ok(!events.includes('sig-chat-stream') && !events.includes('sluice_signed_thinking'), events);
  });

  test('to a chat-wire target the reasoning item is dropped, as chat takes no reasoning', async () => {
    rig.anth.script({ body: toolTurn('sig-chat') });
    const r1 = await openai().responses.create({ model: 'claude', input: 'q', reasoning: { effort: 'high' } });
    rig.mock.script({ body: REASONING_JSON });
    const res = await rig.post(
      '/v1/responses',
      { model: 'r1', input: [{ role: 'user', content: 'q' }, r1.output[0]] },
      CALLER,
    );
    assert.equal(res.status, 200);
    assert.deepEqual(rig.mock.requests.at(-1)!.json!.messages, [{ role: 'user', content: 'q' }]);
  });
});
