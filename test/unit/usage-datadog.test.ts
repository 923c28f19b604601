// The `datadog` exporter kind (docs/usage-events.md "Datadog", "Delivery"): the resource's fields and AISIX's
// errors, the intake URL and key variable, retries of transient failures and none of permanent ones, a full
// queue's drops attributed to model and provider key, and a hanging intake that cannot slow a request.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { parseRow } from '../../src/sources/etcd/rows.ts';
import {
  apiKeyVariable,
  attributeOf,
  datadogRecord,
  intakeUrl,
  postBytesThroughFetch,
} from '../../src/usage/datadog.ts';
import { MAX_BATCH_RECORDS, MAX_QUEUE_RECORDS } from '../../src/observability/delivery-queue.ts';
import { UsageSinks } from '../../src/usage/sinks.ts';
import { UsageMetrics } from '../../src/usage/metrics.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { EVENT_MEMBERS, UsageEvent } from '../../src/usage/event.ts';
import type { CappedContent } from '../../src/usage/content.ts';
import type { DatadogExporterResource } from '../../src/resources/schema.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { gatewayWith } from '../support/platform.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { sumSamples } from '../support/metrics.ts';
import { sampleUsageEvent as event } from '../support/usage-event.ts';

const row = (site: string, more: Partial<DatadogExporterResource> = {}): DatadogExporterResource => ({
  id: 'x',
  name: 'dd',
  kind: 'datadog',
  enabled: true,
  site,
  credential_ref: 'ops.main',
  service: 'gw',
  ddsource: 'aisix-ai-gateway',
  tags: [],
  content_mode: 'metadata_only',
  content_max_bytes: 131072,
  ...more,
});

describe('the datadog exporter resource', () => {
  test('defaults applied and served; the site and the required members checked', async () => {
    const r = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: d, kind: datadog, site: datadoghq.eu, credential_ref: main, service: gw }
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    assert.deepEqual({ ...r.snapshot.usageExporters[0], id: undefined }, {
      id: undefined,
      name: 'd',
      kind: 'datadog',
      enabled: true,
      site: 'datadoghq.eu',
      credential_ref: 'main',
      service: 'gw',
      ddsource: 'aisix-ai-gateway',
      tags: [],
      content_mode: 'metadata_only',
      content_max_bytes: 131072,
    });
    assert.deepEqual(r.snapshot.exporters, [], 'not a trace exporter');
    const bad = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: d, kind: datadog, site: evil.example.com, credential_ref: main }
`,
      {},
    );
    assert.equal(bad.ok, false);
    const text = bad.ok ? '' : bad.report.format();
    assert.match(text, /site: must be a Datadog site/);
    assert.match(text, /service: /);
  });

  test('an etcd row is read leniently: unknown members dropped and reported', () => {
    const r = parseRow(
      '/aisix',
      '/aisix/observability_exporters/e1',
      JSON.stringify({ name: 'd', kind: 'datadog', site: 'localhost:8126', credential_ref: 'c', service: 's', x: 1 }),
    );
    assert.ok(r.ok && r.kind === 'observability_exporters' && r.resource, JSON.stringify(r));
    if (r.ok && r.kind === 'observability_exporters') {
      assert.equal(r.resource!.kind, 'datadog');
      assert.deepEqual(r.unknownFields, ['x']);
    }
  });

  test("the intake URL and the key's variable, AISIX's", () => {
    assert.equal(intakeUrl('datadoghq.com'), 'https://http-intake.logs.datadoghq.com/api/v2/logs');
    assert.equal(intakeUrl('us5.datadoghq.com'), 'https://http-intake.logs.us5.datadoghq.com/api/v2/logs');
    assert.equal(intakeUrl('127.0.0.1:9000'), 'http://127.0.0.1:9000/api/v2/logs');
    assert.equal(intakeUrl('mock-datadog'), 'http://mock-datadog/api/v2/logs');
    assert.equal(apiKeyVariable('ops.main-1'), 'DD_CRED_OPS_MAIN_1_API_KEY');
  });
});

describe('the record', () => {
  /** The record as `JSON.stringify` of the log object writes it: the members set, renamed, in the event's order. */
  function viaObject(e: UsageEvent, d: DatadogExporterResource, content?: CappedContent): string {
    const log: Record<string, unknown> = { ddsource: d.ddsource };
    if (d.tags.length > 0) log.ddtags = d.tags.join(',');
    log.service = d.service;
    log.message = `ai-gateway request ${e.request_id} model=${
      e.provider_model_version || e.model_id || '-'
    } status=${e.status_code}`;
    log.schema_version = '1.0';
    for (const k of EVENT_MEMBERS) {
      const v = (e as unknown as Record<string, unknown>)[k];
      if (v !== undefined && v !== null && v !== '') log[attributeOf(k)] = v;
    }
    if (content) {
      log['gen_ai.prompt'] = content.prompt;
      log['gen_ai.completion'] = content.response;
      if (content.truncated) log.content_truncated = true;
    }
    return JSON.stringify(log);
  }

  test("byte for byte JSON.stringify's, whatever the values hold", () => {
    const awkward = Object.assign(new UsageEvent(), event('r"1\\\n\u0001'), {
      trace_id: '',
      requested_model: 'm\u2028x\ud800y\udc00\ud83d\ude00é',
      provider_model_version: '',
      finish_reason: 'stop\t',
      cost_usd: 0.1 + 0.2,
      upstream_ttft_ms: -0,
      usage_estimated: true as const,
      applied_guardrails: [{ kind: 'pii', hook: 'input' }],
      redacted_entity_counts: { 'e"mail': 2 },
      guardrail_monitor_hits: [{ guardrail_name: 'g\n', hook: 'input', action: 'would_block', reason: '\u007f' }],
      error_message: 'a\\b',
      client_user_agent: '\ud83e',
    });
    const cases: [UsageEvent, DatadogExporterResource, CappedContent | undefined][] = [
      [event('r1'), row('s'), undefined],
      [event('r2'), row('s', { tags: ['env:a', 'team:"b"'] }), undefined],
      [awkward, row('s', { tags: ['x'], service: 'sv\n' }), { prompt: 'p"\n', response: '', truncated: true }],
      [awkward, row('s'), { prompt: 'p', response: 'r\ud800', truncated: false }],
    ];
    for (const [e, d, content] of cases) assert.equal(datadogRecord(e, d, content), viaObject(e, d, content));
  });

  test("every member AISIX's event has, in its order", () => {
    assert.equal(EVENT_MEMBERS.length, 62);
    assert.deepEqual(EVENT_MEMBERS.slice(0, 6), [
      'request_id',
      'trace_id',
      'occurred_at',
      'model_id',
      'api_key_id',
      'requested_model',
    ]);
    assert.deepEqual(EVENT_MEMBERS.slice(-4), ['client_identity', 'jwt_subject', 'jwt_provider', 'jwt_claim_mapping']);
  });
});

describe('delivery', () => {
  let intake: DatadogIntake;
  before(async () => {
    intake = await startDatadogIntake();
  });
  after(() => intake.close());

  function sinks(env: Record<string, string> = { DD_CRED_OPS_MAIN_API_KEY: 'dd-key-1' }) {
    const registry = new Registry();
    const metrics = new UsageMetrics(registry);
    const s = new UsageSinks({
      post: postBytesThroughFetch(),
      env,
      metrics,
      log: createLogger({ level: 'error', format: 'json', write: () => {} }),
      sleep: () => Promise.resolve(),
    });
    s.update([row(intake.site)]);
    return { s, registry };
  }

  test('a transient failure is retried, the batch delivered once', async () => {
    const { s, registry } = sinks();
    intake.failNext(2, 503);
    const before = intake.attempts;
    s.offer(event('r-transient'));
    await s.flush();
    assert.equal(intake.attempts - before, 3);
    assert.equal(intake.logs.filter((l) => l['aisix.request_id'] === 'r-transient').length, 1);
    const m = registry.render();
    assert.equal(sumSamples(m, 'sluice_usage_exporter_delivered_total', { exporter: 'dd' }), 1);
    assert.equal(sumSamples(m, 'sluice_usage_exporter_failures_total', { exporter: 'dd' }), 2);
    await s.close(1000);
  });

  test('a permanent failure (a 4xx other than 429) is dropped at once; a missing key is sent empty', async () => {
    const { s, registry } = sinks({});
    intake.setStatus(403);
    const before = intake.attempts;
    s.offer(event('r-permanent'));
    await s.flush();
    intake.setStatus(202);
    assert.equal(intake.attempts - before, 1);
    assert.equal(intake.posts.at(-1)!.headers['dd-api-key'], '');
    assert.equal(
      sumSamples(registry.render(), 'sluice_usage_exporter_dropped_total', { exporter: 'dd', reason: 'rejected' }),
      1,
    );
    await s.close(1000);
  });

  test('a changed exporter takes over its queue; a removed one delivers what it holds, then takes nothing', async () => {
    const { s } = sinks();
    s.offer(event('r-keep-1')); // queued (the timer has not fired), serialized as the old exporter had it
    s.update([row(intake.site, { service: 'renamed' })]);
    s.offer(event('r-keep-2'));
    await s.flush();
    const kept = intake.logs.filter((l) => String(l['aisix.request_id']).startsWith('r-keep-'));
    assert.deepEqual(kept.map((l) => [l['aisix.request_id'], l.service]), [['r-keep-1', 'gw'], [
      'r-keep-2',
      'renamed',
    ]]);
    s.offer(event('r-gone-1'));
    s.update([]);
    assert.equal(s.active, false);
    assert.deepEqual(s.offer(event('r-gone-2')), []);
    await s.close(1000);
    const gone = intake.logs.filter((l) => String(l['aisix.request_id']).startsWith('r-gone-'));
    assert.deepEqual(gone.map((l) => l['aisix.request_id']), ['r-gone-1']);
  });

  test('a full queue refuses the event: sink_full, never waits', async () => {
    const { s } = sinks();
    intake.hang(true);
    try {
      const reasons: string[] = [];
      // One batch goes out (and hangs); the queue behind it holds its 1024; the rest is refused.
      for (let i = 0; i < MAX_QUEUE_RECORDS + MAX_BATCH_RECORDS + 50; i++) reasons.push(...s.offer(event(`f-${i}`)));
      assert.deepEqual(reasons, Array(50).fill('sink_full'));
    } finally {
      intake.hang(false);
      await s.close(1000);
    }
  });
});

describe('a hanging intake through the proxy', () => {
  const KEY = 'sk-caller-dd-1';
  let mock: MockUpstream;
  let intake: DatadogIntake;
  before(async () => {
    mock = await startMockUpstream();
    intake = await startDatadogIntake();
  });
  after(async () => {
    await mock.close();
    await intake.close();
  });

  test('requests are answered at once while the intake hangs; queue-full drops name model and provider key', async () => {
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${mock.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: x, service: gw }
`,
      { env: { CALLER: KEY, DD_CRED_X_API_KEY: 'k' } },
    );
    const app = createProxyApp(gw);
    intake.hang(true);
    try {
      // Fill the queue without requests: the pipeline is the gateway's own.
      for (let i = 0; i < MAX_QUEUE_RECORDS + 100; i++) gw.usage.offer(event(`fill-${i}`));
      const started = Date.now();
      for (let i = 0; i < 5; i++) {
        mock.script({ body: chatCompletion('gpt-up') });
        const res = await app.request('/v1/chat/completions', {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'x' }] }),
        });
        assert.equal(res.status, 200);
        await res.text();
      }
      assert.ok(Date.now() - started < 2000, `five requests took ${Date.now() - started} ms`);
      const m = gw.metrics.render();
      assert.equal(
        sumSamples(m, 'aisix_usage_event_drops_total', { reason: 'sink_full', model: 'gpt', provider_key_name: 'oa' }),
        5,
      );
    } finally {
      intake.hang(false);
      await gw.usage.close(1000);
      gw.stop();
    }
  });
});
