// Spend reports (docs/admin.md "Spend reports"): budget counters summed per key, team, user or model over a
// range, through the admin app's `app.request()`, the range bounds, the CLI's flags and its table.
// Run: node --import tsx --test test/unit/admin-spend.test.ts
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { type AdminView, createAdminApp } from '../../src/admin/app.ts';
import { type CounterTotal, nameRows, parseTimeBound, spendReport } from '../../src/admin/spend-report.ts';
import { createSpendRoute, SPEND_PATH } from '../../src/admin/spend-route.ts';
import { parseCli } from '../../src/cli.ts';
import { table } from '../../src/tools/spend.ts';

const NOW = Date.parse('2026-12-05T12:00:00Z');
const DAY = 86_400_000;
const start = (ms: number) => Math.floor(ms / 1000);
const c = (counter: string, usd: number, tokens = 0): CounterTotal => ({
  counter,
  spentMicroUsd: Math.round(usd * 1e6),
  spentTokens: tokens,
});
const COUNTERS: CounterTotal[] = [
  c(`team:t1:daily:${start(NOW - 2 * DAY)}`, 1.25, 100),
  c(`team:t1:daily:${start(NOW - DAY)}`, 2.5, 200),
  c(`team:t1:daily:${start(NOW - 10 * DAY)}`, 99, 9_999), // before the range
  c(`team:t1:monthly:${start(NOW - 4 * DAY)}`, 3.75, 300),
  c(`team:t2:daily:${start(NOW - DAY)}`, 0.5, 50),
  c(`api_key:k:1:daily:${start(NOW - DAY)}`, 7, 700), // an id holding `:`
  c(`model:m1:daily:${start(NOW - DAY)}`, 4, 400),
];

describe('the report', () => {
  test('per subject and budget, periods in the range only, most spent first; budgets never summed', () => {
    const r = spendReport(COUNTERS, 'team', NOW - 7 * DAY, NOW);
    assert.deepEqual(r.rows.map((x) => [x.id, x.budget, x.spent_usd, x.spent_tokens, x.periods.length]), [
      ['t1', 'daily', 3.75, 300, 2],
      ['t1', 'monthly', 3.75, 300, 1],
      ['t2', 'daily', 0.5, 50, 1],
    ]);
    assert.deepEqual(r.rows[0]!.periods, [
      { start: new Date(NOW - 2 * DAY).toISOString(), spent_usd: 1.25, spent_tokens: 100 },
      { start: new Date(NOW - DAY).toISOString(), spent_usd: 2.5, spent_tokens: 200 },
    ]);
    assert.deepEqual(spendReport(COUNTERS, 'key', NOW - 7 * DAY, NOW).rows.map((x) => x.id), ['k:1']);
    assert.deepEqual(spendReport(COUNTERS, 'model', NOW - 7 * DAY, NOW).rows.map((x) => x.spent_usd), [4]);
    assert.deepEqual(spendReport(COUNTERS, 'user', NOW - 7 * DAY, NOW).rows, []);
  });

  test('range bounds: durations back from now and RFC 3339 times; anything else says what it takes', () => {
    assert.equal(parseTimeBound('7d', NOW), NOW - 7 * DAY);
    assert.equal(parseTimeBound('24h', NOW), NOW - DAY);
    assert.equal(parseTimeBound('30m', NOW), NOW - 1_800_000);
    assert.equal(parseTimeBound('2w', NOW), NOW - 14 * DAY);
    assert.equal(parseTimeBound('2026-12-01T00:00:00Z', NOW), Date.parse('2026-12-01T00:00:00Z'));
    assert.match(String(parseTimeBound('yesterday', NOW)), /neither a duration/);
  });

  test('the CLI table: a header naming the range, one line per row', () => {
    const lines = table(spendReport(COUNTERS, 'team', NOW - 7 * DAY, NOW));
    assert.equal(
      lines[0],
      `# spend by team from ${new Date(NOW - 7 * DAY).toISOString()} to ${new Date(NOW).toISOString()}`,
    );
    assert.match(lines[1]!, /^team\s+budget\s+spent_usd\s+tokens\s+periods$/);
    assert.match(lines[2]!, /^t1\s+daily\s+3\.750000\s+300\s+2$/);
    assert.equal(lines.length, 5);
  });
});

describe('GET /admin/v1/spend', () => {
  const KEY = 'admin-read-SECRET-spend';
  const view = { config: { admin: { admin_keys: [KEY] } } } as unknown as AdminView;
  const app = (source = { counters: () => Promise.resolve(COUNTERS) }) =>
    createAdminApp(view, undefined, [createSpendRoute({ source, keys: [KEY], now: () => NOW })]);
  const get = (a: ReturnType<typeof app>, q: string, key = KEY) =>
    a.request(`${SPEND_PATH}${q}`, { headers: { authorization: `Bearer ${key}` } });

  test('by team over 7 days, in the report shape', async () => {
    const res = await get(app(), '?by=team&since=7d');
    assert.equal(res.status, 200);
    const body = await res.json() as { by: string; since: string; rows: { id: string }[] };
    assert.equal(body.by, 'team');
    assert.equal(body.since, new Date(NOW - 7 * DAY).toISOString());
    assert.deepEqual(body.rows.map((r) => r.id), ['t1', 't1', 't2']);
  });

  test('bad parameters 400 naming them; no key 401; a write 405; no Redis 501; Redis down 503', async () => {
    const bad = await get(app(), '?by=org');
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /by: one of key, team, user, model/);
    assert.match(await (await get(app(), '?since=7d&until=8d')).text(), /until: must be after since/);
    assert.equal((await get(app(), '', 'wrong')).status, 401);
    const post = await app().request(SPEND_PATH, { method: 'POST', headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET,HEAD');
    const none = createAdminApp(view, undefined, [
      createSpendRoute({ source: undefined, keys: [KEY], now: () => NOW }),
    ]);
    const r501 = await get(none, '');
    assert.equal(r501.status, 501);
    assert.match(await r501.text(), /budgets.backend: redis/);
    const down = await get(app({ counters: () => Promise.reject(new Error('connect ECONNREFUSED pw=hunter2')) }), '');
    assert.equal(down.status, 503);
    assert.ok(!(await down.text()).includes('hunter2'));
  });
});

test('sluice spend: flags', () => {
  assert.deepEqual(parseCli(['spend', '--config', 'c.yaml', '--since', '7d', '--by', 'team', '--json'], {}), {
    kind: 'spend',
    configPath: 'c.yaml',
    by: 'team',
    since: '7d',
    json: true,
  });
  assert.equal(parseCli(['spend'], {}).kind, 'error');
});

const NAMES = {
  api_keys: [{ id: 'k:1', display_name: 'CI key', team_id: 'platform', user_id: 'u7' }, { id: 'other' }],
  models: [{ id: 'm1', display_name: 'gpt-test' }],
};

describe('rows named from the resources', () => {
  test("a key's row gets its name, team and user; a model's its name; teams and users stay ids", () => {
    const keys = nameRows(spendReport(COUNTERS, 'key', NOW - 7 * DAY, NOW), NAMES);
    assert.deepEqual(Object.keys(keys.rows[0]!), [
      'id',
      'name',
      'team_id',
      'user_id',
      'budget',
      'spent_usd',
      'spent_tokens',
      'periods',
    ]);
    assert.deepEqual([keys.rows[0]!.name, keys.rows[0]!.team_id, keys.rows[0]!.user_id], ['CI key', 'platform', 'u7']);
    const models = nameRows(spendReport(COUNTERS, 'model', NOW - 7 * DAY, NOW), NAMES);
    assert.equal(models.rows[0]!.name, 'gpt-test');
    assert.equal('team_id' in models.rows[0]!, false);
    const teams = spendReport(COUNTERS, 'team', NOW - 7 * DAY, NOW);
    assert.deepEqual(nameRows(teams, NAMES), teams);
    const unknown = nameRows(spendReport(COUNTERS, 'key', NOW - 7 * DAY, NOW), { api_keys: [], models: [] });
    assert.equal('name' in unknown.rows[0]!, false, 'a key no resource holds keeps its id only');
  });

  test('the API names the rows from the served resources', async () => {
    const KEY = 'admin-read-SECRET-names';
    const view = { config: { admin: { admin_keys: [KEY] } } } as unknown as AdminView;
    const route = createSpendRoute({
      source: { counters: () => Promise.resolve(COUNTERS) },
      keys: [KEY],
      now: () => NOW,
      names: () => NAMES,
    });
    const res = await createAdminApp(view, undefined, [route]).request(`${SPEND_PATH}?by=key&since=7d`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    const body = await res.json() as { rows: { id: string; name?: string; team_id?: string }[] };
    assert.deepEqual(body.rows.map((r) => [r.id, r.name, r.team_id]), [['k:1', 'CI key', 'platform']]);
  });

  test('the CLI table adds name and team columns when a row has one', () => {
    const lines = table(nameRows(spendReport(COUNTERS, 'key', NOW - 7 * DAY, NOW), NAMES));
    assert.match(lines[1]!, /^key\s+name\s+team\s+budget\s+spent_usd\s+tokens\s+periods$/);
    assert.match(lines[2]!, /^k:1\s+CI key\s+platform\s+daily\s+7\.000000\s+700\s+1$/);
  });
});

test('sluice spend --etcd: flags, and the Redis it needs', () => {
  assert.deepEqual(
    parseCli(
      [
        'spend',
        '--etcd',
        'http://e1:2379,http://e2:2379',
        '--prefix',
        '/gw',
        '--redis',
        'redis://r:6379',
        '--env-id',
        'prod',
        '--by',
        'team',
      ],
      {},
    ),
    {
      kind: 'spend',
      etcd: { endpoints: ['http://e1:2379', 'http://e2:2379'], prefix: '/gw' },
      redisUrl: 'redis://r:6379',
      envId: 'prod',
      by: 'team',
      json: false,
    },
  );
  const withConfig = parseCli(['spend', '--etcd', 'http://e1:2379', '--config', 'c.yaml'], {});
  assert.equal(withConfig.kind, 'spend');
  const noRedis = parseCli(['spend', '--etcd', 'http://e1:2379', '--since', '7d'], {});
  assert.equal(noRedis.kind, 'error');
  assert.match((noRedis as { message: string }).message, /spend --etcd needs --redis <url> or --config <file>/);
  assert.match((parseCli(['spend'], {}) as { message: string }).message, /--config <file> or --etcd <endpoints>/);
});
