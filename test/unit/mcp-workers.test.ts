// /mcp through the Workers fetch handler (runtimes/workers-handler.ts, in-process on Node; docs/mcp.md "The
// endpoint"): the configuration bundled, the caller key from the Worker's bindings, a real upstream MCP server on
// loopback reached through the Worker's fetch. Stateless, so no isolate keeps anything between requests.
// Runs alone: a Worker turns the process's token counts to the approximation, as it does in an isolate.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createWorker, type WorkerEnv } from '../../runtimes/workers-handler.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';

const CALLER_KEY = 'sk-mcp-worker-SECRET';
let tools: McpUpstream;

before(async () => {
  tools = await startSdkUpstream('tools');
});
after(async () => {
  await tools.close();
});

test('a Worker lists and calls tools on /mcp and /mcp/{server}', async (t) => {
  t.mock.method(console, 'log', () => {}); // the Worker's log lines
  const w = createWorker({
    configPath: 'bundle/config.yaml',
    files: {
      'bundle/config.yaml':
        'resources_file: resources.yaml\nproxy: { addr: "0.0.0.0:8787" }\nadmin: { enabled: false }\n',
      'bundle/resources.yaml': `_format_version: "1"
mcp_servers: [{ name: tools, url: "\${TOOLS_URL}" }]
api_keys: [{ display_name: agent, key_env: CALLER_KEY, allowed_models: [], mcp_access: { allow: ["*"] } }]
`,
    },
  });
  const env: WorkerEnv = { CALLER_KEY, TOOLS_URL: tools.url };
  const rpc = (path: string, method: string, params?: unknown) =>
    w.fetch(
      new Request(`https://sluice.example${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${CALLER_KEY}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'cf-connecting-ip': '203.0.113.9',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) }),
      }),
      env,
    );
  const list = await rpc('/mcp', 'tools/list');
  assert.equal(list.status, 200);
  const names = ((await list.json()) as { result: { tools: { name: string }[] } }).result.tools.map((x) => x.name);
  assert.deepEqual(names, ['tools__echo', 'tools__add', 'tools__fail', 'tools__whoami']);
  const call = await rpc('/mcp/tools', 'tools/call', { name: 'echo', arguments: { text: 'edge' } });
  assert.deepEqual(((await call.json()) as { result: unknown }).result, {
    content: [{ type: 'text', text: 'tools: edge' }],
  });
  assert.equal(JSON.stringify(tools.received).includes(CALLER_KEY), false);
});
