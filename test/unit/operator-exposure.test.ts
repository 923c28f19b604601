// What an operator can keep from callers (docs/routing.md "Routing groups and access", "Fields a key drops"):
// `proxy.served_by_header: false` hides the routing member's name, and a provider key's `drop_body_fields`
// never reach its upstream, on chat, messages (native and translated) and responses, JSON and streamed.
// Run: node --import tsx --test test/unit/operator-exposure.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';

const CALLER = 'sk-exposure-caller';
const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0", served_by_header: false }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;
const DROPPED = ['models', 'route', 'provider', 'previous_response_id'];
const drop = `drop_body_fields: [${DROPPED.join(', ')}]`;

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `_format_version: "1"
provider_keys:
  - { display_name: router, provider: openai, api_key: k-or, api_base: "${openaiBase}", ${drop} }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicBase}", ${drop} }
  - { display_name: plain, provider: openai, api_key: k-plain, api_base: "${openaiBase}" }
models:
  - { display_name: gpt, provider_key: router, model_name: gpt-upstream, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-upstream, retries: 0 }
  - { display_name: open, provider_key: plain, model_name: open-upstream, retries: 0 }
  - { display_name: group, routing: { targets: [{ model: gpt }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
  { config: CONFIG, env: { CALLER } },
);

const VENDOR = { models: ['other-model'], route: 'fallback', provider: { order: ['x'] }, previous_response_id: 'r1' };
const user = [{ role: 'user', content: 'hi' }];

describe('x-aisix-served-by', () => {
  test('proxy.served_by_header: false hides the member that served a routing model, JSON and SSE', async () => {
    for (const stream of [false, true]) {
      const res = await rig.post('/v1/chat/completions', { model: 'group', messages: user, stream }, CALLER);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-aisix-served-by'), null, `stream ${stream}`);
    }
  });
});

describe('drop_body_fields', () => {
  const cases: [string, string, Record<string, unknown>, 'openai' | 'anthropic'][] = [
    ['chat', '/v1/chat/completions', { model: 'gpt', messages: user }, 'openai'],
    ['chat, streamed', '/v1/chat/completions', { model: 'gpt', messages: user, stream: true }, 'openai'],
    ['messages, native', '/v1/messages', { model: 'claude', max_tokens: 5, messages: user }, 'anthropic'],
    ['messages, to an OpenAI wire', '/v1/messages', { model: 'gpt', max_tokens: 5, messages: user }, 'openai'],
    ['responses, native', '/v1/responses', { model: 'gpt', input: 'hi' }, 'openai'],
    ['responses, streamed', '/v1/responses', { model: 'gpt', input: 'hi', stream: true }, 'openai'],
  ];
  for (const [name, path, body, upstream] of cases) {
    test(`${name}: the upstream never receives the dropped members`, async () => {
      const seen = upstream === 'openai' ? rig.mock.requests : rig.anth.requests;
      const before = seen.length;
      const res = await rig.post(path, { ...body, ...VENDOR, user: 'kept' }, CALLER);
      assert.equal(res.status, 200, await res.clone().text());
      await res.arrayBuffer();
      assert.equal(seen.length, before + 1);
      const got = seen.at(-1)!.json as Record<string, unknown>;
      for (const f of DROPPED) assert.equal(f in got, false, `${f} was sent`);
      if (name !== 'messages, to an OpenAI wire') assert.equal(got.user, 'kept', 'other members are sent');
    });
  }

  test('a key without the list sends them (the default passes the body through)', async () => {
    const res = await rig.post('/v1/chat/completions', { model: 'open', messages: user, ...VENDOR }, CALLER);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.deepEqual(JSON.parse(rig.mock.requests.at(-1)!.body).models, ['other-model']);
  });
});
