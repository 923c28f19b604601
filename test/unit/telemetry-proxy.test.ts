// The request path traced in process (docs/operations.md "Tracing"), through app.request(): no exporter
// means no trace at all; with one, a request's spans reach a real OTLP receiver and the upstream request
// carries its attempt span; the SLO histograms and `ttft_ms` are recorded with or without tracing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import { gatewayWith } from '../support/platform.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { sumSamples } from '../support/metrics.ts';

const KEY = 'sk-caller-telemetry-1';

function resources(mock: MockUpstream, exporter = ''): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up-secret-1, api_base: "${mock.base}" }
models:
  - { display_name: m, model_name: up, provider_key: mock, retries: 0 }
api_keys:
  - { display_name: caller, key_hash: placeholder, allowed_models: ["*"] }
${exporter}`.replace('key_hash: placeholder', `key_env: CALLER`);
}

describe('the traced request path', () => {
  let mock: MockUpstream;
  let rx: OtlpReceiver;
  before(async () => {
    mock = await startMockUpstream();
    rx = await startOtlpReceiver();
  });
  after(async () => {
    await mock.close();
    await rx.close();
  });

  const chat = (app: ReturnType<typeof createProxyApp>, stream = false, headers: Record<string, string> = {}) =>
    app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: 'hi' }] }),
    }, { peer: '127.0.0.1:5' });

  test('no exporter: nothing is traced, no traceparent goes upstream; the latency families are recorded', async () => {
    const { gw } = await gatewayWith(resources(mock), { env: { CALLER: KEY } });
    assert.equal(gw.telemetry.active, false);
    const app = createProxyApp(gw);
    const n = mock.requests.length;
    mock.script({ sse: [chunk('up', 'a'), chunk('up', 'b')], chunkDelayMs: 5 });
    await (await chat(app, true)).text();
    assert.equal(mock.requests[n]!.headers.traceparent, undefined);
    const text = gw.metrics.render();
    assert.equal(sumSamples(text, 'aisix_request_e2e_latency_seconds_count', { streaming: 'true' }), 1);
    assert.equal(sumSamples(text, 'aisix_request_ttft_seconds_count', { streaming: 'true' }), 1);
    assert.equal(sumSamples(text, 'aisix_llm_time_to_first_token_seconds_count', { model: 'm' }), 1);
    assert.equal(sumSamples(text, 'aisix_request_duration_seconds_count', { model: 'm' }), 1);
  });

  test('an exporter: the spans arrive, the upstream got the attempt span as its parent', async () => {
    const { gw, platform } = await gatewayWith(
      resources(mock, `observability_exporters:\n  - { name: t, kind: otlp_http, endpoint: "${rx.url}" }\n`),
      { env: { CALLER: KEY } },
    );
    assert.equal(gw.telemetry.active, true);
    const app = createProxyApp(gw);
    const n = mock.requests.length;
    const res = await chat(app, false, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    await res.text();
    await gw.telemetry.flush();
    const id = res.headers.get('x-aisix-request-id');
    const spans = rx.spans.filter((s) => s.attrs['aisix.request_id'] === id);
    assert.deepEqual(spans.map((s) => s.kind), [2, 3, 3]);
    assert.equal(spans[0]!.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(mock.requests[n]!.headers.traceparent, `00-4bf92f3577b34da6a3ce929d0e0e4736-${spans[2]!.spanId}-01`);
    // The access log of a JSON answer has no ttft_ms; a stream's has it.
    mock.script({ sse: [chunk('up', 'a')], chunkDelayMs: 5 });
    await (await chat(app, true)).text();
    const lines = platform.logs.filter((l) => l.msg === 'proxy request completed');
    assert.equal(lines.at(-2)!.ttft_ms, undefined);
    assert.equal(typeof lines.at(-1)!.ttft_ms, 'number');
    await gw.telemetry.close(1000);
  });
});
