// The admin API as AISIX's read-only one answers, in file mode (docs/aisix-compatibility.md "Endpoints"):
// list and get for every kind Sluice holds, in AISIX's `{id, value, revision}` shape with secrets redacted;
// 405 with `Allow: GET,HEAD` for every write before the key; 404 for the removed api-key rotation; and the
// playground, forwarded through the proxy app with the caller's proxy key to a real mock upstream.
// Run: node --import tsx --test test/unit/admin-api.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdminApp } from '../../src/admin/app.ts';
import { createGateway } from '../../src/boot.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { VERSION } from '../../src/version.ts';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith, testPlatform } from '../support/platform.ts';

const ADMIN_KEY = 'admin-api-SECRET-key-31c7';
const UPSTREAM_KEY = 'sk-upstream-SECRET-admin-api-1';
const CALLER_KEY = 'sk-caller-SECRET-admin-api-2';
const MODERATION_KEY = 'sk-moderation-SECRET-admin-api-3';
const OTLP_TOKEN = 'otlp-SECRET-admin-api-4';
const ALIYUN_SECRET = 'aliyun-SECRET-admin-api-5';
const MCP_SECRET = 'mcp-SECRET-admin-api-6';
const AGENT_SECRET = 'agent-SECRET-admin-api-7';
const SECRETS = [
  ADMIN_KEY,
  UPSTREAM_KEY,
  CALLER_KEY,
  MODERATION_KEY,
  OTLP_TOKEN,
  ALIYUN_SECRET,
  MCP_SECRET,
  AGENT_SECRET,
];
const ENV = { UPSTREAM_KEY, CALLER_KEY, MODERATION_KEY, OTLP_TOKEN, ALIYUN_SECRET, MCP_SECRET, AGENT_SECRET };
const PEER = { peer: '127.0.0.1:4444' };

const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [${ADMIN_KEY}] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

function resources(base: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: "${base}" }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-upstream, retries: 0 }
  - { display_name: group, routing: { targets: [{ model: gpt }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden-word }] }
  - { name: mod, kind: openai_moderation, enabled: false, api_key: "\${MODERATION_KEY}" }
  - name: ali
    kind: aliyun_text_moderation
    enabled: false
    region: cn-shanghai
    access_key_id: ak
    access_key_secret: \${ALIYUN_SECRET}
cache_policies:
  - { name: main, enabled: false }
observability_exporters:
  - name: traces
    kind: otlp_http
    enabled: false
    endpoint: http://127.0.0.1:9/v1/traces
    headers: { authorization: "Bearer \${OTLP_TOKEN}" }
mcp_servers:
  - { name: tools, url: "http://127.0.0.1:9/mcp", auth_type: bearer, secret: "\${MCP_SECRET}" }
  - { display_name: open, url: "http://127.0.0.1:9/open", timeout_ms: 500, enabled: false }
a2a_agents:
  - { name: helper, url: "http://127.0.0.1:9/a2a", auth_type: api_key, secret: "\${AGENT_SECRET}" }
`;
}

/** The kinds Sluice holds, by AISIX's admin path segment, with the rows the file above has. */
const KINDS: Record<string, number> = {
  models: 2,
  api_keys: 1,
  apikeys: 1,
  provider_keys: 1,
  guardrails: 3,
  cache_policies: 1,
  observability_exporters: 1,
  mcp_servers: 2,
  a2a_agents: 1,
};

type Entry = { id: string; value: Record<string, unknown>; revision: number };

let mock: MockUpstream;
let gw: Gateway;
let admin: ReturnType<typeof createAdminApp>;
const bodies: string[] = [];

before(async () => {
  mock = await startMockUpstream();
  ({ gw } = await gatewayWith(resources(mock.base), { config: CONFIG, env: ENV }));
  admin = createAdminApp(gw, createProxyApp(gw));
});
after(async () => {
  gw.stop();
  await mock.close();
  for (const b of bodies) for (const s of SECRETS) assert.equal(b.includes(s), false, `a body holds ${s}: ${b}`);
});

async function ask(
  path: string,
  init: RequestInit = {},
  key: string | null = ADMIN_KEY,
): Promise<{ res: Response; text: string }> {
  const headers = new Headers(init.headers);
  if (key !== null) headers.set('authorization', `Bearer ${key}`);
  const res = await admin.request(path, { ...init, headers }, PEER);
  const text = await res.text();
  bodies.push(text);
  return { res, text };
}

describe('reads: every kind Sluice holds, AISIX shape', () => {
  test('GET /admin/v1/<kind>: a bare array of {id, value, revision}, revision 0 in file mode', async () => {
    for (const [kind, count] of Object.entries(KINDS)) {
      const { res, text } = await ask(`/admin/v1/${kind}`);
      assert.equal(res.status, 200, `${kind}: ${text}`);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const list = JSON.parse(text) as Entry[];
      assert.equal(list.length, count, kind);
      for (const e of list) {
        assert.deepEqual(Object.keys(e), ['id', 'value', 'revision'], kind);
        assert.equal(typeof e.id, 'string');
        assert.equal(e.revision, 0);
        assert.equal('id' in e.value, false, `${kind}: the id is not repeated in the value`);
      }
    }
  });

  test('values: documents as served, secrets redacted', async () => {
    const list = async (kind: string) => JSON.parse((await ask(`/admin/v1/${kind}`)).text) as Entry[];
    const [gpt, group] = await list('models');
    assert.equal(gpt!.value.display_name, 'gpt');
    assert.equal(gpt!.value.model_name, 'gpt-upstream');
    assert.equal('kind' in gpt!.value, false, "Sluice's derived model kind is not served");
    assert.equal((group!.value.routing as { targets: { model: string }[] }).targets[0]!.model, 'gpt');
    assert.equal((await list('provider_keys'))[0]!.value.api_key, '[redacted]');
    assert.equal((await list('api_keys'))[0]!.value.key_hash, '[redacted]');
    assert.deepEqual(await list('apikeys'), await list('api_keys'), "AISIX's former spelling serves the same rows");
    const guardrails = Object.fromEntries((await list('guardrails')).map((e) => [e.value.name, e.value]));
    assert.equal(guardrails.words!.kind, 'keyword', "a guardrail's own kind is kept");
    assert.deepEqual(guardrails.words!.patterns, [{ kind: 'literal', value: 'forbidden-word' }]);
    assert.equal(guardrails.mod!.api_key, '[redacted]');
    assert.equal(guardrails.mod!.enabled, false);
    assert.equal(guardrails.ali!.access_key_secret, '[redacted]');
    assert.equal(guardrails.ali!.region, 'cn-shanghai');
    const [policy] = await list('cache_policies');
    assert.equal(policy!.value.name, 'main');
    assert.equal(policy!.value.ttl_seconds, 3600);
    const [exporter] = await list('observability_exporters');
    assert.equal(exporter!.value.kind, 'otlp_http');
    assert.deepEqual(exporter!.value.headers, { authorization: '[redacted]' });
    assert.deepEqual((await list('mcp_servers')).map((e) => e.value), [
      {
        name: 'tools',
        type: 'mcp',
        url: 'http://127.0.0.1:9/mcp',
        transport: 'streamable_http',
        auth_type: 'bearer',
        secret: '[redacted]',
        timeout_ms: 30000,
        enabled: true,
      },
      {
        name: 'open',
        type: 'mcp',
        url: 'http://127.0.0.1:9/open',
        transport: 'streamable_http',
        auth_type: 'none',
        timeout_ms: 500,
        enabled: false,
      },
    ]);
    assert.deepEqual((await list('a2a_agents')).map((e) => e.value), [
      {
        name: 'helper',
        url: 'http://127.0.0.1:9/a2a',
        protocol_version: '1.0',
        auth_type: 'api_key',
        secret: '[redacted]',
        enabled: true,
      },
    ]);
  });

  test('GET /admin/v1/<kind>/<id>: the list entry itself; an unknown id is 404', async () => {
    for (const kind of Object.keys(KINDS)) {
      const list = JSON.parse((await ask(`/admin/v1/${kind}`)).text) as Entry[];
      for (const e of list) {
        const { res, text } = await ask(`/admin/v1/${kind}/${encodeURIComponent(e.id)}`);
        assert.equal(res.status, 200, `${kind}/${e.id}`);
        assert.deepEqual(JSON.parse(text), e);
      }
      const missing = await ask(`/admin/v1/${kind}/no-such-row`);
      assert.equal(missing.res.status, 404, kind);
      assert.deepEqual(JSON.parse(missing.text), {
        error: { message: `no ${kind} row "no-such-row"`, type: 'not_found' },
      });
    }
  });

  test('reads need the admin key (401 without it, or with a caller key)', async () => {
    for (const path of ['/admin/v1/guardrails', '/admin/v1/models/some-id', '/admin/v1/health']) {
      assert.equal((await ask(path, {}, null)).res.status, 401, path);
      assert.equal((await ask(path, {}, CALLER_KEY)).res.status, 401, path);
    }
  });

  test('kinds Sluice does not serve, the OpenAPI pages and anything deeper are 404 with or without a key', async () => {
    for (
      const path of [
        '/admin/v1/oidc_providers',
        '/admin/v1/claim_mappings/x',
        '/admin/v1/mcp_policies',
        '/admin/v1/mcp_auth_settings',
        '/admin/openapi.json',
        '/admin/v1/models/x/y',
        '/admin/v1/models/',
        '/admin/v1/health/x',
      ]
    ) {
      for (const key of [ADMIN_KEY, null]) assert.equal((await ask(path, {}, key)).res.status, 404, path);
    }
  });
});

describe('writes: removed, as in AISIX', () => {
  test('POST on a list, PUT/PATCH/DELETE/POST on a row: 405, Allow: GET,HEAD, before the key', async () => {
    const cases: [string, string][] = [];
    for (const kind of Object.keys(KINDS)) {
      cases.push(['POST', `/admin/v1/${kind}`], ['PUT', `/admin/v1/${kind}`]);
      for (const m of ['PUT', 'PATCH', 'DELETE', 'POST']) cases.push([m, `/admin/v1/${kind}/some-id`]);
    }
    cases.push(['POST', '/admin/v1/models/status'], ['DELETE', '/admin/v1/health']);
    for (const [method, path] of cases) {
      for (const key of [ADMIN_KEY, null, 'wrong']) {
        const body = method === 'DELETE' ? undefined : JSON.stringify({ display_name: 'x' });
        const { res, text } = await ask(path, { method, body }, key);
        assert.equal(res.status, 405, `${method} ${path} key=${key}: ${text}`);
        assert.equal(res.headers.get('allow'), 'GET,HEAD', `${method} ${path}`);
        assert.equal(JSON.parse(text).error.type, 'method_not_allowed');
      }
    }
    // Nothing changed.
    assert.equal((JSON.parse((await ask('/admin/v1/models')).text) as Entry[]).length, 2);
  });

  test('api-key rotation is gone: 404 for any method, with or without a key', async () => {
    const [key] = JSON.parse((await ask('/admin/v1/api_keys')).text) as Entry[];
    for (const spelling of ['api_keys', 'apikeys']) {
      for (const id of [key!.id, 'some-id']) {
        for (const method of ['POST', 'GET']) {
          for (const k of [ADMIN_KEY, null]) {
            const { res } = await ask(`/admin/v1/${spelling}/${id}/rotate`, { method }, k);
            assert.equal(res.status, 404, `${method} ${spelling}/${id}/rotate`);
          }
        }
      }
    }
  });
});

describe('the playground: /playground/chat/completions through the proxy pipeline', () => {
  const chat = (content: string, key: string | null, extra: Record<string, unknown> = {}) =>
    ask('/playground/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content }], ...extra }),
    }, key);

  test("a caller's proxy key: the proxy's answer, the upstream called with the provider key", async () => {
    mock.requests.length = 0;
    mock.script({ body: chatCompletion('gpt-upstream', 'playground ok') });
    const { res, text } = await chat('hello from the playground', CALLER_KEY);
    assert.equal(res.status, 200, text);
    const body = JSON.parse(text) as { model: string; choices: { message: { content: string } }[] };
    assert.equal(body.choices[0]!.message.content, 'playground ok');
    assert.equal(body.model, 'gpt', "the caller's model name, as the proxy answers");
    assert.equal(res.headers.get('server'), `sluice/${VERSION}`);
    assert.ok(res.headers.get('x-aisix-request-id'));
    assert.equal(mock.requests.length, 1);
    const up = mock.requests[0]!;
    assert.equal(up.method, 'POST');
    assert.equal(new URL(up.url, 'http://x').pathname, '/v1/chat/completions');
    assert.equal(up.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.equal(up.json?.model, 'gpt-upstream');
  });

  test('the admin key is not a proxy key; no key is 401; the upstream sees nothing', async () => {
    mock.requests.length = 0;
    for (const key of [ADMIN_KEY, null]) {
      const { res, text } = await chat('hi', key);
      assert.equal(res.status, 401, text);
      assert.equal(JSON.parse(text).error.type, 'invalid_api_key');
    }
    assert.equal(mock.requests.length, 0);
  });

  test('the pipeline applies: the guardrail refuses, the stream streams', async () => {
    mock.requests.length = 0;
    const blocked = await chat('say forbidden-word now', CALLER_KEY);
    assert.equal(blocked.res.status, 422, blocked.text);
    assert.equal(mock.requests.length, 0);
    mock.script({ sse: [chunk('gpt-upstream', 'streamed')] });
    const streamed = await chat('stream this', CALLER_KEY, { stream: true });
    assert.equal(streamed.res.status, 200, streamed.text);
    assert.match(streamed.res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.match(streamed.text, /data: \[DONE\]/);
  });

  test('other methods are 405 with Allow: POST; unwired (no proxy app) is 501', async () => {
    const { res } = await ask('/playground/chat/completions', { method: 'GET' }, CALLER_KEY);
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'POST');
    const bare = createAdminApp(gw);
    const unwired = await bare.request('/playground/chat/completions', { method: 'POST', body: '{}' }, PEER);
    assert.equal(unwired.status, 501);
    await unwired.text();
  });

  test("the boot's admin app is wired to its own proxy app", async () => {
    const platform = testPlatform(ENV);
    const c = loadConfig('/t/config.yaml', CONFIG, platform.env);
    assert.ok(c.ok);
    const g = createGateway(c.config, platform);
    const r = await loadResourcesFile('/t/resources.yaml', resources(mock.base), platform.env);
    assert.ok(r.ok);
    g.gw.apply(r.snapshot, { configHash: 'h' });
    g.gw.lifecycle.serve();
    mock.script({ body: chatCompletion('gpt-upstream', 'wired') });
    const res = await g.admin!.request('/playground/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'boot wiring' }] }),
    }, PEER);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /wired/);
    g.gw.stop();
  });
});
