// The `:id` routes' path hygiene through app.request() against a recording mock (docs/endpoints.md "Path parameters
// and upstream bases"): on every files, batches, fine-tuning and videos id route, a segment whose percent-encoding
// does not decode is AISIX's 400 `invalid path parameter` (the unauthenticated caller's 401 first), and an id that
// could move the upstream URL (`\`, `..`, an escaped `.`, `/` or `\`) is the 400 naming it; nothing is sent.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { encodeRoutedId } from '../../src/endpoints/routed-id.ts';
import { encodeVideoId } from '../../src/proxy/videos.ts';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

let up: MockJobs;
let rig: RecordingGateway;

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${url}/v1" }
models:
  - { display_name: batch-mini, provider: openai, model_name: gpt-4o-mini, provider_key: oai }
  - { display_name: sora, provider: openai, model_name: sora-2, provider_key: oai }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: [batch-mini, sora] }
`;

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(resources(up.url), { APP: 'sk-app' });
});
after(() => up.close());

/** Every `:id` route, as method and path with `ID` where the id goes. */
const ID_ROUTES: [string, string][] = [
  ['GET', '/v1/files/ID'],
  ['DELETE', '/v1/files/ID'],
  ['GET', '/v1/files/ID/content'],
  ['GET', '/v1/batches/ID'],
  ['POST', '/v1/batches/ID/cancel'],
  ['GET', '/v1/fine_tuning/jobs/ID'],
  ['POST', '/v1/fine_tuning/jobs/ID/cancel'],
  ['GET', '/v1/videos/ID'],
  ['GET', '/v1/videos/ID/content'],
];

function call(method: string, path: string, key: string | null = 'sk-app'): Promise<Response> {
  const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  return Promise.resolve(rig.app.request(path, { method, headers }, { peer: '127.0.0.1:5555' }));
}

const INVALID_PARAM = {
  error: { message: 'request payload is invalid: invalid path parameter', type: 'invalid_request_error' },
};

describe('a path parameter that does not decode', () => {
  for (const [method, template] of ID_ROUTES) {
    test(`${method} ${template}: 401 unauthenticated, else AISIX's 400; nothing sent`, async () => {
      const before = up.received.length;
      for (const bad of ['%ff', 'file-%', '%e2%82']) {
        const path = template.replace('ID', bad);
        assert.equal((await call(method, path, null)).status, 401, path);
        const res = await call(method, path);
        assert.equal(res.status, 400, path);
        assert.deepEqual(await res.json(), INVALID_PARAM, path);
      }
      assert.equal(up.received.length, before);
    });
  }

  test('a well-formed escape is decoded as the id (the upstream gets the id, not its escape)', async () => {
    const res = await call('GET', '/v1/files/file%2Dabc');
    await res.body?.cancel();
    assert.equal(up.received.at(-1)?.path, '/v1/files/file-abc');
  });
});

/** Ids that, in an upstream URL, could step out of their segment. */
const UNSAFE = ['..', 'a\\b', '%2e%2e', 'a%2fb', '%5c', 'a/b', '%252e%252e'];

describe('an id that could move the upstream URL', () => {
  for (const [method, template] of ID_ROUTES.filter(([, t]) => !t.startsWith('/v1/videos'))) {
    test(`${method} ${template}: 400 naming the id, as sent or inside a routed id; nothing sent`, async () => {
      const before = up.received.length;
      for (const raw of UNSAFE) {
        for (const id of [encodeURIComponent(raw), encodeRoutedId(raw, 'batch-mini')]) {
          const res = await call(method, template.replace('ID', id));
          if (id === '..') {
            // URL parsing takes the step out before routing: no route is left to answer.
            assert.equal(res.status, 404);
            await res.body?.cancel();
            continue;
          }
          assert.equal(res.status, 400, `${raw} as ${id}`);
          assert.equal(
            (await res.json()).error.message,
            `request payload is invalid: malformed resource id ${JSON.stringify(raw)}`,
          );
        }
      }
      assert.equal(up.received.length, before);
    });
  }

  for (const [method, template] of ID_ROUTES.filter(([, t]) => t.startsWith('/v1/videos'))) {
    test(`${method} ${template}: a video id whose task could move the URL is the 400 naming it`, async () => {
      const sora = rig.gw.snapshot!.modelByName('sora')!;
      const before = up.received.length;
      for (const task of UNSAFE) {
        const res = await call(method, template.replace('ID', encodeVideoId(sora.id, 'sora', task)));
        assert.equal(res.status, 400, task);
        assert.equal(
          (await res.json()).error.message,
          `request payload is invalid: malformed resource id ${JSON.stringify(task)}`,
        );
      }
      assert.equal(up.received.length, before);
    });
  }
});

describe('/a2a/{agent} and /mcp/{server}: a name that does not decode', () => {
  let named: RecordingGateway;
  before(async () => {
    named = await recordingGateway(
      `_format_version: "1"
a2a_agents:
  - { name: echo, url: "${up.url}/a2a", auth_type: bearer, secret: agent-secret }
mcp_servers:
  - { name: tools, url: "${up.url}/mcp" }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: [], allowed_agents: ["*"], mcp_access: { allow: ["*"] } }
`,
      { APP: 'sk-app' },
    );
  });

  const rpc = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const ROUTES: [string, string, RequestInit][] = [
    ['POST', '/a2a/NAME', { method: 'POST', headers: { 'content-type': 'application/json' }, body: rpc }],
    ['GET', '/a2a/NAME/.well-known/agent-card.json', { method: 'GET' }],
    [
      'POST',
      '/mcp/NAME',
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: rpc,
      },
    ],
  ];

  for (const [method, template, init] of ROUTES) {
    test(`${method} ${template}: 401 unauthenticated, else AISIX's 400; nothing sent`, async () => {
      const sent = named.sent.length;
      const received = up.received.length;
      for (const bad of ['%ff', 'echo%', '%e2%82']) {
        const path = template.replace('NAME', bad);
        const send = (key: string | null) =>
          Promise.resolve(named.app.request(path, {
            ...init,
            headers: { ...init.headers as Record<string, string>, ...(key ? { authorization: `Bearer ${key}` } : {}) },
          }, { peer: '127.0.0.1:5555' }));
        const anonymous = await send(null);
        assert.equal(anonymous.status, 401, path);
        await anonymous.body?.cancel();
        const res = await send('sk-app');
        assert.equal(res.status, 400, path);
        assert.equal(res.headers.get('content-type'), 'application/json', path);
        assert.deepEqual(await res.json(), INVALID_PARAM, path);
      }
      assert.equal(named.sent.length, sent, 'no upstream request');
      assert.equal(up.received.length, received);
    });
  }

  test('a well-formed escape is decoded as the name', async () => {
    const card = await named.app.request('/a2a/%65cho/.well-known/agent-card.json', {
      headers: { authorization: 'Bearer sk-app' },
    }, { peer: '127.0.0.1:5555' });
    assert.ok(card.status !== 400 && card.status !== 404, `the agent echo was found: ${card.status}`);
    await card.body?.cancel();
    const unknown = await named.app.request('/mcp/t%6Fols%2Fx', {
      method: 'POST',
      headers: {
        authorization: 'Bearer sk-app',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: rpc,
    }, { peer: '127.0.0.1:5555' });
    assert.equal(unknown.status, 404);
    assert.equal(await unknown.text(), 'unknown MCP server: tools/x');
  });
});
