// Spend reports from a real redis-server (docs/admin.md "Spend reports"): counters written by the budgets'
// Redis store are read back page by page (reservation bookkeeping skipped, an env id's counters apart), and
// `sluice spend` prints the same report from the Redis config.yaml names.
// Run: node --import tsx --test test/integration/admin-spend-redis.test.ts
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import { RedisSpendSource } from '../../src/admin/spend-redis.ts';
import { spendReport } from '../../src/admin/spend-report.ts';
import type { BudgetLine } from '../../src/budgets/store.ts';
import { RedisBudgetStore } from '../../src/budgets/store-redis.ts';
import { runtimeCommand } from '../support/process.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { scratchDir } from '../support/scratch.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

const HOUR = 3_600_000;
const client = () => ioredisClient({ mode: 'single', url: redis.url, nodes: [], sentinels: [], timeoutMs: 2000 });
const line = (counter: string): BudgetLine => ({
  counter,
  limitMicroUsd: 100_000_000,
  limitTokens: undefined,
  hard: true,
  expiresAtMs: Date.now() + 48 * HOUR,
});

test('counters the budget store wrote, read back and summed; the CLI prints the same', async () => {
  const c = client();
  const store = new RedisBudgetStore({ client: c, timeoutMs: 2000 });
  const other = new RedisBudgetStore({ client: c, timeoutMs: 2000, envId: 'other-env' });
  const today = Math.floor((Date.now() - HOUR) / 1000);
  const yesterday = today - 86_400;
  const t1 = [line(`team:t1:daily:${yesterday}`), line(`api_key:k1:daily:${yesterday}`)];
  await store.reserve(t1, 'r1', { microUsd: 5_000_000, tokens: 10 }, 60_000);
  await store.commit(t1, 'r1', { microUsd: 1_250_000, tokens: 120 });
  const t1Today = [line(`team:t1:daily:${today}`)];
  await store.reserve(t1Today, 'r2', { microUsd: 1_000_000, tokens: 0 }, 60_000);
  await store.commit(t1Today, 'r2', { microUsd: 500_000, tokens: 30 });
  // Held, not settled: a reservation is not spend.
  await store.reserve([line(`team:t2:daily:${today}`)], 'r3', { microUsd: 9_000_000, tokens: 0 }, 60_000);
  await other.commit([line(`team:t1:daily:${today}`)], 'x', { microUsd: 7_000_000, tokens: 1 });
  for (let i = 0; i < 1500; i++) await c.evalScript("return redis.call('SET', KEYS[1], '1')", [`unrelated:${i}`], []);

  const counters = await new RedisSpendSource(c).counters();
  const report = spendReport(counters, 'team', Date.now() - 7 * 24 * HOUR, Date.now());
  assert.deepEqual(report.rows.map((r) => [r.id, r.budget, r.spent_usd, r.spent_tokens, r.periods.length]), [
    ['t1', 'daily', 1.75, 150, 2],
    ['t2', 'daily', 0, 0, 1],
  ]);
  const otherRows = spendReport(await new RedisSpendSource(c, 'other-env').counters(), 'team', 0, Date.now()).rows;
  assert.deepEqual(otherRows.map((r) => r.spent_usd), [7]);
  await c.quit();

  const dir = scratchDir('sluice-spend');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `etcd: { endpoints: ["http://127.0.0.1:9"] }
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
budgets: { backend: redis, redis: { url: "${redis.url}" } }
`,
  );
  const [cmd, args] = runtimeCommand('node', ['spend', '--config', config, '--since', '7d', '--by', 'team', '--json']);
  const run = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 0, run.stderr);
  const printed = JSON.parse(run.stdout) as { by: string; rows: { id: string; spent_usd: number }[] };
  assert.equal(printed.by, 'team');
  assert.deepEqual(printed.rows.map((r) => [r.id, r.spent_usd]), [['t1', 1.75], ['t2', 0]]);

  const [cmd2, args2] = runtimeCommand('node', ['spend', '--config', config, '--by', 'key']);
  const tableRun = spawnSync(cmd2, args2, { encoding: 'utf8', timeout: 30_000 });
  assert.equal(tableRun.status, 0, tableRun.stderr);
  assert.match(tableRun.stdout, /^k1\s+daily\s+1\.250000\s+120\s+1$/m);
});
