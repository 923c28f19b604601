// Usage fidelity against AISIX (docs/aisix-compatibility.md "Translation and token accounting"), through
// app.request() against the mock upstreams: an Anthropic stream whose events name themselves only in their
// `data:` (relayed whole and counted, native and translated), input counts reported only on `message_delta`,
// Anthropic's cache counts in a chat caller's usage (AISIX's formula, JSON and streamed), and an embeddings
// answer whose usage has only `total_tokens`.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicEvents, anthropicFrame, anthropicMessage } from '../support/mock-anthropic.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';
import { sumSamples } from '../support/metrics.ts';

const CALLER = 'sk-usage-fidelity';
type Json = Record<string, unknown>;

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
  - { display_name: emb, provider_key: oa, model_name: emb-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
  { env: { CALLER } },
);

const post = (path: string, body: unknown) => rig.post(path, body, CALLER);
const lastLog = () => rig.platform.logs.filter((l) => l.msg === 'proxy request completed').at(-1)!;

const FAMILIES = ['input', 'output', 'total'] as const;
/** What the token families counted for `endpoint` (and `model`) while `run` ran. */
async function tokensDuring(endpoint: string, model: string, run: () => Promise<void>): Promise<number[]> {
  const read = () =>
    FAMILIES.map((f) => sumSamples(rig.gw.metrics.render(), `aisix_llm_${f}_tokens_total`, { endpoint, model }) ?? 0);
  const before = read();
  await run();
  return read().map((v, i) => v - before[i]!);
}

/** The access log's token fields of the last request, and whether it was estimated or failed. */
function loggedTokens(): Json {
  const l = lastLog();
  return {
    prompt: l.prompt_tokens,
    completion: l.completion_tokens,
    total: l.total_tokens,
    estimated: l.usage_estimated,
    error: l.error_kind,
  };
}

const start = (usage: Json): [string, unknown] => [
  'message_start',
  {
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude', content: [], usage },
  },
];
const text = anthropicEvents('c', ['hello', ' world']).slice(1, -2);
const end = (usage: Json): [string, unknown][] => [
  ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage }],
  ['message_stop', { type: 'message_stop' }],
];

/** The chat chunks' deltas and finish reasons, and whether the stream ended with `[DONE]`. */
function chatDeltas(body: string): { deltas: unknown[]; done: boolean } {
  const events = body.split('\n\n').filter(Boolean).map((e) => e.slice('data: '.length));
  const done = events.at(-1) === '[DONE]';
  const deltas = events.filter((e) => e !== '[DONE]').map((e) => {
    const c = (JSON.parse(e) as { choices: Json[] }).choices[0]!;
    return [c.delta, c.finish_reason];
  });
  return { deltas, done };
}

describe('an Anthropic stream whose events carry their type only in `data:`', () => {
  const events = [
    start({ input_tokens: 5, cache_read_input_tokens: 100, output_tokens: 1 }),
    ...text,
    ...end({
      output_tokens: 7,
    }),
  ];
  for (const dataOnly of ['compact', 'spaced'] as const) {
    test(`${dataOnly} JSON, native /v1/messages: relayed byte for byte, counted whole`, async () => {
      rig.anth.script({ events, dataOnly });
      let body = '';
      const counted = await tokensDuring('/v1/messages', 'claude', async () => {
        const res = await post('/v1/messages', {
          model: 'claude',
          max_tokens: 50,
          stream: true,
          messages: [{ role: 'user', content: 'q' }],
        });
        assert.equal(res.status, 200);
        body = await res.text();
      });
      assert.equal(body, events.map(([name, data]) => anthropicFrame(name, data, dataOnly)).join(''));
      assert.deepEqual(loggedTokens(), {
        prompt: 105,
        completion: 7,
        total: 112,
        estimated: undefined,
        error: undefined,
      });
      assert.deepEqual(counted, [105, 7, 112]);
    });

    test(`${dataOnly} JSON, translated to a chat stream: every delta, counted whole`, async () => {
      rig.anth.script({ events, dataOnly });
      let body = '';
      const counted = await tokensDuring('/v1/chat/completions', 'claude', async () => {
        const res = await post('/v1/chat/completions', {
          model: 'claude',
          stream: true,
          messages: [{ role: 'user', content: 'q' }],
        });
        assert.equal(res.status, 200);
        body = await res.text();
      });
      assert.deepEqual(chatDeltas(body), {
        deltas: [
          [{ role: 'assistant', content: '' }, null],
          [{ content: 'hello' }, null],
          [{ content: ' world' }, null],
          [{}, 'stop'],
        ],
        done: true,
      });
      // AISIX's accounting to a chat caller: the prompt without the cache read, a total with it.
      assert.deepEqual(loggedTokens(), {
        prompt: 5,
        completion: 7,
        total: 112,
        estimated: undefined,
        error: undefined,
      });
      assert.deepEqual(counted, [5, 7, 112]);
    });
  }
});

describe('input counts an upstream reports on message_delta', () => {
  const CASES = [
    {
      name: 'only there',
      start: { output_tokens: 1 },
      delta: { input_tokens: 30, cache_read_input_tokens: 10, output_tokens: 4 },
      native: [40, 4, 44],
      chat: [30, 4, 44],
    },
    {
      name: 'repeated there without the cache counts message_start gave',
      start: { input_tokens: 5, cache_read_input_tokens: 100, output_tokens: 1 },
      delta: { input_tokens: 5, output_tokens: 9 },
      native: [105, 9, 114],
      chat: [5, 9, 114],
    },
  ];
  for (const c of CASES) {
    for (const dataOnly of [undefined, 'spaced'] as const) {
      const framing = dataOnly ? 'data-only spaced JSON' : 'named events';
      test(`${c.name} (${framing}): in the usage, the access log and the token metrics`, async () => {
        const events = [start(c.start), ...text, ...end(c.delta)];
        rig.anth.script({ events, ...(dataOnly ? { dataOnly } : {}) });
        const native = await tokensDuring('/v1/messages', 'claude', async () => {
          const res = await post('/v1/messages', {
            model: 'claude',
            max_tokens: 50,
            stream: true,
            messages: [{ role: 'user', content: 'q' }],
          });
          await res.text();
        });
        assert.deepEqual(native, c.native);
        assert.deepEqual([lastLog().prompt_tokens, lastLog().completion_tokens, lastLog().total_tokens], c.native);
        rig.anth.script({ events, ...(dataOnly ? { dataOnly } : {}) });
        let body = '';
        const chat = await tokensDuring('/v1/chat/completions', 'claude', async () => {
          const res = await post('/v1/chat/completions', {
            model: 'claude',
            stream: true,
            stream_options: { include_usage: true },
            messages: [{ role: 'user', content: 'q' }],
          });
          body = await res.text();
        });
        assert.deepEqual(chat, c.chat);
        const usage = body.split('\n\n').filter((e) => e.includes('"usage"')).map((e) => JSON.parse(e.slice(6)).usage);
        assert.deepEqual(usage, [{ prompt_tokens: c.chat[0], completion_tokens: c.chat[1], total_tokens: c.chat[2] }]);
      });
    }
  }
});

describe("Anthropic's cache counts in a chat caller's usage: AISIX's formula", () => {
  // prompt_tokens = input_tokens, total_tokens = input + output + cache writes + cache reads, no details.
  const USAGE = { input_tokens: 10, output_tokens: 4, cache_creation_input_tokens: 200, cache_read_input_tokens: 1000 };
  const EXPECTED = { prompt_tokens: 10, completion_tokens: 4, total_tokens: 1214 };

  test('JSON answer', async () => {
    rig.anth.script({ body: { ...anthropicMessage('claude-upstream'), usage: USAGE } });
    let json: Json = {};
    const counted = await tokensDuring('/v1/chat/completions', 'claude', async () => {
      const res = await post('/v1/chat/completions', { model: 'claude', messages: [{ role: 'user', content: 'q' }] });
      assert.equal(res.status, 200);
      json = await res.json() as Json;
    });
    assert.deepEqual(json.usage, EXPECTED);
    assert.deepEqual(counted, [10, 4, 1214]);
    assert.deepEqual([lastLog().prompt_tokens, lastLog().completion_tokens, lastLog().total_tokens], [10, 4, 1214]);
  });

  for (const includeUsage of [true, false]) {
    test(`streamed answer, include_usage ${includeUsage}`, async () => {
      const { cache_creation_input_tokens: w, cache_read_input_tokens: r, input_tokens: i } = USAGE;
      rig.anth.script({
        events: [
          start({ input_tokens: i, cache_creation_input_tokens: w, cache_read_input_tokens: r, output_tokens: 1 }),
          ...text,
          ...end({ output_tokens: 4 }),
        ],
      });
      let body = '';
      const counted = await tokensDuring('/v1/chat/completions', 'claude', async () => {
        const res = await post('/v1/chat/completions', {
          model: 'claude',
          stream: true,
          ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
          messages: [{ role: 'user', content: 'q' }],
        });
        body = await res.text();
      });
      const usage = body.split('\n\n').filter((e) => e.includes('"usage"')).map((e) => JSON.parse(e.slice(6)).usage);
      assert.deepEqual(usage, includeUsage ? [EXPECTED] : []);
      assert.deepEqual(counted, [10, 4, 1214]);
    });
  }

  test('a Responses caller through the same upstream still sees the whole input and its cached part', async () => {
    rig.anth.script({ body: { ...anthropicMessage('claude-upstream'), usage: USAGE } });
    const res = await post('/v1/responses', { model: 'claude', input: 'q' });
    assert.equal(res.status, 200);
    assert.deepEqual((await res.json() as Json).usage, {
      input_tokens: 1210,
      input_tokens_details: { cached_tokens: 1000 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 1214,
    });
  });
});

describe('embeddings usage', () => {
  // The upstream names the caller's alias, so the gateway's renaming (every answer names the caller's model)
  // leaves the bytes as they came.
  const answer = (usage?: Json): Json => ({
    object: 'list',
    model: 'emb',
    data: [{ index: 0, object: 'embedding', embedding: [0.25, -0.5] }],
    ...(usage ? { usage } : {}),
  });

  test('only total_tokens: a 200 whose prompt_tokens is 0, the total counted as input in the metrics', async () => {
    rig.mock.script({ body: answer({ total_tokens: 8 }) });
    let json: Json = {};
    const counted = await tokensDuring('/v1/embeddings', 'emb', async () => {
      const res = await post('/v1/embeddings', { model: 'emb', input: 'hello' });
      assert.equal(res.status, 200);
      json = await res.json() as Json;
    });
    assert.deepEqual(json, answer({ total_tokens: 8, prompt_tokens: 0 }));
    assert.deepEqual(counted, [8, 0, 8]);
    assert.deepEqual([lastLog().prompt_tokens, lastLog().total_tokens], [8, 8]);
  });

  test('no usage at all: both counters 0 in the answer', async () => {
    rig.mock.script({ body: answer() });
    const res = await post('/v1/embeddings', { model: 'emb', input: 'hello' });
    assert.deepEqual(await res.json(), answer({ prompt_tokens: 0, total_tokens: 0 }));
  });

  test('both counters stated: the bytes as the upstream sent them', async () => {
    const raw = JSON.stringify(answer({ prompt_tokens: 5, total_tokens: 5, extra: 1 }));
    rig.mock.script({ body: raw });
    const counted = await tokensDuring('/v1/embeddings', 'emb', async () => {
      const res = await post('/v1/embeddings', { model: 'emb', input: 'hello' });
      assert.equal(await res.text(), raw);
    });
    assert.deepEqual(counted, [5, 0, 5]);
  });
});
