// The response cache's Redis store against real servers (docs/cache.md "Redis"): single, Cluster and
// Sentinel; AISIX's key layout with the env namespace and `EX` TTL; two stores (two gateways) sharing
// entries; Redis killed mid-run — every lookup a miss, one WARN, then recovery.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import { createResponseCache } from '../../src/cache/setup.ts';
import { cacheKeyPrefix, REDIS_RETRY_EVERY_MS, RedisExactStore } from '../../src/cache/redis-store.ts';
import { CACHE_MSG } from '../../src/cache/messages.ts';
import { loadConfig } from '../../src/config/load.ts';
import { Registry } from '../../src/observability/metrics.ts';
import type { RedisClient } from '../../src/platform.ts';
import { CachePolicySchema } from '../../src/resources/schema.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import {
  redisCli,
  type RedisCluster,
  type RedisSentinel,
  type RedisServer,
  startRedis,
  startRedisCluster,
  startRedisSentinel,
} from '../support/redis.ts';
import { testPlatform } from '../support/platform.ts';
import { until } from '../support/until.ts';

const ANSWER = JSON.stringify({
  id: 'chatcmpl-r',
  object: 'chat.completion',
  created: 1,
  model: 'up',
  choices: [{ index: 0, message: { role: 'assistant', content: 'from redis' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
});

function store(client: RedisClient, envId?: string, clock = () => Date.now()) {
  const logs: { level: string; msg: string }[] = [];
  const s = new RedisExactStore({
    client,
    envId,
    clock,
    warn: (msg) => logs.push({ level: 'warn', msg }),
    info: (msg) => logs.push({ level: 'info', msg }),
  });
  return { s, logs };
}

let single: RedisServer;
let cluster: RedisCluster;
let sentinel: RedisSentinel;
const clients: RedisClient[] = [];
const client = (o: Parameters<typeof ioredisClient>[0]) => {
  const c = ioredisClient(o);
  clients.push(c);
  return c;
};

describe('response cache on Redis (real servers)', { timeout: 120_000 }, () => {
  before(async () => {
    // One after the other: concurrent starts can pick the same free port.
    single = await startRedis();
    cluster = await startRedisCluster();
    sentinel = await startRedisSentinel();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.quit()));
    await Promise.all([single?.close(), cluster?.close(), sentinel?.close()]);
  });

  const modes = () =>
    [
      ['single', () => client({ mode: 'single', url: single.url, nodes: [], sentinels: [], timeoutMs: 2000 })],
      ['cluster', () => client({ mode: 'cluster', nodes: cluster.urls, sentinels: [], timeoutMs: 2000 })],
      ['sentinel', () =>
        client({
          mode: 'sentinel',
          nodes: [],
          sentinels: [sentinel.sentinelUrl],
          masterName: sentinel.masterName,
          timeoutMs: 2000,
        })],
    ] as const;
  for (const i of [0, 1, 2]) {
    test(`set then get, with its TTL (${['single', 'cluster', 'sentinel'][i]})`, async () => {
      const [, make] = modes()[i]!;
      const c = make();
      assert.ok(await c.waitReady(5000));
      const { s, logs } = store(c);
      const fp = `fp${i}${process.pid}`;
      assert.equal(await s.get(fp), undefined);
      await s.set(fp, ANSWER, 30_000);
      const got = await s.get(fp);
      assert.equal(got?.body, ANSWER);
      assert.ok(got!.expiresAt > Date.now() + 25_000 && got!.expiresAt <= Date.now() + 30_000);
      assert.deepEqual(logs, []);
    });
  }

  test('AISIX key layout: aisix:cache[:<env_id>]:<fingerprint>, SET EX (at least 1 s)', async () => {
    const c = client({ mode: 'single', url: single.url, nodes: [], sentinels: [], timeoutMs: 2000 });
    assert.ok(await c.waitReady(5000));
    assert.equal(cacheKeyPrefix(undefined), 'aisix:cache');
    const plain = store(c).s;
    const prod = store(c, 'prod').s;
    await plain.set('abc', ANSWER, 60_000);
    await prod.set('abc', 'prod answer', 400);
    assert.equal(redisCli(single.port, 'GET', 'aisix:cache:abc'), ANSWER);
    assert.equal(redisCli(single.port, 'GET', 'aisix:cache:prod:abc'), 'prod answer');
    assert.equal(redisCli(single.port, 'TTL', 'aisix:cache:abc'), '60');
    assert.equal(redisCli(single.port, 'TTL', 'aisix:cache:prod:abc'), '1', 'a TTL under a second is 1 s');
    assert.equal((await prod.get('abc'))?.body, 'prod answer', 'environments never share entries');
  });

  test('two gateways on one Redis share entries through the engine', async () => {
    const cfg = loadConfig(
      '/c.yaml',
      `resources_file: r.yaml\nproxy: { addr: ":0" }\nadmin: { enabled: false }\ncache: { redis: { url: "${single.url}" } }\n`,
      {},
    );
    assert.ok(cfg.ok);
    if (!cfg.ok) return;
    const platform = { ...testPlatform(), redis: ioredisClient };
    const policy = { ...CachePolicySchema.parse({ name: 'shared', backend: 'redis', scope: 'env' }), id: 'p-shared' };
    const snapshot = new Snapshot({ provider_keys: [], models: [], api_keys: [], cache_policies: [policy] });
    const logs: string[] = [];
    const log = { warn: (m: string) => logs.push(m), info: () => {} } as never;
    const a = createResponseCache(cfg.config, platform, log, new Registry(), { clock: Date.now });
    const b = createResponseCache(cfg.config, platform, log, new Registry(), { clock: Date.now });
    await Promise.all([a.connect(), b.connect()]);
    const body = { model: 'gpt', messages: [{ role: 'user', content: `shared ${process.pid}` }] };
    const miss = await a.engine().lookup({ snapshot, body, apiKeyId: 'k1', cacheControl: null });
    assert.equal(miss?.kind, 'miss');
    if (miss?.kind !== 'miss') return;
    await miss.store(ANSWER);
    const hit = await b.engine().lookup({ snapshot, body, apiKeyId: 'k2', cacheControl: null });
    assert.equal(hit?.kind, 'hit');
    assert.equal(hit?.kind === 'hit' && JSON.parse(hit.body).choices[0].message.content, 'from redis');
    assert.deepEqual(logs, [CACHE_MSG.semanticOnRedis, CACHE_MSG.semanticOnRedis], 'the boot WARN, once each');
    await Promise.all([a.close(), b.close()]);
  });

  test("connect failure at boot is fatal with AISIX's message", async () => {
    const cfg = loadConfig(
      '/c.yaml',
      'resources_file: r.yaml\nproxy: { addr: ":0" }\nadmin: { enabled: false }\ncache: { redis: { url: "redis://127.0.0.1:1", timeout_secs: 1 } }\n',
      {},
    );
    assert.ok(cfg.ok);
    if (!cfg.ok) return;
    const log = { warn: () => {}, info: () => {} } as never;
    const setup = createResponseCache(cfg.config, { ...testPlatform(), redis: ioredisClient }, log, new Registry(), {
      clock: Date.now,
    });
    await assert.rejects(setup.connect(), /^Error: redis cache connect failed \(cache\.redis\): /);
    await setup.close();
  });

  test('Redis killed mid-run: lookups are misses and writes are skipped, one WARN; it recovers', async () => {
    const own = await startRedis();
    try {
      const c = client({ mode: 'single', url: own.url, nodes: [], sentinels: [], timeoutMs: 500 });
      assert.ok(await c.waitReady(5000));
      let now = 1_000_000;
      const { s, logs } = store(c, undefined, () => now);
      await s.set('k', ANSWER, 60_000);
      assert.equal((await s.get('k'))?.body, ANSWER);
      await own.stop();
      for (let i = 0; i < 20; i++) {
        assert.equal(await s.get('k'), undefined);
        await s.set('k2', ANSWER, 60_000);
        now += 100;
      }
      assert.deepEqual(logs.map((l) => `${l.level} ${l.msg}`), [`warn ${CACHE_MSG.lookupFailed}`]);
      assert.equal(s.failing, true);
      await own.start();
      assert.ok(await c.waitReady(10_000));
      // The client can still hold the dead connection, half closed, until its close event (ioredis's status
      // "ready", every command refused): what is tested here is the store's probe once Redis answers again.
      await until(() => c.evalScript('return 1', [], []).then(() => true, () => false), 10_000, 'Redis answering');
      now += REDIS_RETRY_EVERY_MS;
      assert.equal(await s.get('k'), undefined, 'an empty server after the restart: a clean miss');
      assert.equal(s.failing, false);
      assert.deepEqual(logs.map((l) => l.level), ['warn', 'info']);
    } finally {
      await own.close();
    }
  });
});
