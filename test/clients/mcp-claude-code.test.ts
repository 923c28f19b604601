// Claude Code's MCP client (`claude mcp add --transport http`, `claude mcp get`) against /mcp of a real Sluice
// process, with a real upstream MCP server behind it (docs/mcp.md): the gateway key as a static header,
// Claude Code connects and lists the gateway's tools; no caller key reaches the upstream.
// Run: node build.mjs && node --import tsx --test test/clients/mcp-claude-code.test.ts
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';

const CLAUDE = join(import.meta.dirname, '../../node_modules/.bin/claude');
let upstream: McpUpstream;
let gw: GatewayProcess;

before(async () => {
  upstream = await startSdkUpstream('tools', { json: true });
  gw = await spawnGateway({
    config: baseConfig(),
    env: { CALLER_KEY },
    files: {
      'resources.yaml': `_format_version: "1"
mcp_servers: [{ name: tools, url: "${upstream.url}" }]
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: [], mcp_access: { allow: ["*"] } }
`,
    },
  });
  await gw.waitReady();
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

/** Runs Claude Code without blocking this process, whose upstream MCP server must keep answering. */
function claude(home: string, args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(CLAUDE, args, {
    cwd: home,
    timeout: 60_000,
    env: {
      ...process.env,
      HOME: home,
      CLAUDE_CONFIG_DIR: home,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

test('claude mcp add --transport http, then get: connected through the gateway', async () => {
  const home = mkdtempSync(join(tmpdir(), 'sluice-claude-mcp-'));
  const add = await claude(home, [
    'mcp',
    'add',
    '--transport',
    'http',
    '--scope',
    'user',
    'sluice',
    gw.url('/mcp'),
    // Variadic: it would take the name and URL for headers if it came before them.
    '--header',
    `Authorization: Bearer ${CALLER_KEY}`,
  ]);
  assert.equal(add.code, 0, add.out);
  const get = await claude(home, ['mcp', 'get', 'sluice']);
  assert.equal(get.code, 0, get.out);
  // Connected and listed: a failed tools/list reads `! Connected · tools fetch failed`.
  assert.match(get.out, /Status: ✔ Connected\n/, get.out);
  assert.ok(upstream.methods().includes('tools/list'), 'the tool list went upstream');
  for (const r of upstream.received) assert.equal(JSON.stringify(r).includes(CALLER_KEY), false);
  const lines = gw.logs.filter((l) => l.msg === 'proxy request completed' && l.path === '/mcp');
  assert.ok(lines.some((l) => l.method === 'GET' && l.status === 405), 'its GET stream asked, refused 405');
  assert.ok(lines.every((l) => l.api_key_id !== undefined), 'every request authenticated with the static header');
});
