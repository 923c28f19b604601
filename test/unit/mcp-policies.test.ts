// Rate-limit policies on MCP tool calls (docs/mcp.md "Governance"): a policy that needs no model meters tool calls
// like model calls (AISIX's policy layer, its 429 naming the policy); one that reads the model cannot match a call
// that has none.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-mcp-policy-SECRET';
let tools: McpUpstream;

before(async () => {
  tools = await startSdkUpstream('tools', { json: true });
});
after(async () => {
  await tools.close();
});

test('a policy without a model dimension meters tool calls; one grouped by model does not', async () => {
  const { gw } = await gatewayWith(
    `_format_version: "1"
mcp_servers: [{ name: tools, url: "${tools.url}" }]
api_keys: [{ display_name: k, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] } }]
rate_limit_policies:
  - { name: per-model, group_by: [model], limits: { rpd: 0 } }
  - { name: daily-pool, limits: { rpd: 2 } }
`,
    { env: { KEY } },
  );
  const app = createProxyApp(gw);
  const call = () =>
    app.request('/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${KEY}`,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'tools__echo', arguments: { text: 'x' } },
      }),
    }, { peer: '127.0.0.1:1' });
  assert.equal((await call()).status, 200, 'per-model (limit 0) does not apply: the call has no model');
  assert.equal((await call()).status, 200);
  const third = await call();
  assert.equal(third.status, 429);
  const body = await third.json() as { error: { message: string; policy: { name: string } } };
  assert.equal(body.error.message, "request limit exceeded (requests) (policy 'daily-pool')");
  assert.equal(body.error.policy.name, 'daily-pool');
  assert.ok(third.headers.get('retry-after'));
});
