// AISIX's latency distributions (docs/aisix-compatibility.md "Metrics"): the duration families as summaries
// over a rolling window, the SLO histograms with AISIX's default edges and no per-key labels, the bucket
// overrides and their boot-time messages, the quantiles the status page reads, and `observability.tracing.otlp`.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bucketQuantile, Summary, SUMMARY_SUB_WINDOW_MS } from '../../src/observability/metrics.ts';
import { GatewayMetrics, SLO_LABELS } from '../../src/observability/gateway-metrics.ts';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigFactsRecorder } from '../../src/config-facts.ts';

const facts = new ConfigFactsRecorder('file').view;

const CONFIG = `resources_file: r.yaml
proxy: { addr: "127.0.0.1:3000" }
admin: { enabled: false }
`;

describe('summary', () => {
  test("renders AISIX's quantiles over the window, cumulative _sum and _count, no buckets", () => {
    let now = 1_000_000;
    const s = new Summary('x_seconds', 'help', ['model'], () => now);
    for (let i = 1; i <= 100; i++) s.observe(['m'], i / 100);
    const out: string[] = [];
    s.render(out);
    assert.deepEqual(out, [
      '# HELP x_seconds help',
      '# TYPE x_seconds summary',
      'x_seconds{model="m",quantile="0"} 0.01',
      'x_seconds{model="m",quantile="0.5"} 0.5',
      'x_seconds{model="m",quantile="0.9"} 0.9',
      'x_seconds{model="m",quantile="0.95"} 0.95',
      'x_seconds{model="m",quantile="0.99"} 0.99',
      'x_seconds{model="m",quantile="0.999"} 1',
      'x_seconds{model="m",quantile="1"} 1',
      'x_seconds_sum{model="m"} 50.5',
      'x_seconds_count{model="m"} 100',
    ]);
    // Three sub-windows later the old observations are out of the quantiles (0), still in _sum/_count.
    now += 3 * SUMMARY_SUB_WINDOW_MS;
    assert.deepEqual(s.quantiles(['m']), undefined);
    const later: string[] = [];
    s.render(later);
    assert.equal(later[2], 'x_seconds{model="m",quantile="0"} 0');
    assert.equal(later.at(-1), 'x_seconds_count{model="m"} 100');
    s.observe(['m'], 7);
    assert.deepEqual(s.quantiles(['m']), [7, 7, 7, 7, 7, 7, 7]);
  });

  test("a bound series given the caller's clock reading windows by it, and reads no clock of its own", () => {
    const now = 1_000_000;
    let reads = 0;
    const s = new Summary('x_seconds', 'help', ['model'], () => (reads++, now));
    const bound = s.bind(['m']);
    bound.observe(0.25, now - 3 * SUMMARY_SUB_WINDOW_MS); // read three sub-windows ago: out of the window now
    bound.observe(0.5, now);
    assert.equal(reads, 0);
    assert.deepEqual(s.quantiles(['m']), [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]);
    bound.observe(1); // without a reading, its own clock
    assert.deepEqual(s.quantiles(['m'])?.at(-1), 1);
    assert.equal(reads, 3); // the observe's and the two quantiles'
  });

  test('memory is bounded: beyond the capacity a sub-window keeps a uniform sample', () => {
    const s = new Summary('y', 'h', [], () => 0);
    for (let i = 0; i < 100_000; i++) s.observe([], i);
    const q = s.quantiles([])!;
    // p50 of 0..99999 sampled: within a few percent.
    assert.ok(Math.abs(q[1]! - 50_000) < 8_000, `p50 ${q[1]}`);
  });
});

describe('bucket quantiles', () => {
  test('interpolated inside the bucket as histogram_quantile does; the overflow answers the last edge', () => {
    const edges = [0.1, 0.5, 1];
    assert.equal(bucketQuantile(edges, [10, 0, 0, 0], 0.5), 0.05);
    assert.ok(Math.abs(bucketQuantile(edges, [0, 10, 0, 0], 0.5)! - 0.3) < 1e-12);
    assert.equal(bucketQuantile(edges, [0, 0, 0, 4], 0.5), 1);
    assert.equal(bucketQuantile(edges, [0, 0, 0, 0], 0.5), undefined);
  });
});

describe('gateway families', () => {
  const m = new GatewayMetrics({
    facts: () => facts,
    inFlight: () => 0,
    openConnections: () => undefined,
    draining: () => false,
  });

  test('legacy duration families are summaries; SLO histograms have the default edges and no per-key label', () => {
    assert.equal(m.legacyDuration.type, 'summary');
    assert.equal(m.proxyDuration.type, 'summary');
    assert.equal(m.llmDuration.type, 'summary');
    assert.equal(m.llmTtft.type, 'summary');
    assert.deepEqual(m.requestE2e.buckets, [
      0.005,
      0.01,
      0.025,
      0.05,
      0.1,
      0.25,
      0.5,
      1,
      2,
      5,
      10,
      30,
      60,
      120,
      300,
      420,
      600,
    ]);
    assert.deepEqual(m.requestTtft.buckets, [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]);
    assert.deepEqual([...SLO_LABELS], ['env_id', 'endpoint', 'model', 'provider', 'status_class', 'streaming']);
    for (const h of [m.requestE2e, m.requestTtft]) {
      for (const perKey of ['api_key_id', 'user_id', 'team_id', 'provider_key_id', 'user_name']) {
        assert.ok(!h.labelNames.includes(perKey), `${h.name} has ${perKey}`);
      }
    }
  });

  test('latency per model for the status page', () => {
    const e2e = (model: string, v: number) =>
      m.requestE2e.observe(['unknown', '/v1/chat/completions', model, 'openai', '2xx', 'false'], v);
    for (let i = 0; i < 10; i++) e2e('a', 0.3);
    e2e('b', 700); // above the last edge
    m.requestTtft.observe(['unknown', '/v1/chat/completions', 'a', 'openai', '2xx', 'true'], 0.2);
    const rows = m.latencyByModel();
    assert.deepEqual(rows.map((r) => [r.model, r.requests, r.streams]), [['a', 10, 1], ['b', 1, 0]]);
    assert.ok(rows[0]!.latencyP50! > 0.25 && rows[0]!.latencyP50! <= 0.5);
    assert.ok(rows[0]!.ttftP95! > 0.1 && rows[0]!.ttftP95! <= 0.25);
    assert.equal(rows[1]!.latencyP95, 600);
    assert.equal(rows[1]!.ttftP50, undefined);
  });

  test('the exposition of the summaries and histograms', () => {
    m.legacyDuration.observe(['openai', 'a', '200'], 0.25);
    const text = m.render();
    assert.match(text, /^# TYPE aisix_request_duration_seconds summary$/m);
    assert.match(
      text,
      /^aisix_request_duration_seconds\{provider="openai",model="a",status="200",quantile="0\.99"\} 0\.25$/m,
    );
    assert.doesNotMatch(text, /aisix_request_duration_seconds_bucket/);
    assert.match(
      text,
      /^aisix_request_e2e_latency_seconds_bucket\{env_id="unknown",endpoint="\/v1\/chat\/completions",model="a",provider="openai",status_class="2xx",streaming="false",le="600"\} 10$/m,
    );
  });

  test('bucket overrides replace one family and leave the other alone', () => {
    const o = new GatewayMetrics({
      facts: () => facts,
      inFlight: () => 0,
      openConnections: () => undefined,
      draining: () => false,
      buckets: { request_e2e_latency: [1, 2], request_ttft: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300] },
    });
    assert.deepEqual(o.requestE2e.buckets, [1, 2]);
  });
});

describe('observability.metrics.buckets', () => {
  const report = (buckets: string, env: Record<string, string> = {}) => {
    const r = loadConfig('/c.yaml', `${CONFIG}observability: { metrics: { buckets: ${buckets} } }\n`, env);
    return r.ok ? r.config.observability.metrics.buckets : r.report.format();
  };

  test('an unset key keeps its default; a set one replaces it', () => {
    const b = report('{ request_ttft: [0.5, 3] }');
    assert.ok(typeof b !== 'string');
    assert.deepEqual(b.request_ttft, [0.5, 3]);
    assert.equal(b.request_e2e_latency.length, 17);
  });

  test("the environment's comma list", () => {
    const r = loadConfig('/c.yaml', CONFIG, { AISIX_OBSERVABILITY__METRICS__BUCKETS__REQUEST_TTFT: '0.5,3' });
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    assert.deepEqual(r.config.observability.metrics.buckets.request_ttft, [0.5, 3]);
  });

  test("AISIX's boot-time messages", () => {
    const cases: [string, string][] = [
      ['{ request_ttft: [] }', 'observability.metrics.buckets.request_ttft: must list at least one bucket edge'],
      [
        `{ request_e2e_latency: [${Array.from({ length: 65 }, (_, i) => i + 1).join(', ')}] }`,
        'observability.metrics.buckets.request_e2e_latency: 65 edges exceed the limit of 64',
      ],
      [
        '{ request_ttft: [0.5, -1] }',
        'observability.metrics.buckets.request_ttft[1]: -1 must be a finite positive number of seconds (the +Inf bucket is added automatically)',
      ],
      [
        '{ guardrail_latency: [0.5, .inf] }',
        'observability.metrics.buckets.guardrail_latency[1]: inf must be a finite positive number of seconds (the +Inf bucket is added automatically)',
      ],
      [
        '{ a2a_ttfb: [1, 2, 2] }',
        'observability.metrics.buckets.a2a_ttfb[2]: 2 must be greater than the preceding edge 2 — bucket edges are cumulative and must strictly ascend',
      ],
    ];
    for (const [buckets, message] of cases) {
      const r = report(buckets);
      assert.equal(typeof r, 'string', buckets);
      assert.ok((r as string).includes(message), `${buckets}:\n${r}`);
    }
  });
});

describe('observability.tracing.otlp', () => {
  test("enabled with an empty endpoint stops the boot with AISIX's message", () => {
    const r = loadConfig(
      '/c.yaml',
      `${CONFIG}observability: { tracing: { otlp: { enabled: true, endpoint: "" } } }\n`,
      {},
    );
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.match(
        r.report.format(),
        /observability\.tracing\.otlp\.endpoint: otlp init failed: otlp exporter install failed: tracing\.otlp\.enabled=true but endpoint is empty/,
      );
    }
  });

  test('an endpoint and ratio are read; disabled by default', () => {
    const r = loadConfig(
      '/c.yaml',
      `${CONFIG}observability: { tracing: { otlp: { enabled: true, endpoint: "http://127.0.0.1:4318/v1/traces", sample_ratio: 0.25 } } }\n`,
      {},
    );
    assert.ok(r.ok);
    assert.deepEqual(r.config.observability.tracing.otlp, {
      enabled: true,
      endpoint: 'http://127.0.0.1:4318/v1/traces',
      sample_ratio: 0.25,
      headers: {},
    });
    const d = loadConfig('/c.yaml', CONFIG, {});
    assert.ok(d.ok);
    assert.equal(d.config.observability.tracing.otlp.enabled, false);
  });
});
