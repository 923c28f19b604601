// Many replicas, one limit: three gateway processes — Node, Bun and Deno — on one real Redis (a single
// server, a three-master Cluster, a master found through a Sentinel) enforce each `rate_limit` once for the whole fleet. Then a replica
// SIGKILLed while holding concurrency slots, a Redis stopped and restarted under traffic, and a boot with
// Redis down.
//
// Minute windows: a test that needs its requests in one `rpm`/`tpm` window first waits, by Redis `TIME`,
// until at least 20 s of the current minute are left (at most ~20 s of waiting), so a window boundary
// cannot fall inside it.
//
// Each command gets 1 s (`command_timeout_ms`), not the 250 ms default: these tests are about exact
// counts, and on a loaded machine a late answer would mark the store down and count per replica.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import type { GatewayProcess, RuntimeName } from '../support/process.ts';
import { fleetConfig, fleetResources, spawnFleet } from '../support/redis-fleet.ts';
import {
  redisCli,
  type RedisCluster,
  type RedisSentinel,
  type RedisServer,
  startRedis,
  startRedisCluster,
  startRedisSentinel,
} from '../support/redis.ts';
import { until } from '../support/until.ts';
import { SHARED_STORE_DOWN_WARNING, SHARED_STORE_RECOVERED } from '../../src/routing/rate-limit-redis.ts';

const KEYS = { CALLER: 'sk-fleet-caller', RPM30: 'sk-fleet-rpm30', CONC2: 'sk-fleet-conc2', BIG: 'sk-fleet-big' };
const TTL_SECS = 3;

function resources(upstreamBase: string): string {
  return fleetResources(
    upstreamBase,
    `  - { display_name: tpm-json, model_name: gpt-upstream, provider_key: mock, retries: 0, rate_limit: { tpm: 10 } }
  - { display_name: tpm-stream, model_name: gpt-upstream, provider_key: mock, retries: 0, rate_limit: { tpm: 10 } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: rpm30, key_env: RPM30, allowed_models: ["*"], rate_limit: { rpm: 30 } }
  - { display_name: conc2, key_env: CONC2, allowed_models: ["*"], rate_limit: { concurrency: 2 } }
  - { display_name: big, key_env: BIG, allowed_models: ["*"], rate_limit: { rpm: 1000000, concurrency: 1000 } }
`,
  );
}

const config = (redis: string): string =>
  fleetConfig(`${redis}, timeout_secs: 1, command_timeout_ms: 1000`, `  concurrency_ttl_secs: ${TTL_SECS}\n`);

const fleet = (runtimes: RuntimeName[], redis: string, mock: MockUpstream): Promise<GatewayProcess[]> =>
  spawnFleet(runtimes, { config: config(redis), resources: resources(mock.base), env: { ...KEYS } });

function chat(g: GatewayProcess, key: string, model = 'gpt-test', extra: Record<string, unknown> = {}) {
  return fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });
}

/** Redis `TIME` in seconds, from any node (cluster nodes share the host clock). */
function redisNow(port: number): number {
  return Number(redisCli(port, 'TIME').split('\n')[0]);
}

/** Wait until at least `secs` of the current minute are left (by Redis time); returns the window start. */
async function freshMinute(port: number, secs = 20): Promise<number> {
  let now = redisNow(port);
  if (60 - (now % 60) < secs) {
    await new Promise((r) => setTimeout(r, (60 - (now % 60)) * 1000 + 200));
    now = redisNow(port);
  }
  return now - (now % 60);
}

function fleetSuite(name: string, setup: () => Promise<{ redis: string; port: number; close(): Promise<void> }>) {
  describe(`fleet of Node + Bun + Deno on ${name} Redis`, () => {
    let mock: MockUpstream;
    let env: Awaited<ReturnType<typeof setup>>;
    let gws: GatewayProcess[];
    before(async () => {
      mock = await startMockUpstream();
      env = await setup();
      gws = await fleet(['node', 'bun', 'deno'], env.redis, mock);
    });
    after(async () => {
      await Promise.all((gws ?? []).map((g) => g.stop()));
      await env?.close();
      await mock?.close();
    });

    test('rpm: 30 → exactly 30 successes out of 90 requests spread across the three', async () => {
      await freshMinute(env.port);
      const statuses: number[] = [];
      let limited: Response | undefined;
      for (let batch = 0; batch < 9; batch++) {
        const rs = await Promise.all(
          Array.from({ length: 10 }, (_, i) => chat(gws[(batch * 10 + i) % 3]!, KEYS.RPM30)),
        );
        for (const r of rs) {
          statuses.push(r.status);
          if (r.status === 429 && !limited) limited = r;
          else await r.arrayBuffer();
        }
      }
      assert.equal(statuses.filter((s) => s === 200).length, 30, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 429).length, 60);
      assert.ok(limited);
      const retry = Number(limited.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry} is the minute's end`);
      assert.equal(limited.headers.get('x-ratelimit-limit-requests'), '30');
      assert.equal(limited.headers.get('x-ratelimit-remaining-requests'), '0');
      assert.match(limited.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+s$/);
      const body = await limited.json() as { error: { type: string } };
      assert.equal(body.error.type, 'rate_limit_exceeded');
      // AISIX's rejection counter on each replica; together they refused the 60.
      let refused = 0;
      for (const g of gws) {
        const text = await (await fetch(g.url('/metrics', 'status'))).text();
        const m = /^aisix_ratelimit_rejections_total\{scope="requests",layer="api_key",policy_id=""\} (\d+)$/m
          .exec(text);
        refused += Number(m?.[1] ?? 0);
        assert.match(text, /^sluice_ratelimit_shared_store_up 1$/m);
      }
      assert.equal(refused, 60);
    });

    test('concurrency: 2 → exactly 2 upstream requests in flight fleet-wide', async () => {
      let release!: () => void;
      const hold = new Promise<void>((r) => (release = r));
      mock.script({ hold }, { hold });
      const before = mock.requests.length;
      const pending = gws.flatMap((g) => [chat(g, KEYS.CONC2), chat(g, KEYS.CONC2)]);
      await mock.waitForRequests(2, 10_000);
      // The four others are refused without reaching the upstream.
      const settled: number[] = [];
      pending.forEach((p) => void p.then((r) => settled.push(r.status)));
      await until(() => settled.length >= 4, 10_000, 'four refusals');
      assert.deepEqual(settled.slice(0, 4), [429, 429, 429, 429]);
      assert.equal(mock.requests.length - before, 2, 'only two requests reached the upstream');
      release();
      const all = await Promise.all(pending);
      for (const r of all) await r.arrayBuffer();
      assert.deepEqual(all.map((r) => r.status).sort(), [200, 200, 429, 429, 429, 429]);
      // Both slots come back (released just after each response, asynchronously): two more go through at once.
      await until(
        async () => {
          const again = await Promise.all([chat(gws[0]!, KEYS.CONC2), chat(gws[2]!, KEYS.CONC2)]);
          for (const r of again) await r.arrayBuffer();
          return again.every((r) => r.status === 200);
        },
        5000,
        'both slots to be free again',
        50,
      );
    });

    test('tpm charges JSON usage across the fleet', async () => {
      await freshMinute(env.port);
      // The mock's JSON answer carries usage.total_tokens 4: 0 → 4 → 8 → 12, and 12 > 10 refuses.
      for (const g of gws) {
        const r = await chat(g, KEYS.CALLER, 'tpm-json');
        assert.equal(r.status, 200);
        await r.arrayBuffer();
      }
      const r = await chat(gws[1]!, KEYS.CALLER, 'tpm-json');
      assert.equal(r.status, 429);
      assert.equal((await r.json() as { error: { message: string } }).error.message.includes('model tpm'), true);
    });

    test('tpm charges streamed usage across the fleet', async () => {
      const ws = await freshMinute(env.port);
      const usage = {
        ...chunk('gpt-upstream', ''),
        usage: { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 },
      };
      const counter = `aisix:rl:{model:tpm-stream}:tpm:${ws}`;
      const charged = () => Number(redisCli(env.port, '-c', 'GET', counter) || 0);
      for (const [i, g] of gws.slice(0, 2).entries()) {
        mock.script({ sse: [chunk('gpt-upstream', 'a'), usage] });
        const r = await chat(g, KEYS.CALLER, 'tpm-stream', { stream: true });
        assert.equal(r.status, 200);
        await r.text();
        // Charged when the stream ends, after its last byte: wait for the shared counter.
        await until(() => charged() === 6 * (i + 1), 5000, `the stream's 6 tokens in ${counter}`);
      }
      const r = await chat(gws[2]!, KEYS.CALLER, 'tpm-stream', { stream: true });
      assert.equal(r.status, 429, '12 > 10 tokens this minute');
      await r.arrayBuffer();
    });
  });
}

fleetSuite('a single', async () => {
  const r: RedisServer = await startRedis();
  return { redis: `mode: single, url: "${r.url}"`, port: r.port, close: () => r.close() };
});

fleetSuite('a three-master Cluster', async () => {
  const c: RedisCluster = await startRedisCluster();
  return {
    redis: `mode: cluster, nodes: [${c.urls.map((u) => `"${u}"`).join(', ')}]`,
    port: c.nodes[0]!.port,
    close: () => c.close(),
  };
});

fleetSuite('a Sentinel-discovered', async () => {
  const s: RedisSentinel = await startRedisSentinel();
  return {
    redis: `mode: sentinel, sentinels: ["${s.sentinelUrl}"], master_name: ${s.masterName}`,
    port: s.master.port,
    close: () => s.close(),
  };
});

describe('replicas and Redis failing', () => {
  let mock: MockUpstream;
  let redis: RedisServer;
  before(async () => {
    mock = await startMockUpstream();
    redis = await startRedis();
  });
  after(async () => {
    await redis?.close();
    await mock?.close();
  });

  test('a replica SIGKILLed while holding concurrency slots: the slots come back after concurrency_ttl_secs', async () => {
    const [doomed, survivor] = await fleet(['node', 'bun'], `mode: single, url: "${redis.url}"`, mock);
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    try {
      mock.script({ hold }, { hold });
      // Their client sees the connection die with the replica.
      const held = [chat(doomed!, KEYS.CONC2), chat(doomed!, KEYS.CONC2)].map((p) => p.catch(() => undefined));
      await mock.waitForRequests(2, 10_000);
      doomed!.kill();
      await doomed!.waitForExit();
      await Promise.all(held);
      const refused = await chat(survivor!, KEYS.CONC2);
      assert.equal(refused.status, 429, 'the dead replica still holds both slots');
      await refused.arrayBuffer();
      const killedAt = Date.now();
      await until(
        async () => {
          const r = await chat(survivor!, KEYS.CONC2);
          await r.arrayBuffer();
          return r.status === 200;
        },
        10_000,
        'the leaked slots to be reclaimed',
        200,
      );
      const waited = (Date.now() - killedAt) / 1000;
      assert.ok(waited <= TTL_SECS + 4, `reclaimed after ${waited} s (concurrency_ttl_secs ${TTL_SECS})`);
    } finally {
      release();
      await survivor!.stop();
    }
  });

  test('Redis stopped mid-run: traffic flows, one WARN, status and metric say so; restarted: shared again, WARN re-armed', async () => {
    const [g] = await fleet(['node'], `mode: single, url: "${redis.url}"`, mock);
    const status = async () =>
      (await (await fetch(g!.url('/status/config', 'status'))).json() as {
        rate_limit_store: { backend: string; shared: boolean; since: string };
      }).rate_limit_store;
    const metric = async () =>
      /^sluice_ratelimit_shared_store_up (\d)$/m.exec(await (await fetch(g!.url('/metrics', 'status'))).text())?.[1];
    const warnings = () => g!.logs.filter((l) => l.msg === SHARED_STORE_DOWN_WARNING);
    const ok = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const r = await chat(g!, KEYS.BIG);
        assert.equal(r.status, 200);
        await r.arrayBuffer();
      }
    };
    try {
      await ok(3);
      assert.deepEqual(await status(), { backend: 'redis', shared: true, since: (await status()).since });
      assert.equal(await metric(), '1');
      await redis.stop();
      await ok(20);
      assert.equal(warnings().length, 1, 'one WARN per outage');
      assert.equal(warnings()[0]!.level, 'WARN');
      assert.equal((await status()).shared, false);
      assert.equal(await metric(), '0');
      await redis.start();
      await until(
        async () => {
          await ok(1);
          return (await status()).shared;
        },
        15_000,
        'shared counting to resume',
        200,
      );
      assert.equal(await metric(), '1');
      await g!.waitForLog(SHARED_STORE_RECOVERED);
      // Shared again: the next request is counted in Redis (the one that saw `shared` may have been counted
      // here, if the background probe found Redis back only after it).
      await ok(1);
      assert.notEqual(redisCli(redis.port, '--scan', '--pattern', 'aisix:rl:*:rpm:*'), '');
      await redis.stop();
      await until(
        async () => {
          await ok(1);
          return warnings().length === 2;
        },
        15_000,
        'the WARN of the second outage',
        200,
      );
    } finally {
      await redis.start();
      await g!.stop();
    }
  });

  test('booting with Redis down: the gateway starts, serves, and says why limits are not shared', async () => {
    await redis.stop();
    try {
      const [g] = await fleet(['node'], `mode: single, url: "${redis.url}"`, mock);
      const r = await chat(g!, KEYS.BIG);
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      await g!.waitForLog(SHARED_STORE_DOWN_WARNING);
      const st = await (await fetch(g!.url('/status/config', 'status'))).json() as Record<string, unknown>;
      assert.deepEqual((st.rate_limit_store as { shared: boolean }).shared, false);
      await g!.stop();
    } finally {
      await redis.start();
    }
  });
});
