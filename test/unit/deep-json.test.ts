// Bad input is the caller's error, not the target's (docs/security.md "What callers cannot grow"): a body
// nested deeper than the gateway reads is a 400, and a body an adapter cannot serialise is refused unsent;
// neither reaches, or charges, a target. Through app.request() and the status app against a real mock upstream.
// Run: node --import tsx --test test/unit/deep-json.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { MAX_JSON_DEPTH } from '../../src/proxy/body.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { Dispatcher } from '../../src/routing/dispatch.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { labelsOf } from '../support/metrics.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';

const CALLER = 'sk-caller-bounds-1111';
const MESSAGES = [{ role: 'user', content: 'hi' }];

let mock: MockUpstream;
let gw: Gateway;
let proxy: ReturnType<typeof createProxyApp>;
let status: ReturnType<typeof createStatusApp>;

before(async () => {
  mock = await startMockUpstream();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up-bounds, api_base: ${mock.base} }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0 }
  - { display_name: group, routing: { targets: [{ model: gpt }] } }
api_keys:
  - { display_name: all, key_env: CALLER, allowed_models: ["*"] }
`,
    { env: { CALLER } },
  ));
  proxy = createProxyApp(gw);
  status = createStatusApp(gw);
});
after(() => mock.close());
beforeEach(() => {
  mock.requests.length = 0;
});

async function chat(body: unknown): Promise<{ status: number; text: string }> {
  const res = await proxy.request('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  }, { peer: '127.0.0.1:5555' });
  return { status: res.status, text: await res.text() };
}

const metrics = async () => (await status.request('/metrics')).text();

describe('a body nested too deep', () => {
  const nested = (levels: number) =>
    `{"model":"group","messages":[{"role":"user","content":"hi"}],"metadata":${'['.repeat(levels)}${
      ']'.repeat(levels)
    }}`;

  async function healthy(): Promise<void> {
    const rows = await (await status.request('/status/models')).json() as { display_name: string; status: string }[];
    assert.equal(rows.find((r) => r.display_name === 'gpt')!.status, 'healthy');
    const state = (await metrics()).split('\n').find((l) =>
      l.startsWith('aisix_deployment_state{') && labelsOf(l).model === 'gpt'
    );
    assert.ok(state?.endsWith(' 0'), `deployment state: ${state}`);
  }

  test('100,000 levels: a 400 naming the limit, no upstream request, the target still healthy', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await chat(nested(100_000));
      assert.equal(r.status, 400);
      assert.deepEqual(JSON.parse(r.text), {
        error: {
          message:
            `request payload is invalid: invalid JSON request body: nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
          type: 'invalid_request_error',
        },
      });
    }
    assert.equal(mock.requests.length, 0);
    await healthy();
  });

  test(`${MAX_JSON_DEPTH} levels pass (the top level counted); one more does not`, async () => {
    // The body is one level, `metadata` adds the rest.
    assert.equal((await chat(nested(MAX_JSON_DEPTH - 1))).status, 200);
    assert.equal((await chat(nested(MAX_JSON_DEPTH))).status, 400);
    assert.equal(mock.requests.length, 1);
  });

  test('a body the adapter cannot serialise is the caller 400, never a transport failure of the target', async () => {
    const d = new Dispatcher({
      config: gw.config,
      upstream: gw.upstream,
      health: gw.health,
      routing: gw.routingState,
      metrics: gw.metrics,
    });
    const snapshot = gw.snapshot!;
    for (let i = 0; i < 3; i++) {
      // A BigInt: JSON.stringify throws in the adapter, before anything is sent.
      const r = await d.dispatch({
        snapshot,
        model: snapshot.modelByName('group')!,
        endpoint: 'chat',
        body: { model: 'group', messages: MESSAGES, metadata: { n: 1n } },
        stream: false,
        signal: new Cancel(),
      });
      assert.equal(r.kind, 'error');
      if (r.kind !== 'error') return;
      assert.equal(r.failure.status, 400);
      assert.equal(r.failure.kind, 'invalid_request');
      assert.doesNotMatch(r.failure.message, /BigInt/); // the runtime's words go to the log only
      assert.match(r.failure.detail ?? '', /BigInt/);
    }
    assert.equal(mock.requests.length, 0);
    await healthy();
  });
});
