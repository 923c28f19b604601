// The OAuth protected-resource surface of /mcp (docs/mcp.md "Inbound authentication"): with one usable
// `resource_url` and an enabled `oidc_providers` row, AISIX's metadata document on both paths and the
// `WWW-Authenticate` challenges of a refused caller; a `resource_url` AISIX's check refuses keeps it dormant.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { MCP_AUTH_MSG } from '../../src/proxy/mcp.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-mcp-discovery';
const PEER = { peer: '127.0.0.1:1' };
const ACCEPT = 'application/json, text/event-stream';

// The issuers are never fetched: no caller here presents a JWT.
const resources = (resourceUrl: string) =>
  `_format_version: "1"
oidc_providers:
  - { name: corp, issuer: "https://idp.example", audiences: [sluice], required_scopes: [tools.call, mcp] }
  - { name: second, issuer: "https://a.example", audiences: [sluice], required_scopes: [mcp] }
  - { name: off, issuer: "https://off.example", audiences: [sluice], required_scopes: [never], enabled: false }
mcp_auth_settings: [{ resource_url: "${resourceUrl}" }]
mcp_servers: [{ name: tools, url: "http://127.0.0.1:9/mcp" }]
api_keys: [{ display_name: k, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] } }]
`;

async function appFor(resourceUrl: string) {
  const { gw, platform } = await gatewayWith(resources(resourceUrl), { env: { KEY } });
  return { app: createProxyApp(gw), platform, gw };
}

const listTools = (app: Awaited<ReturnType<typeof appFor>>['app'], headers: Record<string, string>) =>
  Promise.resolve(app.request('/mcp', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  }, PEER));

test('active: the metadata document on both paths, GET and HEAD only', async () => {
  const { app, gw } = await appFor('https://gw.example:8443/mcp');
  const expected = {
    resource: 'https://gw.example:8443/mcp',
    authorization_servers: ['https://a.example', 'https://idp.example'],
    bearer_methods_supported: ['header'],
    scopes_supported: ['mcp', 'tools.call'],
  };
  for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    const get = await app.request(path, {}, PEER);
    assert.equal(get.status, 200);
    assert.equal(get.headers.get('content-type'), 'application/json');
    const text = await get.text();
    assert.deepEqual(JSON.parse(text), expected);
    const head = await app.request(path, { method: 'HEAD' }, PEER);
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(new TextEncoder().encode(text).byteLength));
    assert.equal(await head.text(), '');
    const post = await app.request(path, { method: 'POST' }, PEER);
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
  }
  assert.equal((await app.request('/.well-known/oauth-protected-resource/mcp/tools', {}, PEER)).status, 404);
  gw.stop();
});

test('active: a refused /mcp caller is challenged toward the metadata; a key that works is not', async () => {
  const { app, gw } = await appFor('https://gw.example:8443/mcp');
  const metadata = 'resource_metadata="https://gw.example:8443/.well-known/oauth-protected-resource/mcp"';
  const none = await listTools(app, {});
  assert.equal(none.status, 401);
  assert.equal(none.headers.get('www-authenticate'), `Bearer ${metadata}`);
  const bad = await listTools(app, { authorization: 'Bearer sk-not-a-key' });
  assert.equal(bad.status, 401);
  assert.equal(bad.headers.get('www-authenticate'), `Bearer error="invalid_token", ${metadata}`);
  const good = await listTools(app, { authorization: `Bearer ${KEY}` });
  assert.equal(good.status, 200);
  assert.equal(good.headers.get('www-authenticate'), null);
  gw.stop();
});

test('a resource_url that is not exactly /mcp keeps the surface dormant, with one WARN', async () => {
  const { app, gw, platform } = await appFor('https://gw.example/tools?x=1');
  assert.equal((await app.request('/.well-known/oauth-protected-resource', {}, PEER)).status, 404);
  const none = await listTools(app, {});
  assert.equal(none.status, 401);
  assert.equal(none.headers.get('www-authenticate'), null);
  // The settings are judged when a caller's request first reads the snapshot's servers.
  await listTools(app, { authorization: `Bearer ${KEY}` });
  await listTools(app, { authorization: `Bearer ${KEY}` });
  assert.equal(platform.logs.filter((l) => l.msg === MCP_AUTH_MSG.invalidResourceUrl).length, 1);
  gw.stop();
});
