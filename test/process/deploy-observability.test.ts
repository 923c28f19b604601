// The alert rules and the Grafana dashboard that ship in deploy/ (issue 13) are tested like code:
//   - `promtool check rules` and `promtool test rules` on deploy/prometheus (every alert has a firing case);
//   - the dashboard is a Grafana dashboard (shape, unique ids, panels on the 24-column grid, no overlap);
//   - every PromQL expression of the dashboard parses (each is written as a recording rule into a temporary
//     rules file and checked by promtool);
//   - every metric the dashboard and the rules name exists in the /metrics exposition of a real gateway
//     process (etcd mode, so the source gauges exist) after scripted traffic: JSON, SSE, errors, a failover.
// promtool ships in Debian's `prometheus` package; etcd in `etcd-server`.
import { type RedisServer, startRedis } from '../support/redis.ts';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { seeder } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';
import { scratchDir } from '../support/scratch.ts';

/**
 * Metric families the dashboard and rules are written against that this branch does not expose yet: AISIX's
 * traffic and token families (being added to src/observability in parallel) and the shared rate-limit
 * store gauge. The test tolerates exactly these, and fails once one of them appears — delete it from here
 * at merge so the check is real.
 */

const ROOT = resolve(import.meta.dirname, '..', '..');
const RULES_DIR = join(ROOT, 'deploy/prometheus');
const DASHBOARD = join(ROOT, 'deploy/grafana/sluice.json');
const INSTALL_HINT =
  'promtool is not installed: run `apt-get install -y prometheus` (Debian/Ubuntu; it provides /usr/bin/promtool), ' +
  'or put the promtool binary from a Prometheus release on PATH';

function promtool(args: string[], cwd = ROOT): string {
  const r = spawnSync('promtool', args, { cwd, encoding: 'utf8' });
  if (r.error) assert.fail(`${INSTALL_HINT} (${r.error.message})`);
  assert.equal(r.status, 0, `promtool ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

interface Target {
  refId: string;
  expr: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
  datasource?: { type: string; uid: string };
}

function dashboard(): { panels: Panel[]; [k: string]: unknown } {
  return JSON.parse(readFileSync(DASHBOARD, 'utf8'));
}

/** Grafana's macros and this dashboard's variables, replaced by what Prometheus itself would accept. */
function concrete(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*').replaceAll('$instance', '.*');
}

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
  'on',
  'ignoring',
  'group_left',
  'group_right',
]);

/** Metric names a PromQL expression selects: identifiers that are not functions, keywords or labels. */
export function metricNames(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  s = s.replace(/\{[^}]*\}/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (s.slice(m.index + m[0].length).trimStart().startsWith('(')) continue;
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

interface RuleGroup {
  name: string;
  rules: { alert?: string; record?: string; expr: string }[];
}

function ruleGroups(): RuleGroup[] {
  return (parseYaml(readFileSync(join(RULES_DIR, 'sluice-rules.yaml'), 'utf8')) as { groups: RuleGroup[] }).groups;
}

describe('alert rules', () => {
  test('promtool check rules and promtool test rules pass', () => {
    assert.match(promtool(['check', 'rules', 'sluice-rules.yaml'], RULES_DIR), /SUCCESS: \d+ rules found/);
    assert.match(promtool(['test', 'rules', 'sluice-rules.test.yaml'], RULES_DIR), /SUCCESS/);
  });

  test('every alert has a unit test in which it fires, and the ones the issue asks for are there', () => {
    const alerts = ruleGroups().flatMap((g) => g.rules.map((r) => r.alert)).filter((a) => a !== undefined);
    const tests = parseYaml(readFileSync(join(RULES_DIR, 'sluice-rules.test.yaml'), 'utf8')) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const firing = new Set(
      tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)),
    );
    for (const a of alerts) assert.ok(firing.has(a), `${a} has no test case in which it fires`);
    for (
      const a of [
        'SluiceConfigDegraded',
        'SluiceConfigOutOfSync',
        'SluiceConfigReloadFailing',
        'SluiceConfigSourceDisconnected',
        'SluiceModelUnavailable',
        'SluiceModelDownLong',
        'SluiceHighErrorRate',
        'SluiceHighLatency',
        'SluiceDrainOverrun',
        'SluiceRateLimitStoreDown',
      ]
    ) assert.ok(alerts.includes(a), `missing alert ${a}`);
  });
});

describe('grafana dashboard', () => {
  test('is a Grafana dashboard: shape, ids, grid, data source variable', () => {
    const d = dashboard();
    assert.equal(d.title, 'Sluice');
    assert.equal(typeof d.uid, 'string');
    assert.equal(typeof d.schemaVersion, 'number');
    const vars = (d.templating as { list: { name: string; type: string }[] }).list;
    assert.ok(vars.some((v) => v.name === 'datasource' && v.type === 'datasource'));
    const ids = new Set<number>();
    const cells = new Set<string>();
    const titles = d.panels.map((p) => p.title);
    for (const s of ['Configuration', 'Traffic', 'Tokens', 'Models', 'Drains and rate limits']) {
      assert.ok(titles.includes(s), `no "${s}" row`);
    }
    for (const p of d.panels) {
      assert.ok(Number.isInteger(p.id) && !ids.has(p.id), `panel id ${p.id} is not unique`);
      ids.add(p.id);
      assert.ok(['row', 'timeseries', 'stat'].includes(p.type), `${p.title}: unexpected type ${p.type}`);
      const g = p.gridPos;
      assert.ok(
        g.w > 0 && g.h > 0 && g.x >= 0 && g.x + g.w <= 24 && g.y >= 0,
        `${p.title}: gridPos ${JSON.stringify(g)}`,
      );
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          assert.ok(!cells.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`);
          cells.add(`${x},${y}`);
        }
      }
      if (p.type === 'row') continue;
      assert.equal(p.datasource?.uid, '${datasource}', `${p.title}: panels read the selected data source`);
      assert.ok(p.targets && p.targets.length > 0, `${p.title}: no query`);
      const refs = p.targets.map((t) => t.refId);
      assert.equal(new Set(refs).size, refs.length, `${p.title}: duplicate refId`);
      for (const t of p.targets) assert.equal(typeof t.expr, 'string');
    }
  });

  test('every PromQL expression parses (promtool check rules on them as recording rules)', () => {
    const rules = dashboard().panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ record: `dashboard:panel_${p.id}_${t.refId}`, expr: concrete(t.expr) }))
    );
    assert.ok(rules.length >= 20, `only ${rules.length} expressions`);
    const dir = scratchDir('sluice-dashboard');
    writeFileSync(join(dir, 'dashboard.rules.yaml'), toYaml({ groups: [{ name: 'dashboard', rules }] }));
    assert.match(
      promtool(['check', 'rules', 'dashboard.rules.yaml'], dir),
      new RegExp(`SUCCESS: ${rules.length} rules`),
    );
  });

  test('metric names are read from expressions as Prometheus would select them', () => {
    assert.deepEqual(
      metricNames(
        'histogram_quantile(0.95, sum by (le, model) (rate(a_bucket{x="y{}"}[5m]))) / on(instance) group_left b > 0 and c offset 5m',
      ),
      ['a_bucket', 'b', 'c'],
    );
    assert.deepEqual(metricNames('time() - x_seconds{job=~"$job"}'), ['x_seconds']);
  });
});

describe('every metric the dashboard and the rules name exists in a real exposition', () => {
  let etcd: EtcdServer;
  let mock: MockUpstream;
  let gw: GatewayProcess;
  let redis: RedisServer;
  const P = '/sluice-dashboard';
  before(async () => {
    etcd = await startEtcd();
    mock = await startMockUpstream();
    // The shared rate-limit store, so its gauge (sluice_ratelimit_shared_store_up) is exposed too.
    redis = await startRedis();
    const s = seeder(etcd.endpoint);
    const rows: [string, unknown][] = [
      [`${P}/provider_keys/pk1`, { display_name: 'mock', provider: 'openai', api_key: 'sk-up', api_base: mock.base }],
      [`${P}/provider_keys/pk2`, { display_name: 'offline', provider: 'echo' }],
      [`${P}/models/m1`, { display_name: 'flaky', model_name: 'flaky-up', provider_key_id: 'pk1', retries: 0 }],
      [`${P}/models/m2`, { display_name: 'steady', model_name: 'echo-1', provider_key_id: 'pk2' }],
      [`${P}/models/m3`, { display_name: 'smart', routing: { targets: [{ model: 'flaky' }, { model: 'steady' }] } }],
      [`${P}/models/m4`, { display_name: 'flaky-2', model_name: 'flaky-up', provider_key_id: 'pk1', retries: 0 }],
      [`${P}/models/m5`, { display_name: 'flaky-3', model_name: 'flaky-up', provider_key_id: 'pk1', retries: 0 }],
      [`${P}/models/m6`, {
        display_name: 'chain',
        routing: { targets: [{ model: 'flaky-2' }, { model: 'flaky-3' }, { model: 'steady' }] },
      }],
      [`${P}/api_keys/k1`, {
        display_name: 'caller',
        key_hash: createHash('sha256').update(CALLER_KEY).digest('hex'),
        allowed_models: ['*'],
      }],
    ];
    for (const [k, v] of rows) await s.put(k, v);
    gw = await spawnGateway({
      config: `etcd: { endpoints: ["${etcd.endpoint}"], prefix: ${P} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
ratelimit: { backend: redis, redis: { url: "redis://127.0.0.1:${redis.port}" } }
`,
    });
    await gw.waitReady('/readyz', 'proxy', 30_000);
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([mock?.close(), etcd?.stop(), redis?.close()]);
  });

  async function chat(model: string, stream = false): Promise<number> {
    const res = await fetch(gw.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  test('after JSON, SSE, an upstream error, a failover, an unknown model and the source failing', async () => {
    mock.script({ status: 502 }, { status: 502 }, { status: 502 }, { status: 502 });
    assert.equal(await chat('flaky'), 502); // an upstream error answered as is
    assert.equal(await chat('smart'), 200); // flaky 502 → cooldown, fails over to steady
    assert.equal(await chat('chain'), 200); // flaky-2 502 → flaky-3 502 (a failed fallback) → steady
    assert.equal(await chat('steady', true), 200); // SSE
    assert.equal(await chat('steady'), 200); // JSON
    assert.equal(await chat('nope'), 404);
    const models = await fetch(gw.url('/v1/models'), { headers: { authorization: `Bearer ${CALLER_KEY}` } });
    assert.equal(models.status, 200);
    await models.arrayBuffer();

    // A rejected row after the first clean load, so the per-kind rejection gauges (absent until something is
    // rejected) are exposed beside the last success timestamp.
    await seeder(etcd.endpoint).put(`${P}/models/broken`, '{not json');
    await until(
      async () => /^aisix_config_rejected_resources\{/m.test(await (await fetch(gw.url('/metrics', 'status'))).text()),
      10_000,
      'the rejected row in aisix_config_rejected_resources',
      100,
    );
    // And the source going away: etcd dies, the watch fails, loads fail (the gateway keeps serving).
    await etcd.kill();
    let body = '';
    await until(
      async () =>
        /^aisix_config_reload_failures_total\{/m.test(body = await (await fetch(gw.url('/metrics', 'status'))).text()),
      30_000,
      () => `a reload failure counted after etcd's death:\n${body}`,
      100,
    );
    const exposed = new Set(
      body.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.slice(0, l.search(/[{ ]/))),
    );
    const named = new Map<string, string>();
    for (const p of dashboard().panels) {
      for (const t of p.targets ?? []) for (const m of metricNames(t.expr)) named.set(m, `dashboard "${p.title}"`);
    }
    for (const g of ruleGroups()) {
      for (const r of g.rules) for (const m of metricNames(r.expr)) named.set(m, `rule ${r.alert ?? r.record}`);
    }
    assert.ok(named.size >= 25, `only ${named.size} metric names found`);
    const missing = [...named].filter(([m]) => !exposed.has(m));
    assert.deepEqual(missing, [], `named but not exposed:\n${missing.map(([m, w]) => `${m} (${w})`).join('\n')}`);
  });
});
