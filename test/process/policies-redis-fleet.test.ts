// One team pool, many replicas (docs/rate-limit-policies.md "Where a policy counts"): a Node, a Bun and a Deno gateway on one
// real Redis hold a team's `rate_limit_policies` exactly once for the whole fleet, in AISIX's key layout.
//
// Day windows: a test first waits, by Redis `TIME`, until at least 2 minutes of the UTC day are left, so the
// 00:00 boundary cannot fall inside it. Each command gets 1 s (`command_timeout_ms`): on a loaded machine a late
// answer would mark the store down and count per replica.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import type { GatewayProcess } from '../support/process.ts';
import { fleetConfig, fleetResources, spawnFleet } from '../support/redis-fleet.ts';
import { redisCli, type RedisServer, startRedis } from '../support/redis.ts';
import { until } from '../support/until.ts';

const KEYS = { A1: 'sk-team-a-1', A2: 'sk-team-a-2', A3: 'sk-team-a-3', B1: 'sk-team-b-1' };

const resources = (upstreamBase: string): string =>
  fleetResources(
    upstreamBase,
    `api_keys:
  - { display_name: a1, key_env: A1, allowed_models: ["*"], team_id: team-a, user_id: u-1 }
  - { display_name: a2, key_env: A2, allowed_models: ["*"], team_id: team-a, user_id: u-2 }
  - { display_name: a3, key_env: A3, allowed_models: ["*"], team_id: team-a, user_id: u-3 }
  - { display_name: b1, key_env: B1, allowed_models: ["*"], team_id: team-b, user_id: u-4 }
rate_limit_policies:
  - { name: team-a-requests, scope: team, scope_ref: team-a, window: day, max_requests: 30 }
  - { name: team-b-tokens, limits: { tpd: 10 }, group_by: [team], conditions: [{ dimension: team, operator: "==", value: team-b }] }
`,
  );

const CONFIG = (url: string): string =>
  fleetConfig(`mode: single, url: "${url}", timeout_secs: 1, command_timeout_ms: 1000`);

function chat(g: GatewayProcess, key: string) {
  return fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** Wait until at least `secs` of the UTC day are left (by Redis time); returns the day's start. */
async function freshDay(port: number, secs = 120): Promise<number> {
  const now = () => Number(redisCli(port, 'TIME').split('\n')[0]);
  let t = now();
  if (86_400 - (t % 86_400) < secs) {
    await new Promise((r) => setTimeout(r, (86_400 - (t % 86_400)) * 1000 + 200));
    t = now();
  }
  return t - (t % 86_400);
}

/** The one Redis key of a policy bucket, found by its hash-tagged prefix (the policy id is derived). */
function policyKey(port: number, bucketPrefix: string, dim: string, day: number): string {
  const keys = redisCli(port, 'KEYS', `aisix:rl:{${bucketPrefix}*}:${dim}:${day}`).split('\n').filter(Boolean);
  assert.equal(keys.length, 1, keys.join(','));
  return keys[0]!;
}

describe('a team pool held by Node + Bun + Deno on one Redis', () => {
  let mock: MockUpstream;
  let redis: RedisServer;
  let gws: GatewayProcess[];
  before(async () => {
    mock = await startMockUpstream();
    redis = await startRedis();
    gws = await spawnFleet(['node', 'bun', 'deno'], {
      config: CONFIG(redis.url),
      resources: resources(mock.base),
      env: { ...KEYS },
    });
  });
  after(async () => {
    await Promise.all((gws ?? []).map((g) => g.stop()));
    await redis?.close();
    await mock?.close();
  });

  test('30 requests a day for the team: exactly 30 of 90, from three keys on three runtimes', async () => {
    const day = await freshDay(redis.port);
    const keys = [KEYS.A1, KEYS.A2, KEYS.A3];
    const before = mock.requests.length;
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let batch = 0; batch < 9; batch++) {
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) => chat(gws[(batch * 10 + i) % 3]!, keys[(batch + i) % 3]!)),
      );
      for (const r of rs) {
        statuses.push(r.status);
        if (r.status === 429 && !limited) limited = r;
        else await r.arrayBuffer();
      }
    }
    assert.equal(statuses.filter((s) => s === 200).length, 30, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 429).length, 60);
    assert.equal(mock.requests.length - before, 30, 'no refused call reached the upstream');
    assert.ok(limited);
    const body = await limited.json() as { error: { message: string; type: string; policy: { name: string } } };
    assert.equal(body.error.message, "request limit exceeded (requests) (policy 'team-a-requests')");
    assert.equal(body.error.type, 'rate_limit_exceeded');
    assert.equal(body.error.policy.name, 'team-a-requests');
    assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
    // AISIX's layout: one counter for the fleet, a refusal counts nothing.
    assert.equal(redisCli(redis.port, 'GET', policyKey(redis.port, 'policy:team:team-a:', 'rpd', day)), '30');
    let refused = 0;
    for (const g of gws) {
      const text = await (await fetch(g.url('/metrics', 'status'))).text();
      const m = /^aisix_ratelimit_rejections_total\{scope="requests",layer="policy",policy_id="[^"]+"\} (\d+)$/m
        .exec(text);
      refused += Number(m?.[1] ?? 0);
      assert.match(text, /^sluice_ratelimit_shared_store_up 1$/m);
    }
    assert.equal(refused, 60);
  });

  test('a team token pool charged by each runtime in turn: 4 + 4 + 4 > 10, the fourth call is refused', async () => {
    const day = await freshDay(redis.port);
    const charged = () => {
      const keys = redisCli(redis.port, 'KEYS', `aisix:rl:{policy:*}:tpd:${day}`).split('\n').filter(Boolean);
      return keys.length === 0 ? 0 : Number(redisCli(redis.port, 'GET', keys[0]!) || 0);
    };
    // The mock's JSON answer carries usage.total_tokens 4, charged after the answer's last byte.
    for (const [i, g] of gws.entries()) {
      const r = await chat(g, KEYS.B1);
      assert.equal(r.status, 200, `call ${i + 1}`);
      await r.arrayBuffer();
      await until(() => charged() === 4 * (i + 1), 5000, `${4 * (i + 1)} tokens in the team's bucket`);
    }
    for (const g of gws) {
      const r = await chat(g, KEYS.B1);
      assert.equal(r.status, 429);
      const body = await r.json() as { error: { message: string } };
      assert.equal(body.error.message, "token limit exceeded (tokens) (policy 'team-b-tokens')");
    }
    assert.equal(charged(), 12);
    const key = policyKey(redis.port, 'policy:v2:', 'tpd', day);
    assert.match(key, /:team=team-b\}:/, 'the group_by bucket names the team');
  });
});
