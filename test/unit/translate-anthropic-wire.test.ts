// What an Anthropic upstream receives for an OpenAI chat caller, as AISIX sends it (docs/routing.md
// "Anthropic Messages"): every turn as content blocks, and with a model's `auto_prompt_caching` two cache
// breakpoints (system, final message) at its TTL; and count_tokens' 404 for a model the key cannot see
// (docs/aisix-compatibility.md "Endpoints") — through app.request() against the recording Anthropic mock.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';

type Json = Record<string, unknown>;

const CALLER = 'sk-wire-caller';
const LIMITED = 'sk-wire-limited';

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
  - { display_name: cached, provider_key: an, model_name: claude-upstream, retries: 0, auto_prompt_caching: { enabled: true } }
  - display_name: cached-1h
    provider_key: an
    model_name: claude-upstream
    retries: 0
    auto_prompt_caching: { enabled: true, ttl: 1h }
  - { display_name: cache-off, provider_key: an, model_name: claude-upstream, retries: 0, auto_prompt_caching: { enabled: false } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: limited, key_env: LIMITED, allowed_models: [gpt] }
`,
  { env: { CALLER, LIMITED } },
);

/** The body the Anthropic mock received for one chat request to `model`. */
async function sent(model: string, body: Json): Promise<Json> {
  const res = await rig.post('/v1/chat/completions', { model, ...body }, CALLER);
  assert.equal(res.status, 200, await res.clone().text());
  await res.text();
  const got = rig.anth.requests.at(-1)!;
  assert.equal(got.url, '/v1/messages');
  return got.json!;
}

const CONVERSATION = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'first question' },
  { role: 'assistant', content: 'first answer' },
  { role: 'user', content: 'second question' },
];

describe('chat → Anthropic on the wire', () => {
  test('string turns as content-block arrays; a string system stays a string', async () => {
    const body = await sent('claude', { messages: CONVERSATION });
    assert.equal(body.system, 'You are terse.');
    assert.deepEqual(body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'first question' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
      { role: 'user', content: [{ type: 'text', text: 'second question' }] },
    ]);
  });

  test('auto_prompt_caching (5m): a bare ephemeral marker on the system prompt and on the final message', async () => {
    const body = await sent('cached', { messages: CONVERSATION });
    assert.deepEqual(body.system, [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }]);
    assert.deepEqual(body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'first question' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
      { role: 'user', content: [{ type: 'text', text: 'second question', cache_control: { type: 'ephemeral' } }] },
    ]);
  });

  test('auto_prompt_caching (1h): the markers carry the TTL; the last block of the final message is marked', async () => {
    const body = await sent('cached-1h', {
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        {
          role: 'user',
          content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'https://x.test/i.png' } }],
        },
      ],
    });
    const marker = { type: 'ephemeral', ttl: '1h' };
    assert.deepEqual(body.system, [{ type: 'text', text: 'a' }, { type: 'text', text: 'b', cache_control: marker }]);
    assert.deepEqual(body.messages, [{
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        { type: 'image', source: { type: 'url', url: 'https://x.test/i.png' }, cache_control: marker },
      ],
    }]);
  });

  test('auto_prompt_caching: a tool-result turn last gets the marker on its last result', async () => {
    const body = await sent('cached', {
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'f' } }] },
        { role: 'tool', tool_call_id: 't', content: 'r' },
      ],
    });
    assert.equal(body.system, undefined, 'no system prompt, no system marker');
    assert.deepEqual((body.messages as Json[]).at(-1), {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 't', content: 'r', cache_control: { type: 'ephemeral' } }],
    });
  });

  test("a caller's own marker anywhere (here on a tool) leaves the request as the caller made it", async () => {
    const body = await sent('cached', {
      messages: CONVERSATION,
      tools: [{
        type: 'function',
        function: { name: 'f', parameters: { type: 'object' } },
        cache_control: { type: 'ephemeral' },
      }],
    });
    assert.equal(body.system, 'You are terse.');
    assert.deepEqual((body.messages as Json[]).at(-1), {
      role: 'user',
      content: [{ type: 'text', text: 'second question' }],
    });
  });

  test('no marker without auto_prompt_caching, or with it disabled; a blank last block is never marked', async () => {
    for (const model of ['claude', 'cache-off']) {
      assert.ok(!JSON.stringify(await sent(model, { messages: CONVERSATION })).includes('cache_control'), model);
    }
    const blank = await sent('cached', {
      messages: [{ role: 'system', content: '  ' }, { role: 'user', content: '' }],
    });
    assert.ok(!JSON.stringify(blank).includes('cache_control'), JSON.stringify(blank));
  });
});

describe('count_tokens for a model the key cannot see', () => {
  // AISIX's ModelNotFound in the Anthropic envelope; a restricted key gets the same 404 for a model it may
  // not use, so the answer does not tell it which names exist.
  const notFound = (model: string) => ({
    type: 'error',
    error: { type: 'not_found_error', message: `model "${model}" not found` },
  });
  const count = (model: string, key: string) =>
    rig.post('/v1/messages/count_tokens', { model, messages: [{ role: 'user', content: 'hi' }] }, key);

  test('an unknown model: 404', async () => {
    for (const key of [CALLER, LIMITED]) {
      const res = await count('no-such-model', key);
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), notFound('no-such-model'));
    }
  });

  test('a model the key may not use: the same 404, and nothing sent upstream', async () => {
    const before = rig.anth.requests.length;
    const res = await count('claude', LIMITED);
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), notFound('claude'));
    assert.equal(rig.anth.requests.length, before);
  });
});
