// What an upstream MCP server's failure says is logged without the gateway's secrets (docs/mcp.md "Upstreams"):
// an MCP server's `secret` is among the snapshot's secrets the scrubber redacts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scrubberFor } from '../../src/http/scrub.ts';
import { resolveAcl } from '../../src/mcp/acl.ts';
import { UpstreamFailure } from '../../src/mcp/failures.ts';
import { McpGateway } from '../../src/mcp/gateway.ts';
import type { McpUpstreams } from '../../src/mcp/upstream.ts';
import type { Logger } from '../../src/observability/logger.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';

test("an upstream failure that repeats the server's secret is logged redacted", async () => {
  const r = await loadResourcesFile(
    '/r.yaml',
    '_format_version: "1"\nmcp_servers: [{ name: s, url: "https://s.example/mcp", auth_type: bearer, secret: tok-SECRET-93 }]\n',
    {},
  );
  assert.ok(r.ok);
  const warns: Record<string, unknown>[] = [];
  const log = { warn: (_m: string, f: Record<string, unknown>) => void warns.push(f) } as unknown as Logger;
  const failing = {
    listTools: () => Promise.reject(new UpstreamFailure('tools/list: JSON-RPC error -1: bad token tok-SECRET-93')),
  } as unknown as McpUpstreams;
  const gw = new McpGateway(failing, log);
  const servers = r.snapshot.of('mcp_servers');
  const res = await gw.handle(
    {
      servers,
      acl: resolveAcl([], { mcp_access: { allow: ['*'] } }),
      version: null,
      headers: new Headers(),
      scrub: scrubberFor(r.snapshot, [], undefined),
    },
    { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    () => Promise.resolve(undefined),
  );
  assert.deepEqual((res as { body?: Record<string, unknown> } | undefined)?.body?.result, { tools: [] });
  assert.equal(warns.length, 1);
  assert.equal(String(warns[0]!.error).includes('tok-SECRET-93'), false, String(warns[0]!.error));
  assert.match(String(warns[0]!.error), /bad token/);
});
