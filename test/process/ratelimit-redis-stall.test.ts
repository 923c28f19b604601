// A shared store that stalls instead of failing: three gateway processes — Node, Bun and Deno — with the
// default `ratelimit.redis` budgets on one real Redis paused by `DEBUG SLEEP 5`. No request waits much longer
// than `command_timeout_ms` (250 ms), the store counts as down (the WARN, `sluice_ratelimit_shared_store_up 0`),
// requests meanwhile do not wait for it, and the background probe brings it back (the INFO line, the gauge 1)
// with no request needed (docs/scaling.md "When Redis is unavailable").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import type { GatewayProcess, RuntimeName } from '../support/process.ts';
import { fleetConfig, fleetResources, spawnFleet } from '../support/redis-fleet.ts';
import { type RedisServer, redisSleep, startRedis } from '../support/redis.ts';
import { until } from '../support/until.ts';
import { SHARED_STORE_DOWN_WARNING, SHARED_STORE_RECOVERED } from '../../src/routing/rate-limit-redis.ts';

const KEY = 'sk-stall-limited';
const BUDGET_MS = 250;
const RUNTIMES: RuntimeName[] = ['node', 'bun', 'deno'];

const resources = (upstreamBase: string): string =>
  fleetResources(
    upstreamBase,
    `api_keys:
  - { display_name: limited, key_env: KEY, allowed_models: ["*"], rate_limit: { rpm: 1000000, concurrency: 1000 } }
`,
  );

/** One request's answer time, ms (asserting it was served). */
async function timedChat(g: GatewayProcess): Promise<number> {
  const t = performance.now();
  const r = await fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(30_000),
  });
  await r.arrayBuffer();
  assert.equal(r.status, 200);
  return performance.now() - t;
}

async function gauge(g: GatewayProcess): Promise<string | undefined> {
  const text = await (await fetch(g.url('/metrics', 'status'))).text();
  return /^sluice_ratelimit_shared_store_up (\d)$/m.exec(text)?.[1];
}

describe('a stalled shared store (gateway processes on node, bun, deno)', { timeout: 180_000 }, () => {
  let redis: RedisServer;
  let mock: MockUpstream;
  const gws: GatewayProcess[] = [];
  before(async () => {
    redis = await startRedis(['--enable-debug-command', 'yes']);
    mock = await startMockUpstream();
    gws.push(
      ...await spawnFleet(RUNTIMES, {
        config: fleetConfig(`url: "${redis.url}"`),
        resources: resources(mock.base),
        env: { KEY },
      }),
    );
  });
  after(async () => {
    await Promise.all(gws.map((g) => g.stop(10_000).catch(() => g.kill())));
    await mock?.close();
    await redis?.close();
  });

  test('DEBUG SLEEP 5: requests bounded by the command budget, gauge 0, recovery probed and logged', async () => {
    const baseline: number[] = [];
    for (const g of gws) {
      for (let i = 0; i < 10; i++) baseline.push(await timedChat(g));
      assert.equal(await gauge(g), '1');
    }
    const sleeping = redisSleep(redis.port, 5);
    const sleepStarted = performance.now();
    // Each gateway: requests one after another until its store counts as down.
    const waits = await Promise.all(gws.map(async (g, i) => {
      const mine: number[] = [];
      await until(
        async () => {
          mine.push(await timedChat(g));
          return g.logs.some((l) => l.msg === SHARED_STORE_DOWN_WARNING);
        },
        4000,
        `${RUNTIMES[i]}: the stall to be noticed`,
        0,
      );
      return mine;
    }));
    const noticedAfter = performance.now() - sleepStarted;
    assert.ok(noticedAfter < 4000, 'noticed well within the 5 s stall');
    for (const [i, g] of gws.entries()) {
      const worst = Math.max(...waits[i]!);
      console.log(
        `${RUNTIMES[i]}: baseline max ${Math.max(...baseline).toFixed(0)} ms; during the stall ` +
          `${waits[i]!.map((w) => w.toFixed(0)).join(', ')} ms`,
      );
      // The budget plus what a loaded machine adds to one request; a stall reaching callers is ≥ 5000.
      assert.ok(worst < BUDGET_MS + 750, `${RUNTIMES[i]}: a request waited ${worst.toFixed(0)} ms`);
      assert.equal(await gauge(g), '0', `${RUNTIMES[i]}: sluice_ratelimit_shared_store_up`);
      const warn = g.logs.find((l) => l.msg === SHARED_STORE_DOWN_WARNING)!;
      assert.match(String(warn.error), /timed out/i, `${RUNTIMES[i]}: the WARN names the timeout`);
      // While it is down, requests do not wait for it: one that did would take the whole budget, so most of ten
      // take less (on a loaded machine one request alone can take as long: the baseline's max above).
      const during: number[] = [];
      for (let j = 0; j < 10; j++) during.push(await timedChat(g));
      const median = [...during].sort((a, b) => a - b)[5]!;
      assert.ok(median < BUDGET_MS, `${RUNTIMES[i]}: while down ${during.map((w) => w.toFixed(0))}`);
    }
    // No request from here on: only the background probe can notice that Redis answers again.
    await sleeping;
    await Promise.all(gws.map((g) => g.waitForLog(SHARED_STORE_RECOVERED, 10_000)));
    for (const g of gws) assert.equal(await gauge(g), '1');
    for (const g of gws) assert.equal(g.logs.filter((l) => l.msg === SHARED_STORE_DOWN_WARNING).length, 1);
  });
});
