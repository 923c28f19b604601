// The `aliyun_sls` exporter kind (docs/usage-events.md "Aliyun SLS"): the resource's fields and errors, the
// LZ4 block and MD5 it sends, and delivery to a real intake that checks the signature, decompresses and decodes
// the LogGroup (test/support/sls-intake.ts): fields as text, retries of transient failures and none of
// permanent ones, and one event per request through app.request().
// Run: node --import tsx --test test/unit/usage-sls.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import type { SlsExporterResource } from '../../src/resources/schema.ts';
import { postBytesThroughFetch } from '../../src/usage/datadog.ts';
import { UsageMetrics } from '../../src/usage/metrics.ts';
import { UsageSinks } from '../../src/usage/sinks.ts';
import { putLogsUrl, slsKeyVariables } from '../../src/usage/sls.ts';
import { lz4Block, md5Hex } from '../../src/usage/sls-wire.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { lz4Decompress, SLS_KEY_ID, SLS_SECRET, type SlsIntake, startSlsIntake } from '../support/sls-intake.ts';
import { gatewayWith } from '../support/platform.ts';
import { sumSamples } from '../support/metrics.ts';
import { sampleUsageEvent as event } from '../support/usage-event.ts';

const row = (endpoint: string, more: Partial<SlsExporterResource> = {}): SlsExporterResource => ({
  id: 'x',
  name: 'sls',
  kind: 'aliyun_sls',
  enabled: true,
  endpoint,
  project: 'proj',
  logstore: 'usage',
  credential_ref: 'ops.main',
  content_mode: 'metadata_only',
  content_max_bytes: 131072,
  ...more,
});
const ENV = { SLS_CRED_OPS_MAIN_AK_ID: SLS_KEY_ID, SLS_CRED_OPS_MAIN_AK_SECRET: SLS_SECRET };

describe('the aliyun_sls exporter resource', () => {
  test('defaults applied and served as a usage exporter; the endpoint and required members checked', async () => {
    const r = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: s, kind: aliyun_sls, endpoint: cn-hangzhou.log.aliyuncs.com, project: p, logstore: l, credential_ref: main }
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    assert.deepEqual({ ...r.snapshot.usageExporters[0], id: undefined }, {
      id: undefined,
      name: 's',
      kind: 'aliyun_sls',
      enabled: true,
      endpoint: 'cn-hangzhou.log.aliyuncs.com',
      project: 'p',
      logstore: 'l',
      credential_ref: 'main',
      content_mode: 'metadata_only',
      content_max_bytes: 131072,
    });
    const bad = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: s, kind: aliyun_sls, endpoint: "https://evil.example.com", logstore: l, credential_ref: main }
`,
      {},
    );
    assert.equal(bad.ok, false);
    const text = bad.ok ? '' : bad.report.format();
    assert.match(text, /endpoint: must be an SLS endpoint/);
    assert.match(text, /project: /);
  });

  test('the PutLogs URL and the key variables', () => {
    assert.equal(
      putLogsUrl(row('cn-hangzhou.log.aliyuncs.com')),
      'https://proj.cn-hangzhou.log.aliyuncs.com/logstores/usage/shards/lb',
    );
    assert.equal(putLogsUrl(row('http://127.0.0.1:9000')), 'http://127.0.0.1:9000/logstores/usage/shards/lb');
    assert.deepEqual(slsKeyVariables('ops.main'), {
      id: 'SLS_CRED_OPS_MAIN_AK_ID',
      secret: 'SLS_CRED_OPS_MAIN_AK_SECRET',
    });
  });
});

describe('the wire', () => {
  test('LZ4 blocks decompress to the input (text, repeats, random, long runs); MD5 is RFC 1321', () => {
    const rnd = new Uint8Array(5000);
    for (let i = 0; i < rnd.length; i++) rnd[i] = (i * 7919 + (i >> 3) * 31) & 0xff;
    const inputs = [
      new Uint8Array(0),
      new TextEncoder().encode('short'),
      new TextEncoder().encode('{"request_id":"r-1","model":"gpt"},'.repeat(300)),
      new Uint8Array(70_000).fill(97),
      rnd,
      new TextEncoder().encode('版本是 12.1 — 😀 '.repeat(50)),
    ];
    for (const input of inputs) {
      const packed = lz4Block(input);
      assert.deepEqual(lz4Decompress(packed, input.length), input);
      assert.equal(md5Hex(packed), createHash('md5').update(packed).digest('hex').toUpperCase());
    }
    assert.ok(lz4Block(inputs[3]!).length < 400, 'a long run compresses');
  });
});

describe('delivery', () => {
  let intake: SlsIntake;
  before(async () => {
    intake = await startSlsIntake();
  });
  after(() => intake.close());

  function sinks(env: Record<string, string> = ENV) {
    const registry = new Registry();
    const s = new UsageSinks({
      post: postBytesThroughFetch(),
      env,
      metrics: new UsageMetrics(registry),
      log: createLogger({ level: 'error', format: 'json', write: () => {} }),
      sleep: () => Promise.resolve(),
    });
    s.update([row(intake.endpoint)]);
    return { s, registry };
  }

  test('each event is one log: schema_version, then every field as text under its own name', async () => {
    const { s } = sinks();
    s.offer(
      Object.assign(event('r-fields'), {
        applied_guardrails: [{ kind: 'pii', hook: 'input' }],
        provider_request_id: '',
      }),
    );
    await s.flush();
    assert.deepEqual(intake.invalid, []);
    const log = intake.logs.find((l) => l.request_id === 'r-fields');
    assert.ok(log);
    assert.ok(Math.abs(Number(log.__time__) - Date.now() / 1000) < 60, 'Time is the ingest time');
    const { __time__: _t, ...contents } = log;
    assert.deepEqual(contents, {
      schema_version: '1.0',
      request_id: 'r-fields',
      occurred_at: '2026-01-01T00:00:00Z',
      model_id: 'm1',
      api_key_id: 'k1',
      prompt_tokens: '1',
      completion_tokens: '2',
      upstream_latency_ms: '3',
      status_code: '200',
      cost_usd: '0',
      guardrail_blocked: 'false',
      attempt_index: '0',
      applied_guardrails: '[{"kind":"pii","hook":"input"}]',
    });
  });

  test('a transient failure is retried and delivered once; a permanent one is not retried', async () => {
    const { s, registry } = sinks();
    intake.failNext(2, 503, 'ServerBusy');
    let before = intake.attempts;
    s.offer(event('r-transient'));
    await s.flush();
    assert.equal(intake.attempts - before, 3);
    assert.equal(intake.logs.filter((l) => l.request_id === 'r-transient').length, 1);
    intake.failNext(2, 400, 'WriteQuotaExceed');
    before = intake.attempts;
    s.offer(event('r-quota'));
    await s.flush();
    assert.equal(intake.attempts - before, 3, 'an errorCode with QuotaExceed is transient');
    intake.failNext(1, 400, 'InvalidParameter');
    before = intake.attempts;
    s.offer(event('r-permanent'));
    await s.flush();
    assert.equal(intake.attempts - before, 1);
    assert.equal(intake.logs.filter((l) => l.request_id === 'r-permanent').length, 0);
    assert.ok((sumSamples(registry.render(), 'sluice_usage_exporter_failures_total', { exporter: 'sls' }) ?? 0) >= 1);
  });

  test('a credential_ref with no keys in the environment is sent unsigned by any key: refused, counted', async () => {
    const { s } = sinks({});
    intake.invalid.length = 0;
    s.offer(event('r-nokey'));
    await s.flush();
    assert.match(intake.invalid[0] ?? '', /^SignatureNotMatch: LOG :/);
    assert.equal(intake.logs.filter((l) => l.request_id === 'r-nokey').length, 0);
  });
});

describe('through the proxy', () => {
  let mock: MockUpstream;
  let intake: SlsIntake;
  before(async () => {
    mock = await startMockUpstream();
    intake = await startSlsIntake();
  });
  after(async () => {
    await mock.close();
    await intake.close();
  });

  test('a chat request leaves one event in the logstore', async () => {
    const KEY = 'sk-sls-caller';
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${mock.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
observability_exporters:
  - { name: sls, kind: aliyun_sls, endpoint: "${intake.endpoint}", project: p, logstore: usage, credential_ref: ops.main }
`,
      { env: { CALLER: KEY, ...ENV } },
    );
    try {
      mock.script({ body: chatCompletion('gpt-up') });
      const res = await createProxyApp(gw).request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'x' }] }),
      });
      assert.equal(res.status, 200);
      await res.text();
      await gw.usage.flush();
      assert.deepEqual(intake.invalid, []);
      assert.equal(intake.logs.length, 1);
      const log = intake.logs[0]!;
      assert.equal(log.schema_version, '1.0');
      assert.equal(log.status_code, '200');
      assert.equal(log.requested_model, 'gpt');
      assert.equal(log.provider_request_id, 'chatcmpl-mock');
      assert.equal(log.provider_model_version, 'gpt-up');
      assert.equal(log.prompt_tokens, '1');
      assert.equal(log.completion_tokens, '3');
      assert.equal(log.guardrail_blocked, 'false');
    } finally {
      await gw.usage.close(1000);
      gw.stop();
    }
  });
});
