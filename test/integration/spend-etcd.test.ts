// `sluice spend --etcd` (docs/admin.md "Spend reports") against a real etcd and a real redis-server: the budget
// counters the Redis store wrote, the rows named from the keys and models under the prefix (and an env id's),
// Redis from `--redis` or from config.yaml, and `GET /admin/v1/spend` naming its rows from the served
// configuration the same way. Refusals: no Redis, an etcd that does not answer, a Redis URL's password never
// printed.
// Run: node build.mjs && node --import tsx --test test/integration/spend-etcd.test.ts
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import { createAdminApp } from '../../src/admin/app.ts';
import { spendRouteFor } from '../../src/admin/spend-route.ts';
import type { BudgetLine } from '../../src/budgets/store.ts';
import { RedisBudgetStore } from '../../src/budgets/store-redis.ts';
import { RedisConnSchema } from '../../src/config/schema.ts';
import { seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { runtimeCommand } from '../support/process.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { scratchDir } from '../support/scratch.ts';

const HOUR = 3_600_000;
const P = '/spend';

let etcd: EtcdServer;
let redis: RedisServer;
before(async () => {
  [etcd, redis] = await Promise.all([startEtcd(), startRedis()]);
  const s = seeder(etcd.endpoint);
  await s.put(`${P}/provider_keys/pk1`, { display_name: 'echo', provider: 'echo' });
  await s.put(`${P}/models/m1`, { display_name: 'gpt-test', model_name: 'x', provider_key_id: 'pk1' });
  await s.put(`${P}/api_keys/k1`, {
    display_name: 'CI key',
    key_hash: 'a'.repeat(64),
    allowed_models: ['*'],
    team_id: 'platform',
    user_id: 'u7',
  });
  await s.put(`${P}/api_keys/k2`, { display_name: 'batch', key_hash: 'b'.repeat(64), allowed_models: ['*'] });
  await s.put(`${P}/envA/api_keys/k1`, { display_name: 'CI key in envA', key_hash: 'c'.repeat(64) });

  const c = ioredisClient({ mode: 'single', url: redis.url, nodes: [], sentinels: [], timeoutMs: 2000 });
  const line = (counter: string): BudgetLine => ({
    counter,
    limitMicroUsd: 100_000_000,
    limitTokens: undefined,
    hard: true,
    expiresAtMs: Date.now() + 48 * HOUR,
  });
  const yesterday = Math.floor((Date.now() - 24 * HOUR) / 1000);
  const commit = async (store: RedisBudgetStore, counters: string[], usd: number, tokens: number) => {
    const lines = counters.map(line);
    await store.reserve(lines, `r-${counters[0]}`, { microUsd: usd * 1e6, tokens }, 60_000);
    await store.commit(lines, `r-${counters[0]}`, { microUsd: usd * 1e6, tokens });
  };
  const store = new RedisBudgetStore({ client: c, timeoutMs: 2000 });
  await commit(store, [`api_key:k1:daily:${yesterday}`, `team:platform:daily:${yesterday}`], 1.25, 120);
  await commit(store, [`api_key:k2:daily:${yesterday}`], 0.5, 40);
  await commit(store, [`model:m1:monthly:${yesterday}`], 1.75, 160);
  await commit(
    new RedisBudgetStore({ client: c, timeoutMs: 2000, envId: 'envA' }),
    [`api_key:k1:daily:${yesterday}`],
    3,
    1,
  );
  await c.quit();
});
after(async () => {
  await etcd?.stop();
  await redis?.close();
});

function spend(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const [cmd, argv] = runtimeCommand('node', ['spend', ...args]);
  return spawnSync(cmd, argv, { encoding: 'utf8', timeout: 30_000 });
}

type Row = { id: string; name?: string; team_id?: string; user_id?: string; budget: string; spent_usd: number };

test('--etcd with --redis: the counters, each key named from its row; by team; by model', () => {
  const byKey = spend(['--etcd', etcd.endpoint, '--prefix', P, '--redis', redis.url, '--since', '7d', '--json']);
  assert.equal(byKey.status, 0, byKey.stderr);
  const rows = (JSON.parse(byKey.stdout) as { rows: Row[] }).rows;
  assert.deepEqual(rows.map((r) => [r.id, r.name, r.team_id, r.user_id, r.budget, r.spent_usd]), [
    ['k1', 'CI key', 'platform', 'u7', 'daily', 1.25],
    ['k2', 'batch', undefined, undefined, 'daily', 0.5],
  ]);
  assert.deepEqual(Object.keys(rows[0]!).slice(0, 4), ['id', 'name', 'team_id', 'user_id']);

  const byTeam = spend(['--etcd', etcd.endpoint, '--prefix', P, '--redis', redis.url, '--since', '7d', '--by', 'team']);
  assert.equal(byTeam.status, 0, byTeam.stderr);
  assert.match(byTeam.stdout, /^# spend by team from /);
  assert.match(byTeam.stdout, /^platform\s+daily\s+1\.250000\s+120\s+1$/m);

  const byModel = spend(['--etcd', etcd.endpoint, '--prefix', P, '--redis', redis.url, '--by', 'model']);
  assert.equal(byModel.status, 0, byModel.stderr);
  assert.match(byModel.stdout, /^model\s+name\s+team\s+budget\s+spent_usd\s+tokens\s+periods$/m);
  assert.match(byModel.stdout, /^m1\s+gpt-test\s+-\s+monthly\s+1\.750000\s+160\s+1$/m);
});

test("--env-id: that environment's counters and rows", () => {
  const r = spend(['--etcd', etcd.endpoint, '--prefix', P, '--env-id', 'envA', '--redis', redis.url, '--json']);
  assert.equal(r.status, 0, r.stderr);
  const rows = (JSON.parse(r.stdout) as { rows: Row[] }).rows;
  assert.deepEqual(rows.map((x) => [x.id, x.name, x.spent_usd]), [['k1', 'CI key in envA', 3]]);
});

test('--etcd with --config: Redis from budgets.redis, the prefix from etcd.prefix', () => {
  const dir = scratchDir('sluice-spend-etcd');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `etcd: { endpoints: ["http://127.0.0.1:9"], prefix: ${P} }
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
budgets: { backend: redis, redis: { url: "${redis.url}" } }
`,
  );
  const r = spend(['--etcd', etcd.endpoint, '--config', config, '--since', '7d', '--json']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual((JSON.parse(r.stdout) as { rows: Row[] }).rows.map((x) => [x.id, x.name]), [
    ['k1', 'CI key'],
    ['k2', 'batch'],
  ]);
});

test('refusals: no Redis, etcd not answering, a bad or unreachable Redis URL (its password never printed)', () => {
  const noRedis = spend(['--etcd', etcd.endpoint]);
  assert.equal(noRedis.status, 2);
  assert.match(noRedis.stderr, /spend --etcd needs --redis <url> or --config <file>/);

  const deadEtcd = spend(['--etcd', 'http://127.0.0.1:9', '--prefix', P, '--redis', redis.url]);
  assert.equal(deadEtcd.status, 1);
  assert.match(deadEtcd.stderr, /spend: cannot read \/spend\/ from etcd/);

  const badUrl = spend(['--etcd', etcd.endpoint, '--redis', 'http://:hunter2@127.0.0.1:6379']);
  assert.equal(badUrl.status, 2);
  assert.match(badUrl.stderr, /--redis must be a redis:\/\/ or rediss:\/\/ URL/);

  const deadRedis = spend(['--etcd', etcd.endpoint, '--prefix', P, '--redis', 'redis://:hunter2@127.0.0.1:9']);
  assert.equal(deadRedis.status, 1);
  assert.match(deadRedis.stderr, /the budget counters could not be read: check --redis/);
  for (const r of [badUrl, deadRedis]) assert.ok(!(r.stdout + r.stderr).includes('hunter2'), r.stderr);
});

test('GET /admin/v1/spend on a gateway fed by etcd names its rows as the command does', async () => {
  const t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
  const clients: ReturnType<typeof ioredisClient>[] = [];
  try {
    await t.until(() => t.gw.snapshot?.resources.api_keys.length === 2, 'the keys served');
    const KEY = 'admin-read-SECRET-spend-etcd';
    const redisConn = RedisConnSchema.parse({ url: redis.url });
    const route = spendRouteFor({
      config: {
        budgets: { ...t.gw.config.budgets, backend: 'redis', redis: redisConn },
        etcd: t.gw.config.etcd,
        admin: { ...t.gw.config.admin, admin_keys: [KEY], write_keys: [] },
      },
      platform: {
        redis: (o) => {
          const c = ioredisClient(o);
          clients.push(c);
          return c;
        },
      },
      get snapshot() {
        return t.gw.snapshot;
      },
    });
    const app = createAdminApp(t.gw, undefined, [route]);
    const res = await app.request('/admin/v1/spend?since=7d', { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    const api = (await res.json() as { rows: Row[] }).rows;
    const cli = spend(['--etcd', etcd.endpoint, '--prefix', P, '--redis', redis.url, '--since', '7d', '--json']);
    assert.deepEqual(api, (JSON.parse(cli.stdout) as { rows: Row[] }).rows);
  } finally {
    for (const c of clients) await c.quit();
    await t.stop();
  }
});
