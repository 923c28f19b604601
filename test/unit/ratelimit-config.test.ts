// The `ratelimit` section of config.yaml (AISIX's keys and defaults, AISIX_* overrides, what each mode needs),
// the Workers boot WARN for `backend: redis`, and what callers see through the proxy app: the 429 envelope per
// endpoint, Retry-After, the x-ratelimit-* headers and the rejection counter.
// Runs alone: a Worker turns the process's token counts to the approximation, as it does in an isolate.
import { parseLogLine } from '../support/log-line.ts';
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { type ConfigResult, loadConfig } from '../../src/config/load.ts';
import { createWorker } from '../../runtimes/workers-handler.ts';
import { NO_TCP_WARNING } from '../../src/routing/rate-limit-setup.ts';
import { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { gatewayWith } from '../support/platform.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';

const FILE = '/etc/sluice/config.yaml';
const BASE = 'resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\nadmin: { enabled: false }\n';

function ok(r: ConfigResult): Extract<ConfigResult, { ok: true }> {
  if (!r.ok) assert.fail(r.report.format());
  return r;
}
function errorsOf(r: ConfigResult): string {
  assert.equal(r.ok, false);
  return r.ok ? '' : r.report.format();
}

describe('config.yaml ratelimit', () => {
  test('defaults: memory backend, concurrency_ttl_secs 300; redis defaults as AISIX (single, timeout_secs 5)', () => {
    assert.deepEqual(ok(loadConfig(FILE, BASE, {})).config.ratelimit, { backend: 'memory', concurrency_ttl_secs: 300 });
    const r = ok(loadConfig(FILE, `${BASE}ratelimit: { backend: redis, redis: { url: "redis://r:6379" } }\n`, {}));
    assert.deepEqual(r.config.ratelimit, {
      backend: 'redis',
      redis: {
        mode: 'single',
        url: 'redis://r:6379',
        nodes: [],
        sentinels: [],
        timeout_secs: 5,
        command_timeout_ms: 250,
      },
      concurrency_ttl_secs: 300,
    });
    assert.deepEqual(r.ignoredKeys, []);
  });

  test('every AISIX key, TLS paths resolved against the config folder', () => {
    const r = ok(loadConfig(
      FILE,
      `${BASE}ratelimit:
  backend: redis
  redis:
    mode: sentinel
    sentinels: ["redis://10.0.0.1:26379"]
    master_name: mymaster
    username: default
    password: s3cret
    database: 2
    tls: { ca_file: tls/ca.pem, client_cert_file: /abs/c.pem, client_key_file: tls/k.pem, verify: false }
    timeout_secs: 2
  concurrency_ttl_secs: 30
`,
      {},
    ));
    assert.deepEqual(r.config.ratelimit.redis?.tls, {
      ca_file: '/etc/sluice/tls/ca.pem',
      client_cert_file: '/abs/c.pem',
      client_key_file: '/etc/sluice/tls/k.pem',
      verify: false,
    });
    assert.equal(r.config.ratelimit.concurrency_ttl_secs, 30);
  });

  test('AISIX_RATELIMIT__* environment overrides', () => {
    const r = ok(loadConfig(FILE, BASE, {
      AISIX_RATELIMIT__BACKEND: 'redis',
      AISIX_RATELIMIT__REDIS__MODE: 'cluster',
      AISIX_RATELIMIT__REDIS__NODES: '[redis://a:7000, redis://b:7001]',
      AISIX_RATELIMIT__REDIS__PASSWORD: 'from-env',
      AISIX_RATELIMIT__CONCURRENCY_TTL_SECS: '60',
    }));
    assert.equal(r.config.ratelimit.backend, 'redis');
    assert.deepEqual(r.config.ratelimit.redis?.nodes, ['redis://a:7000', 'redis://b:7001']);
    assert.equal(r.config.ratelimit.redis?.password, 'from-env');
    assert.equal(r.config.ratelimit.concurrency_ttl_secs, 60);
  });

  test('what each mode needs, timeout_secs ≥ 1, unknown keys rejected', () => {
    const bad = (yaml: string) => errorsOf(loadConfig(FILE, `${BASE}${yaml}\n`, {}));
    assert.match(bad('ratelimit: { backend: redis }'), /ratelimit\.redis: required when backend is redis/);
    assert.match(bad('ratelimit: { backend: redis, redis: { mode: single } }'), /ratelimit\.redis\.url: required/);
    assert.match(bad('ratelimit: { backend: redis, redis: { mode: cluster } }'), /ratelimit\.redis\.nodes: required/);
    const sentinel = bad('ratelimit: { backend: redis, redis: { mode: sentinel } }');
    assert.match(sentinel, /ratelimit\.redis\.sentinels: required/);
    assert.match(sentinel, /ratelimit\.redis\.master_name: required/);
    assert.match(bad('ratelimit: { backend: redis, redis: { url: "redis://x", timeout_secs: 0 } }'), /timeout_secs/);
    assert.match(bad('ratelimit: { backend: etcd }'), /ratelimit\.backend/);
    assert.match(bad('ratelimit: { bogus: 1 }'), /unknown key "bogus"/);
    assert.match(bad('ratelimit: { backend: redis, redis: { url: "http://x:6379" } }'), /redis:\/\/ or rediss:\/\//);
    assert.match(
      bad('ratelimit: { backend: redis, redis: { mode: cluster, nodes: ["a b"] } }'),
      /ratelimit\.redis\.nodes\[0\]: must be/,
    );
    ok(
      loadConfig(
        FILE,
        `${BASE}ratelimit: { redis: { mode: cluster, nodes: ["10.0.0.1:7000", "rediss://h:1"] } }\n`,
        {},
      ),
    );
    assert.match(
      bad('ratelimit: { backend: redis, redis: { url: "redis://x", tls: { client_cert_file: c.pem } } }'),
      /client_cert_file and client_key_file go together/,
    );
  });
});

describe('Workers and backend: redis', () => {
  test('no TCP sockets: one WARN at boot, counting per isolate, status and metric say not shared', async (t: TestContext) => {
    const lines: Record<string, unknown>[] = [];
    t.mock.method(console, 'log', (line: string) => void lines.push(parseLogLine(line) ?? {}));
    const w = createWorker({
      configPath: 'b/config.yaml',
      files: {
        'b/config.yaml': `resources_file: resources.yaml
proxy: { addr: "0.0.0.0:8787" }
admin: { enabled: false }
ratelimit: { backend: redis, redis: { url: "redis://10.0.0.1:6379" } }
`,
        'b/resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: up, provider: openai, api_base: "http://127.0.0.1:9/v1", api_key: x }
models:
  - { display_name: gpt-test, model_name: gpt-upstream, provider_key: up }
`,
      },
    });
    const env = { SLUICE_STATUS_TOKEN: 'tok' };
    const auth = { headers: { authorization: 'Bearer tok' } };
    assert.equal((await w.fetch(new Request('https://s.example/livez'), env)).status, 200);
    const warn = lines.filter((l) => l.msg === NO_TCP_WARNING);
    assert.equal(warn.length, 1);
    assert.equal(warn[0]!.level, 'WARN');
    assert.equal(warn[0]!.runtime, 'workers');
    const st = await (await w.fetch(new Request('https://s.example/status/config', auth), env)).json() as {
      rate_limit_store: { backend: string; shared: boolean };
    };
    assert.equal(st.rate_limit_store.backend, 'redis');
    assert.equal(st.rate_limit_store.shared, false);
    const metrics = await (await w.fetch(new Request('https://s.example/metrics', auth), env)).text();
    assert.match(metrics, /^sluice_ratelimit_shared_store_up 0$/m);
  });
});

describe('what callers see (proxy app, memory backend)', () => {
  let up: MockUpstream;
  let gw: Gateway;
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    up = await startMockUpstream();
    ({ gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: up, provider: openai, api_base: "${up.base}", api_key: x }
models:
  - { display_name: gpt-test, model_name: gpt-upstream, provider_key: up, retries: 0 }
api_keys:
  - display_name: caller
    key_env: CALLER
    allowed_models: ["*"]
    rate_limit: { rpm: 2, tpm: 1000, concurrency: 5 }
`,
      // A stopped clock 10 s into a minute: the four requests share one rpm window, whatever the wall time.
      { env: { CALLER: 'sk-rl-caller' }, now: () => new Date(Date.UTC(2026, 0, 1, 12, 0, 10)) },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    gw.stop();
    await up.close();
  });

  const post = (path: string, body: Record<string, unknown>) =>
    app.request(path, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-rl-caller', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  test('admitted: x-ratelimit-* headers; refused: 429 in the endpoint envelope with Retry-After and the headers', async () => {
    const first = await post('/v1/chat/completions', { model: 'gpt-test', messages: [{ role: 'user', content: 'a' }] });
    assert.equal(first.status, 200);
    await first.arrayBuffer();
    assert.equal(first.headers.get('x-ratelimit-limit-requests'), '2');
    assert.equal(first.headers.get('x-ratelimit-remaining-requests'), '1');
    assert.match(first.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+s$/);
    assert.equal(first.headers.get('x-ratelimit-limit-tokens'), '1000');
    assert.equal(first.headers.get('x-ratelimit-limit-concurrent'), '5');
    assert.equal(first.headers.get('x-ratelimit-remaining-concurrent'), '4');
    const second = await post('/v1/messages', {
      model: 'gpt-test',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'b' }],
    });
    assert.equal(second.status, 200);
    await second.arrayBuffer();
    const refusedAnthropic = await post('/v1/messages', {
      model: 'gpt-test',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'c' }],
    });
    const refusedOpenAI = await post('/v1/chat/completions', {
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'd' }],
    });
    for (const r of [refusedAnthropic, refusedOpenAI]) {
      assert.equal(r.status, 429);
      const secs = Number(r.headers.get('retry-after'));
      assert.ok(secs >= 1 && secs <= 60);
      assert.equal(secs, 50); // the rest of the stopped clock's minute
      assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
      assert.equal(r.headers.get('x-ratelimit-reset-requests'), `${secs}s`);
    }
    const anth = await refusedAnthropic.json() as { type: string; error: { type: string; message: string } };
    assert.equal(anth.type, 'error'); // Anthropic's envelope on /v1/messages
    assert.match(anth.error.message, /API key rpm/);
    const oai = await refusedOpenAI.json() as { error: { type: string } };
    assert.equal(oai.error.type, 'rate_limit_exceeded');
    assert.match(
      gw.metrics.render(),
      /^aisix_ratelimit_rejections_total\{scope="requests",layer="api_key",policy_id=""\} 2$/m,
    );
  });
});
