// OpenAI-wire vendor quirks (docs/aisix-compatibility.md "Providers"): `reasoning` → `reasoning_content`,
// DeepSeek's cache counters mirrored, in JSON and in SSE however the bytes are split; answers without
// them pass through as the same bytes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { normaliseAnswer, normaliseChatResult, normalisedStream } from '../../src/providers/openai-quirks.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

const enc = new TextEncoder();

async function run(pieces: Uint8Array[]): Promise<{ text: string; out: Uint8Array[] }> {
  async function* src() {
    yield* pieces;
  }
  const out: Uint8Array[] = [];
  for await (const c of normalisedStream(src())) out.push(c);
  return { text: new TextDecoder().decode(Buffer.concat(out)), out };
}

test('normaliseAnswer: reasoning lifted (an existing reasoning_content wins), cache hits mirrored', () => {
  assert.deepEqual(
    normaliseAnswer({
      choices: [{ message: { role: 'assistant', content: 'x', reasoning: 'think' } }],
      usage: { prompt_tokens: 10, prompt_cache_hit_tokens: 6, prompt_cache_miss_tokens: 4 },
    }),
    {
      choices: [{ message: { role: 'assistant', content: 'x', reasoning_content: 'think' } }],
      usage: {
        prompt_tokens: 10,
        prompt_cache_hit_tokens: 6,
        prompt_cache_miss_tokens: 4,
        prompt_tokens_details: { cached_tokens: 6 },
      },
    },
  );
  assert.deepEqual(
    normaliseAnswer({
      choices: [{ delta: { reasoning: 'a', reasoning_content: 'b' } }],
      usage: { prompt_cache_hit_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } },
    }),
    {
      choices: [{ delta: { reasoning_content: 'b' } }],
      usage: { prompt_cache_hit_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } },
    },
  );
});

test('a stream: delta.reasoning rewritten whatever the split, other events kept byte for byte', async () => {
  const events = [
    'data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Let me think"}}]}\n\n',
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\r\n\r\n',
    'data: [DONE]\n\n',
  ];
  const all = enc.encode(events.join(''));
  for (const size of [1, 3, 17, all.length]) {
    const pieces: Uint8Array[] = [];
    for (let i = 0; i < all.length; i += size) pieces.push(all.slice(i, i + size));
    const { text } = await run(pieces);
    assert.equal(
      text,
      'data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me think"}}]}\n\n' +
        events[1] + events[2],
      `pieces of ${size}`,
    );
  }
  const plain = [enc.encode(events[1]!), enc.encode(events[2]!)];
  const { out } = await run(plain);
  assert.deepEqual(out, plain);
  assert.equal(out[0], plain[0], 'the same bytes object, not a copy');
});

let mock: MockUpstream;
let g: RecordingGateway;
before(async () => {
  mock = await startMockUpstream();
  g = await recordingGateway(
    `_format_version: "1"
provider_keys:
  - { display_name: or, provider: openrouter, adapter: openai, api_key: sk-or-SECRET-123456, api_base: "${mock.base}" }
models:
  - { display_name: r1, provider_key: or, model_name: deepseek/deepseek-r1, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
    { CALLER: 'sk-caller-quirks-1' },
  );
});
after(() => mock.close());

test('through the proxy: JSON and SSE answers carry reasoning_content, never reasoning', async () => {
  mock.script({
    body: {
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'r1',
      choices: [{
        index: 0,
        message: { role: 'assistant', content: 'ok', reasoning: 'because' },
        finish_reason: 'stop',
      }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    },
  });
  const r = await g.post(
    '/v1/chat/completions',
    { model: 'r1', messages: [{ role: 'user', content: 'q' }] },
    'sk-caller-quirks-1',
  );
  const body = await r.json() as { choices: { message: Record<string, unknown> }[] };
  assert.equal(body.choices[0]!.message.reasoning_content, 'because');
  assert.equal('reasoning' in body.choices[0]!.message, false);
  mock.script({
    sse: [{
      id: 'x',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'r1',
      choices: [{ index: 0, delta: { reasoning: 'hmm' }, finish_reason: null }],
    }],
  });
  const s = await g.post('/v1/chat/completions', {
    model: 'r1',
    stream: true,
    messages: [{ role: 'user', content: 'q' }],
  }, 'sk-caller-quirks-1');
  const text = await s.text();
  assert.match(text, /"reasoning_content":"hmm"/);
  assert.equal(text.includes('"reasoning":'), false);
});

test('a JSON answer is parsed only when a quirk key appears quoted; a bare word or a key at the start passes as is', () => {
  const answer = (body: string) => ({
    kind: 'response' as const,
    status: 200,
    body,
    contentType: 'application/json',
    retryAfter: null,
  });
  for (const body of ['reasoning"', '{"content":"the reasoning\\" is","x":"prompt_cache_hit_tokens\\""}', '{"a":1}']) {
    const r = answer(body);
    assert.equal(normaliseChatResult(r), r, body);
  }
  const lifted = normaliseChatResult(answer('{"choices":[{"message":{"reasoning":"r"}}]}'));
  assert.equal(lifted.kind === 'response' && lifted.body, '{"choices":[{"message":{"reasoning_content":"r"}}]}');
  const mirrored = normaliseChatResult(answer('{"usage":{"prompt_cache_hit_tokens":3}}'));
  assert.match(mirrored.kind === 'response' ? mirrored.body : '', /"cached_tokens":3/);
});
