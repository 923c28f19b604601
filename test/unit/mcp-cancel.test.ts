// A caller who hangs up ends the gateway's upstream work on its behalf (docs/mcp.md "Upstreams"): the tool call's
// upstream request is cancelled, not left running to its deadline.
import { after, before, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { gatewayWith } from '../support/platform.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-mcp-cancel-SECRET';
let slow: McpUpstream;

before(async () => {
  slow = await startSdkUpstream('slow', { json: true, hang: true });
});
after(async () => {
  await slow.close();
});

test('the upstream call is cancelled when the caller leaves', async () => {
  const { gw } = await gatewayWith(
    `_format_version: "1"
mcp_servers: [{ name: slow, url: "${slow.url}", timeout_ms: 60000 }]
api_keys: [{ display_name: k, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] } }]
`,
    { env: { KEY } },
  );
  const app = createProxyApp(gw);
  const caller = new AbortController();
  const answer = Promise.resolve(app.request('/mcp', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${KEY}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow__hang' } }),
    signal: caller.signal,
  }, { peer: '127.0.0.1:1' }));
  await until(() => slow.received.some((r) => r.body?.method === 'tools/call'), 10_000, 'the call upstream');
  const before = slow.hungUp;
  caller.abort();
  await until(() => slow.hungUp > before, 10_000, () => `the upstream request cancelled (hung up: ${slow.hungUp})`);
  await answer.catch(() => {});
});
