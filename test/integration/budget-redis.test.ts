// Budgets shared through a real redis-server (docs/budgets.md "Redis"): the Lua scripts answer as the memory
// store does step by step; two gateways sharing one budget under concurrent calls admit exactly what fits
// and charge what was spent; keys expire after their period; an unsettled reservation is released on
// Redis's clock; Redis down refuses calls under a hard budget (fail closed), or lets them go on with
// `on_store_unavailable: allow`.
// Run: node --import tsx --test test/integration/budget-redis.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import type { Amount, BudgetLine, BudgetStore } from '../../src/budgets/store.ts';
import { MemoryBudgetStore } from '../../src/budgets/store.ts';
import { counterKey, RedisBudgetStore } from '../../src/budgets/store-redis.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';
import { redisCli, type RedisServer, startRedis, startRedisCluster } from '../support/redis.ts';
import { until } from '../support/until.ts';

let redis: RedisServer;
let mock: MockUpstream;
before(async () => {
  redis = await startRedis();
  mock = await startMockUpstream();
});
after(async () => {
  await mock.close();
  await redis.close();
});

const client = () => ioredisClient({ mode: 'single', url: redis.url, nodes: [], sentinels: [], timeoutMs: 2000 });
const line = (counter: string, limitMicroUsd?: number, hard = true): BudgetLine => ({
  counter,
  limitMicroUsd,
  limitTokens: undefined,
  hard,
  expiresAtMs: Date.now() + 3_600_000,
});
const usd = (micro: number, tokens = 0): Amount => ({ microUsd: micro, tokens });

describe('the Redis store', () => {
  test('answers as the memory store does, step by step', async () => {
    const r = new RedisBudgetStore({ client: client(), timeoutMs: 2000 });
    const m = new MemoryBudgetStore();
    const lines = [line('team:same:daily:1', 1_000_000), line('api_key:k:daily:1', 300_000, false)];
    const steps: ((s: BudgetStore) => Promise<unknown>)[] = [
      (s) => s.reserve(lines, 'a', usd(400_000, 10), 60_000),
      (s) => s.reserve(lines, 'b', usd(700_000, 5), 60_000),
      (s) => s.reserve(lines, 'c', usd(600_000, 5), 60_000),
      (s) => s.commit(lines, 'a', usd(350_000, 8)),
      (s) => s.reserve(lines, 'd', usd(650_000, 1), 60_000),
      (s) => s.commit(lines, 'd', usd(900_000, 2)),
      (s) => s.commit(lines, 'c', usd(1, 1)), // never reserved: charged all the same
    ];
    for (const [i, step] of steps.entries()) assert.deepEqual(await step(r), await step(m), `step ${i}`);
    await r.close();
  });

  test('a Cluster runs a call’s budgets in one script: every key shares one hash tag', async () => {
    const cluster = await startRedisCluster();
    try {
      const c = ioredisClient({ mode: 'cluster', nodes: cluster.urls, sentinels: [], timeoutMs: 2000 });
      const r = new RedisBudgetStore({ client: c, timeoutMs: 2000 });
      const lines = [line('api_key:k:daily:1', 1_000), line('team:t:monthly:1', 500), line('model:m:weekly:1', 9_000)];
      assert.equal((await r.reserve(lines, 'a', usd(400), 60_000)).refused, undefined);
      assert.equal((await r.reserve(lines, 'b', usd(200), 60_000)).refused, 1);
      assert.deepEqual((await r.commit(lines, 'a', usd(300))).map((s) => s.spentMicroUsd), [300, 300, 300]);
      assert.equal((await r.reserve(lines, 'b', usd(200), 60_000)).refused, undefined);
      await r.close();
    } finally {
      await cluster.close();
    }
  });

  test('every key of a counter expires at its period’s end', async () => {
    const r = new RedisBudgetStore({ client: client(), timeoutMs: 2000, envId: 'prod' });
    const l = line('user:u1:weekly:7', 10);
    await r.reserve([l], 'x', usd(1), 60_000);
    const key = counterKey(l.counter, 'prod');
    assert.equal(key, 'sluice:budget:{prod}:user:u1:weekly:7');
    for (const k of [key, `${key}:a`, `${key}:x`]) {
      const ttl = Number(redisCli(redis.port, 'PTTL', k));
      assert.ok(ttl > 3_500_000 && ttl <= 3_600_000, `${k}: ${ttl}`);
    }
    await r.close();
  });

  test('a reservation never settled is released after its ttl, on Redis’s clock', async () => {
    const r = new RedisBudgetStore({ client: client(), timeoutMs: 2000 });
    const l = [line('team:ttl:daily:1', 100)];
    assert.equal((await r.reserve(l, 'lost', usd(100), 300)).refused, undefined);
    assert.equal((await r.reserve(l, 'next', usd(100), 300)).refused, 0);
    await until(async () => (await r.reserve(l, 'next', usd(100), 60_000)).refused === undefined, 5000, 'release');
    await r.close();
  });
});

const RESOURCES = (base: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
api_keys:
  - { display_name: shared, key_env: SHARED, allowed_models: ["*"], budgets: [{ window: daily, limit_usd: 1 }] }
`;
const KEY = 'sk-shared';
const budgetConfig = (extra = '') =>
  `${BASE_CONFIG}budgets: { backend: redis, redis: { url: "${redis.url}", timeout_secs: 1 }${extra} }\n`;

async function gateway(config: string): Promise<{ gw: Gateway; app: ReturnType<typeof createProxyApp> }> {
  const { gw } = await gatewayWith(RESOURCES(mock.base), { config, env: { SHARED: KEY }, redis: ioredisClient });
  return { gw, app: createProxyApp(gw) };
}

const chat = (app: ReturnType<typeof createProxyApp>) =>
  app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt', max_tokens: 150, messages: [{ role: 'user', content: 'hi' }] }),
  });

describe('two gateways sharing one budget through Redis', () => {
  test('concurrent calls on both: exactly what fits is admitted, and charged', async () => {
    redisCli(redis.port, 'FLUSHALL');
    const a = await gateway(budgetConfig());
    const b = await gateway(budgetConfig());
    // $0.30 spent per call; each reserves about $0.32, so three fit in $1 however the calls interleave.
    mock.setDefault({
      delayMs: 100,
      body: { ...chatCompletion('gpt-up'), usage: { prompt_tokens: 20, completion_tokens: 140, total_tokens: 160 } },
    });
    const before = mock.requests.length;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(i % 2 ? a.app : b.app)));
    const statuses = answers.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 200).length, 3, statuses.join(' '));
    assert.equal(statuses.filter((s) => s === 429).length, 17);
    assert.equal(mock.requests.length - before, 3);
    const keys = redisCli(redis.port, '--scan', '--pattern', 'sluice:budget:*').split('\n').filter((k) =>
      !/:[ax]$/.test(k)
    );
    assert.equal(keys.length, 1);
    assert.equal(redisCli(redis.port, 'HGET', keys[0]!, 's'), '900000');
    assert.equal(redisCli(redis.port, 'HGET', keys[0]!, 'r'), '0');
    const refused = await chat(a.app);
    assert.equal(refused.status, 429);
    assert.equal(((await refused.json()) as { error: { spent_usd: string } }).error.spent_usd, '0.90');
    a.gw.stop();
    b.gw.stop();
  });

  test('Redis down: a hard budget refuses (503, nothing sent); allow lets the call go on', async () => {
    const closed = await gateway(budgetConfig());
    const open = await gateway(budgetConfig(', on_store_unavailable: allow'));
    mock.setDefault({});
    redisCli(redis.port, 'FLUSHALL');
    assert.equal((await chat(closed.app)).status, 200);
    await redis.stop();
    try {
      const before = mock.requests.length;
      const res = await chat(closed.app);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      const body = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'budget_store_unavailable');
      assert.match(body.error.message, /^budget store unavailable: a hard budget covers this call/);
      assert.equal(mock.requests.length, before);
      assert.equal((await chat(open.app)).status, 200);
    } finally {
      await redis.start();
    }
    await until(async () => (await chat(closed.app)).status === 200, 10_000, 'budgets back once Redis answers');
    closed.gw.stop();
    open.gw.stop();
  });
});
