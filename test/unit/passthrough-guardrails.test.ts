// Guardrails on passthrough routes (docs/endpoints.md "Passthrough routes"): the request's envelope text (or
// its whole body) checked before anything is sent, the bytes sent never rewritten by a mask, and answers
// checked whole or, for an event stream, through the stream guard.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import { AttachmentIndex } from '../../src/guardrails/attachments.ts';
import { buildGuardrail } from '../../src/guardrails/build.ts';
import { GuardrailSchema } from '../../src/guardrails/schema.ts';
import { gatewayWith } from '../support/platform.ts';
import { type ProviderMock, startProviderMock } from '../support/passthrough-upstream.ts';

const CALLER = 'sk-caller-guarded-1';
const ANTHROPIC_KEY = 'sk-ant-upstream-SECRET-g1';
const OPENAI_KEY = 'sk-openai-upstream-SECRET-g2';

let mock: ProviderMock;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  mock = await startProviderMock({ anthropic: ANTHROPIC_KEY, bearer: OPENAI_KEY });
  const { gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: ant, provider: anthropic, secret: ${ANTHROPIC_KEY} }
  - { display_name: oai, provider: openai, secret: ${OPENAI_KEY}, api_base: "${mock.url}/v1" }
api_keys:
  - { display_name: app, key_env: CALLER, allowed_models: [], allowed_routes: ["*"] }
passthrough_routes:
  - { name: raw-anthropic, path_prefix: /raw/anthropic, target_url: "${mock.url}", provider_key: ant }
  - { name: raw-openai, path_prefix: /raw/openai, target_url: "${mock.url}/v1", provider_key: oai }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden }, { kind: literal, value: "Hello there" }] }
  - { name: pii, kind: pii, detectors: [{ type: email }] }
`,
    { env: { CALLER } },
  );
  app = createProxyApp(gw);
});
after(() => mock.close());

const post = (path: string, body: string) =>
  Promise.resolve(app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
    body,
  }, { peer: '127.0.0.1:1' }));

describe('passthrough routes under guardrails', () => {
  test('a blocked request: 422 in the OpenAI envelope, nothing sent', async () => {
    const before = mock.requests.length;
    const res = await post(
      '/raw/anthropic/v1/messages',
      JSON.stringify({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'a forbidden word' }] }),
    );
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), {
      error: { message: "request blocked by content policy (guardrail 'words')", type: 'content_filter' },
    });
    // A body with no envelope is checked whole.
    const raw = await post('/raw/openai/things', JSON.stringify({ anything: ['forbidden'] }));
    assert.equal(raw.status, 422);
    assert.equal(mock.requests.length, before);
  });

  test('a mask never rewrites the bytes relayed', async () => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'mail me at a@example.com' }] });
    const res = await post('/raw/openai/echo', body);
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(mock.requests.at(-1)!.body.toString('utf8'), body);
  });

  test('a whole answer the chain blocks: 422, the upstream’s bytes withheld', async () => {
    const res = await Promise.resolve(app.request('/raw/openai/x?w=forbidden', {
      headers: { authorization: `Bearer ${CALLER}` },
    }));
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), {
      error: { message: "response blocked by content policy (guardrail 'words')", type: 'content_filter' },
    });
  });

  test('an Anthropic event stream the chain blocks ends with the error frame', async () => {
    const res = await post(
      '/raw/anthropic/v1/messages',
      JSON.stringify({ model: 'm', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    );
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.doesNotMatch(text, /event: message_stop/);
    assert.match(text, /event: error\ndata: .*response blocked by content policy \(guardrail 'words'\)/);
  });
});

describe('attachments scoped to a passthrough route', () => {
  test('select the route’s requests only (etcd `scope_type: passthrough_route`)', () => {
    const row = GuardrailSchema.parse({
      name: 'route-words',
      kind: 'keyword',
      patterns: [{ kind: 'literal', value: 'x' }],
    });
    const built = buildGuardrail('g-route', row);
    assert.ok(built.ok && built.guardrail);
    const entry = { id: 'g-route', name: 'route-words', createdAt: undefined, guardrail: built.guardrail! };
    const index = new AttachmentIndex([entry], [
      {
        id: 'a1',
        guardrail_id: 'g-route',
        scope_type: 'passthrough_route',
        scope_id: 'route-1',
        priority: 0,
        enabled: true,
      },
    ]);
    const names = (routeId?: string) =>
      index.resolve({ modelId: '', apiKeyId: 'k', teamId: undefined, routeId }).map((g) => g.name);
    assert.deepEqual(names('route-1'), ['route-words']);
    assert.deepEqual(names('route-2'), []);
    assert.deepEqual(names(), [], 'a model call names no route');
  });
});
