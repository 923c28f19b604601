// Claude Code's MCP client against /mcp of a real Sluice process, with a real upstream MCP server behind it
// (docs/mcp.md): `claude mcp add --transport http` with the gateway key as a static header, then `claude mcp get`
// (connected, tools listed); and `claude -p` calling a gateway tool, its model answered through the same
// gateway's /v1/messages by the scripted upstream. No caller key reaches the MCP upstream.
// Run: node build.mjs && node --import tsx --test test/clients/mcp-claude-code.test.ts
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { FINAL_ANSWER, type ScriptedUpstream, startScriptedUpstream } from '../support/scripted-upstream.ts';
import { scratchDir } from '../support/scratch.ts';

const CLAUDE = join(import.meta.dirname, '../../node_modules/.bin/claude');
/** A key whose ACL lists one tool, so the script's one tool call (the first offered) is to it. */
const ECHO_KEY = 'sk-echo-only-SECRET';
let upstream: McpUpstream;
let model: ScriptedUpstream;
let gw: GatewayProcess;

before(async () => {
  [upstream, model] = await Promise.all([startSdkUpstream('tools', { json: true }), startScriptedUpstream()]);
  gw = await spawnGateway({
    config: baseConfig(),
    env: { CALLER_KEY, ECHO_KEY },
    files: {
      'resources.yaml': `_format_version: "1"
mcp_servers: [{ name: tools, url: "${upstream.url}" }]
provider_keys:
  - { display_name: ant, provider: anthropic, api_key: sk-upstream-ant, api_base: "${model.url}" }
models:
  - { display_name: claude-mock, provider_key: ant, model_name: claude-sonnet-4-5-mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"], mcp_access: { allow: ["*"] } }
  - { display_name: echo-only, key_env: ECHO_KEY, allowed_models: ["*"], mcp_access: { allow: [tools__echo] } }
`,
    },
  });
  await gw.waitReady();
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
  await model?.close();
});

/** Runs Claude Code without blocking this process, whose upstream MCP server must keep answering. */
function claude(
  home: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; out: string }> {
  const child = spawn(CLAUDE, args, {
    cwd: home,
    timeout: 120_000,
    env: {
      ...process.env,
      ...extraEnv,
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
  const home = scratchDir('sluice-claude-mcp');
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

test('claude -p calls a gateway tool: the tool ran upstream and its result reached the model', async () => {
  const home = scratchDir('sluice-claude-mcp');
  const marker = `MARKER-${Math.random().toString(36).slice(2, 10)}`;
  model.toolArgs = () => ({ text: marker });
  const config = {
    mcpServers: { sluice: { type: 'http', url: gw.url('/mcp'), headers: { Authorization: `Bearer ${ECHO_KEY}` } } },
  };
  const from = upstream.received.length;
  const run = await claude(home, [
    '-p',
    'Echo the marker with the gateway tool.',
    '--model',
    'claude-mock',
    '--strict-mcp-config',
    '--mcp-config',
    JSON.stringify(config),
    // No built-in tool: the gateway's one tool is all the model is offered.
    '--tools',
    '',
    '--allowedTools',
    'mcp__sluice__tools__echo',
    '--output-format',
    'stream-json',
    '--verbose',
  ], { ANTHROPIC_BASE_URL: gw.url(''), ANTHROPIC_API_KEY: CALLER_KEY });
  const lines = run.out.split('\n').filter((l) => l.startsWith('{')).map((l) =>
    JSON.parse(l) as Record<string, unknown>
  );
  const result = lines.find((l) => l.type === 'result') as { is_error?: boolean; result?: string } | undefined;
  assert.ok(result, run.out.slice(-3000));
  assert.equal(result.is_error, false, run.out.slice(-3000));
  assert.ok(result.result?.includes(FINAL_ANSWER), result.result);
  assert.ok(result.result?.includes(`tools: ${marker}`), `the tool's own answer came back: ${result.result}`);
  const calls = upstream.received.slice(from).filter((r) => r.body?.method === 'tools/call');
  assert.equal(calls.length, 1);
  assert.deepEqual((calls[0]!.body!.params as { name: string }).name, 'echo');
  for (const r of upstream.received) {
    assert.equal(JSON.stringify(r).includes(CALLER_KEY) || JSON.stringify(r).includes(ECHO_KEY), false);
  }
});
