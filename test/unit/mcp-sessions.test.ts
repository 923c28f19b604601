// Upstream MCP sessions ended as the transport asks (docs/mcp.md "Upstreams"), through app.request() against
// real SDK upstreams on 127.0.0.1: an upstream that names a session (`Mcp-Session-Id`) gets a DELETE carrying it,
// the protocol version and the gateway-held credential once the gateway is done with it, for a listing and for a
// call; a stateless upstream gets none.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { gatewayWith } from '../support/platform.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-mcp-sessions-1';
let stateful: McpUpstream;
let stateless: McpUpstream;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  [stateful, stateless] = await Promise.all([
    startSdkUpstream('kept', { json: true, sessions: true }),
    startSdkUpstream('free', { json: true }),
  ]);
  ({ gw } = await gatewayWith(
    `_format_version: "1"
mcp_servers:
  - { name: kept, url: "${stateful.url}", auth_type: bearer, secret: up-secret }
  - { name: free, url: "${stateless.url}" }
api_keys: [{ display_name: k, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] } }]
`,
    { env: { KEY } },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await Promise.all([stateful.close(), stateless.close()]);
});

async function rpc(path: string, method: string, params?: unknown): Promise<Record<string, unknown>> {
  const res = await app.request(path, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) }),
  }, { peer: '127.0.0.1:1' });
  assert.equal(res.status, 200);
  return await res.json() as Record<string, unknown>;
}

const deletes = (u: McpUpstream) => u.received.filter((r) => r.method === 'DELETE');

test('a call: the session the upstream named is ended with a DELETE carrying it and the held credential', async () => {
  const before = stateful.received.length;
  const answer = await rpc('/mcp/kept', 'tools/call', { name: 'echo', arguments: { text: 'hi' } });
  assert.deepEqual((answer.result as { content: unknown }).content, [{ type: 'text', text: 'kept: hi' }]);
  await until(
    () => stateful.liveSessions() === 0 && deletes(stateful).length === 1,
    5000,
    () => `the session's DELETE (${stateful.liveSessions()} live)`,
  );
  const mine = stateful.received.slice(before);
  assert.deepEqual(mine.map((r) => r.body?.method ?? r.method), [
    'initialize',
    'notifications/initialized',
    'tools/call',
    'DELETE',
  ]);
  const call = mine[2]!;
  const del = mine[3]!;
  assert.ok(call.headers['mcp-session-id'], 'the upstream named a session');
  assert.equal(del.headers['mcp-session-id'], call.headers['mcp-session-id']);
  assert.equal(del.headers['mcp-protocol-version'], call.headers['mcp-protocol-version']);
  assert.equal(del.headers.authorization, 'Bearer up-secret');
  assert.ok(!JSON.stringify(del.headers).includes(KEY), 'no caller credential upstream');
});

test('a listing on /mcp: each session ended too; a stateless upstream gets no DELETE', async () => {
  const before = deletes(stateful).length;
  const answer = await rpc('/mcp', 'tools/list');
  const names = (answer.result as { tools: { name: string }[] }).tools.map((t) => t.name);
  assert.ok(names.includes('kept__echo') && names.includes('free__echo'), names.join());
  await until(
    () => stateful.liveSessions() === 0 && deletes(stateful).length === before + 1,
    5000,
    () => `the listing session's DELETE (${stateful.liveSessions()} live)`,
  );
  assert.deepEqual(deletes(stateless), []);
});
