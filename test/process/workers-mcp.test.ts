// /mcp on Cloudflare Workers (docs/mcp.md "The endpoint"), black-box under `wrangler dev --local` (workerd,
// offline): a Worker whose bundled resources name a real SDK MCP server on loopback that keeps sessions. Through
// workerd's own fetch the Worker lists the tools on /mcp, calls one on /mcp/{server}, answers a 2026-07-28
// discover, and ends each upstream session with a DELETE kept alive by the request's `waitUntil`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { startWranglerDev, type WranglerDev } from '../support/wrangler-dev.ts';
import { until } from '../support/until.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const CALLER_KEY = 'sk-caller-SECRET-mcp-edge';

describe('/mcp on Workers (wrangler dev --local, workerd)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'sluice-workers-mcp-'));
  let tools: McpUpstream;
  let worker: WranglerDev;

  before(async () => {
    tools = await startSdkUpstream('tools', { json: true, sessions: true });
    const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(
      readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'),
    )?.[1];
    assert.ok(compatibilityDate, 'wrangler.toml has a compatibility_date');
    const bundle = {
      configPath: 'bundle/config.yaml',
      files: {
        'bundle/config.yaml':
          'resources_file: resources.yaml\nproxy: { addr: "0.0.0.0:8787" }\nadmin: { enabled: false }\n',
        'bundle/resources.yaml': `_format_version: "1"
mcp_servers: [{ name: tools, url: "${tools.url}", auth_type: bearer, secret: up-secret }]
api_keys:
  - { display_name: agent, key_env: CALLER_KEY, allowed_models: [], mcp_access: { allow: ["tools__echo", "tools__add"] } }
`,
      },
    };
    writeFileSync(
      join(scratch, 'worker.ts'),
      `import { createWorker } from ${JSON.stringify(join(ROOT, 'runtimes/workers-handler.ts'))};
export default createWorker(${JSON.stringify(bundle)});
`,
    );
    writeFileSync(
      join(scratch, 'wrangler.toml'),
      `name = "sluice-test-mcp"\nmain = "worker.ts"\ncompatibility_date = "${compatibilityDate}"\n`,
    );
    worker = await startWranglerDev(['--var', `CALLER_KEY:${CALLER_KEY}`], scratch, join(scratch, 'state'));
  });

  after(async () => {
    await worker?.stop();
    await tools?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const rpc = async (path: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const res = await worker.fetch(path, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CALLER_KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
    });
    return { status: res.status, body: await res.json() as Record<string, unknown> };
  };
  const deletes = () => tools.received.filter((r) => r.method === 'DELETE').length;

  test('tools/list on /mcp: the tools the key may call, namespaced and sorted', async () => {
    const r = await rpc('/mcp', { method: 'tools/list' });
    assert.equal(r.status, 200);
    const names = (r.body.result as { tools: { name: string }[] }).tools.map((t) => t.name);
    assert.deepEqual(names, ['tools__echo', 'tools__add']);
  });

  test('tools/call on /mcp/{server}: the upstream answer, the held credential, the session ended', async () => {
    const before = tools.received.length;
    const r = await rpc('/mcp/tools', { method: 'tools/call', params: { name: 'echo', arguments: { text: 'edge' } } });
    assert.equal(r.status, 200);
    assert.deepEqual((r.body.result as { content: unknown }).content, [{ type: 'text', text: 'tools: edge' }]);
    await until(
      () => tools.liveSessions() === 0 && tools.received.slice(before).some((x) => x.method === 'DELETE'),
      15_000,
      () => `the session's DELETE (${tools.liveSessions()} live; ${worker.output.join('\n')})`,
    );
    const mine = tools.received.slice(before);
    for (const x of mine) {
      assert.equal(x.headers.authorization, 'Bearer up-secret');
      assert.ok(!JSON.stringify(x.headers).includes(CALLER_KEY), 'no caller credential upstream');
    }
    assert.ok(deletes() >= 1);
  });

  test('a 2026-07-28 discover and the version gate answer as on every runtime', async () => {
    const discover = await rpc('/mcp', {
      method: 'server/discover',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' });
    assert.equal(discover.status, 200);
    assert.ok(Array.isArray((discover.body.result as { supportedVersions?: unknown }).supportedVersions));
    const gate = await rpc('/mcp', { method: 'tools/list' }, { 'mcp-protocol-version': '2099-01-01' });
    assert.equal(gate.status, 400);
    assert.equal((gate.body.error as { code: number }).code, -32600);
  });
});
