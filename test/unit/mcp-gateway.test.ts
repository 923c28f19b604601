// /mcp and /mcp/{server} through app.request() against real upstream MCP servers on loopback (docs/mcp.md):
// aggregation and scoping, a failing upstream skipped, the ACL, the version gate and transport checks, upstream
// credentials (bearer, OAuth client credentials with a 401 refresh) and that no caller key reaches an upstream,
// a 2026-07-28 upstream and caller, rate limits per key × server, anonymous access.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import {
  type McpUpstream,
  startModernUpstream,
  startSdkUpstream,
  startTokenEndpoint,
  type TokenEndpoint,
} from '../support/mcp-upstream.ts';
import { gatewayWith, midMinute, type TestPlatform } from '../support/platform.ts';

const PEER = { peer: '127.0.0.1:5555' };
const KEYS = {
  all: 'sk-mcp-all-SECRET-1',
  echo: 'sk-mcp-echo-SECRET-2',
  none: 'sk-mcp-none-SECRET-3',
  limited: 'sk-mcp-limited-SECRET-4',
};
const ACCEPT = 'application/json, text/event-stream';
const SUPPORTED = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'];

let alpha: McpUpstream;
let beta: McpUpstream;
let dead: McpUpstream;
let guarded: McpUpstream;
let oauth: McpUpstream;
let modern: McpUpstream;
let tokens: TokenEndpoint;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

function resources(): string {
  return `_format_version: "1"
mcp_servers:
  - { name: beta, url: "${beta.url}" }
  - { name: alpha, url: "${alpha.url}" }
  - { name: dead, url: "${dead.url}" }
  - { name: off, url: "${alpha.url}", enabled: false }
  - { name: guarded, url: "${guarded.url}", auth_type: bearer, secret: up-SECRET }
  - { name: oauth, url: "${oauth.url}", auth_type: oauth2, secret: s1, client_id: c1, token_url: "${tokens.url}", scopes: [tools, read] }
  - { name: modern, url: "${modern.url}", protocol_version: "2026-07-28" }
mcp_auth_settings:
  - resource_url: https://gw.example.com/mcp
    anonymous: { api_key_id: "${uuidV5('api_keys/anon')}", servers: [alpha], source_cidrs: ["127.0.0.0/8"] }
api_keys:
  - { display_name: all, key_env: K_ALL, allowed_models: [], mcp_access: { allow: ["*"], deny: ["*__whoami"] } }
  - { display_name: echo, key_env: K_ECHO, allowed_models: [], mcp_access: { allow: ["*__echo", "guarded__whoami", "oauth__whoami"] } }
  - { display_name: none, key_env: K_NONE, allowed_models: [] }
  - display_name: limited
    key_env: K_LIMITED
    allowed_models: []
    mcp_access: { allow: ["alpha__*", "beta__*"] }
    mcp_rate_limits: { alpha: { rpm: 1 } }
  - { display_name: anon, key_hash: "never-presented", allowed_models: [], mcp_access: { allow: ["*"] } }
`;
}

before(async () => {
  [alpha, beta, dead, guarded, oauth, modern, tokens] = await Promise.all([
    startSdkUpstream('alpha', { json: true }),
    startSdkUpstream('beta'),
    startSdkUpstream('dead'),
    startSdkUpstream('guarded'),
    startSdkUpstream('oauth'),
    startModernUpstream('modern'),
    startTokenEndpoint(),
  ]);
  dead.failWith = 500;
  guarded.requireAuth = 'Bearer up-SECRET';
  oauth.requireAuth = 'Bearer token-1';
  ({ gw, platform } = await gatewayWith(resources(), {
    env: { K_ALL: KEYS.all, K_ECHO: KEYS.echo, K_NONE: KEYS.none, K_LIMITED: KEYS.limited },
    now: midMinute(),
  }));
  app = createProxyApp(gw);
});

after(async () => {
  await Promise.all([alpha, beta, dead, guarded, oauth, modern, tokens].map((u) => u.close()));
});

let nextId = 1;

function rpc(
  path: string,
  method: string,
  params?: Record<string, unknown>,
  opts: { key?: string | null; headers?: Record<string, string>; httpMethod?: string; id?: unknown } = {},
): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: ACCEPT, ...opts.headers };
  const key = opts.key === undefined ? KEYS.all : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const body = { jsonrpc: '2.0', id: 'id' in opts ? opts.id : nextId++, method, ...(params ? { params } : {}) };
  const init: RequestInit = { method: opts.httpMethod ?? 'POST', headers };
  if ((opts.httpMethod ?? 'POST') === 'POST') init.body = JSON.stringify(body);
  return Promise.resolve(app.request(path, init, PEER));
}

async function result(res: Response): Promise<Record<string, unknown>> {
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  const body = await res.json() as { result?: Record<string, unknown>; error?: unknown };
  assert.ok(body.result, JSON.stringify(body));
  return body.result;
}

async function toolNames(path: string, key?: string | null): Promise<string[]> {
  const r = await result(await rpc(path, 'tools/list', undefined, { key }));
  return (r.tools as { name: string }[]).map((t) => t.name);
}

async function rpcError(res: Response, status: number): Promise<{ code: number; message: string; data?: unknown }> {
  assert.equal(res.status, status);
  const body = await res.json() as { error: { code: number; message: string; data?: unknown } };
  assert.ok(body.error, JSON.stringify(body));
  return body.error;
}

describe('/mcp: tools from every enabled server', () => {
  test('aggregated, namespaced, sorted by server then upstream order; a failing upstream is skipped with a WARN', async () => {
    const names = await toolNames('/mcp');
    assert.deepEqual(names, [
      'alpha__echo',
      'alpha__add',
      'alpha__fail',
      'beta__echo',
      'beta__add',
      'beta__fail',
      'guarded__echo',
      'guarded__add',
      'guarded__fail',
      'modern__now',
      'oauth__echo',
      'oauth__add',
      'oauth__fail',
    ]);
    const warn = platform.logs.find((l) => l.msg === 'skipping upstream in tools/list: list_tools failed');
    assert.equal(warn?.upstream, 'dead');
    assert.match(String(warn?.error), /HTTP 500/);
    assert.equal(alpha.received.some((r) => r.body?.method === 'tools/list'), true);
  });

  test('the relayed tool keeps name, description and inputSchema only', async () => {
    const r = await result(await rpc('/mcp/alpha', 'tools/list'));
    const echo = (r.tools as Record<string, unknown>[]).find((t) => t.name === 'echo')!;
    assert.deepEqual(Object.keys(echo).sort(), ['description', 'inputSchema', 'name']);
    assert.equal(echo.description, 'echoes its text');
  });

  test('tools/call relays to the named server; the upstream sees no caller key', async () => {
    const r = await result(await rpc('/mcp', 'tools/call', { name: 'alpha__add', arguments: { a: 2, b: 3 } }));
    assert.deepEqual(r, { content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } });
    const e = await result(await rpc('/mcp', 'tools/call', { name: 'beta__echo', arguments: { text: 'hi' } }));
    assert.deepEqual(e.content, [{ type: 'text', text: 'beta: hi' }]);
    const f = await result(await rpc('/mcp', 'tools/call', { name: 'beta__fail' }));
    assert.equal(f.isError, true, 'a tool error is passed through');
    for (const up of [alpha, beta]) {
      for (const r of up.received) {
        assert.equal(r.headers.authorization, undefined, 'no caller credential upstream');
        assert.equal(JSON.stringify(r).includes(KEYS.all), false);
      }
    }
  });

  test('scoped: original names, both spellings callable, another server prefix refused', async () => {
    assert.deepEqual(await toolNames('/mcp/beta'), ['echo', 'add', 'fail']);
    const a = await result(await rpc('/mcp/beta', 'tools/call', { name: 'echo', arguments: { text: 'x' } }));
    assert.deepEqual(a.content, [{ type: 'text', text: 'beta: x' }]);
    const b = await result(await rpc('/mcp/beta', 'tools/call', { name: 'beta__echo', arguments: { text: 'y' } }));
    assert.deepEqual(b.content, [{ type: 'text', text: 'beta: y' }]);
    const e = await rpcError(await rpc('/mcp/beta', 'tools/call', { name: 'alpha__echo', arguments: {} }), 200);
    assert.deepEqual(e, { code: -32602, message: "tool 'alpha__echo' is not available" });
  });

  test('an unknown or disabled server is a text 404, only after authentication', async () => {
    for (const name of ['nope', 'off']) {
      const res = await rpc(`/mcp/${name}`, 'tools/list');
      assert.equal(res.status, 404);
      assert.equal(await res.text(), `unknown MCP server: ${name}`);
      assert.equal((await rpc(`/mcp/${name}`, 'tools/list', undefined, { key: null })).status, 401);
      assert.equal((await rpc(`/mcp/${name}`, 'tools/list', undefined, { key: 'sk-wrong' })).status, 401);
    }
    const bad = await rpc('/mcp/%E0%A4%A', 'tools/list');
    assert.equal(bad.status, 400);
  });

  test('call errors: no prefix, unknown server, upstream failure', async () => {
    assert.deepEqual(await rpcError(await rpc('/mcp', 'tools/call', { name: 'echo' }), 200), {
      code: -32602,
      message: "tool name 'echo' is missing a 'server__tool' prefix",
    });
    assert.deepEqual(await rpcError(await rpc('/mcp', 'tools/call', { name: 'ghost__echo' }), 200), {
      code: -32602,
      message: "unknown MCP server 'ghost'",
    });
    assert.deepEqual(await rpcError(await rpc('/mcp', 'tools/call', { name: 'dead__echo' }), 200), {
      code: -32603,
      message: "upstream MCP server 'dead' failed to call tool",
    });
    assert.ok(platform.logs.some((l) => l.msg === 'upstream tools/call failed' && l.upstream === 'dead'));
  });
});

describe('access control', () => {
  test('tools/list shows only what the key may call; a refused call is -32602, its upstream not contacted', async () => {
    assert.deepEqual(await toolNames('/mcp', KEYS.echo), [
      'alpha__echo',
      'beta__echo',
      'guarded__echo',
      'guarded__whoami',
      'oauth__echo',
      'oauth__whoami',
    ]);
    const before = alpha.received.length;
    const e = await rpcError(await rpc('/mcp', 'tools/call', { name: 'alpha__add' }, { key: KEYS.echo }), 200);
    assert.deepEqual(e, { code: -32602, message: "tool 'alpha__add' is not available" });
    assert.equal(alpha.received.length, before);
  });

  test('no layer grants nothing; a deny pattern wins over an allow of *', async () => {
    assert.deepEqual(await toolNames('/mcp', KEYS.none), []);
    assert.equal((await toolNames('/mcp')).some((n) => n.endsWith('__whoami')), false);
  });
});

describe('upstream credentials', () => {
  test('bearer: the gateway-held secret, never the caller key; a cleartext upstream is warned about once', async () => {
    const r = await result(await rpc('/mcp', 'tools/call', { name: 'guarded__whoami' }, { key: KEYS.echo }));
    assert.deepEqual(r.content, [{ type: 'text', text: 'Bearer up-SECRET' }]);
    await rpc('/mcp', 'tools/call', { name: 'guarded__whoami' }, { key: KEYS.echo });
    const warns = platform.logs.filter((l) => l.server === 'guarded' && String(l.msg).includes('cleartext http'));
    assert.equal(warns.length, 1);
    assert.equal(
      warns[0]!.msg,
      'the gateway-held upstream credential is sent over cleartext http; anyone on the network path can read it — serve this upstream over https',
    );
  });

  test('oauth2: minted once and cached; an upstream 401 drops it and the next call mints afresh', async () => {
    const call = () => rpc('/mcp', 'tools/call', { name: 'oauth__whoami' }, { key: KEYS.echo });
    assert.deepEqual((await result(await call())).content, [{ type: 'text', text: 'Bearer token-1' }]);
    assert.deepEqual((await result(await call())).content, [{ type: 'text', text: 'Bearer token-1' }]);
    assert.equal(tokens.minted.length, 1, 'cached across calls');
    const form = tokens.requests[0]!;
    assert.deepEqual(Object.fromEntries(form), {
      grant_type: 'client_credentials',
      client_id: 'c1',
      client_secret: 's1',
      scope: 'tools read',
    });
    oauth.requireAuth = 'Bearer token-2'; // the upstream revoked token-1
    assert.equal((await rpcError(await call(), 200)).code, -32603);
    assert.deepEqual((await result(await call())).content, [{ type: 'text', text: 'Bearer token-2' }]);
    assert.equal(tokens.minted.length, 2);
  });

  test('a 2026-07-28 upstream: server/discover, then the request with its _meta and headers', async () => {
    const r = await result(await rpc('/mcp', 'tools/call', { name: 'modern__now' }));
    assert.deepEqual(r.content, [{ type: 'text', text: 'modern at 2026' }]);
    const methods = modern.methods();
    assert.deepEqual(methods.slice(-2), ['server/discover', 'tools/call']);
    assert.equal(modern.received.at(-1)!.headers['mcp-name'], 'now');
  });
});

describe('the protocol', () => {
  test('initialize negotiates within the one supported list, and mints no session', async () => {
    for (
      const [asked, got] of [['2025-06-18', '2025-06-18'], ['2024-11-05', '2025-11-25'], ['2099-01-01', '2025-11-25']]
    ) {
      const res = await rpc('/mcp', 'initialize', {
        protocolVersion: asked,
        capabilities: {},
        clientInfo: { name: 't' },
      });
      assert.equal(res.headers.get('mcp-session-id'), null);
      const r = await result(res);
      assert.equal(r.protocolVersion, got);
      assert.deepEqual(r.capabilities, { tools: {} });
    }
  });

  test("the MCP-Protocol-Version gate: AISIX's exact 400", async () => {
    const res = await rpc('/mcp', 'tools/list', undefined, {
      headers: { 'mcp-protocol-version': '2099-01-01' },
      id: 7,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32600, message: 'unsupported MCP-Protocol-Version: 2099-01-01', data: { supported: SUPPORTED } },
    });
    const long = await rpc('/mcp', 'tools/list', undefined, {
      headers: { 'mcp-protocol-version': 'x'.repeat(80) },
      id: {},
    });
    const body = await long.json() as { id: unknown; error: { message: string } };
    assert.equal(body.id, null);
    assert.equal(body.error.message, `unsupported MCP-Protocol-Version: ${'x'.repeat(64)}`);
    for (const v of SUPPORTED.slice(0, 3)) {
      assert.equal(
        (await rpc('/mcp', 'tools/list', undefined, { headers: { 'mcp-protocol-version': v } })).status,
        200,
      );
    }
  });

  test('a 2026-07-28 caller: server/discover, modern results, ping removed', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const h = (m: string) => ({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': m });
    const d = await result(await rpc('/mcp', 'server/discover', { _meta: meta }, { headers: h('server/discover') }));
    assert.deepEqual(d.supportedVersions, SUPPORTED);
    assert.equal(d.resultType, 'complete');
    assert.equal(d.cacheScope, 'private');
    const list = await result(await rpc('/mcp/alpha', 'tools/list', { _meta: meta }, { headers: h('tools/list') }));
    assert.equal(list.ttlMs, 0);
    assert.equal(list.resultType, 'complete');
    assert.equal(
      (await rpcError(await rpc('/mcp', 'ping', { _meta: meta }, { headers: h('ping') }), 404)).code,
      -32601,
    );
    const e = await rpcError(await rpc('/mcp', 'tools/list', {}, { headers: h('tools/list') }), 400);
    assert.equal(e.code, -32602);
    const mismatch = await rpcError(
      await rpc('/mcp', 'tools/list', { _meta: meta }, { headers: h('tools/call') }),
      400,
    );
    assert.equal(mismatch.code, -32020);
    assert.deepEqual(await result(await rpc('/mcp', 'ping')), {}, 'a legacy ping');
  });

  test('transport: 405 for GET after auth, 406, 415, 202 for a notification, 403 for a foreign Origin', async () => {
    const get = await rpc('/mcp', 'x', undefined, { httpMethod: 'GET' });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal((await rpc('/mcp', 'x', undefined, { httpMethod: 'GET', key: null })).status, 401);
    assert.equal((await rpc('/mcp', 'tools/list', undefined, { headers: { accept: 'application/json' } })).status, 406);
    assert.equal(
      (await rpc('/mcp', 'tools/list', undefined, { headers: { 'content-type': 'text/plain' } })).status,
      415,
    );
    const n = await app.request('/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT, authorization: `Bearer ${KEYS.all}` },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    }, PEER);
    assert.equal(n.status, 202);
    assert.equal(await n.text(), '');
    const foreign = await rpc('/mcp', 'tools/list', undefined, { headers: { origin: 'https://evil.example' } });
    assert.equal(foreign.status, 403);
    const same = await rpc('/mcp', 'tools/list', undefined, {
      headers: { origin: 'http://localhost', host: 'localhost' },
    });
    assert.equal(same.status, 200);
    assert.equal((await rpc('/mcp', 'resources/read')).status, 200, 'legacy -32601 at 200');
    assert.equal((await rpc('/mcp/', 'tools/list')).status, 200, '/mcp/ is /mcp');
  });
});

describe('governance and inbound auth', () => {
  test('a rate limit per key × server: 429 in the OpenAI envelope; another server and refused tools unaffected', async () => {
    const refused = await rpc('/mcp', 'tools/call', { name: 'guarded__echo' }, { key: KEYS.limited });
    assert.equal((await rpcError(refused, 200)).code, -32602, 'the ACL first: no limit burnt');
    const call = (name: string) => rpc('/mcp', 'tools/call', { name, arguments: { text: 't' } }, { key: KEYS.limited });
    assert.equal((await call('alpha__echo')).status, 200);
    const res = await call('alpha__echo');
    assert.equal(res.status, 429);
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.equal(res.headers.get('x-ratelimit-limit-requests'), null);
    assert.deepEqual(await res.json(), {
      error: { message: 'request limit exceeded (requests)', type: 'rate_limit_exceeded' },
    });
    assert.equal((await call('beta__echo')).status, 200);
    assert.equal(
      (await rpc('/mcp/alpha', 'tools/list', undefined, { key: KEYS.limited })).status,
      200,
      'lists are ungoverned',
    );
  });

  test('anonymous: only on an allowed entry from an allowed source, as its principal, narrowed to its servers', async () => {
    assert.deepEqual(await toolNames('/mcp/alpha', null), ['echo', 'add', 'fail', 'whoami']);
    assert.equal(
      (await rpc('/mcp/beta', 'tools/list', undefined, { key: null })).status,
      401,
      'not an anonymous entry',
    );
    assert.equal((await rpc('/mcp', 'tools/list', undefined, { key: null })).status, 401, 'aggregate_entry is off');
    const far = await app.request('/mcp/alpha', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    }, { peer: '10.1.2.3:4000' });
    assert.equal(far.status, 401, 'a source outside source_cidrs');
    const bad = await rpc('/mcp/alpha', 'tools/list', undefined, { key: 'sk-not-a-key' });
    assert.equal(bad.status, 401, 'a bad credential is never downgraded to anonymous');
  });

  test('the OAuth discovery surface stays dormant (no oidc_providers): a bare 404, one WARN', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      for (const method of ['GET', 'HEAD', 'POST']) {
        const res = await app.request(path, { method }, PEER);
        assert.equal(res.status, 404);
        assert.equal(await res.text(), '');
      }
    }
    const res = await rpc('/mcp', 'tools/list', undefined, { key: null });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), null, 'no challenge while dormant');
    await rpc('/mcp', 'tools/list');
    const dormant = platform.logs.filter((l) => String(l.msg).startsWith('mcp_auth_settings.resource_url is set'));
    assert.equal(dormant.length, 1);
  });

  test('the access log and metrics label /mcp by template, protocol and provider mcp', async () => {
    for (const path of ['/mcp', '/mcp/', '/mcp/beta']) {
      const lines = () => platform.logs.filter((l) => l.msg === 'proxy request completed').length;
      const before = lines();
      await rpc(path, 'tools/list');
      assert.equal(lines() - before, 1, `one access-log line for ${path}`);
    }
    const line = platform.logs.filter((l) => l.msg === 'proxy request completed' && l.path === '/mcp/{server}').at(-1);
    assert.ok(line, 'an access-log line with the template path');
    assert.equal(line.provider, 'mcp');
    const m = gw.metrics.render();
    assert.match(
      m,
      /aisix_proxy_requests_total\{[^}]*endpoint="\/mcp\/\{server\}"[^}]*inbound_protocol="mcp"[^}]*model="mcp"/,
    );
  });
});
