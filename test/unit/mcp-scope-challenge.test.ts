// AISIX's `insufficient_scope` challenge on /mcp (docs/mcp.md "Inbound authentication"), through app.request()
// with tokens from a real OIDC issuer on 127.0.0.1: a JWT without its provider's required scopes gets the 403
// with `Bearer error="insufficient_scope", scope="…", resource_metadata="…"`; a bound-claim refusal gets the
// same 403 without a challenge; off /mcp the 403 carries none either.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { gatewayWith } from '../support/platform.ts';

const PEER = { peer: '127.0.0.1:1' };
const METADATA = 'resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"';
let oidc: MockOidc;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  oidc = await startMockOidc();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
oidc_providers:
  - name: corp
    issuer: "${oidc.issuer}"
    audiences: [sluice]
    required_scopes: [tools.call, mcp]
    bound_claims: { team: eng }
mcp_auth_settings: [{ resource_url: "https://gw.example/mcp" }]
mcp_servers: [{ name: tools, url: "http://127.0.0.1:9/mcp" }]
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], mcp_access: { allow: ["*"] }, jwt_subject: alice, jwt_provider: corp }
`,
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await oidc.close();
});

const token = (claims: Record<string, unknown>) =>
  oidc.sign({ iss: oidc.issuer, aud: 'sluice', sub: 'alice', exp: Math.floor(Date.now() / 1000) + 60, ...claims });

async function listTools(bearer: string, path = '/mcp'): Promise<Response> {
  return await app.request(path, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${bearer}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  }, PEER);
}

test('a token without the required scopes: 403 challenged for them, the body as on /v1', async () => {
  for (const path of ['/mcp', '/mcp/tools']) {
    const res = await listTools(await token({ scope: 'mcp', team: 'eng' }), path);
    assert.equal(res.status, 403);
    assert.equal(
      res.headers.get('www-authenticate'),
      `Bearer error="insufficient_scope", scope="tools.call mcp", ${METADATA}`,
    );
    assert.deepEqual((await res.json()).error, {
      message: 'JWT does not satisfy the required scopes or claims',
      type: 'permission_denied',
      code: 'jwt_claims_rejected',
    });
  }
});

test('a bound-claim refusal: the same 403, no challenge (new scopes would not cure it)', async () => {
  const res = await listTools(await token({ scope: 'tools.call mcp', team: 'sales' }));
  assert.equal(res.status, 403);
  assert.equal(res.headers.get('www-authenticate'), null);
});

test('the scopes and claims held: admitted; off /mcp a scope refusal carries no challenge', async () => {
  assert.equal((await listTools(await token({ scope: 'tools.call mcp', team: 'eng' }))).status, 200);
  const chat = await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${await token({ scope: 'mcp', team: 'eng' })}` },
    body: '{}',
  }, PEER);
  assert.equal(chat.status, 403);
  assert.equal(chat.headers.get('www-authenticate'), null);
});
