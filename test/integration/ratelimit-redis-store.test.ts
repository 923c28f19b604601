// The Redis store against a real redis-server (single and Cluster), step by step beside the memory store on
// the same timeline: each step runs on Redis first, then on memory with its clock set to the Redis `TIME`
// the script reported, and both answers must be identical (refusal, Retry-After, counts). Then the Redis
// key layout, TTLs, concurrency-slot expiry and the fail-open path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import {
  type AcquireOutcome,
  type BucketEnd,
  type BucketSpec,
  bucketSpec,
  MemoryRateLimitStore,
  RateLimiter,
  type RateLimitStore,
} from '../../src/routing/rate-limit.ts';
import {
  type RedisClient,
  RedisRateLimitStore,
  SHARED_STORE_DOWN_WARNING,
  SHARED_STORE_RECOVERED,
  type SharedStoreState,
} from '../../src/routing/rate-limit-redis.ts';
import {
  redisCli,
  type RedisCluster,
  type RedisSentinel,
  type RedisServer,
  redisSleep,
  startRedis,
  startRedisCluster,
  startRedisSentinel,
} from '../support/redis.ts';
import { sleep, until } from '../support/until.ts';

interface Harness {
  redis: RedisRateLimitStore;
  client: RedisClient;
  logs: { level: string; msg: string }[];
  states: SharedStoreState[];
}

function harness(client: RedisClient, mode: 'single' | 'cluster' | 'sentinel', ttl = 300, timeoutMs = 2000): Harness {
  const logs: { level: string; msg: string }[] = [];
  const states: SharedStoreState[] = [];
  const redis = new RedisRateLimitStore({
    client,
    mode,
    concurrencyTtlSecs: ttl,
    timeoutMs,
    warn: (msg) => logs.push({ level: 'warn', msg }),
    info: (msg) => logs.push({ level: 'info', msg }),
    onState: (s) => states.push(s),
  });
  return { redis, client, logs, states };
}

type Step =
  | { acquire: BucketSpec[]; member?: string }
  | { finish: BucketEnd[]; member: string }
  /** Wait until the Redis clock is in the next second (crosses an rps window). */
  | { nextSecond: true };

let run = 0;
/** Buckets unique to one run, so a server shared by several tests starts empty for each. */
const b = (name: string) => `t${process.pid}-${run}-${name}`;
const spec = (name: string, limits: Parameters<typeof bucketSpec>[1]) => bucketSpec(b(name), limits)!;

function timelines(): { name: string; steps: () => Step[] }[] {
  return [
    {
      name: 'rps: the limit per second, refused until the next second, then admitted again',
      steps: () => {
        const s = [spec('rps', { rps: 2 })];
        return [{ acquire: s }, { acquire: s }, { acquire: s }, { nextSecond: true }, { acquire: s }, { acquire: s }];
      },
    },
    {
      name: 'rpm + rph + rpd: counted together; Retry-After is the rest of the refusing window',
      steps: () => {
        const s = [spec('rpx', { rpm: 3, rph: 10, rpd: 100 })];
        return [{ acquire: s }, { acquire: s }, { acquire: s }, { acquire: s }, { acquire: s }];
      },
    },
    {
      name: 'tpm + tpd: checked before, charged after; refused once used > limit',
      steps: () => {
        const s = [spec('tok', { tpm: 10, tpd: 1000 })];
        const end = (tokens: number): BucketEnd[] => [{
          bucket: b('tok'),
          tokenDims: [{ dim: 'tpm', windowSecs: 60 }, { dim: 'tpd', windowSecs: 86_400 }],
          tokens,
          release: false,
        }];
        return [
          { acquire: s },
          { finish: end(10), member: 'm1' },
          { acquire: s }, // 10 ≤ 10: admitted
          { finish: end(1), member: 'm2' },
          { acquire: s }, // 11 > 10: refused
        ];
      },
    },
    {
      name: 'concurrency: slots taken and given back by member',
      steps: () => {
        const s = [spec('conc', { concurrency: 2 })];
        const rel: BucketEnd[] = [{ bucket: b('conc'), tokenDims: [], tokens: 0, release: true }];
        return [
          { acquire: s, member: 'a' },
          { acquire: s, member: 'b' },
          { acquire: s, member: 'c' },
          { finish: rel, member: 'a' },
          { acquire: s, member: 'd' },
          { acquire: s, member: 'e' },
        ];
      },
    },
    {
      name: 'zeros: rpm 0 and concurrency 0 refuse everything; tpm 0 admits until a token is charged',
      steps: () => [
        { acquire: [spec('z1', { rpm: 0 })] },
        { acquire: [spec('z2', { concurrency: 0 })] },
        { acquire: [spec('z3', { tpm: 0 })] },
        {
          finish: [{ bucket: b('z3'), tokenDims: [{ dim: 'tpm', windowSecs: 60 }], tokens: 1, release: false }],
          member: 'x',
        },
        { acquire: [spec('z3', { tpm: 0 })] },
      ],
    },
    {
      name: 'two buckets: all or nothing (a refusal by the second counts nothing in the first)',
      steps: () => {
        const s = [spec('key', { rpm: 5, concurrency: 5 }), spec('model', { rps: 1 })];
        return [
          { acquire: s, member: 'p' },
          { acquire: s, member: 'q' }, // model rps refuses; key rpm and slot untouched
          { acquire: [spec('key', { rpm: 5, concurrency: 5 })], member: 'r' },
        ];
      },
    },
  ];
}

async function redisNowMs(client: RedisClient): Promise<number> {
  const r = await client.evalScript("local t = redis.call('TIME') return {t[1], t[2]}", [`{clock}`], []) as string[];
  return Number(r[0]) * 1000 + Math.floor(Number(r[1]) / 1000);
}

async function replay(h: Harness, steps: Step[]): Promise<void> {
  const clock = { t: 0 };
  const memory = new MemoryRateLimitStore({ now: () => clock.t });
  let n = 0;
  for (const step of steps) {
    n++;
    if ('nextSecond' in step) {
      const now = await redisNowMs(h.client);
      await sleep(1000 - (now % 1000) + 20);
      continue;
    }
    if ('finish' in step) {
      await h.redis.finish(step.finish, step.member);
      clock.t = await redisNowMs(h.client);
      await memory.finish(step.finish, step.member);
      continue;
    }
    const member = step.member ?? `m${n}`;
    const fromRedis: AcquireOutcome = await h.redis.acquire(step.acquire, member);
    clock.t = fromRedis.nowMs; // memory runs at the instant Redis reported
    const fromMemory = await memory.acquire(step.acquire, member);
    assert.deepEqual(fromMemory, fromRedis, `step ${n}: memory and Redis answer alike`);
    // Window boundaries relative to the clock the store reports.
    if (fromRedis.refused && fromRedis.refused.dim !== 'concurrency') {
      const w = { rps: 1, rpm: 60, rph: 3600, rpd: 86_400, tpm: 60, tpd: 86_400 }[fromRedis.refused.dim];
      const nowSecs = Math.floor(fromRedis.nowMs / 1000);
      assert.equal(fromRedis.refused.retryAfterSecs, w - (nowSecs % w), `step ${n}: Retry-After is the window's end`);
    }
  }
}

/** What each timeline must answer, whatever the backend (the memory replay proves equality). */
async function checkExpected(h: Harness): Promise<void> {
  run++;
  const s = [spec('exp', { rpm: 2, concurrency: 1 })];
  const a = await h.redis.acquire(s, 'e1');
  assert.equal(a.refused, undefined);
  assert.deepEqual(a.usage, [{ inFlight: 1, used: [1] }]);
  const c = await h.redis.acquire(s, 'e2');
  assert.equal(c.refused?.dim, 'concurrency');
  assert.equal(c.refused?.retryAfterSecs, 1);
}

function suite(
  name: string,
  setup: () => Promise<{ client: RedisClient; mode: 'single' | 'cluster' | 'sentinel'; close(): Promise<void> }>,
) {
  describe(name, () => {
    let env: Awaited<ReturnType<typeof setup>>;
    let h: Harness;
    before(async () => {
      env = await setup();
      h = harness(env.client, env.mode);
    });
    after(async () => {
      await env.client.quit();
      await env.close();
    });

    for (const t of timelines()) {
      test(`memory and Redis agree — ${t.name}`, async () => {
        run++;
        await replay(h, t.steps());
      });
    }

    test('expected answers (not only equal ones)', () => checkExpected(h));

    test('no WARN while Redis answers', () => {
      assert.deepEqual(h.logs, []);
      assert.equal(h.states.at(-1)?.shared, true);
    });
  });
}

describe('Redis rate-limit store', () => {
  let single: RedisServer;
  let cluster: RedisCluster;
  let sentinel: RedisSentinel;
  before(async () => {
    single = await startRedis();
    cluster = await startRedisCluster();
    sentinel = await startRedisSentinel();
  });
  after(async () => {
    await single?.close();
    await cluster?.close();
    await sentinel?.close();
  });

  suite('single', async () => ({
    client: ioredisClient({ mode: 'single', url: single.url, nodes: [], sentinels: [], timeoutMs: 2000 }),
    mode: 'single' as const,
    close: async () => {},
  }));
  suite('cluster', async () => ({
    client: ioredisClient({ mode: 'cluster', nodes: cluster.urls, sentinels: [], timeoutMs: 2000 }),
    mode: 'cluster' as const,
    close: async () => {},
  }));
  suite('sentinel (the master found through a sentinel)', async () => ({
    client: ioredisClient({
      mode: 'sentinel',
      nodes: [],
      sentinels: [sentinel.sentinelUrl],
      masterName: sentinel.masterName,
      timeoutMs: 2000,
    }),
    mode: 'sentinel' as const,
    close: async () => {},
  }));

  test('key layout: aisix:rl:{<bucket>}:<dim>:<window_start> with EXPIRE window + 5 s; conc is a sorted set', async () => {
    const client = ioredisClient({ mode: 'single', url: single.url, nodes: [], sentinels: [], timeoutMs: 2000 });
    const h = harness(client, 'single');
    const limiter = new RateLimiter({ store: h.redis });
    const d = await limiter.acquire([
      { scope: 'api_key', id: 'layout-key', limits: { rpm: 9, rph: 9, tpm: 50, concurrency: 3 } },
      { scope: 'model', id: 'uuid-1', name: 'layout-model', limits: { rps: 9 } },
    ]);
    assert.ok(d.allowed);
    const now = Math.floor((await redisNowMs(client)) / 1000);
    const ws = (w: number) => now - (now % w);
    assert.equal(redisCli(single.port, 'GET', `aisix:rl:{layout-key}:rpm:${ws(60)}`), '1');
    assert.equal(redisCli(single.port, 'GET', `aisix:rl:{layout-key}:rph:${ws(3600)}`), '1');
    const ttl = Number(redisCli(single.port, 'TTL', `aisix:rl:{layout-key}:rpm:${ws(60)}`));
    assert.ok(ttl > 60 - (now % 60) && ttl <= 65, `rpm TTL ${ttl} is window + 5 s from the first count`);
    assert.ok(Number(redisCli(single.port, 'TTL', `aisix:rl:{layout-key}:rph:${ws(3600)}`)) <= 3605);
    assert.equal(redisCli(single.port, 'EXISTS', `aisix:rl:{model:layout-model}:rps:${ws(1)}`), '1');
    assert.equal(redisCli(single.port, 'TYPE', 'aisix:rl:{layout-key}:conc'), 'zset');
    assert.equal(redisCli(single.port, 'ZCARD', 'aisix:rl:{layout-key}:conc'), '1');
    assert.equal(d.headers?.['x-ratelimit-limit-requests'], '9');
    assert.equal(d.headers?.['x-ratelimit-remaining-requests'], '8');
    assert.equal(d.headers?.['x-ratelimit-limit-tokens'], '50');
    assert.equal(d.headers?.['x-ratelimit-remaining-tokens'], '50');
    assert.match(d.headers?.['x-ratelimit-reset-requests'] ?? '', /^([1-9]|[1-5][0-9]|60)s$/);
    assert.equal(d.headers?.['x-ratelimit-limit-concurrent'], '3');
    assert.equal(d.headers?.['x-ratelimit-remaining-concurrent'], '2');
    await d.permit.end(7);
    assert.equal(redisCli(single.port, 'GET', `aisix:rl:{layout-key}:tpm:${ws(60)}`), '7');
    assert.equal(redisCli(single.port, 'ZCARD', 'aisix:rl:{layout-key}:conc'), '0');
    await client.quit();
  });

  test('a slot never given back is reclaimed after concurrency_ttl_secs', async () => {
    const client = ioredisClient({ mode: 'single', url: single.url, nodes: [], sentinels: [], timeoutMs: 2000 });
    const h = harness(client, 'single', 1);
    const s = [bucketSpec(`ttl-${process.pid}`, { concurrency: 1 })!];
    assert.equal((await h.redis.acquire(s, 'crashed')).refused, undefined);
    assert.equal((await h.redis.acquire(s, 'next')).refused?.dim, 'concurrency');
    await until(async () => (await h.redis.acquire(s, 'later')).refused === undefined, 5000, 'the slot to expire');
    await client.quit();
  });

  test('Redis down: fail open to memory, one WARN, state and probes; back up: shared again, WARN re-armed', async () => {
    const own = await startRedis();
    const client = ioredisClient({ mode: 'single', url: own.url, nodes: [], sentinels: [], timeoutMs: 1000 });
    const h = harness(client, 'single', 300, 1000);
    const store: RateLimitStore = h.redis;
    const s = [bucketSpec('outage', { rpm: 1000, concurrency: 1 })!];
    const first = await store.acquire(s, 'u1');
    assert.equal(first.refused, undefined);
    await store.finish([{ bucket: 'outage', tokenDims: [], tokens: 0, release: true }], 'u1');
    await own.stop();
    // Every request keeps being answered (from memory), promptly.
    const started = Date.now();
    for (let i = 0; i < 20; i++) {
      const r = await store.acquire(s, `d${i}`);
      assert.equal(r.refused?.dim ?? 'admitted', i === 0 ? 'admitted' : 'concurrency', `request ${i}`);
    }
    assert.ok(Date.now() - started < 3000, 'no request waits long for a Redis that is down');
    await store.finish([{ bucket: 'outage', tokenDims: [], tokens: 0, release: true }], 'd0');
    assert.deepEqual(h.logs.map((l) => l.msg), [SHARED_STORE_DOWN_WARNING]);
    assert.equal(h.states.at(-1)?.shared, false);
    await own.start();
    const release: BucketEnd[] = [{ bucket: 'outage', tokenDims: [], tokens: 0, release: true }];
    let seq = 0;
    await until(
      async () => {
        const member = `p${++seq}`;
        if (!(await store.acquire(s, member)).refused) await store.finish(release, member);
        return h.states.at(-1)?.shared === true;
      },
      10_000,
      'shared counting to resume',
      100,
    );
    assert.deepEqual(h.logs.map((l) => l.msg), [SHARED_STORE_DOWN_WARNING, SHARED_STORE_RECOVERED]);
    await own.stop();
    await until(
      async () => {
        await store.acquire(s, `q${Date.now()}`);
        return h.states.at(-1)?.shared === false;
      },
      10_000,
      'the second outage to be noticed',
      50,
    );
    assert.deepEqual(h.logs.map((l) => l.msg), [
      SHARED_STORE_DOWN_WARNING,
      SHARED_STORE_RECOVERED,
      SHARED_STORE_DOWN_WARNING,
    ]);
    await h.redis.close(); // stops the background probe too
    await own.close();
  });
  test('a stalled Redis (DEBUG SLEEP 5) costs a request at most the command budget; the probe brings it back', async () => {
    const own = await startRedis(['--enable-debug-command', 'yes']);
    const budgetMs = 200;
    const client = ioredisClient({
      mode: 'single',
      url: own.url,
      nodes: [],
      sentinels: [],
      timeoutMs: 5000,
      commandTimeoutMs: budgetMs,
    });
    const h = harness(client, 'single', 300, 5000);
    const s = [bucketSpec(b('stall'), { rpm: 1000 })!];
    assert.equal((await h.redis.acquire(s, 'before')).refused, undefined);
    const sleeping = redisSleep(own.port, 5);
    // Requests until the stall is noticed: none waits much longer than the budget.
    const waits: number[] = [];
    await until(
      async () => {
        const t = performance.now();
        await h.redis.acquire(s, `w${waits.length}`);
        waits.push(performance.now() - t);
        return h.states.at(-1)?.shared === false;
      },
      4000,
      'the stall to mark the store down',
      20,
    );
    assert.ok(Math.max(...waits) < budgetMs + 300, `waits ${waits.map((w) => w.toFixed(0)).join(', ')} ms`);
    assert.deepEqual(h.logs.map((l) => l.msg), [SHARED_STORE_DOWN_WARNING]);
    // While it is down no request waits for it at all.
    const t = performance.now();
    for (let i = 0; i < 20; i++) await h.redis.acquire(s, `d${i}`);
    assert.ok(performance.now() - t < 100, `20 requests while down took ${(performance.now() - t).toFixed(0)} ms`);
    // Recovery comes from the background probe alone: no request is made until it is logged.
    await sleeping;
    await until(() => h.states.at(-1)?.shared === true, 5000, 'the background probe to see Redis again');
    assert.deepEqual(h.logs.map((l) => l.msg), [SHARED_STORE_DOWN_WARNING, SHARED_STORE_RECOVERED]);
    assert.equal((await h.redis.acquire(s, 'after')).refused, undefined);
    await h.redis.close();
    await own.close();
  });
});
