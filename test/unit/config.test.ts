// config.yaml loading (docs/configuration.md): defaults, unknown keys, ignored AISIX keys, env overrides, source and admin
// rules, addresses, relative paths, JSON.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  type ConfigResult,
  envOverrides,
  loadConfig,
  parseAddr,
  PATH_KEYS,
  resolvePath,
} from '../../src/config/load.ts';
import {
  ConfigSchema,
  DEFAULT_IDLE_TIMEOUT_SECS,
  DEFAULT_REQUEST_BODY_LIMIT_BYTES,
  IGNORED_KEYS,
  isIgnoredKey,
} from '../../src/config/schema.ts';
import { bootGateway, loadBootConfig } from '../../src/boot.ts';
import { MSG } from '../../src/observability/messages.ts';
import { testPlatform } from '../support/platform.ts';

const FILE = '/etc/sluice/config.yaml';

const MINIMAL = `resources_file: resources.yaml
proxy:
  addr: "0.0.0.0:3000"
admin:
  admin_keys: [adm-1]
`;

function ok(r: ConfigResult): Extract<ConfigResult, { ok: true }> {
  if (!r.ok) assert.fail(`expected the config to load, got:\n${r.report.format()}`);
  return r;
}

function failed(r: ConfigResult): string {
  if (r.ok) assert.fail('expected the config to fail');
  return r.report.format();
}

describe('defaults', () => {
  test('a minimal file gets every documented default', () => {
    const r = ok(loadConfig(FILE, MINIMAL, {}));
    assert.deepEqual(r.config, {
      resources_file: '/etc/sluice/resources.yaml',
      etcd: { endpoints: [], prefix: '/aisix', dial_timeout_ms: 5000, request_timeout_ms: 5000 },
      proxy: {
        addr: '0.0.0.0:3000',
        http2: false,
        request_body_limit_bytes: 33_554_432,
        max_request_headers: 100,
        max_request_header_bytes: 32768,
        served_by_header: true,
        url_rewrites: [],
        request_id: { accept_headers: ['x-aisix-request-id'] },
        identity: 'sluice',
        real_ip: { trusted_proxies: [], recursive: false, header: 'x-forwarded-for' },
      },
      admin: { enabled: true, addr: '127.0.0.1:3001', admin_keys: ['adm-1'], write_keys: [] },
      observability: {
        log_level: 'info',
        log_format: 'text',
        access_log: true,
        metrics: {
          prometheus: { enabled: true, path: '/metrics', addr: '127.0.0.1:9090' },
          buckets: {
            request_e2e_latency: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 420, 600],
            request_ttft: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
            guardrail_latency: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
            a2a_ttfb: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
          },
          client_type_rules: [],
        },
        tracing: { otlp: { enabled: false, sample_ratio: 1, headers: {} } },
      },
      upstream: {
        pool_idle_timeout_secs: 30,
        timeout_ms: 6000000,
        stream_timeout_ms: 0,
        connect_timeout_ms: 5000,
        retries: 2,
        max_response_bytes: 33554432,
        max_buffered_response_bytes: 67108864,
        max_sse_event_bytes: 4194304,
      },
      downstream: { sse_keepalive_interval_secs: 15, idle_timeout_secs: 30, first_request_timeout_secs: 30 },
      shutdown: { min_drain_secs: 30 },
      managed: {},
      ratelimit: { backend: 'memory', concurrency_ttl_secs: 300 },
      cache: { backend: 'memory', memory: { max_entries: 10_000, max_bytes: 67_108_864 } },
      responses_store: {
        backend: 'memory',
        ttl_secs: 86_400,
        max_entries: 10_000,
        max_bytes: 67_108_864,
        max_entry_bytes: 4_194_304,
      },
      budgets: {
        backend: 'memory',
        on_store_unavailable: 'refuse',
        reservation_ttl_secs: 900,
        default_max_output_tokens: 4096,
        teams: {},
        users: {},
      },
    });
    assert.deepEqual(r.ignoredKeys, []);
  });

  test('explicit values override the defaults', () => {
    const r = ok(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy: { addr: "127.0.0.1:8080", http2: true, request_body_limit_bytes: 1024, request_id: { accept_headers: [x-request-id] }, max_request_headers: 50, max_request_header_bytes: 4096 }
admin: { enabled: false }
observability: { log_level: debug, log_format: json, access_log: false, metrics: { prometheus: { enabled: false, path: /m, addr: "127.0.0.1:9999" } } }
upstream: { timeout_ms: 0, stream_timeout_ms: 100, connect_timeout_ms: 50, retries: 0, max_response_bytes: 0 }
downstream: { sse_keepalive_interval_secs: 0, idle_timeout_secs: 75, first_request_timeout_secs: 0 }
shutdown: { min_drain_secs: 0 }
`,
      {},
    ));
    const c = r.config;
    assert.equal(c.proxy.http2, true);
    assert.equal(c.proxy.request_body_limit_bytes, 1024);
    assert.equal(c.proxy.max_request_headers, 50);
    assert.equal(c.proxy.max_request_header_bytes, 4096);
    assert.deepEqual(c.proxy.request_id.accept_headers, ['x-request-id']);
    assert.equal(c.admin.enabled, false);
    assert.deepEqual(c.admin.admin_keys, []);
    assert.deepEqual({ ...c.observability, metrics: { ...c.observability.metrics, buckets: undefined } }, {
      log_level: 'debug',
      log_format: 'json',
      access_log: false,
      metrics: {
        prometheus: { enabled: false, path: '/m', addr: '127.0.0.1:9999' },
        buckets: undefined,
        client_type_rules: [],
      },
      tracing: { otlp: { enabled: false, headers: {}, sample_ratio: 1 } },
    });
    assert.deepEqual(c.upstream, {
      pool_idle_timeout_secs: 30,
      timeout_ms: 0,
      stream_timeout_ms: 100,
      connect_timeout_ms: 50,
      retries: 0,
      max_response_bytes: 0,
      max_buffered_response_bytes: 67108864,
      max_sse_event_bytes: 4194304,
    });
    assert.equal(c.downstream.sse_keepalive_interval_secs, 0);
    assert.equal(c.downstream.idle_timeout_secs, 75);
    assert.equal(c.downstream.first_request_timeout_secs, 0);
    assert.equal(c.shutdown.min_drain_secs, 0);
  });

  test('absent body limit and idle timeout: the finite defaults, no WARN; an explicit 0: unbounded, one WARN each', async () => {
    const boot = async (extra: string) => {
      const p = testPlatform();
      p.fileMap.set(FILE, extra);
      p.fileMap.set('/etc/sluice/resources.yaml', '_format_version: "1"\n');
      const b = await bootGateway(p, FILE);
      if (typeof b === 'string') assert.fail(b);
      b.g.gw.stop();
      const warned = p.logs.filter((l) => l.level === 'WARN').map((l) => [l.msg, l.key, l.default]);
      return { config: b.boot.config, warned };
    };
    const absent = await boot(MINIMAL);
    assert.equal(absent.config.proxy.request_body_limit_bytes, DEFAULT_REQUEST_BODY_LIMIT_BYTES);
    assert.equal(DEFAULT_REQUEST_BODY_LIMIT_BYTES, 32 * 1024 * 1024);
    assert.equal(absent.config.downstream.idle_timeout_secs, DEFAULT_IDLE_TIMEOUT_SECS);
    assert.ok(DEFAULT_IDLE_TIMEOUT_SECS > 0 && DEFAULT_IDLE_TIMEOUT_SECS <= 30, 'finite, at most 30 s');
    assert.deepEqual(absent.warned, []);
    const idleZero = `${MINIMAL}downstream: { idle_timeout_secs: 0 }\n`;
    const zero = await boot(idleZero);
    assert.equal(zero.config.downstream.idle_timeout_secs, 0);
    assert.deepEqual(zero.warned, [[MSG.idleTimeoutUnbounded, 'downstream.idle_timeout_secs', 30]]);
    const both = await boot(idleZero.replace('"0.0.0.0:3000"', '"0.0.0.0:3000"\n  request_body_limit_bytes: 0'));
    assert.equal(both.config.proxy.request_body_limit_bytes, 0);
    assert.deepEqual(both.warned, [
      [MSG.bodyLimitUnbounded, 'proxy.request_body_limit_bytes', 33_554_432],
      [MSG.idleTimeoutUnbounded, 'downstream.idle_timeout_secs', 30],
    ]);
    // The environment form is as explicit as the file's.
    const p = testPlatform({ AISIX_PROXY__REQUEST_BODY_LIMIT_BYTES: '0' });
    assert.equal(ok(loadConfig(FILE, MINIMAL, p.env)).config.proxy.request_body_limit_bytes, 0);
  });

  test('etcd source: endpoints and prefix, no resources_file', () => {
    const r = ok(
      loadConfig(
        FILE,
        `etcd: { endpoints: ["http://127.0.0.1:2379"], prefix: /custom, user: root, password_env: ETCD_PW }
proxy: { addr: ":3000" }
admin: { admin_keys: [a] }
`,
        {},
      ),
    );
    assert.equal(r.config.resources_file, undefined);
    assert.deepEqual(r.config.etcd, {
      endpoints: ['http://127.0.0.1:2379'],
      prefix: '/custom',
      user: 'root',
      password_env: 'ETCD_PW',
      dial_timeout_ms: 5000,
      request_timeout_ms: 5000,
    });
  });

  test('bad values are reported with the path and line', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy:
  addr: "0.0.0.0:3000"
  request_body_limit_bytes: -1
admin: { admin_keys: [a] }
observability:
  log_level: loud
`,
      {},
    ));
    assert.match(out, /^config file \/etc\/sluice\/config\.yaml: 2 error\(s\):\n/);
    assert.match(out, /\n {2}- proxy\.request_body_limit_bytes: .* \(line 4\)/);
    assert.match(out, /\n {2}- observability\.log_level: .* \(line 7\)/);
  });
});

describe('unknown keys', () => {
  test('an unknown key in a section is an error naming the key, with its line', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy:
  addr: "0.0.0.0:3000"
  bogus: 1
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.equal(out, 'config file /etc/sluice/config.yaml: 1 error(s):\n  - proxy: unknown key "bogus" (line 4)');
  });

  test('an unknown top-level key is an error naming it, with its line', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
frobnicate: true
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.equal(out, 'config file /etc/sluice/config.yaml: 1 error(s):\n  - file: unknown key "frobnicate" (line 2)');
  });

  test('several unknown keys are each reported', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy:
  addr: "0.0.0.0:3000"
  one: 1
  two: 2
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.match(out, /: 2 error\(s\):/);
    assert.match(out, /- proxy: unknown key "one" \(line 4\)/);
    assert.match(out, /- proxy: unknown key "two" \(line 5\)/);
  });

  test('keys that merely look like ignored ones are still unknown', () => {
    const cases: [string, string][] = [
      ['proxy: { addr: "0.0.0.0:3000", workerz: 1 }', 'proxy: unknown key "workerz"'],
      ['proxy: { addr: "0.0.0.0:3000" }\nupstream: { pool: 1 }', 'upstream: unknown key "pool"'],
      ['proxy: { addr: "0.0.0.0:3000" }\nupstream: { tcp_keepalive: 1 }', 'upstream: unknown key "tcp_keepalive"'],
      ['proxy: { addr: "0.0.0.0:3000" }\netcd: { env: 1 }', 'etcd: unknown key "env"'],
      [
        'proxy: { addr: "0.0.0.0:3000" }\nobservability: { metrics: { otlpx: 1 } }',
        'observability.metrics: unknown key "otlpx"',
      ],
    ];
    for (const [yaml, want] of cases) {
      const out = failed(loadConfig(FILE, `resources_file: r.yaml\nadmin: { admin_keys: [a] }\n${yaml}\n`, {}));
      assert.ok(out.includes(`  - ${want} (line `), out);
    }
  });
});

describe('ignored AISIX keys (docs/configuration.md)', () => {
  const AISIX = `resources_file: r.yaml
bedrock_endpoint_url: "http://bedrock.local"
cache: { backend: memory }
ratelimit: { backend: redis, redis: { url: "redis://127.0.0.1:6379" } }
proxy:
  addr: "0.0.0.0:3000"
  thread_per_core: true
  workers: 4
  real_ip: { header: x-forwarded-for, trusted_proxies: [10.0.0.0/8] }
admin: { admin_keys: [a] }
observability:
  service_name: aisix
  log_level: warn
  metrics:
    otlp: { endpoint: "http://otel:4317" }
    buckets: { request_ttft: [0.1, 1] }
    client_type_rules: []
    labels: {}
    prometheus: { path: /prom }
  tracing: { otlp: { enabled: false } }
upstream:
  timeout_ms: 1000
  tls: { verify: true }
  tcp_keepalive_secs: 60
  tcp_keepalive_interval_secs: 10
  pool_max_idle_per_host: 32
  pool_idle_timeout_secs: 90
downstream:
  idle_timeout_secs: 75
etcd:
  env_id: prod
  tls: { domain_name: etcd.internal }
managed:
  control_plane_url: "https://cp.example"
  instance_token_env: TOKEN
  snapshot_cache_path: cache/snapshot.json
`;

  test('are accepted, removed from the config and returned in ignoredKeys', () => {
    const r = ok(loadConfig(FILE, AISIX, {}));
    assert.deepEqual([...r.ignoredKeys].sort(), [
      'etcd.tls.domain_name',
      'managed.control_plane_url',
      'managed.instance_token_env',
      'observability.metrics.labels',
      'observability.metrics.otlp',
      'observability.service_name',
      'proxy.thread_per_core',
      'proxy.workers',
      'upstream.pool_max_idle_per_host',
      'upstream.tcp_keepalive_interval_secs',
      'upstream.tcp_keepalive_secs',
    ]);
    // The keys that Sluice implements next to them still apply.
    assert.equal(r.config.observability.log_level, 'warn');
    assert.equal(r.config.etcd.prefix, '/aisix/prod', 'etcd.env_id: rows under <prefix>/<env_id>/');
    assert.equal(r.config.observability.metrics.prometheus.path, '/prom');
    assert.equal(r.config.upstream.timeout_ms, 1000);
    assert.equal(r.config.upstream.pool_idle_timeout_secs, 90); // implemented: no longer ignored
    assert.deepEqual(r.config.upstream.tls, { verify: true });
    assert.equal(r.config.managed.snapshot_cache_path, '/etc/sluice/cache/snapshot.json');
    assert.equal('workers' in r.config.proxy, false);
    assert.equal(r.config.cache.backend, 'memory'); // implemented (docs/cache.md): no longer ignored
    assert.equal(r.config.etcd.env_id, 'prod');
    assert.equal(r.config.ratelimit.backend, 'redis'); // implemented: no longer ignored
  });

  test('proxy.listeners stops the boot with advice (ignoring it would leave addresses unserved); admin.tls is served', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy:
  addr: "0.0.0.0:3000"
  listeners: [{ addr: "0.0.0.0:3443" }]
admin:
  admin_keys: [a]
`,
      {},
    ));
    assert.match(out, /proxy\.listeners: not implemented by Sluice \(it binds one proxy listener, proxy\.addr\)/);
    const env = loadConfig(FILE, MINIMAL, {
      AISIX_ADMIN__TLS__CERT_FILE: '/x.crt',
      AISIX_ADMIN__TLS__KEY_FILE: '/x.key',
    });
    assert.ok(env.ok, env.ok ? '' : env.report.format());
    assert.deepEqual(env.config.admin.tls, { cert_file: '/x.crt', key_file: '/x.key' });
    const half = failed(loadConfig(FILE, `${MINIMAL}  tls: { cert_file: a.crt }\n`, {}));
    assert.match(half, /admin\.tls\.key_file/);
  });

  test('etcd.env_id joins the prefix; empty or absent leaves it', () => {
    const etcd = (block: string) =>
      ok(loadConfig(FILE, `${MINIMAL.replace('resources_file: resources.yaml\n', '')}etcd: ${block}\n`, {}));
    assert.equal(etcd('{ endpoints: [http://e:2379], prefix: /gw/, env_id: env-1 }').config.etcd.prefix, '/gw/env-1');
    assert.equal(etcd('{ endpoints: [http://e:2379], env_id: "" }').config.etcd.prefix, '/aisix');
    assert.equal(etcd('{ endpoints: [http://e:2379] }').config.etcd.prefix, '/aisix');
    const env = ok(
      loadConfig(
        FILE,
        `${MINIMAL.replace('resources_file: resources.yaml\n', '')}etcd: { endpoints: [http://e:2379] }\n`,
        {
          AISIX_ETCD__ENV_ID: 'staging',
        },
      ),
    );
    assert.equal(env.config.etcd.prefix, '/aisix/staging');
  });

  test('isIgnoredKey covers the list, and managed.snapshot_cache_path is not ignored', () => {
    for (const k of IGNORED_KEYS) assert.equal(isIgnoredKey(k.replace('*', 'x')), true, k);
    assert.equal(isIgnoredKey('managed.snapshot_cache_path'), false);
    assert.equal(isIgnoredKey('managed.anything'), true);
    assert.equal(isIgnoredKey('proxy.addr'), false);
    assert.equal(isIgnoredKey('upstream.timeout_ms'), false);
    assert.equal(isIgnoredKey('observability.metrics.prometheus'), false);
  });
});

describe('environment overrides', () => {
  test('AISIX_PROXY__ADDR and AISIX_SHUTDOWN__MIN_DRAIN_SECS override the file', () => {
    const r = ok(loadConfig(FILE, `${MINIMAL}shutdown: { min_drain_secs: 30 }\n`, {
      AISIX_PROXY__ADDR: '127.0.0.1:4000',
      AISIX_SHUTDOWN__MIN_DRAIN_SECS: '10',
    }));
    assert.equal(r.config.proxy.addr, '127.0.0.1:4000');
    assert.equal(r.config.shutdown.min_drain_secs, 10);
  });

  test('values are read as YAML scalars: booleans, numbers, lists; sections are created', () => {
    const r = ok(loadConfig(
      FILE,
      `resources_file: r.yaml
proxy: { addr: "0.0.0.0:3000" }
`,
      {
        AISIX_ADMIN__ENABLED: 'false',
        AISIX_UPSTREAM__RETRIES: '5',
        AISIX_PROXY__REQUEST_ID__ACCEPT_HEADERS: '[x-request-id, x-trace]',
        AISIX_OBSERVABILITY__LOG_FORMAT: 'json',
      },
    ));
    assert.equal(r.config.admin.enabled, false);
    assert.equal(r.config.upstream.retries, 5);
    assert.deepEqual(r.config.proxy.request_id.accept_headers, ['x-request-id', 'x-trace']);
    assert.equal(r.config.observability.log_format, 'json');
  });

  test('envOverrides: AISIX_CONFIG and unrelated variables are not overrides', () => {
    assert.deepEqual(
      envOverrides({ AISIX_CONFIG: '/x', PATH: '/bin', AISIX_PROXY__ADDR: ':1', AISIX___X: '1', AISIX_B: undefined }),
      [
        { path: ['proxy', 'addr'], value: ':1', name: 'AISIX_PROXY__ADDR' },
      ],
    );
  });

  test('a bad override names the environment variable (and no line)', () => {
    const out = failed(loadConfig(FILE, MINIMAL, { AISIX_SHUTDOWN__MIN_DRAIN_SECS: 'soon' }));
    assert.equal(
      out,
      'config file /etc/sluice/config.yaml: 1 error(s):\n' +
        '  - shutdown.min_drain_secs: Invalid input: expected number, received string (from environment variable AISIX_SHUTDOWN__MIN_DRAIN_SECS)',
    );
    const addr = failed(loadConfig(FILE, MINIMAL, { AISIX_PROXY__ADDR: 'not-an-addr' }));
    assert.equal(
      addr,
      'config file /etc/sluice/config.yaml: 1 error(s):\n' +
        '  - proxy.addr: must be host:port, e.g. 0.0.0.0:3000 (from environment variable AISIX_PROXY__ADDR)',
    );
  });

  test('an override of an unknown key names the environment variable', () => {
    const out = failed(loadConfig(FILE, MINIMAL, { AISIX_PROXY__BOGUS: '1' }));
    assert.equal(
      out,
      'config file /etc/sluice/config.yaml: 1 error(s):\n' +
        '  - proxy: unknown key "bogus" (from environment variable AISIX_PROXY__BOGUS)',
    );
  });

  test('an override that sets etcd.endpoints next to resources_file is the mutual-exclusion error', () => {
    const out = failed(loadConfig(FILE, MINIMAL, { AISIX_ETCD__ENDPOINTS: '["http://127.0.0.1:2379"]' }));
    assert.match(out, /resources_file and etcd\.endpoints are mutually exclusive/);
  });

  test('the rejected value of an override is not echoed (it may be a secret)', () => {
    const out = failed(loadConfig(FILE, MINIMAL, { AISIX_ADMIN__ADMIN_KEYS: 'sk-admin-very-secret' }));
    assert.match(out, /admin\.admin_keys: .*\(from environment variable AISIX_ADMIN__ADMIN_KEYS\)/);
    assert.equal(out.includes('sk-admin-very-secret'), false, out);
  });
});

describe('configuration source and admin rules', () => {
  test('resources_file and etcd.endpoints both set: one error naming both', () => {
    const out = failed(loadConfig(
      FILE,
      `resources_file: r.yaml
etcd: { endpoints: ["http://127.0.0.1:2379"] }
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.match(out, /: 1 error\(s\):\n/);
    assert.ok(out.includes('resources_file') && out.includes('etcd.endpoints'), out);
    assert.match(out, /- resources_file: resources_file and etcd\.endpoints are mutually exclusive/);
  });

  test('neither resources_file nor etcd.endpoints: error', () => {
    const out = failed(loadConfig(
      FILE,
      `proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.equal(
      out,
      'config file /etc/sluice/config.yaml: 1 error(s):\n' +
        '  - resources_file: no configuration source: set resources_file or etcd.endpoints (line 1)',
    );
  });

  test('an empty etcd.endpoints list counts as no source', () => {
    const out = failed(loadConfig(
      FILE,
      `etcd: { endpoints: [] }
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.match(out, /no configuration source/);
  });

  test('admin enabled (the default) with no admin_keys: error', () => {
    for (const admin of ['', 'admin: { enabled: true }\n', 'admin: { admin_keys: [] }\n']) {
      const out = failed(loadConfig(FILE, `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\n${admin}`, {}));
      assert.match(
        out,
        /: 1 error\(s\):\n {2}- admin\.admin_keys: required \(non-empty\) when admin\.enabled is true/,
        admin,
      );
    }
  });

  test('admin disabled needs no admin_keys', () => {
    const r = ok(
      loadConfig(FILE, `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\nadmin: { enabled: false }\n`, {}),
    );
    assert.equal(r.config.admin.enabled, false);
  });

  test('proxy.addr is required', () => {
    const out = failed(loadConfig(FILE, `resources_file: r.yaml\nadmin: { admin_keys: [a] }\n`, {}));
    assert.match(out, /- proxy: /);
  });

  test('the top level must be a mapping', () => {
    const out = failed(loadConfig(FILE, `- a\n- b\n`, {}));
    assert.match(out, /- file: the top level must be a mapping/);
  });

  test('YAML syntax errors are reported with their line', () => {
    const out = failed(loadConfig(FILE, `resources_file: r.yaml\nproxy:\n  addr: "0.0.0.0:3000\n`, {}));
    assert.match(out, /^config file \/etc\/sluice\/config\.yaml: 1 error\(s\):\n {2}- yaml: .* \(line \d+\)$/);
  });
});

describe('addresses', () => {
  const withAddr = (addr: string, where: 'proxy' | 'admin' | 'metrics' = 'proxy') => {
    const proxy = where === 'proxy' ? addr : '0.0.0.0:3000';
    const admin = where === 'admin' ? `, addr: ${JSON.stringify(addr)}` : '';
    const metrics = where === 'metrics'
      ? `observability: { metrics: { prometheus: { addr: ${JSON.stringify(addr)} } } }\n`
      : '';
    return loadConfig(
      FILE,
      `resources_file: r.yaml\nproxy: { addr: ${
        JSON.stringify(proxy)
      } }\nadmin: { admin_keys: [a]${admin} }\n${metrics}`,
      {},
    );
  };

  test('valid forms', () => {
    for (
      const a of [
        '0.0.0.0:3000',
        '127.0.0.1:0',
        ':3000',
        'localhost:80',
        '[::1]:3000',
        '[::]:443',
        'gw.example.com:8443',
      ]
    ) {
      assert.equal(ok(withAddr(a)).config.proxy.addr, a);
    }
  });

  test('bad forms are errors naming the key', () => {
    for (
      const a of ['nope', '0.0.0.0', '0.0.0.0:', 'host:port', '0.0.0.0:3000 ', 'a b:80', '::1:3000', '0.0.0.0:123456']
    ) {
      const out = failed(withAddr(a));
      assert.match(out, /- proxy\.addr: must be host:port, e\.g\. 0\.0\.0\.0:3000 \(line 2\)/, a);
    }
    assert.match(failed(withAddr('nope', 'admin')), /- admin\.addr: must be host:port/);
    assert.match(failed(withAddr('nope', 'metrics')), /- observability\.metrics\.prometheus\.addr: must be host:port/);
    assert.match(
      failed(loadConfig(FILE, `resources_file: r.yaml\nproxy: { addr: 3000 }\nadmin: { admin_keys: [a] }\n`, {})),
      /- proxy\.addr: /,
    );
  });

  test('parseAddr', () => {
    assert.deepEqual(parseAddr('0.0.0.0:3000'), { host: '0.0.0.0', port: 3000 });
    assert.deepEqual(parseAddr(':3000'), { host: '0.0.0.0', port: 3000 });
    assert.deepEqual(parseAddr('[::1]:8080'), { host: '::1', port: 8080 });
    assert.deepEqual(parseAddr('localhost:0'), { host: 'localhost', port: 0 });
  });

  test('a port over 65535 is a boot error (loadBootConfig)', async () => {
    const p = testPlatform();
    p.fileMap.set(
      '/c/config.yaml',
      `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:70000" }\nadmin: { admin_keys: [a] }\n`,
    );
    assert.equal(
      await loadBootConfig(p, '/c/config.yaml'),
      'config file /c/config.yaml: proxy.addr: port 70000 is out of range (0-65535)',
    );
    p.fileMap.set(
      '/c/config.yaml',
      `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\nadmin: { admin_keys: [a], addr: "127.0.0.1:99999" }\n`,
    );
    assert.equal(
      await loadBootConfig(p, '/c/config.yaml'),
      'config file /c/config.yaml: admin.addr: port 99999 is out of range (0-65535)',
    );
  });

  test('loadBootConfig: unreadable config and unreadable TLS material are boot errors', async () => {
    const p = testPlatform();
    const missing = await loadBootConfig(p, '/c/none.yaml');
    assert.equal(typeof missing, 'string');
    assert.match(missing as string, /^config file \/c\/none\.yaml: cannot read it: /);
    p.fileMap.set(
      '/c/config.yaml',
      `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000", tls: { cert_file: tls/cert.pem, key_file: tls/key.pem } }\nadmin: { admin_keys: [a] }\n`,
    );
    const noCert = await loadBootConfig(p, '/c/config.yaml');
    assert.match(
      noCert as string,
      /^config file \/c\/config\.yaml: proxy\.tls\.cert_file: cannot read \/c\/tls\/cert\.pem: /,
    );
    p.fileMap.set('/c/tls/cert.pem', 'CERT');
    p.fileMap.set('/c/tls/key.pem', 'KEY');
    const good = await loadBootConfig(p, '/c/config.yaml');
    assert.equal(typeof good, 'object');
    const tls = (good as Exclude<typeof good, string>).tls!;
    assert.equal(new TextDecoder().decode(tls.cert), 'CERT');
    assert.equal(new TextDecoder().decode(tls.key), 'KEY');
    assert.equal(tls.certFile, '/c/tls/cert.pem');
  });
});

describe('paths', () => {
  test('relative paths are resolved against the config file folder; absolute ones are kept', () => {
    const r = ok(loadConfig(
      '/srv/gw/conf/config.yaml',
      `resources_file: ../data/resources.yaml
proxy: { addr: "0.0.0.0:3000", tls: { cert_file: tls/cert.pem, key_file: /abs/key.pem } }
admin: { admin_keys: [a] }
managed: { snapshot_cache_path: cache.json }
`,
      {},
    ));
    assert.equal(r.config.resources_file, '/srv/gw/conf/../data/resources.yaml');
    assert.deepEqual(r.config.proxy.tls, { cert_file: '/srv/gw/conf/tls/cert.pem', key_file: '/abs/key.pem' });
    assert.equal(r.config.managed.snapshot_cache_path, '/srv/gw/conf/cache.json');
  });

  test('etcd TLS files are resolved too', () => {
    const r = ok(loadConfig(
      '/srv/config.yaml',
      `etcd:
  endpoints: ["https://etcd:2379"]
  tls: { ca_cert_file: ca.pem, client_cert_file: /pki/c.pem, client_key_file: k.pem }
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
`,
      {},
    ));
    assert.deepEqual(r.config.etcd.tls, {
      ca_cert_file: '/srv/ca.pem',
      client_cert_file: '/pki/c.pem',
      client_key_file: '/srv/k.pem',
    });
  });

  test('admin TLS and cache.redis TLS files are resolved too', () => {
    const r = ok(loadConfig(
      '/srv/config.yaml',
      `resources_file: r.yaml
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a], tls: { cert_file: tls/admin.pem, key_file: /pki/admin-key.pem } }
cache:
  backend: redis
  redis: { url: "rediss://r:6380", tls: { ca_file: ca.pem, client_cert_file: c.pem, client_key_file: /pki/k.pem } }
`,
      {},
    ));
    assert.deepEqual(r.config.admin.tls, { cert_file: '/srv/tls/admin.pem', key_file: '/pki/admin-key.pem' });
    assert.deepEqual(r.config.cache.redis?.tls, {
      ca_file: '/srv/ca.pem',
      client_cert_file: '/srv/c.pem',
      client_key_file: '/pki/k.pem',
      verify: true,
    });
  });

  test('loadBootConfig reads a relative admin TLS pair from the config file folder', async () => {
    const p = testPlatform();
    p.fileMap.set(
      '/c/config.yaml',
      `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\nadmin: { admin_keys: [a], tls: { cert_file: tls/a.pem, key_file: tls/a-key.pem } }\n`,
    );
    p.fileMap.set('/c/tls/a.pem', 'ADMIN CERT');
    p.fileMap.set('/c/tls/a-key.pem', 'ADMIN KEY');
    const boot = await loadBootConfig(p, '/c/config.yaml');
    if (typeof boot === 'string') assert.fail(boot);
    assert.equal(new TextDecoder().decode(boot.adminTls!.cert), 'ADMIN CERT');
    assert.equal(boot.adminTls!.keyFile, '/c/tls/a-key.pem');
  });

  test('every key of the schema that names a file is in the declared list of paths', () => {
    // A key is found by its name (`*_file`, `*_path`), walking the schema through its wrappers.
    type Def = { type: string; innerType?: unknown; in?: unknown; shape?: Record<string, unknown> };
    const defOf = (s: unknown) => (s as { _zod: { def: Def } })._zod.def;
    const keys = (s: unknown, prefix: string): string[] => {
      const d = defOf(s);
      if (d.innerType) return keys(d.innerType, prefix);
      if (d.type === 'pipe') return keys(d.in, prefix);
      if (d.type !== 'object') return [prefix];
      return Object.entries(d.shape!).flatMap(([k, v]) => keys(v, prefix ? `${prefix}.${k}` : k));
    };
    const all = keys(ConfigSchema, '');
    assert.ok(all.includes('proxy.tls.cert_file'), 'the walk reaches nested keys');
    assert.deepEqual(all.filter((k) => /_(file|path)$/.test(k)).sort(), [...PATH_KEYS].sort());
  });

  test('a config file given without a folder resolves against the current folder', () => {
    const r = ok(loadConfig('config.yaml', MINIMAL, {}));
    assert.equal(r.config.resources_file, './resources.yaml');
    const root = ok(loadConfig('/config.yaml', MINIMAL, {}));
    assert.equal(root.config.resources_file, '/resources.yaml');
  });

  test('resolvePath', () => {
    assert.equal(resolvePath('/a/b', 'c.yaml'), '/a/b/c.yaml');
    assert.equal(resolvePath('/a/b', '/c.yaml'), '/c.yaml');
    assert.equal(resolvePath('.', 'c.yaml'), './c.yaml');
  });
});

describe('JSON', () => {
  test('a JSON config file loads the same as YAML', () => {
    const json = JSON.stringify(
      {
        resources_file: 'resources.yaml',
        proxy: { addr: '0.0.0.0:3000' },
        admin: { admin_keys: ['adm-1'] },
        shutdown: { min_drain_secs: 5 },
      },
      null,
      2,
    );
    const r = ok(loadConfig('/etc/sluice/config.json', json, {}));
    const y = ok(loadConfig('/etc/sluice/config.yaml', `${MINIMAL}shutdown: { min_drain_secs: 5 }\n`, {}));
    assert.deepEqual(r.config, y.config);
    assert.equal(r.config.shutdown.min_drain_secs, 5);
  });

  test('JSON errors: unknown key with its line', () => {
    const out = failed(
      loadConfig(
        '/etc/sluice/config.json',
        '{\n  "resources_file": "r.yaml",\n  "proxy": { "addr": "0.0.0.0:3000" },\n  "admin": { "admin_keys": ["a"] },\n  "extra": 1\n}\n',
        {},
      ),
    );
    assert.equal(out, 'config file /etc/sluice/config.json: 1 error(s):\n  - file: unknown key "extra" (line 5)');
  });
});

test('AISIX_ variables that are not <SECTION>__<KEY> overrides are left alone', () => {
  const text = 'resources_file: r.yaml\nproxy: { addr: "127.0.0.1:3000" }\nadmin: { enabled: false }\n';
  const r = loadConfig('/c/config.yaml', text, {
    AISIX_API_KEY: 'x',
    AISIX_LOG: 'debug',
    AISIX_RESOURCES_FILE: 'other.yaml',
  });
  assert.ok(r.ok, r.ok ? '' : r.report.format());
  if (r.ok) assert.equal(r.config.resources_file, '/c/other.yaml');
});
