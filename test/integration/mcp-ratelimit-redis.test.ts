// A tool call's rate limit per key × server shared by two gateways through one real Redis (docs/mcp.md
// "Governance"): AISIX's bucket `mcp:<key id>:<server>`, so the second replica refuses what the first counted.
// A daily window, so the three calls cannot straddle a window edge.
// Run: node --import tsx --test test/integration/mcp-ratelimit-redis.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';
import { redisCli, type RedisServer, startRedis } from '../support/redis.ts';

const KEY = 'sk-mcp-fleet-SECRET';
let redis: RedisServer;
let tools: McpUpstream;
const gateways: Gateway[] = [];
const clients: ReturnType<typeof ioredisClient>[] = [];

before(async () => {
  [redis, tools] = await Promise.all([startRedis(), startSdkUpstream('tools', { json: true })]);
  const resources = `_format_version: "1"
mcp_servers:
  - { name: tools, url: "${tools.url}" }
api_keys:
  - display_name: fleet
    key_env: KEY
    allowed_models: []
    mcp_access: { allow: ["*"] }
    mcp_rate_limits: { tools: { rpd: 2 } }
`;
  const config = `${BASE_CONFIG}ratelimit: { backend: redis, redis: { url: "${redis.url}" } }\n`;
  for (let i = 0; i < 2; i++) {
    const { gw } = await gatewayWith(resources, {
      config,
      env: { KEY },
      redis: (o) => {
        const c = ioredisClient(o);
        clients.push(c);
        return c;
      },
    });
    gateways.push(gw);
  }
});

after(async () => {
  for (const gw of gateways) gw.stop();
  await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  await tools?.close();
  await redis?.close();
});

test('two replicas share the per-server bucket in Redis', async () => {
  const apps = gateways.map((gw) => createProxyApp(gw));
  const call = (i: number) =>
    apps[i]!.request('/mcp', {
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
  assert.equal((await call(0)).status, 200);
  assert.equal((await call(1)).status, 200);
  const third = await call(0);
  assert.equal(third.status, 429, 'the two replicas counted into one bucket');
  assert.deepEqual(await third.json(), {
    error: { message: 'request limit exceeded (requests)', type: 'rate_limit_exceeded' },
  });
  const keys = redisCli(redis.port, '--scan', '--pattern', 'aisix:rl:*').split('\n').filter(Boolean);
  const id = uuidV5('api_keys/fleet');
  assert.ok(keys.some((k) => k.startsWith(`aisix:rl:{mcp:${id}:tools}:rpd:`)), keys.join(', '));
});
