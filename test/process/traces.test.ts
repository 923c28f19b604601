// Traces from a real gateway process of each runtime (docs/operations.md "Tracing") to a real OTLP/HTTP JSON
// receiver (test/support/otlp-receiver.ts): a direct request, a streamed one, a failover with its attempts,
// a rate-limited refusal, an inbound traceparent continued, the upstream's received traceparent matching
// the attempt span, sample_rate 0 and 0.5, content capture caps, `ttft_ms` in the access log, and the drain
// delivering what is queued.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { sumSamples } from '../support/metrics.ts';
import { roomInMinute, until } from '../support/until.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_TRACE_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node', 'bun', 'deno'];
const LIMITED_KEY = 'sk-limited-caller-key';
const CAP = 64;

function resources(mock: MockUpstream, rx: OtlpReceiver, half: OtlpReceiver, none: OtlpReceiver): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${mock.base}" }
models:
  - { display_name: direct, model_name: up-direct, provider_key: mock, retries: 0 }
  - { display_name: first, model_name: up-first, provider_key: mock, retries: 0 }
  - { display_name: second, model_name: up-second, provider_key: mock, retries: 0 }
  - { display_name: smart, routing: { targets: [{ model: first, priority: 2 }, { model: second, priority: 1 }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
  - { display_name: limited, key_env: LIMITED_KEY, allowed_models: ["*"], rate_limit: { rpm: 1 } }
observability_exporters:
  - { name: rx, kind: otlp_http, endpoint: "${rx.url}", headers: { x-collector-token: tok }, content_mode: full, content_max_bytes: ${CAP} }
  - { name: half, kind: otlp_http, endpoint: "${half.url}", sample_rate: 0.5 }
  - { name: none, kind: otlp_http, endpoint: "${none.url}", sample_rate: 0 }
`;
}

const CONFIG = `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { log_format: json, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;

/** The spans of one trace, by kind and order: [SERVER, logical?, ...attempts]. */
function traceOf(spans: ReceivedSpan[], requestId: string): [ReceivedSpan, ...ReceivedSpan[]] {
  const server = spans.find((s) => s.kind === 2 && s.attrs['aisix.request_id'] === requestId);
  assert.ok(server, `no SERVER span for ${requestId}`);
  const all = spans.filter((s) => s.traceId === server.traceId && s.attrs['aisix.request_id'] === requestId);
  const logical = all.find((s) => s.kind === 3 && s.parentSpanId === server.spanId);
  const attempts = logical ? all.filter((s) => s.parentSpanId === logical.spanId) : [];
  attempts.sort((a, b) => Number(a.attrs['aisix.attempt_index']) - Number(b.attrs['aisix.attempt_index']));
  return logical ? [server, logical, ...attempts] : [server];
}

for (const runtime of RUNTIMES) {
  describe(`traces on ${runtime}`, { concurrency: false, timeout: 120_000 }, () => {
    let mock: MockUpstream;
    let rx: OtlpReceiver;
    let half: OtlpReceiver;
    let none: OtlpReceiver;
    let gw: GatewayProcess;

    before(async () => {
      mock = await startMockUpstream();
      [rx, half, none] = await Promise.all([startOtlpReceiver(), startOtlpReceiver(), startOtlpReceiver()]);
      gw = await spawnGateway({
        runtime,
        config: CONFIG,
        files: { 'resources.yaml': resources(mock, rx, half, none) },
        env: { CALLER_KEY, LIMITED_KEY },
      });
      await gw.waitReady();
    });
    after(async () => {
      await gw?.stop();
      await Promise.all([mock?.close(), rx?.close(), half?.close(), none?.close()]);
    });

    const chat = async (
      model: string,
      o: { stream?: boolean; key?: string; headers?: Record<string, string>; content?: string } = {},
    ) => {
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${o.key ?? CALLER_KEY}`,
          'content-type': 'application/json',
          ...o.headers,
        },
        body: JSON.stringify({
          model,
          stream: o.stream ?? false,
          messages: [{ role: 'user', content: o.content ?? 'hi' }],
        }),
      });
      await res.text();
      return { status: res.status, requestId: res.headers.get('x-aisix-request-id')! };
    };

    test('a direct request: SERVER → logical → attempt; the upstream received the attempt span as its parent', async () => {
      const before = mock.requests.length;
      const r = await chat('direct');
      assert.equal(r.status, 200);
      await until(
        () => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId && s.kind === 2),
        10_000,
        'the trace',
      );
      assert.deepEqual(rx.invalid, []);
      const [server, logical, attempt, ...more] = traceOf(rx.spans, r.requestId);
      assert.equal(more.length, 0);
      assert.ok(logical && attempt);
      assert.equal(server.parentSpanId, undefined);
      assert.equal(server.status, 1);
      assert.equal(attempt.attrs['gen_ai.request.model'], 'direct');
      assert.equal(attempt.attrs['gen_ai.provider.name'], 'openai');
      assert.equal(attempt.attrs['server.address'], '127.0.0.1');
      assert.equal(attempt.attrs['aisix.attempt_kind'], 'initial');
      assert.equal(attempt.attrs['gen_ai.usage.input_tokens'], 1);
      assert.equal(attempt.attrs['gen_ai.usage.output_tokens'], 3);
      assert.equal(attempt.resource['service.name'], 'aisix-dp');
      const sent = mock.requests[before]!.headers.traceparent;
      assert.equal(sent, `00-${attempt.traceId}-${attempt.spanId}-01`);
      assert.equal(rx.posts.at(-1)!.headers['x-collector-token'], 'tok');
    });

    test('a streamed request: the attempt has its upstream TTFT, the access log its ttft_ms', async () => {
      mock.script({ sse: [chunk('up-direct', 'hel'), chunk('up-direct', 'lo')], chunkDelayMs: 20 });
      const r = await chat('direct', { stream: true });
      assert.equal(r.status, 200);
      await until(
        () => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId && s.kind === 2),
        10_000,
        'the trace',
      );
      const [, , attempt] = traceOf(rx.spans, r.requestId);
      assert.ok(Number(attempt!.attrs['aisix.upstream_ttft_ms']) >= 0);
      assert.equal(attempt!.attrs['gen_ai.completion'], 'hello');
      const line = await gw.waitForLog((l) => l.msg === 'proxy request completed' && l.request_id === r.requestId);
      assert.equal(typeof line.ttft_ms, 'number');
    });

    test('a failover: every attempt is a span, the failed one with its error', async () => {
      mock.script({ status: 503 });
      const r = await chat('smart');
      assert.equal(r.status, 200);
      await until(
        () => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId && s.kind === 2),
        10_000,
        'the trace',
      );
      const [server, logical, failed, served] = traceOf(rx.spans, r.requestId);
      assert.ok(logical && failed && served);
      assert.equal(server.status, 1);
      assert.equal(failed.status, 2);
      assert.equal(failed.attrs['aisix.attempt_model'], 'first');
      assert.equal(failed.attrs['aisix.error_class'], 'upstream_status');
      assert.equal(failed.attrs['http.response.status_code'], 503);
      assert.equal(failed.attrs['error.type'], 'upstream_status');
      assert.equal(served.attrs['aisix.attempt_kind'], 'fallback');
      assert.equal(served.attrs['aisix.attempt_model'], 'second');
      assert.ok(failed.end <= served.start);
    });

    test('a rate-limited refusal is a SERVER span with rate_limit_exceeded', async () => {
      await roomInMinute();
      assert.equal((await chat('direct', { key: LIMITED_KEY })).status, 200);
      const r = await chat('direct', { key: LIMITED_KEY });
      assert.equal(r.status, 429);
      await until(() => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId), 10_000, 'the trace');
      const spans = traceOf(rx.spans, r.requestId);
      assert.equal(spans.length, 1);
      assert.equal(spans[0]!.status, 2);
      assert.equal(spans[0]!.attrs['aisix.error_class'], 'rate_limit_exceeded');
      assert.equal(spans[0]!.attrs['http.response.status_code'], 429);
    });

    test('an inbound traceparent is continued, its tracestate kept on SERVER', async () => {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const r = await chat('direct', {
        headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'vendor=x' },
      });
      await until(
        () => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId && s.kind === 2),
        10_000,
        'the trace',
      );
      const [server, , attempt] = traceOf(rx.spans, r.requestId);
      assert.equal(server.traceId, traceId);
      assert.equal(server.parentSpanId, '00f067aa0ba902b7');
      assert.equal(server.traceState, 'vendor=x');
      assert.equal(server.flags! & 0x200, 0x200);
      assert.equal(mock.requests.at(-1)!.headers.traceparent, `00-${traceId}-${attempt!.spanId}-01`);
      // Never the caller's own header upstream.
      assert.notEqual(mock.requests.at(-1)!.headers.traceparent, `00-${traceId}-00f067aa0ba902b7-01`);
    });

    test('content capture under full is capped; metadata_only exporters get none', async () => {
      const long = 'z'.repeat(500);
      const r = await chat('direct', { content: long });
      await until(
        () => rx.spans.some((s) => s.attrs['aisix.request_id'] === r.requestId && s.kind === 2),
        10_000,
        'the trace',
      );
      const [, , attempt] = traceOf(rx.spans, r.requestId);
      const prompt = String(attempt!.attrs['gen_ai.prompt']);
      assert.ok(new TextEncoder().encode(prompt).length <= CAP, prompt);
      assert.equal(attempt!.attrs['aisix.content_truncated'], true);
      assert.ok(!prompt.includes(CALLER_KEY) && !prompt.includes('sk-upstream-SECRET-value'));
      await until(() => half.spans.length > 0, 10_000, 'a sampled trace at the half exporter').catch(() => {});
      for (const s of half.spans) assert.equal(s.attrs['gen_ai.prompt'], undefined);
    });

    test('sample_rate 0 exports nothing; 0.5 about half (bounded); drops are counted, none here', async () => {
      const n = runtime === 'node' ? 200 : 60;
      const ids = new Set<string>();
      for (let i = 0; i < n; i++) ids.add((await chat('direct')).requestId);
      const posts = half.posts.length;
      await until(
        () =>
          ids.size ===
            [...ids].filter((id) => rx.spans.some((s) => s.kind === 2 && s.attrs['aisix.request_id'] === id)).length,
        15_000,
        'every trace at rx',
      );
      // The half exporter sends its last partial batch on its one-second timer: wait for a POST after the load.
      await until(() => half.posts.length > posts, 5_000, "the half exporter's last batch").catch(() => {});
      const kept = [...ids].filter((id) =>
        half.spans.some((s) => s.kind === 2 && s.attrs['aisix.request_id'] === id)
      ).length;
      // Binomial(n, 0.5): 5 standard deviations either side.
      const sd = Math.sqrt(n * 0.25);
      assert.ok(kept > n / 2 - 5 * sd && kept < n / 2 + 5 * sd, `kept ${kept} of ${n}`);
      assert.equal(none.attempts, 0);
      // A span counts as delivered once the collector's 2xx reaches the gateway, a moment after the sink has it.
      let metrics = '';
      const delivered = () => sumSamples(metrics, 'sluice_otlp_delivered_spans_total', { exporter: 'rx' }) ?? 0;
      await until(
        async () => {
          metrics = await (await fetch(gw.url('/metrics', 'status'))).text();
          return delivered() >= n * 3;
        },
        5_000,
        () => `at least ${n * 3} spans counted as delivered to rx (last ${delivered()})`,
        50,
      );
      assert.equal(sumSamples(metrics, 'aisix_otlp_fanout_drops_total'), undefined);
    });

    test('the drain delivers what is queued before the process exits', async () => {
      const r = await chat('direct');
      const code = await gw.stop();
      assert.equal(code, 0);
      assert.ok(
        rx.spans.some((s) => s.kind === 2 && s.attrs['aisix.request_id'] === r.requestId),
        'the last trace arrived',
      );
    });
  });
}
