// The tokenizer's first use holds no other request (docs/translation.md "Estimated tokens"): the first
// translated `/v1/messages` stream and count_tokens on an `o200k_base` model, in a process that has built no
// table yet, while other requests are timed; and once the table is built, the counts are the tokenizer's.
// Its own file: the table must not exist before the first test starts. Then: the counts are js-tiktoken's.
// Runs alone: in a process shared with other files, one of them may have built the table first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { estimatePromptTokens, estimateTokens } from '../../src/providers/estimate.ts';
import { chunk } from '../support/mock-upstream.ts';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';
import { mainThreadCpuMs } from '../support/thread-cpu.ts';

const CALLER = 'sk-tok-caller';
/** Building js-tiktoken's `o200k_base` table at once held the loop 0.86–2.0 s of CPU on the development machine. */
const BOUND_MS = 400;

const rig = proxyOverMocks(
  (openaiBase) =>
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
models:
  - { display_name: gpt4o, provider_key: oa, model_name: gpt-4o-mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
  { env: { CALLER } },
);

const MESSAGES = [{ role: 'user', content: 'Tell me about the weather patterns of the Norwegian coast in winter.' }];

test('the first translated stream and count_tokens do not hold a concurrent request while the table builds', async () => {
  // The most CPU time the main thread spent between two runs of this 1 ms timer: work that holds the event loop
  // shows in it; a loaded machine that leaves the process waiting for a core does not (the clock would), nor
  // do the compiler's and the collector's threads beside it.
  let longestGap = 0;
  let last = mainThreadCpuMs();
  const lag = setInterval(() => {
    const now = mainThreadCpuMs();
    longestGap = Math.max(longestGap, now - last);
    last = now;
  }, 1);
  let slowest = 0;
  try {
    rig.mock.script({
      sse: [chunk('up', 'hello'), {
        id: 'c',
        model: 'up',
        choices: [],
        usage: { prompt_tokens: 20, completion_tokens: 1, total_tokens: 21 },
      }],
    });
    const first = rig.post('/v1/messages', { model: 'gpt4o', max_tokens: 50, stream: true, messages: MESSAGES }, CALLER)
      .then(async (res) => ({ status: res.status, text: await res.text() }));
    const count = rig.post('/v1/messages/count_tokens', { model: 'gpt4o', messages: MESSAGES }, CALLER)
      .then(async (res) => ({ status: res.status, body: await res.json() as { input_tokens: number } }));
    // Other callers meanwhile, each arriving on a timer as from the network, until the table is built.
    let built = false;
    const table = estimateTokens('x', 'o200k_base').then(() => built = true);
    const giveUp = performance.now() + 60_000;
    while (!built) {
      assert.ok(performance.now() < giveUp, 'the table was built within a minute');
      await new Promise((resolve) => setTimeout(resolve, 1));
      const t = mainThreadCpuMs();
      const res = await rig.app.request('/v1/models', { headers: { authorization: `Bearer ${CALLER}` } });
      await res.text();
      assert.equal(res.status, 200);
      slowest = Math.max(slowest, mainThreadCpuMs() - t);
    }
    await table;
    const streamed = await first;
    assert.equal(streamed.status, 200);
    assert.match(streamed.text, /"input_tokens":\d+/, 'message_start states a count before the table is built');
    const counted = await count;
    assert.equal(counted.status, 200);
    assert.ok(counted.body.input_tokens > 0);
  } finally {
    clearInterval(lag);
  }
  assert.ok(longestGap < BOUND_MS, `the event loop was held ${Math.round(longestGap)} ms`);
  assert.ok(slowest < BOUND_MS, `a concurrent request took ${Math.round(slowest)} ms`);

  // Built: the next count is the tokenizer's, not the approximation.
  const res = await rig.post('/v1/messages/count_tokens', { model: 'gpt4o', messages: MESSAGES }, CALLER);
  const exact = await estimatePromptTokens('chat', { messages: MESSAGES }, 'o200k_base');
  assert.deepEqual(await res.json(), { input_tokens: exact });
});

test("counts are js-tiktoken's, in both encodings", async () => {
  const texts = [
    'hello world',
    '  leading spaces\n\n\ttabs and\r\nCRLF',
    'Ünïcödé ñ 日本語のテキスト 中文 한국어 مرحبا emoji 😀🎉👨‍👩‍👧',
    'function f(x) { return x * 2; } // code',
    '<|endoftext|> special spellings <|im_start|> as text',
    "1234567890 3.14159 -42 it's don't we'll I'M",
    ' '.repeat(40) + 'a',
    JSON.stringify({ a: [1, 2, { b: 'c' }], d: null }),
  ];
  for (const [encoding, ranks] of [['cl100k_base', cl100k], ['o200k_base', o200k]] as const) {
    const reference = new Tiktoken(ranks);
    for (const text of texts) {
      assert.equal(await estimateTokens(text, encoding), reference.encode(text, [], []).length, `${encoding} ${text}`);
    }
  }
});
