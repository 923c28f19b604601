// The status listener (docs/operations.md, docs/routing.md, docs/aisix-compatibility.md "Metrics") and the admin listener (docs/operations.md): bodies, state
// derivation, hashes, metrics families, and no secret anywhere.
import { sumSamples } from '../support/metrics.ts';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createAdminApp } from '../../src/admin/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { Counter, Gauge, Histogram, Registry } from '../../src/observability/metrics.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { FileSource } from '../../src/sources/file.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { type ConfigFacts, configStatusBody, deriveConfigState } from '../../src/config-facts.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { forcePhase, gatewayWith, SteeredLifecycle, type TestPlatform, testPlatform } from '../support/platform.ts';

/** The gateway's file source for `path`: one per (gateway, path), as the boot makes one per gateway. */
const fileSources = new WeakMap<Gateway, Map<string, FileSource>>();
function fileSource(gw: Gateway, path: string): FileSource {
  const byPath = fileSources.get(gw) ?? new Map<string, FileSource>();
  fileSources.set(gw, byPath);
  const source = byPath.get(path) ?? new FileSource(path, gw);
  byPath.set(path, source);
  return source;
}

const sha256 = (s: string | Uint8Array) => createHash('sha256').update(s).digest('hex');

const ADMIN_KEY = 'admin-SECRET-key-9d2c';
const UPSTREAM_KEY = 'sk-upstream-SECRET-status-5e1b';
const CALLER_KEY = 'sk-caller-SECRET-status-77aa';
const SECRETS = [ADMIN_KEY, UPSTREAM_KEY, CALLER_KEY, sha256(CALLER_KEY)];
const RES_PATH = '/srv/sluice/resources.yaml';

const CONFIG = `
resources_file: ${RES_PATH}
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [${ADMIN_KEY}, second-admin-key] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

function goodFile(apiBase = 'http://127.0.0.1:9/v1'): string {
  return `_format_version: "1"
provider_keys:
  - display_name: mock
    provider: openai
    api_key: \${UPSTREAM_KEY}
    api_base: ${apiBase}
models:
  - { display_name: gpt-4o, provider_key: mock, model_name: gpt-4o-upstream, retries: 0 }
  - { display_name: 'we"ird\\model', provider_key: mock, model_name: weird-upstream, retries: 0 }
  - { display_name: smart, routing: { targets: [{ model: gpt-4o }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

const BAD_FILE = `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: x }
models:
  - { display_name: gpt-4o, provider_key: mock, model_name: gpt-4o-upstream, timeout: "abc" }
  - { display_name: orphan, provider_key: nope, model_name: x }
`;

const ENV = { UPSTREAM_KEY, CALLER_KEY };

/** A controllable clock: every call returns the current value. */
function clock(start = '2025-03-01T10:00:00Z') {
  let t = Date.parse(start);
  return {
    now: () => new Date(t),
    set: (iso: string) => {
      t = Date.parse(iso);
    },
  };
}

/** A Gateway with nothing applied, with an injected clock. */
function bareGateway(now: () => Date = () => new Date()): { gw: Gateway; platform: TestPlatform } {
  const platform = testPlatform(ENV);
  const c = loadConfig('/srv/sluice/config.yaml', CONFIG, {});
  if (!c.ok) throw new Error(c.report.format());
  const clock = () => now().getTime();
  return { gw: new Gateway(c.config, platform, { clock, lifecycle: new SteeredLifecycle(clock) }), platform };
}

async function get(
  app: { request: (p: string, i?: RequestInit) => Response | Promise<Response> },
  path: string,
  init?: RequestInit,
): Promise<{ res: Response; text: string }> {
  const res = await app.request(path, init);
  return { res, text: await res.text() };
}

function assertNoSecret(where: string, text: string): void {
  for (const s of SECRETS) {
    assert.equal(text.includes(s), false, `${where} contains a secret (${s.slice(0, 8)}…):\n${text}`);
  }
}

/** Minimal Prometheus text-format 0.0.4 check: every sample belongs to a family declared by # TYPE before it. */
function checkExposition(text: string): Map<string, string> {
  assert.ok(text.endsWith('\n'));
  const types = new Map<string, string>();
  const helps = new Set<string>();
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# HELP ')) {
      helps.add(line.split(' ')[2]!);
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      assert.ok(!types.has(name!), `family ${name} declared twice`);
      assert.ok(helps.has(name!), `# HELP of ${name} must come first`);
      assert.ok(['counter', 'gauge', 'histogram', 'summary'].includes(type!), line);
      types.set(name!, type!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*",?)*\})? (\S+)$/.exec(
      line,
    );
    assert.ok(m, `not a valid sample line: ${JSON.stringify(line)}`);
    const name = m[1]!;
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `sample of undeclared family: ${line}`);
    if (family !== name) {
      assert.ok(['histogram', 'summary'].includes(types.get(family)!), line);
      if (name.endsWith('_bucket')) assert.equal(types.get(family), 'histogram', line);
    }
    assert.ok(/^(NaN|[+-]Inf|-?\d+(\.\d+)?(e[+-]?\d+)?)$/.test(m[3]!), `bad value: ${line}`);
  }
  return types;
}

/** The value of the one sample `name{labels}` (labels as written), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('/status/ready', () => {
  test('503 `no configuration available` before any apply; 200 `ok` after', async () => {
    const { gw, platform } = bareGateway();
    const app = createStatusApp(gw);
    const before = await get(app, '/status/ready');
    assert.equal(before.res.status, 503);
    assert.equal(before.text, 'no configuration available');
    assert.equal(before.res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(before.res.headers.get('x-content-type-options'), 'nosniff');
    platform.fileMap.set(RES_PATH, goodFile());
    assert.deepEqual(await fileSource(gw, RES_PATH).read(), { ok: true, resources: 5 });
    const after = await get(app, '/status/ready');
    assert.equal(after.res.status, 200);
    assert.equal(after.text, 'ok');
    // still ok while draining, and after a failed reload (last-known-good serves)
    forcePhase(gw, 'draining');
    assert.equal((await get(app, '/status/ready')).text, 'ok');
    platform.fileMap.set(RES_PATH, BAD_FILE);
    assert.equal((await fileSource(gw, RES_PATH).read()).ok, false);
    const stale = await get(app, '/status/ready');
    assert.equal(stale.res.status, 200);
    assert.equal(stale.text, 'ok');
  });

  test('HEAD works; other methods are 405', async () => {
    const { gw } = await gatewayWith(goodFile(), { config: CONFIG, env: ENV });
    const app = createStatusApp(gw);
    assert.equal((await app.request('/status/ready', { method: 'HEAD' })).status, 200);
    for (const path of ['/status/ready', '/status/config', '/status/models', '/metrics']) {
      const res = await app.request(path, { method: 'POST' });
      assert.equal(res.status, 405, path);
      assert.equal(res.headers.get('allow'), 'GET, HEAD');
    }
  });
});

describe('/status/config', () => {
  test('never_loaded before anything is applied', async () => {
    const { gw } = bareGateway();
    const { res, text } = await get(createStatusApp(gw), '/status/config');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(text), {
      state: 'never_loaded',
      source: { type: 'file' },
      last_failure: null,
      rejected: [],
      partially_compatible: [],
      rate_limit_store: { backend: 'memory', shared: false },
    });
  });

  test('a failed first load: still never_loaded, with last_failure and rejected rows', async () => {
    const c = clock();
    const { gw, platform } = bareGateway(c.now);
    platform.fileMap.set(RES_PATH, BAD_FILE);
    const r = await fileSource(gw, RES_PATH).read();
    assert.equal(r.ok, false);
    // deno-lint-ignore no-explicit-any -- JSON under test
    const body = configStatusBody(gw.facts, c.now()) as Record<string, any>;
    assert.equal(body.state, 'never_loaded');
    assert.equal(body.applied, undefined);
    assert.equal(body.source.source_hash, sha256(BAD_FILE));
    assert.deepEqual(body.last_reload, { successful: false, at: '2025-03-01T10:00:00Z' });
    assert.equal(body.last_failure.last_error_kind, 'validate');
    assert.equal((await get(createStatusApp(gw), '/status/ready')).res.status, 503);
  });

  test('synced → out_of_sync after a failed reload → synced again (last_failure sticky) → empty', async () => {
    const c = clock('2025-03-01T10:00:00Z');
    const { gw, platform } = bareGateway(c.now);
    const app = createStatusApp(gw);
    // deno-lint-ignore no-explicit-any -- JSON under test
    const status = async () => JSON.parse((await get(app, '/status/config')).text) as Record<string, any>;

    // 1. a good file
    const good = goodFile();
    platform.fileMap.set(RES_PATH, good);
    assert.deepEqual(await fileSource(gw, RES_PATH).read(), { ok: true, resources: 5 });
    const s1 = await status();
    assert.deepEqual(s1, {
      state: 'synced',
      source: { type: 'file', source_hash: sha256(good), observed_at: '2025-03-01T10:00:00Z' },
      applied: {
        config_hash: sha256(good),
        apply_seq: 1,
        applied_at: '2025-03-01T10:00:00Z',
        resource_counts: { provider_keys: 1, models: 3, api_keys: 1 },
      },
      last_reload: { successful: true, at: '2025-03-01T10:00:00Z' },
      last_failure: null,
      rejected: [],
      partially_compatible: [],
      rate_limit_store: { backend: 'memory', shared: false },
    });

    // 2. a bad reload: the previous snapshot keeps serving, state out_of_sync, rows named in rejected[]
    c.set('2025-03-01T10:05:00Z');
    platform.fileMap.set(RES_PATH, BAD_FILE);
    const bad = await fileSource(gw, RES_PATH).read();
    assert.equal(bad.ok, false);
    const s2 = await status();
    assert.equal(s2.state, 'out_of_sync');
    assert.deepEqual(s2.source, {
      type: 'file',
      source_hash: sha256(BAD_FILE),
      observed_at: '2025-03-01T10:05:00Z',
    });
    assert.deepEqual(s2.applied, s1.applied, 'the applied snapshot is untouched');
    assert.deepEqual(s2.last_reload, { successful: false, at: '2025-03-01T10:05:00Z' });
    assert.deepEqual(s2.last_failure, {
      at: '2025-03-01T10:05:00Z',
      last_error_kind: 'validate',
      last_error: bad.ok ? '' : bad.message,
    });
    assert.match(s2.last_failure.last_error, /^resources file \/srv\/sluice\/resources\.yaml: 2 error\(s\):/);
    assert.deepEqual(s2.rejected, [
      {
        resource_kind: 'models',
        resource_id: uuidV5('models/gpt-4o'),
        last_error_kind: 'schema_failed',
        last_error: 'timeout: Invalid input: expected number, received string',
        first_seen_at: '2025-03-01T10:05:00Z',
        last_seen_at: '2025-03-01T10:05:00Z',
      },
      {
        resource_kind: 'models',
        resource_id: uuidV5('models/orphan'),
        last_error_kind: 'schema_failed',
        last_error: '`provider_key` references unknown provider key "nope" (defined provider_keys: mock)',
        first_seen_at: '2025-03-01T10:05:00Z',
        last_seen_at: '2025-03-01T10:05:00Z',
      },
    ]);
    assert.equal(gw.snapshot?.modelByName('we"ird\\model')?.display_name, 'we"ird\\model', 'old snapshot still serves');

    // 3. the same bad file again: first_seen_at survives
    c.set('2025-03-01T10:06:00Z');
    await fileSource(gw, RES_PATH).read();
    const s3 = await status();
    assert.equal(s3.rejected[0].first_seen_at, '2025-03-01T10:05:00Z');
    assert.equal(s3.rejected[0].last_seen_at, '2025-03-01T10:06:00Z');
    assert.equal(s3.last_failure.at, '2025-03-01T10:06:00Z');

    // 4. a good file again: synced, apply_seq 2, last_failure sticky, rejected cleared
    c.set('2025-03-01T10:10:00Z');
    const good2 = `${good}# edited\n`;
    platform.fileMap.set(RES_PATH, good2);
    assert.equal((await fileSource(gw, RES_PATH).read()).ok, true);
    const s4 = await status();
    assert.equal(s4.state, 'synced');
    assert.equal(s4.applied.apply_seq, 2);
    assert.equal(s4.applied.config_hash, sha256(good2));
    assert.notEqual(s4.applied.config_hash, s1.applied.config_hash);
    assert.equal(s4.applied.applied_at, '2025-03-01T10:10:00Z');
    assert.deepEqual(s4.last_reload, { successful: true, at: '2025-03-01T10:10:00Z' });
    assert.deepEqual(s4.last_failure, s3.last_failure, 'last_failure is sticky until restart');
    assert.deepEqual(s4.rejected, []);

    // 5. zero resources: empty
    c.set('2025-03-01T10:20:00Z');
    platform.fileMap.set(RES_PATH, '_format_version: "1"\n');
    assert.deepEqual(await fileSource(gw, RES_PATH).read(), { ok: true, resources: 0 });
    const s5 = await status();
    assert.equal(s5.state, 'empty');
    assert.equal(s5.applied.apply_seq, 3);
    assert.deepEqual(s5.applied.resource_counts, {}, 'only kinds that have resources are listed');
    assert.equal((await get(app, '/status/ready')).text, 'ok', 'an empty configuration is still a configuration');
  });

  test('an unreadable file is a fetch failure; bytes that are not UTF-8 a parse failure', async () => {
    const { gw, platform } = bareGateway();
    const missing = await fileSource(gw, '/nowhere.yaml').read();
    assert.equal(missing.ok, false);
    assert.equal(gw.facts.lastFailure?.last_error_kind, 'fetch');
    assert.match(gw.facts.lastFailure?.last_error ?? '', /^resources file \/nowhere\.yaml: cannot read it: /);
    const bytes = new Uint8Array([0x5f, 0xff, 0xfe, 0x0a]);
    platform.files = { read: async () => bytes, writeAtomic: async () => {} };
    assert.equal((await fileSource(gw, RES_PATH).read()).ok, false);
    assert.equal(gw.facts.lastFailure?.last_error_kind, 'parse');
    assert.equal(gw.facts.sourceHash, sha256(bytes), 'the hash covers the bytes observed');
  });

  test('the file hash is the sha256 of the bytes, not of a re-encoding', async () => {
    const { gw, platform } = bareGateway();
    const text = `${goodFile()}# ünïcødé comment, CRLF next\r\n`;
    platform.fileMap.set(RES_PATH, text);
    assert.equal((await fileSource(gw, RES_PATH).read()).ok, true);
    const body = JSON.parse((await get(createStatusApp(gw), '/status/config')).text);
    assert.equal(body.source.source_hash, sha256(Buffer.from(text, 'utf8')));
    assert.equal(body.applied.config_hash, sha256(Buffer.from(text, 'utf8')));
  });

  test('deriveConfigState: first match wins', () => {
    const base: ConfigFacts = {
      sourceType: 'etcd',
      latestLoadFailed: false,
      lastFailure: null,
      rejected: [],
      partiallyCompatible: [],
      partiallyCompatibleRows: {},
    };
    const applied = (n: number) => ({
      config_hash: 'h',
      apply_seq: 1,
      applied_at: 'x',
      resource_counts: { provider_keys: 0, models: n, api_keys: 0 },
    });
    const row = {
      resource_kind: 'models',
      resource_id: 'm',
      last_error_kind: 'schema_failed',
      last_error: 'e',
      first_seen_at: 'x',
      last_seen_at: 'x',
    };
    assert.equal(deriveConfigState(base), 'never_loaded');
    assert.equal(deriveConfigState({ ...base, latestLoadFailed: true, rejected: [row] }), 'never_loaded');
    assert.equal(deriveConfigState({ ...base, applied: applied(1), latestLoadFailed: true }), 'out_of_sync');
    assert.equal(deriveConfigState({ ...base, applied: applied(1), rejected: [row] }), 'degraded');
    assert.equal(deriveConfigState({ ...base, applied: applied(0), rejected: [row] }), 'out_of_sync');
    assert.equal(deriveConfigState({ ...base, applied: applied(0) }), 'empty');
    assert.equal(deriveConfigState({ ...base, applied: applied(2) }), 'synced');
    // an unreachable source does not change the state
    assert.equal(
      deriveConfigState({
        ...base,
        applied: applied(2),
        connected: false,
        lastFailure: { at: 'x', last_error_kind: 'fetch', last_error: 'down' },
      }),
      'synced',
    );
  });

  test('configStatusBody: etcd fields and serving_stale_age_seconds', () => {
    const f: ConfigFacts = {
      sourceType: 'etcd',
      connected: true,
      observedRevision: 42,
      sourceHash: 'src',
      observedAt: '2025-01-01T00:00:00Z',
      applied: {
        applied_revision: 40,
        config_hash: 'cfg',
        apply_seq: 7,
        applied_at: '2025-01-01T00:00:00Z',
        resource_counts: { provider_keys: 1, models: 1, api_keys: 0 },
      },
      latestLoadFailed: false,
      lastReload: { successful: true, at: '2025-01-01T00:00:00Z' },
      lastFailure: null,
      rejected: [{
        resource_kind: 'models',
        resource_id: 'm1',
        last_error_kind: 'schema_failed',
        last_error: 'bad',
        first_seen_at: '2025-01-01T00:00:00Z',
        last_seen_at: '2025-01-01T00:01:00Z',
        serving_stale_since: '2025-01-01T00:00:00Z',
      }],
      partiallyCompatible: [{ resource_kind: 'models', field: 'extra', count: 2 }],
      partiallyCompatibleRows: { models: 2 },
    };
    assert.deepEqual(configStatusBody(f, new Date('2025-01-01T00:02:05Z')), {
      state: 'degraded',
      source: {
        type: 'etcd',
        connected: true,
        observed_revision: 42,
        source_hash: 'src',
        observed_at: '2025-01-01T00:00:00Z',
      },
      applied: {
        applied_revision: 40,
        config_hash: 'cfg',
        apply_seq: 7,
        applied_at: '2025-01-01T00:00:00Z',
        resource_counts: { provider_keys: 1, models: 1, api_keys: 0 },
      },
      last_reload: { successful: true, at: '2025-01-01T00:00:00Z' },
      last_failure: null,
      rejected: [{
        resource_kind: 'models',
        resource_id: 'm1',
        last_error_kind: 'schema_failed',
        last_error: 'bad',
        first_seen_at: '2025-01-01T00:00:00Z',
        last_seen_at: '2025-01-01T00:01:00Z',
        serving_stale_since: '2025-01-01T00:00:00Z',
        serving_stale_age_seconds: 125,
      }],
      partially_compatible: [{ resource_kind: 'models', field: 'extra', count: 2 }],
    });
  });
});

describe('/status/models', () => {
  test('one row per model, routing models not_applicable', async () => {
    const { gw } = await gatewayWith(goodFile(), { config: CONFIG, env: ENV });
    const { res, text } = await get(createStatusApp(gw), '/status/models');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.deepEqual(JSON.parse(text), [
      { id: uuidV5('models/gpt-4o'), display_name: 'gpt-4o', kind: 'direct', status: 'healthy' },
      { id: uuidV5('models/we"ird\\model'), display_name: 'we"ird\\model', kind: 'direct', status: 'healthy' },
      { id: uuidV5('models/smart'), display_name: 'smart', kind: 'routing', status: 'not_applicable' },
    ]);
  });

  test('an empty array before any configuration', async () => {
    const { gw } = bareGateway();
    assert.equal((await get(createStatusApp(gw), '/status/models')).text, '[]');
  });
});

describe('/metrics', () => {
  let mock: MockUpstream;
  before(async () => {
    mock = await startMockUpstream();
  });
  after(async () => {
    await mock.close();
  });

  test('families with samples are written, the others not at all; the exposition is well-formed', async () => {
    const c = clock('2025-03-01T10:00:00Z');
    const { gw, platform } = bareGateway(c.now);
    platform.fileMap.set(RES_PATH, goodFile());
    await fileSource(gw, RES_PATH).read();
    const { res, text } = await get(createStatusApp(gw), '/metrics');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
    const types = checkExposition(text);
    for (
      const f of [
        'aisix_config_last_reload_successful',
        'aisix_config_last_reload_success_timestamp_seconds',
        'aisix_config_reloads_total',
        'aisix_config_hash_info',
        'aisix_deployment_state',
        'sluice_draining',
      ]
    ) {
      assert.ok(types.has(f), `family ${f} is missing`);
    }
    // AISIX's exporter writes a family only once it has a sample: not even # HELP / # TYPE before that.
    for (
      const f of [
        // labelled by endpoint and inbound protocol: no series before the first request
        'aisix_proxy_in_flight_requests',
        'aisix_config_reload_failures_total',
        'aisix_config_rejected_resources',
        'aisix_config_partially_compatible_resources',
        'aisix_config_stale_served_resources',
        'aisix_deployment_cooled_down_total',
        'aisix_deployment_requests_total',
        'aisix_proxy_requests_total',
        'aisix_proxy_request_duration_seconds',
        'aisix_config_observed_revision',
        'aisix_config_applied_revision',
        'aisix_config_source_connected',
      ]
    ) {
      assert.equal(types.has(f), false, `family ${f} has no sample yet and must not be written`);
      assert.equal(text.includes(` ${f} `), false, `no HELP/TYPE for ${f}`);
    }
    assert.equal(types.get('aisix_config_reloads_total'), 'counter');
    for (const t of ['counter']) for (const [name, type] of types) if (type === t) assert.match(name, /_total$/, name);

    assert.equal(sample(text, 'aisix_config_last_reload_successful'), 1);
    assert.equal(
      sample(text, 'aisix_config_last_reload_success_timestamp_seconds'),
      Date.parse('2025-03-01T10:00:00Z') / 1000,
    );
    assert.equal(sample(text, 'aisix_config_reloads_total'), 1);
    assert.equal(sample(text, `aisix_config_hash_info{hash="${sha256(goodFile())}"}`), 1);
    // in flight is labelled by endpoint and inbound protocol: no series before the first request
    assert.equal(text.split('\n').some((l) => l.startsWith('aisix_proxy_in_flight_requests{')), false);
    assert.equal(sample(text, 'sluice_draining'), 0);
    const open = text.split('\n').filter((l) => l.startsWith('sluice_open_connections'));
    assert.ok(open.length === 0 || /^sluice_open_connections \d+$/.test(open[0]!), open.join('\n'));
    // file mode: no etcd samples
    for (
      const f of ['aisix_config_observed_revision', 'aisix_config_applied_revision', 'aisix_config_source_connected']
    ) {
      assert.equal(text.split('\n').some((l) => l.startsWith(`${f} `) || l.startsWith(`${f}{`)), false, f);
    }
    assert.equal(
      sample(
        text,
        `aisix_deployment_state{provider="openai",model="gpt-4o",upstream_model="gpt-4o-upstream",provider_key_id="${
          uuidV5(
            'provider_keys/mock',
          )
        }"}`,
      ),
      0,
    );
  });

  test('reload failures, rejected rows, hash and sluice_draining follow the gateway', async () => {
    const { gw, platform } = bareGateway();
    const app = createStatusApp(gw);
    platform.fileMap.set(RES_PATH, goodFile());
    await fileSource(gw, RES_PATH).read();
    platform.fileMap.set(RES_PATH, BAD_FILE);
    await fileSource(gw, RES_PATH).read();
    await fileSource(gw, '/missing.yaml').read();
    forcePhase(gw, 'draining');
    const { text } = await get(app, '/metrics');
    checkExposition(text);
    assert.equal(sample(text, 'aisix_config_last_reload_successful'), 0);
    assert.equal(sample(text, 'aisix_config_reloads_total'), 3);
    assert.equal(sample(text, 'aisix_config_reload_failures_total{reason="validate"}'), 1);
    assert.equal(sample(text, 'aisix_config_reload_failures_total{reason="fetch"}'), 1);
    assert.equal(sample(text, `aisix_config_hash_info{hash="${sha256(goodFile())}"}`), 1, 'the hash of what serves');
    assert.equal(sample(text, 'sluice_draining'), 1);
    // the missing-file load keeps the rejected rows of the last validation (nothing new was read)
    assert.equal(sample(text, 'aisix_config_rejected_resources{kind="models"}'), 2);
  });

  test('etcd mode: revisions, connection and stale-served rows', async () => {
    const platform = testPlatform();
    const c = loadConfig(
      '/c.yaml',
      `etcd: { endpoints: ["http://127.0.0.1:2379"] }\nproxy: { addr: ":0" }\nadmin: { enabled: false }\n`,
      {},
    );
    assert.ok(c.ok);
    const gw = new Gateway(c.config, platform);
    Object.assign(gw.facts, {
      connected: true,
      observedRevision: 42,
      lastReload: { successful: true, at: '2025-01-01T00:00:00Z' },
      applied: {
        applied_revision: 40,
        config_hash: 'abc',
        apply_seq: 1,
        applied_at: '2025-01-01T00:00:00Z',
        resource_counts: { provider_keys: 0, models: 1, api_keys: 0 },
      },
      rejected: [
        {
          resource_kind: 'models',
          resource_id: 'a',
          last_error_kind: 'schema_failed',
          last_error: 'x',
          first_seen_at: 'x',
          last_seen_at: 'x',
          serving_stale_since: '2025-01-01T00:00:00Z',
        },
        {
          resource_kind: 'api_keys',
          resource_id: 'b',
          last_error_kind: 'non_json',
          last_error: 'x',
          first_seen_at: 'x',
          last_seen_at: 'x',
        },
      ],
      partiallyCompatible: [
        { resource_kind: 'models', field: 'f', count: 3 },
        { resource_kind: 'models', field: 'g', count: 1 },
      ],
      partiallyCompatibleRows: { models: 3 },
    });
    const text = gw.metrics.render();
    checkExposition(text);
    assert.equal(sample(text, 'aisix_config_observed_revision'), 42);
    assert.equal(sample(text, 'aisix_config_applied_revision'), 40);
    assert.equal(sample(text, 'aisix_config_source_connected'), 1);
    assert.equal(sample(text, 'aisix_config_rejected_resources{kind="models"}'), 1);
    assert.equal(sample(text, 'aisix_config_rejected_resources{kind="api_keys"}'), 1);
    assert.equal(sample(text, 'aisix_config_stale_served_resources{kind="models"}'), 1);
    assert.equal(sample(text, 'aisix_config_stale_served_resources{kind="api_keys"}'), undefined, 'never reported');
    assert.equal(sample(text, 'aisix_config_partially_compatible_resources{kind="models"}'), 3);
    gw.record.connected(false);
    assert.equal(sample(gw.metrics.render(), 'aisix_config_source_connected'), 0);
  });

  test('request metrics increase after a request; label values are escaped', async () => {
    const { gw } = await gatewayWith(goodFile(mock.base), { config: CONFIG, env: ENV });
    const proxy = createProxyApp(gw);
    const status = createStatusApp(gw);
    const chat = (model: string, key = CALLER_KEY) =>
      proxy.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      }, { peer: '127.0.0.1:1' });
    const ok = { endpoint: '/v1/chat/completions', model: 'gpt-4o', status: '200', outcome: 'success' };
    const before = (await get(status, '/metrics')).text;
    assert.equal(sumSamples(before, 'aisix_proxy_requests_total', ok), undefined);
    for (let i = 0; i < 2; i++) await (await chat('gpt-4o')).text();
    await (await chat('gpt-4o', 'wrong-key')).text();
    await (await chat('we"ird\\model')).text();
    const { text } = await get(status, '/metrics');
    checkExposition(text);
    assert.equal(sumSamples(text, 'aisix_proxy_requests_total', ok), 2);
    assert.equal(
      sumSamples(text, 'aisix_proxy_requests_total', { model: 'unresolved', status: '401', outcome: 'client_error' }),
      1,
    );
    assert.ok(text.includes('model="we\\"ird\\\\model"'), 'label values escaped');
    assert.equal(
      sumSamples(text, 'aisix_proxy_requests_total', { model: 'we"ird\\model', status: '200', outcome: 'success' }),
      1,
    );
    assert.equal(sumSamples(text, 'aisix_proxy_request_duration_seconds_count', { model: 'gpt-4o' }), 2);
    // AISIX's form: the duration families are summaries (no buckets); the SLO histogram has them.
    assert.equal(sumSamples(text, 'aisix_proxy_request_duration_seconds_bucket', { model: 'gpt-4o' }), undefined);
    assert.equal(
      sumSamples(text, 'aisix_proxy_request_duration_seconds', { model: 'gpt-4o', quantile: '1' })! > 0,
      true,
    );
    assert.ok(
      text.includes(
        'aisix_deployment_state{provider="openai",model="we\\"ird\\\\model",upstream_model="weird-upstream",',
      ),
      'deployment labels escaped',
    );
    assert.equal(mock.requests.length, 3);
  });

  test('the registry escapes backslash, quote and newline in label values and renders histograms', () => {
    const r = new Registry();
    const c = r.register(new Counter('t_total', 'help', ['l']));
    c.inc(['a\\b"c\nd'], 2);
    const g = r.register(new Gauge('t_gauge', 'help'));
    g.set([], 1.5);
    const h = r.register(new Histogram('t_seconds', 'help', ['e'], [0.1, 1]));
    h.observe(['x'], 0.05);
    h.observe(['x'], 0.5);
    h.observe(['x'], 5);
    assert.equal(
      r.render(),
      [
        '# HELP t_total help',
        '# TYPE t_total counter',
        't_total{l="a\\\\b\\"c\\nd"} 2',
        '# HELP t_gauge help',
        '# TYPE t_gauge gauge',
        't_gauge 1.5',
        '# HELP t_seconds help',
        '# TYPE t_seconds histogram',
        't_seconds_bucket{e="x",le="0.1"} 1',
        't_seconds_bucket{e="x",le="1"} 2',
        't_seconds_bucket{e="x",le="+Inf"} 3',
        't_seconds_sum{e="x"} 5.55',
        't_seconds_count{e="x"} 3',
        '',
      ].join('\n'),
    );
    checkExposition(r.render());
    assert.throws(() => r.register(new Counter('t_total', 'again')), /registered twice/);
  });

  test('multi-label series: shared prefixes stay apart, creation order is kept, reset forgets every series', () => {
    const r = new Registry();
    const c = r.register(new Counter('m_total', 'help', ['a', 'b', 'c']));
    c.inc(['x', 'y', '1']);
    c.inc(['x', 'y', '2'], 3);
    c.inc(['x', 'z', '1']);
    c.inc(['x', 'y', '1'], 4);
    c.inc(['', '', '']);
    assert.equal(c.get(['x', 'y', '1']), 5);
    assert.equal(c.get(['x', 'y', '2']), 3);
    assert.equal(c.get(['x', 'z', '1']), 1);
    assert.deepEqual(r.render().split('\n').slice(2, -1), [
      'm_total{a="x",b="y",c="1"} 5',
      'm_total{a="x",b="y",c="2"} 3',
      'm_total{a="x",b="z",c="1"} 1',
      'm_total{a="",b="",c=""} 1',
    ]);
    const g = r.register(new Gauge('m_gauge', 'help', ['k']));
    g.set(['p'], 1);
    g.set(['q'], 2);
    g.reset();
    g.set(['q'], 7);
    assert.ok(r.render().endsWith('# TYPE m_gauge gauge\nm_gauge{k="q"} 7\n'));
  });
});

describe('no secret in any status or metrics body', () => {
  test('status/config, status/models, metrics, admin resources', async () => {
    const mock = await startMockUpstream();
    try {
      const c = clock();
      const { gw, platform } = bareGateway(c.now);
      platform.fileMap.set(RES_PATH, goodFile(mock.base));
      await fileSource(gw, RES_PATH).read();
      const proxy = createProxyApp(gw);
      await (await proxy.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}` },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
      }, {})).text();
      // a failed reload whose rows carry secrets
      platform.fileMap.set(
        RES_PATH,
        `${goodFile(mock.base)}  - { display_name: broken, key_hash: ${
          sha256(CALLER_KEY)
        }, allowed_models: [ghost] }\n`,
      );
      assert.equal((await fileSource(gw, RES_PATH).read()).ok, false);
      const status = createStatusApp(gw);
      const admin = createAdminApp(gw);
      const auth = { headers: { authorization: `Bearer ${ADMIN_KEY}` } };
      const bodies: [string, string][] = [];
      for (const p of ['/status/ready', '/status/config', '/status/models', '/metrics']) {
        bodies.push([p, (await get(status, p)).text]);
      }
      for (
        const p of [
          '/admin/v1/models',
          '/admin/v1/provider_keys',
          '/admin/v1/api_keys',
          '/admin/v1/models/status',
          '/admin/v1/health',
          '/admin/v1/nothing',
        ]
      ) {
        bodies.push([p, (await get(admin, p, auth)).text]);
      }
      bodies.push([
        'admin 401',
        (await get(admin, '/admin/v1/models', { headers: { authorization: 'Bearer wrong-admin' } })).text,
      ]);
      bodies.push(['admin 405', (await get(admin, '/admin/v1/models', { method: 'POST', ...auth })).text]);
      assert.ok(
        bodies.find(([p]) => p === '/status/config')![1].includes('"rejected":[{'),
        'the failed reload is reported',
      );
      for (const [p, body] of bodies) assertNoSecret(p, body);
      for (const l of platform.logs) assertNoSecret('log', JSON.stringify(l));
    } finally {
      await mock.close();
    }
  });
});

describe('admin app', () => {
  test('/livez 200 from the start; /readyz 503 before apply and 200 after', async () => {
    const { gw, platform } = bareGateway();
    const admin = createAdminApp(gw);
    const live = await get(admin, '/livez');
    assert.equal(live.res.status, 200);
    assert.equal(live.text, 'ok');
    assert.equal(live.res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(live.res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal((await get(admin, '/livez?verbose')).text, '[+]ping ok\nlivez check passed\n');
    const notReady = await get(admin, '/readyz');
    assert.equal(notReady.res.status, 503);
    assert.equal(notReady.text, '[-]config failed: not ready\nreadyz check failed');
    platform.fileMap.set(RES_PATH, goodFile());
    await fileSource(gw, RES_PATH).read();
    const ready = await get(admin, '/readyz');
    assert.equal(ready.res.status, 200);
    assert.equal(ready.text, 'ok');
    assert.equal((await get(admin, '/readyz?verbose')).text, '[+]config ok\nreadyz check passed\n');
    assert.equal((await admin.request('/livez', { method: 'POST' })).status, 405);
    assert.equal((await admin.request('/readyz', { method: 'DELETE' })).status, 405);
    assert.equal((await admin.request('/readyz', { method: 'HEAD' })).status, 200);
  });

  describe('resources behind an admin key', () => {
    let gw: Gateway;
    let admin: ReturnType<typeof createAdminApp>;
    before(async () => {
      ({ gw } = await gatewayWith(goodFile(), { config: CONFIG, env: ENV }));
      admin = createAdminApp(gw);
    });

    const PATHS = [
      '/admin/v1/models',
      '/admin/v1/provider_keys',
      '/admin/v1/api_keys',
      '/admin/v1/models/status',
      '/admin/v1/health',
    ];

    test('401 without a key, with a wrong key, or with a malformed header', async () => {
      for (const p of PATHS) {
        const variants: Record<string, string>[] = [
          {},
          { authorization: 'Bearer nope' },
          { 'x-api-key': 'nope' },
          { authorization: `Basic ${ADMIN_KEY}` },
          { authorization: `Bearer ${ADMIN_KEY}x` },
          { authorization: `Bearer ${ADMIN_KEY.slice(0, -1)}` },
        ];
        for (const headers of variants) {
          const { res, text } = await get(admin, p, { headers });
          assert.equal(res.status, 401, `${p} ${JSON.stringify(headers)}`);
          assert.equal(JSON.parse(text).error.type, 'invalid_api_key');
          assertNoSecret(p, text);
        }
      }
    });

    test('Authorization: Bearer and x-api-key both work, with any configured admin key', async () => {
      const variants: Record<string, string>[] = [
        { authorization: `Bearer ${ADMIN_KEY}` },
        { 'x-api-key': ADMIN_KEY },
        { authorization: 'Bearer second-admin-key' },
      ];
      for (const headers of variants) {
        for (const p of PATHS) {
          assert.equal((await admin.request(p, { headers })).status, 200, `${p} ${JSON.stringify(headers)}`);
        }
      }
    });

    const auth = { headers: { authorization: `Bearer ${ADMIN_KEY}` } };

    test("/admin/v1/models: AISIX's bare array of {id, value, revision}", async () => {
      const body = JSON.parse((await get(admin, '/admin/v1/models', auth)).text);
      assert.ok(Array.isArray(body));
      assert.equal(body.length, 3);
      assert.deepEqual(body.map((e: { value: { display_name: string } }) => e.value.display_name), [
        'gpt-4o',
        'we"ird\\model',
        'smart',
      ]);
      for (const e of body) assert.deepEqual(Object.keys(e), ['id', 'value', 'revision']);
      assert.equal(body[0].id, uuidV5('models/gpt-4o'));
      assert.equal(body[0].revision, 0, 'file mode: no revision');
      assert.equal(body[0].value.provider_key_id, uuidV5('provider_keys/mock'));
      assert.equal(body[0].value.id, undefined, 'the id is not repeated inside the document');
      assert.equal(body[0].value.kind, undefined, "Sluice's derived kind is not part of the document");
    });

    test('/admin/v1/provider_keys redacts api_key', async () => {
      const { text } = await get(admin, '/admin/v1/provider_keys', auth);
      const body = JSON.parse(text);
      assert.equal(body.length, 1);
      assert.deepEqual(body[0], {
        id: uuidV5('provider_keys/mock'),
        value: {
          display_name: 'mock',
          provider: 'openai',
          adapter: 'openai',
          api_key: '[redacted]',
          api_base: 'http://127.0.0.1:9/v1',
        },
        revision: 0,
      });
      assertNoSecret('provider_keys', text);
    });

    test('/admin/v1/api_keys redacts key_hash', async () => {
      const { text } = await get(admin, '/admin/v1/api_keys', auth);
      const body = JSON.parse(text);
      assert.equal(body.length, 1);
      assert.deepEqual(body[0], {
        id: uuidV5('api_keys/caller'),
        value: {
          display_name: 'caller',
          key_hash: '[redacted]',
          allowed_models: ['*'],
          disabled: false,
        },
        revision: 0,
      });
      assertNoSecret('api_keys', text);
    });

    test('/admin/v1/models/status is byte-identical to /status/models', async () => {
      const a = await get(admin, '/admin/v1/models/status', auth);
      const s = await get(createStatusApp(gw), '/status/models');
      assert.equal(a.text, s.text);
      assert.ok(a.text.length > 2);
      assert.equal(a.res.headers.get('content-type'), s.res.headers.get('content-type'));
    });

    test("/admin/v1/health: AISIX's status and models (no config block in file mode), Sluice's fields beside", async () => {
      const body = JSON.parse((await get(admin, '/admin/v1/health', auth)).text);
      assert.equal(body.status, 'ok');
      assert.deepEqual(body.models, [
        { id: uuidV5('models/gpt-4o'), name: 'gpt-4o', health: 0 },
        { id: uuidV5('models/we"ird\\model'), name: 'we"ird\\model', health: 0 },
        { id: uuidV5('models/smart'), name: 'smart', health: 0 },
      ]);
      assert.equal('config' in body, false, 'the etcd freshness block is omitted in file mode');
      assert.equal(body.phase, 'serving');
      assert.equal(body.ready, true);
      assert.equal(body.in_flight, 0);
      assert.equal(body.open_connections, null);
      assert.equal(body.config_status.state, 'synced');
    });

    test('/admin/v1/health levels: 4 consecutive failures degraded, 8 down, a success resets', async () => {
      const id = uuidV5('models/gpt-4o');
      const level = async () => {
        const body = JSON.parse((await get(admin, '/admin/v1/health', auth)).text);
        return [body.status, body.models.find((m: { id: string }) => m.id === id).health];
      };
      try {
        for (let i = 0; i < 3; i++) gw.health.noteAttempt(id, false);
        assert.deepEqual(await level(), ['ok', 0]);
        gw.health.noteAttempt(id, false);
        assert.deepEqual(await level(), ['degraded', 1]);
        for (let i = 0; i < 3; i++) gw.health.noteAttempt(id, false);
        assert.deepEqual(await level(), ['degraded', 1]);
        gw.health.noteAttempt(id, false);
        assert.deepEqual(await level(), ['unhealthy', 2]);
      } finally {
        gw.health.noteAttempt(id, true);
      }
      assert.deepEqual(await level(), ['ok', 0]);
    });

    test('non-GET is 405 with Allow; an unknown admin path is 404', async () => {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        for (const p of ['/admin/v1/models', '/admin/v1/provider_keys', '/admin/v1/api_keys']) {
          const { res, text } = await get(admin, p, { method, ...auth });
          assert.equal(res.status, 405, `${method} ${p}`);
          assert.equal(res.headers.get('allow'), 'GET,HEAD');
          assert.equal(JSON.parse(text).error.type, 'method_not_allowed');
        }
      }
      const nf = await get(admin, '/admin/v1/nothing', auth);
      assert.equal(nf.res.status, 404);
      assert.equal((await admin.request('/admin/v1/models', { method: 'HEAD', ...auth })).status, 200);
    });

    test("AISIX's order: route, then method, then key (its admin API is read-only: no write needs a key)", async () => {
      const cases: [string, string, Record<string, string>, number][] = [
        // Unknown routes are 404 with or without a key (AISIX's router answers before its auth).
        ['GET', '/admin/v1/nothing', {}, 404],
        ['POST', '/admin/v1/api_keys/k1/rotate', auth.headers, 404],
        // Any method but GET/HEAD on a route: 405 before the key.
        ['PATCH', '/admin/v1/models', {}, 405],
        ['DELETE', '/admin/v1/health', {}, 405],
        ['POST', '/admin/v1/models', {}, 405],
        ['POST', '/admin/v1/models/m1', {}, 405],
        ['POST', '/admin/v1/api_keys', { authorization: 'Bearer nope' }, 405],
        ['POST', '/admin/v1/provider_keys', auth.headers, 405],
        // A read needs the key.
        ['GET', '/admin/v1/health', {}, 401],
        ['GET', '/admin/v1/models/m1', {}, 401],
      ];
      for (const [method, path, headers, status] of cases) {
        const { res, text } = await get(admin, path, { method, headers });
        assert.equal(res.status, status, `${method} ${path} ${JSON.stringify(headers)}: ${text}`);
        if (status === 405) assert.equal(res.headers.get('allow'), 'GET,HEAD');
      }
    });

    test('an admin with no configuration lists nothing', async () => {
      const { gw: bare } = bareGateway();
      const body = JSON.parse(
        (await get(createAdminApp(bare), '/admin/v1/models', { headers: { 'x-api-key': ADMIN_KEY } })).text,
      );
      assert.deepEqual(body, []);
    });
  });
});
