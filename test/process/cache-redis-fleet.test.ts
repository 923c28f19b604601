// `backend: redis` cache policies across gateway processes (docs/cache.md "Redis"): a Node and a Bun
// gateway on one real Redis share entries under the env namespace; Redis stopped mid-run — every request
// still succeeds, as a miss, with one WARN per gateway — and started again, entries shared once more.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { redisCli, type RedisServer, startRedis } from '../support/redis.ts';
import { until } from '../support/until.ts';
import { CACHE_MSG } from '../../src/cache/messages.ts';

const KEY = 'sk-cache-fleet';

function resources(upstream: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${upstream} }
models:
  - { display_name: gpt-shared, model_name: gpt-upstream, provider_key: mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
cache_policies:
  - { name: shared, backend: redis, scope: env }
`;
}

const config = (redis: string) =>
  `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
etcd: { env_id: prod }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
cache: { redis: { url: "${redis}", timeout_secs: 1 } }
`;

describe('response cache on Redis across gateways', { timeout: 120_000 }, () => {
  let redis: RedisServer;
  let up: MockUpstream;
  const gws: GatewayProcess[] = [];
  before(async () => {
    [redis, up] = await Promise.all([startRedis(), startMockUpstream()]);
    for (const runtime of ['node', 'bun'] as const) {
      const g = await spawnGateway({
        runtime,
        config: config(redis.url),
        files: { 'resources.yaml': resources(up.base) },
        env: { CALLER: KEY },
      });
      gws.push(g);
    }
    await Promise.all(gws.map((g) => g.waitReady()));
  });
  after(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await Promise.all([redis?.close(), up?.close()]);
  });

  const chat = (g: GatewayProcess, content: string) =>
    fetch(g.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-shared', messages: [{ role: 'user', content }] }),
    });
  const cacheOf = async (r: Response) => {
    assert.equal(r.status, 200);
    await r.arrayBuffer();
    return r.headers.get('x-aisix-cache');
  };

  test('the boot WARN: no semantic layer on Redis', async () => {
    for (const g of gws) await g.waitForLog(CACHE_MSG.semanticOnRedis);
  });

  test('an answer stored by one gateway is a hit on the other, under aisix:cache:prod:', async () => {
    up.script({ body: chatCompletion('gpt-upstream', 'shared answer') });
    assert.equal(await cacheOf(await chat(gws[0]!, 'shared?')), 'miss');
    // The store is written after the answer is handed over (src/proxy/cache-steps.ts), so wait for it.
    const stored = () => redisCli(redis.port, 'KEYS', 'aisix:cache:*').split('\n').filter(Boolean);
    await until(() => stored().length > 0, 5_000, 'the first answer stored in Redis');
    const hit = await chat(gws[1]!, 'shared?');
    assert.equal(hit.headers.get('x-aisix-cache'), 'hit');
    const body = await hit.json() as { choices: { message: { content: string } }[] };
    assert.equal(body.choices[0]!.message.content, 'shared answer');
    const keys = stored();
    assert.equal(keys.length, 1);
    assert.match(keys[0]!, /^aisix:cache:prod:[0-9a-f]{16}$/);
  });

  test('Redis stopped mid-run: requests succeed as misses, one WARN per gateway; back, shared again', async () => {
    await redis.stop();
    for (const g of gws) {
      for (let i = 0; i < 5; i++) assert.equal(await cacheOf(await chat(g, 'during the outage')), 'miss');
    }
    for (const g of gws) {
      await g.waitForLog(CACHE_MSG.lookupFailed);
      const warns = g.logs.filter((l) => l.msg === CACHE_MSG.lookupFailed || l.msg === CACHE_MSG.writeFailed);
      assert.equal(warns.length, 1, 'one WARN per outage');
    }
    await redis.start();
    await until(async () => (await cacheOf(await chat(gws[0]!, 'after the outage'))) === 'hit', 15_000, 'stored again');
    // The other gateway tries Redis again within a second of its last failed try.
    await until(async () => (await cacheOf(await chat(gws[1]!, 'after the outage'))) === 'hit', 15_000, 'shared again');
    for (const g of gws) await g.waitForLog(CACHE_MSG.redisRecovered);
  });
});
