// Guardrails on MCP tool calls through app.request() (docs/mcp.md "Governance"): a block on the arguments (the
// upstream not asked) and on the result, both as tool results with isError; a mask written into the arguments
// the upstream receives and into the result the caller reads; an `mcp_server` attachment applying to its
// server's calls only.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-mcp-guard-SECRET';
let alpha: McpUpstream;
let beta: McpUpstream;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

function resources(): string {
  return `_format_version: "1"
mcp_servers:
  - { name: alpha, url: "${alpha.url}" }
  - { name: beta, url: "${beta.url}" }
api_keys:
  - { display_name: k, key_env: KEY, allowed_models: [], mcp_access: { allow: ["*"] } }
guardrails:
  - { name: words, kind: keyword, hook_point: input, patterns: [{ kind: literal, value: forbidden }] }
  - { name: answers, kind: keyword, hook_point: output, patterns: [{ kind: literal, value: "alpha: secret" }] }
  - { name: pii, kind: pii, detectors: [{ type: email }] }
  - { name: srv, kind: keyword, hook_point: input, patterns: [{ kind: literal, value: server-only }] }
`;
}

before(async () => {
  [alpha, beta] = await Promise.all([startSdkUpstream('alpha', { json: true }), startSdkUpstream('beta')]);
  ({ gw } = await gatewayWith(resources(), { env: { KEY } }));
  // `srv` applies to alpha's calls only (an etcd attachment; a file's guardrails apply everywhere).
  const file = await loadResourcesFile('/r.yaml', resources(), { KEY });
  assert.ok(file.ok);
  gw.apply(
    new Snapshot({
      ...file.snapshot.resources,
      guardrail_attachments: [{
        id: 'att-1',
        guardrail_id: uuidV5('guardrails/srv'),
        scope_type: 'mcp_server',
        scope_id: uuidV5('mcp_servers/alpha'),
        priority: 0,
        enabled: true,
      }],
    }),
    { configHash: 'with-attachment' },
  );
  app = createProxyApp(gw);
});

after(async () => {
  await Promise.all([alpha, beta].map((u) => u.close()));
});

async function echo(name: string, text: string): Promise<{ content: { text: string }[]; isError?: boolean }> {
  const res = await app.request('/mcp', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${KEY}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text } } }),
  }, { peer: '127.0.0.1:1' });
  assert.equal(res.status, 200);
  const body = await res.json() as { result: { content: { text: string }[]; isError?: boolean } };
  assert.ok(body.result, JSON.stringify(body));
  return body.result;
}

describe('guardrails on tool calls', () => {
  test('an input block answers as a tool result with isError; the upstream is not asked', async () => {
    const before = alpha.received.length;
    const r = await echo('alpha__echo', 'a forbidden thing');
    assert.deepEqual(r, {
      content: [{ type: 'text', text: "tool call blocked by content policy (guardrail 'words')" }],
      isError: true,
    });
    assert.equal(alpha.received.length, before);
  });

  test('an output block withholds the result', async () => {
    const r = await echo('alpha__echo', 'secret plans');
    assert.deepEqual(r, {
      content: [{ type: 'text', text: "tool result blocked by content policy (guardrail 'answers')" }],
      isError: true,
    });
  });

  test('a mask is written into the arguments the upstream receives and the result the caller reads', async () => {
    const r = await echo('beta__echo', 'mail bob@example.com now');
    assert.equal(r.isError, undefined);
    assert.equal(r.content[0]!.text.includes('bob@example.com'), false, r.content[0]!.text);
    const call = beta.received.find((x) => x.body?.method === 'tools/call');
    const sent = JSON.stringify(call?.body);
    assert.equal(sent.includes('bob@example.com'), false, sent);
    assert.ok(sent.includes('mail '), 'the rest of the arguments is intact');
  });

  test("an mcp_server attachment applies to its server's calls only", async () => {
    assert.equal((await echo('alpha__echo', 'server-only')).isError, true);
    assert.deepEqual((await echo('beta__echo', 'server-only')).content, [{ type: 'text', text: 'beta: server-only' }]);
  });
});
