// /mcp in a real gateway process on Node, Bun and Deno (docs/mcp.md), with a real upstream MCP server built with
// the official SDK that records what it receives, and the SDKs' Streamable HTTP clients as callers at several
// protocol revisions: the v1 client (2025-11-25), the v2 client in its legacy and 2026-07-28 modes, and a
// 2025-03-26 exchange by hand. No caller key reaches the upstream.
// Run: node build.mjs && node --import tsx --test test/process/mcp-process.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

let tools: McpUpstream;
let files: McpUpstream;
const running: GatewayProcess[] = [];

before(async () => {
  [tools, files] = await Promise.all([startSdkUpstream('tools'), startSdkUpstream('files', { json: true })]);
});
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await Promise.all([tools, files].map((u) => u.close()));
});

function resources(): string {
  return `_format_version: "1"
mcp_servers:
  - { name: tools, url: "${tools.url}", auth_type: bearer, secret: upstream-SECRET }
  - { name: files, url: "${files.url}" }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: [], mcp_access: { allow: ["*"], deny: ["files__fail"] } }
`;
}

const AUTH = { authorization: `Bearer ${CALLER_KEY}` };

function text(r: unknown): string {
  return (r as { content: { text: string }[] }).content[0]!.text;
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: /mcp`, () => {
    let gw: GatewayProcess;
    before(async () => {
      tools.requireAuth = 'Bearer upstream-SECRET';
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': resources() },
      });
      running.push(gw);
      await gw.waitReady();
    });
    after(async () => {
      await gw.stop();
    });

    test('the v1 SDK client (2025-11-25): aggregated list and calls', async () => {
      const client = new Client({ name: 'v1-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(gw.url('/mcp')), { requestInit: { headers: AUTH } }),
      );
      try {
        const names = (await client.listTools()).tools.map((t) => t.name);
        assert.deepEqual(names, [
          'files__echo',
          'files__add',
          'files__whoami',
          'tools__echo',
          'tools__add',
          'tools__fail',
          'tools__whoami',
        ]);
        assert.equal(text(await client.callTool({ name: 'tools__echo', arguments: { text: 'hi' } })), 'tools: hi');
        const sum = await client.callTool({ name: 'files__add', arguments: { a: 1, b: 2 } });
        assert.deepEqual(sum.structuredContent, { sum: 3 });
        assert.equal(text(await client.callTool({ name: 'tools__whoami' })), 'Bearer upstream-SECRET');
        assert.equal(text(await client.callTool({ name: 'files__whoami' })), '(none)');
      } finally {
        await client.close();
      }
    });

    test('the v2 client, legacy and 2026-07-28 (pinned): the scoped endpoint', async () => {
      for (const mode of ['legacy', { pin: '2026-07-28' }] as const) {
        const sent: string[] = [];
        const seeing = async (url: string | URL, init?: RequestInit) => {
          const res = await fetch(url, init);
          sent.push(`${new Headers(init?.headers).get('mcp-protocol-version')} ${res.status}`);
          return res;
        };
        const client = new V2Client({ name: 'v2-test', version: '1.0.0' }, { versionNegotiation: { mode } });
        await client.connect(
          new V2Transport(new URL(gw.url('/mcp/tools')), { requestInit: { headers: AUTH }, fetch: seeing }),
        );
        try {
          const names = (await client.listTools()).tools.map((t) => t.name);
          assert.deepEqual(names, ['echo', 'add', 'fail', 'whoami'], JSON.stringify(mode));
          const r = await client.callTool({ name: 'echo', arguments: { text: JSON.stringify(mode) } });
          assert.equal(text(r), `tools: ${JSON.stringify(mode)}`);
          const era = mode === 'legacy' ? '2025-11-25 200' : '2026-07-28 200';
          assert.ok(sent.includes(era), `${JSON.stringify(mode)} spoke ${era}: ${sent.join(', ')}`);
        } finally {
          await client.close();
        }
      }
    });

    test('a 2025-03-26 exchange by hand; the version gate', async () => {
      const post = (body: unknown, headers: Record<string, string> = {}) =>
        fetch(gw.url('/mcp/files'), {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...AUTH,
            ...headers,
          },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(15_000),
        });
      const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'old', version: '0' } },
      });
      assert.equal(init.status, 200);
      assert.equal(
        ((await init.json()) as { result: { protocolVersion: string } }).result.protocolVersion,
        '2025-03-26',
      );
      const list = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, {
        'mcp-protocol-version': '2025-03-26',
      });
      assert.equal(list.status, 200);
      const gate = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, {
        'mcp-protocol-version': '2024-11-05',
      });
      assert.equal(gate.status, 400);
      assert.equal(
        await gate.text(),
        '{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"unsupported MCP-Protocol-Version: 2024-11-05","data":{"supported":["2025-03-26","2025-06-18","2025-11-25","2026-07-28"]}}}',
      );
    });

    test('no caller key reached either upstream; the access log names the template', () => {
      for (const up of [tools, files]) {
        assert.ok(up.received.length > 0);
        for (const r of up.received) {
          assert.equal(JSON.stringify(r).includes(CALLER_KEY), false, 'the caller key stayed at the gateway');
        }
      }
      assert.ok(gw.logs.some((l) => l.msg === 'proxy request completed' && l.path === '/mcp/{server}'));
      assert.ok(gw.logs.some((l) => l.msg === 'proxy request completed' && l.path === '/mcp'));
    });
  });
}
