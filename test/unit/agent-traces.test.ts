// The spans of tool and agent calls (docs/operations.md "Tracing", docs/mcp.md "Governance", docs/a2a.md
// "Telemetry"), through app.request() to a real OTLP receiver: an MCP `tools/call` as AISIX's `execute_tool <tool>`
// SERVER span with one CLIENT span over the upstream call carrying the tool's attributes, a call refused before
// the upstream as its SERVER span alone, an A2A call as `invoke_agent <agent>`; and a JWT caller's `aisix.jwt_*`.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-agent-traces-1';
let tools: McpUpstream;
let agent: MockA2a;
let oidc: MockOidc;
let rx: OtlpReceiver;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  [tools, agent, oidc, rx] = await Promise.all([
    startSdkUpstream('tools', { json: true }),
    mockA2a(),
    startMockOidc(),
    startOtlpReceiver(),
  ]);
  ({ gw } = await gatewayWith(
    `_format_version: "1"
api_keys:
  - { display_name: plain, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] }, allowed_agents: ["*"] }
  - { display_name: alice, key_hash: h-alice, allowed_models: [], mcp_access: { allow: ["*"] }, jwt_subject: alice, jwt_provider: corp }
mcp_servers: [{ name: tools, url: "${tools.url}" }]
a2a_agents: [{ name: echo, url: "${agent.url}" }]
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice] }
guardrails:
  - { name: words, kind: keyword, hook_point: input, patterns: [{ kind: literal, value: forbidden }] }
observability_exporters:
  - { name: t, kind: otlp_http, endpoint: "${rx.url}" }
`,
    { env: { KEY } },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  await gw.telemetry.close(1000);
  gw.stop();
  await Promise.all([tools.close(), agent.close(), oidc.close(), rx.close()]);
});

/** The spans of the request `res` answered, once delivered, SERVER first. */
async function spansOf(res: Response): Promise<ReceivedSpan[]> {
  await res.text();
  await gw.telemetry.flush();
  const id = res.headers.get('x-aisix-request-id');
  return rx.spans.filter((s) => s.attrs['aisix.request_id'] === id);
}

function toolCall(bearer: string, name: string, text = 'x'): Promise<Response> {
  return Promise.resolve(app.request('/mcp', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${bearer}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text } } }),
  }, { peer: '127.0.0.1:1' }));
}

const pick = (s: ReceivedSpan | undefined, prefix: string) =>
  Object.fromEntries(Object.entries(s?.attrs ?? {}).filter(([k]) => k.startsWith(prefix)));

describe('MCP tool calls', () => {
  test('SERVER and one CLIENT span named execute_tool <tool>; the tool and server on the CLIENT span', async () => {
    const spans = await spansOf(await toolCall(KEY, 'tools__echo'));
    assert.deepEqual(spans.map((s) => [s.kind, s.name]), [[2, 'execute_tool echo'], [3, 'execute_tool echo']]);
    const [server, client] = spans as [ReceivedSpan, ReceivedSpan];
    assert.equal(client.parentSpanId, server.spanId);
    assert.ok(client.start >= server.start && client.end <= server.end);
    assert.equal(client.status, 1);
    for (const s of spans) assert.equal(s.attrs['gen_ai.operation.name'], 'execute_tool');
    assert.equal(client.attrs['gen_ai.tool.name'], 'echo');
    assert.equal(client.attrs['aisix.mcp.server_name'], 'tools');
    assert.equal(server.attrs['gen_ai.tool.name'], undefined, 'the structural set only on SERVER');
    assert.deepEqual(pick(client, 'aisix.jwt_'), {});
  });

  test('a call refused before the upstream (a guardrail block) is its SERVER span alone', async () => {
    const spans = await spansOf(await toolCall(KEY, 'tools__echo', 'forbidden'));
    assert.deepEqual(spans.map((s) => [s.kind, s.name]), [[2, 'execute_tool echo']]);
    assert.equal(spans[0]!.attrs['gen_ai.tool.name'], 'echo');
  });

  test("a JWT caller's spans carry aisix.jwt_subject and aisix.jwt_provider", async () => {
    const token = await oidc.sign({
      iss: oidc.issuer,
      aud: 'sluice',
      sub: 'alice',
      exp: Math.floor(Date.now() / 1000) + 60,
    });
    const spans = await spansOf(await toolCall(token, 'tools__echo'));
    assert.equal(spans.length, 2);
    assert.deepEqual(pick(spans[1], 'aisix.jwt_'), { 'aisix.jwt_subject': 'alice', 'aisix.jwt_provider': 'corp' });
  });

  test('other MCP methods keep the request span (no execute_tool name)', async () => {
    const res = await app.request('/mcp', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    }, { peer: '127.0.0.1:1' });
    const spans = await spansOf(res);
    assert.equal(spans.length, 1);
    assert.notEqual(spans[0]!.attrs['gen_ai.operation.name'], 'execute_tool');
  });
});

describe('A2A calls', () => {
  test('SERVER and one CLIENT span named invoke_agent <agent> with the agent, task and context', async () => {
    const res = await app.request('/a2a/echo', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'message/send',
        params: { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] } },
      }),
    }, { peer: '127.0.0.1:1' });
    const spans = await spansOf(res);
    assert.deepEqual(spans.map((s) => [s.kind, s.name]), [[2, 'invoke_agent echo'], [3, 'invoke_agent echo']]);
    const client = spans[1]!;
    assert.equal(client.attrs['gen_ai.operation.name'], 'invoke_agent');
    assert.equal(client.attrs['gen_ai.agent.name'], 'echo');
    assert.equal(client.attrs['gen_ai.conversation.id'], 'ctx-1');
    assert.deepEqual(pick(client, 'aisix.a2a.'), {
      'aisix.a2a.method': 'message/send',
      'aisix.a2a.operation': 'message/send',
      'aisix.a2a.protocol_version': '1.0',
      'aisix.a2a.task_id': 't-1',
      'aisix.a2a.task_state': 'completed',
    });
  });
});
