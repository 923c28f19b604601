// The request id upstream (docs/aisix-compatibility.md "Endpoints"; AISIX request_id.rs and its bridges): every
// attempt of a request — retries and failover included — carries the request's `x-aisix-request-id`, the one
// the caller gets back: the caller's own when acceptable, else a minted UUID.
// Run: node --import tsx --test test/unit/request-id-upstream.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-rid-caller';

describe('x-aisix-request-id upstream', () => {
  let mock: MockUpstream;
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    mock = await startMockUpstream();
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: pk, provider: openai, api_key: sk-up, api_base: "${mock.base}" }
models:
  - { display_name: a, model_name: up-a, provider_key: pk, retries: 1 }
  - { display_name: b, model_name: up-b, provider_key: pk }
  - { display_name: g, routing: { strategy: failover, targets: [{ model: a }, { model: b }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`,
      { env: { CALLER_KEY: KEY } },
    );
    app = createProxyApp(gw);
  });
  after(() => mock.close());

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  test('one id on the retry and the failover, the one the caller gets back', async () => {
    mock.script({ status: 500 }, { status: 500 }); // a: first try and its retry; then b answers
    const from = mock.requests.length;
    const res = await post('/v1/chat/completions', { model: 'g', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 200);
    const id = res.headers.get('x-aisix-request-id')!;
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const sent = mock.requests.slice(from).map((r) => [r.json?.model, r.headers['x-aisix-request-id']]);
    assert.deepEqual(sent, [['up-a', id], ['up-a', id], ['up-b', id]]);
  });

  test("the caller's acceptable id is the id; an unacceptable one is replaced", async () => {
    const from = mock.requests.length;
    const mine = await post('/v1/embeddings', { model: 'b', input: 'x' }, { 'x-aisix-request-id': 'caller-id-1' });
    assert.equal(mine.headers.get('x-aisix-request-id'), 'caller-id-1');
    assert.equal(mock.requests[from]!.headers['x-aisix-request-id'], 'caller-id-1');
    const bad = await post('/v1/completions', { model: 'b', prompt: 'x' }, { 'x-aisix-request-id': 'has space' });
    const minted = bad.headers.get('x-aisix-request-id')!;
    assert.notEqual(minted, 'has space');
    assert.equal(mock.requests[from + 1]!.headers['x-aisix-request-id'], minted);
  });

  test('on /v1/messages too (translated to the upstream chat wire)', async () => {
    const from = mock.requests.length;
    const res = await post('/v1/messages', { model: 'b', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, {
      'x-aisix-request-id': 'caller-id-2',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-aisix-request-id'), 'caller-id-2');
    assert.equal(mock.requests[from]!.headers['x-aisix-request-id'], 'caller-id-2');
  });
});
