// Tracing (docs/operations.md "Tracing"): trace context, sampling, the span model and its attributes, content
// capture, and the OTLP/HTTP exporter's delivery (batching, retries, drops, rebuilds, the drain) against a
// real receiver that checks the OTLP JSON mapping.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { formatTraceparent, parseTraceparent, screenTracestate } from '../../src/telemetry/context.ts';
import { sampled, sampledByRate } from '../../src/telemetry/sampling.ts';
import { buildSpans, cleanErrorMessage, unixNano } from '../../src/telemetry/spans.ts';
import { capContent, CompletionCollector, completionOfAnswer, cutUtf8 } from '../../src/telemetry/content.ts';
import { type RequestOutcome, RequestTrace, type TraceClock } from '../../src/telemetry/trace.ts';
import { type DropReason, type ExporterDeps, OtlpExporter, transientStatus } from '../../src/telemetry/exporter.ts';
import { type ExporterConfig, postThroughFetch, Telemetry } from '../../src/telemetry/telemetry.ts';
import { decodeExportRequest, type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { exportRequestBody } from '../../src/telemetry/otlp.ts';

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('trace context', () => {
  test('a valid traceparent is continued; anything else is a local root', () => {
    assert.deepEqual(parseTraceparent(TP, null), {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      parentSpanId: 'b7ad6b7169203331',
      flags: 1,
    });
    for (
      const bad of [
        TP.toUpperCase(),
        `ff${TP.slice(2)}`,
        `01${TP.slice(2)}`,
        `${TP}-extra`,
        `00-${'0'.repeat(32)}-b7ad6b7169203331-01`,
        `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01`,
        `${TP}, ${TP}`, // two headers, joined by Headers
        '',
      ]
    ) assert.equal(parseTraceparent(bad, null), undefined, bad);
  });

  test('tracestate is kept only beside a valid traceparent, screened', () => {
    assert.equal(parseTraceparent(TP, ' vendor=a,other=b ')?.traceState, 'vendor=a,other=b');
    assert.equal(parseTraceparent('bogus', 'vendor=a'), undefined);
    assert.equal(screenTracestate('x'.repeat(513)), undefined);
    assert.equal(screenTracestate('x'.repeat(512))?.length, 512);
    assert.equal(screenTracestate('a=\u00e9'), undefined);
    assert.equal(screenTracestate('   '), undefined);
  });

  test('an attempt carries its own span as the parent', () => {
    assert.equal(formatTraceparent('a'.repeat(32), 'b'.repeat(16)), `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`);
  });
});

describe('sampling', () => {
  test('1.0 keeps all, 0 none, 0.5 about half (bounded)', () => {
    let kept = 0;
    const n = 4000;
    for (let i = 0; i < n; i++) {
      assert.equal(sampledByRate(1, 's', `r${i}`), true);
      assert.equal(sampledByRate(0, 's', `r${i}`), false);
      if (sampledByRate(0.5, 'salt', `req-${i}`)) kept++;
    }
    // Binomial(4000, 0.5): sd ≈ 32; 6 sd either side.
    assert.ok(kept > n / 2 - 200 && kept < n / 2 + 200, `kept ${kept} of ${n}`);
  });

  test('the same request id and salt always decide the same; the salt changes the subset', () => {
    const a = Array.from({ length: 200 }, (_, i) => sampledByRate(0.5, 'one', `id${i}`));
    const b = Array.from({ length: 200 }, (_, i) => sampledByRate(0.5, 'one', `id${i}`));
    const c = Array.from({ length: 200 }, (_, i) => sampledByRate(0.5, 'two', `id${i}`));
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
  });

  test("parent-based: the caller's flag decides, except that sample_rate 0 keeps nothing", () => {
    assert.equal(sampled(0.01, 's', 'r', true), true);
    assert.equal(sampled(1, 's', 'r', false), false);
    assert.equal(sampled(0, 's', 'r', true), false);
  });
});

/** A clock the test moves: wall fixed at 1.7e12 ms, mono advanced by hand. */
function manualClock(): TraceClock & { advance(ms: number): void } {
  let mono = 0;
  return { wall: () => 1_700_000_000_123, mono: () => mono, advance: (ms) => void (mono += ms) };
}

const OUTCOME: RequestOutcome = {
  status: 200,
  operation: 'chat',
  requestModel: 'gpt-4o',
  responseModel: 'gpt-4o-2024-08-06',
  responseId: 'chatcmpl-1',
  finishReason: 'stop',
  inputTokens: 12,
  outputTokens: 34,
  apiKeyId: 'key-1',
  modelId: 'model-1',
  clientIp: '10.0.0.1',
  userAgent: 'sdk/1',
  downstreamTtftMs: 40,
};

describe('spans', () => {
  test('a failover: SERVER → logical → one CLIENT span per attempt, failed attempts with their error', () => {
    const clock = manualClock();
    const t = new RequestTrace('req-1', undefined, ['x'], clock);
    clock.advance(5);
    const a0 = t.attempt('initial', { model: 'primary', provider: 'openai', url: 'https://api.openai.com/v1' });
    clock.advance(10);
    a0.settle(503, { errorClass: 'upstream_status', message: 'bad\ngateway' });
    const a1 = t.attempt('fallback', { model: 'backup', provider: 'anthropic', url: 'http://127.0.0.1:9999/v1' });
    clock.advance(20);
    a1.firstByte();
    clock.advance(7);
    a1.settle(200);
    clock.advance(3);
    t.finish();
    const spans = decodeExportRequest(exportRequestBody([buildSpans(t, OUTCOME, { exporterName: 'x' })]));
    assert.equal(spans.length, 4);
    const [server, logical, s0, s1] = spans as [typeof spans[0], typeof spans[0], typeof spans[0], typeof spans[0]];
    assert.equal(new Set(spans.map((s) => s.traceId)).size, 1);
    assert.deepEqual(spans.map((s) => s.kind), [2, 3, 3, 3]);
    assert.deepEqual(spans.map((s) => s.name), Array(4).fill('chat.completions'));
    assert.equal(server.parentSpanId, undefined);
    assert.equal(logical.parentSpanId, server.spanId);
    assert.equal(s0.parentSpanId, logical.spanId);
    assert.equal(s1.parentSpanId, logical.spanId);
    assert.equal(s1.spanId, a1.spanId);
    // Times: SERVER 0→45 ms, logical 5→42, attempts 5→15 and 15→42.
    const base = 1_700_000_000_123_000_000n;
    assert.deepEqual([server.start - base, server.end - base], [0n, 45_000_000n]);
    assert.deepEqual([logical.start - base, logical.end - base], [5_000_000n, 42_000_000n]);
    assert.deepEqual([s0.start - base, s0.end - base], [5_000_000n, 15_000_000n]);
    assert.deepEqual([s1.start - base, s1.end - base], [15_000_000n, 42_000_000n]);
    assert.deepEqual(spans.map((s) => s.status), [1, 1, 2, 1]);
    assert.deepEqual(spans.map((s) => s.flags), [0x101, 0x101, 0x101, 0x101]);
    assert.equal(s0.attrs['aisix.attempt_kind'], 'initial');
    assert.equal(s0.attrs['aisix.attempt_index'], 0);
    assert.equal(s0.attrs['aisix.error_class'], 'upstream_status');
    assert.equal(s0.attrs['aisix.error_message'], 'badgateway');
    assert.equal(s0.attrs['error.type'], 'upstream_status');
    assert.equal(s0.attrs['http.response.status_code'], 503);
    assert.equal(s0.attrs['gen_ai.response.model'], undefined);
    assert.equal(s0.attrs['server.address'], 'api.openai.com');
    assert.equal(s0.attrs['server.port'], 443);
    assert.deepEqual(
      { ...s1.attrs },
      {
        'gen_ai.system': 'aisix',
        'gen_ai.operation.name': 'chat',
        'aisix.exporter_name': 'x',
        'aisix.request_id': 'req-1',
        'http.response.status_code': 200,
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.model': 'gpt-4o-2024-08-06',
        'gen_ai.response.id': 'chatcmpl-1',
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.usage.input_tokens': 12,
        'gen_ai.usage.output_tokens': 34,
        'gen_ai.provider.name': 'anthropic',
        'server.address': '127.0.0.1',
        'server.port': 9999,
        'aisix.api_key_id': 'key-1',
        'aisix.model_id': 'model-1',
        'aisix.attempt_index': 1,
        'aisix.attempt_kind': 'fallback',
        'aisix.attempt_model': 'backup',
        'aisix.upstream_ttft_ms': 20,
        'aisix.downstream_latency_ms': 40,
        'aisix.client_source_ip': '10.0.0.1',
        'aisix.client_user_agent': 'sdk/1',
      },
    );
    // The structural set on SERVER and logical.
    assert.deepEqual(Object.keys(server.attrs).sort(), [
      'aisix.exporter_name',
      'aisix.request_id',
      'gen_ai.operation.name',
      'gen_ai.request.model',
      'gen_ai.system',
      'http.response.status_code',
    ]);
    assert.equal(server.resource['service.name'], 'aisix-dp');
    assert.equal(server.scope, 'aisix-obs.otlp_http_sink');
  });

  test('a continued trace: the caller parents SERVER, IS_REMOTE and the random bit, tracestate on SERVER only', () => {
    const remote = parseTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03', 'k=v')!;
    const t = new RequestTrace('r', remote, ['x'], manualClock());
    t.attempt('initial', { model: '', provider: 'openai' }).settle(200);
    const [server, logical, a] = buildSpans(t, OUTCOME, { exporterName: 'x' });
    assert.equal(server!.traceId, remote.traceId);
    assert.equal(server!.parentSpanId, 'b7ad6b7169203331');
    assert.equal(server!.flags, 0x101 | 0x200 | 0x02);
    assert.equal(server!.traceState, 'k=v');
    assert.equal(logical!.traceState, undefined);
    assert.equal(a!.flags, 0x101);
  });

  test('a refusal before dispatch is a SERVER span alone, with the event set', () => {
    const t = new RequestTrace('r', undefined, ['x'], manualClock());
    const spans = buildSpans(t, { status: 429, operation: 'chat', requestModel: 'm', rateLimited: true }, {
      exporterName: 'x',
    });
    assert.equal(spans.length, 1);
    const attrs = Object.fromEntries(spans[0]!.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
    assert.equal(attrs['aisix.error_class'], 'rate_limit_exceeded');
    assert.equal(attrs['error.type'], 'rate_limit_exceeded');
    assert.equal(attrs['http.response.status_code'], '429');
    assert.equal(spans[0]!.status.code, 2);
  });

  test('unix nanoseconds stay exact past 2^53', () => {
    assert.equal(unixNano(1_700_000_000_123, 0.000001), '1700000000123000001');
    assert.equal(unixNano(1_700_000_000_123, 1234.5), '1700000001357500000');
  });

  test('error messages lose control characters and stop at 2048 characters', () => {
    assert.equal(cleanErrorMessage('a\u0000b\u001fc\u007fd'), 'abcd');
    assert.equal(cleanErrorMessage('x'.repeat(5000)).length, 2048);
  });
});

describe('content capture', () => {
  test('metadata_only captures nothing; full captures within the cap and marks a cut', () => {
    const t = new RequestTrace('r', undefined, ['x'], manualClock());
    t.attempt('initial', { model: '', provider: 'openai' }).settle(200);
    const o = { ...OUTCOME, prompt: '{"messages":[{"content":"hello"}]}', completion: 'x'.repeat(100) };
    const attrsOf = (max?: number) =>
      Object.fromEntries(
        buildSpans(t, o, { exporterName: 'x', contentMaxBytes: max })[2]!.attributes.map((a) => [
          a.key,
          Object.values(a.value)[0],
        ]),
      );
    const meta = attrsOf(undefined);
    assert.equal(meta['gen_ai.prompt'], undefined);
    assert.equal(meta['gen_ai.completion'], undefined);
    const full = attrsOf(1000);
    assert.equal(full['gen_ai.prompt'], o.prompt);
    assert.equal(full['gen_ai.completion'], o.completion);
    assert.equal(full['aisix.content_truncated'], undefined);
    const cut = attrsOf(50);
    assert.equal((cut['gen_ai.completion'] as string).length, 50);
    assert.equal(cut['aisix.content_truncated'], true);
  });

  test('oversized JSON is shrunk structurally and stays JSON; text is cut on a character boundary', () => {
    const doc = JSON.stringify({ messages: [{ role: 'user', content: 'y'.repeat(5000) }] });
    const c = capContent(doc, 1000);
    assert.equal(c.truncated, true);
    assert.ok(new TextEncoder().encode(c.text).length <= 1000);
    const parsed = JSON.parse(c.text);
    assert.match(parsed.messages[0].content, /\.\.\.\[aisix: truncated, 5000 bytes total\]$/);
    assert.equal(cutUtf8('aé€😀', 4), 'aé'); // é is 2 bytes, € 3: a + é = 3 bytes, + € would be 6
    assert.equal(capContent('😀😀', 5).text, '😀');
  });

  test('the completion of a whole answer and of a stream', () => {
    assert.equal(completionOfAnswer(JSON.stringify({ choices: [{ message: { content: 'hi' } }] })), 'hi');
    assert.equal(
      completionOfAnswer(JSON.stringify({ content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] })),
      'ab',
    );
    const c = new CompletionCollector(1000);
    const enc = new TextEncoder();
    const frames =
      'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\ndata: {"choices":[{"delta":{"content":"lo"}}]}\n\ndata: [DONE]\n\n';
    c.push(enc.encode(frames.slice(0, 30)));
    c.push(enc.encode(frames.slice(30)));
    assert.equal(c.completion, 'Hello');
    const a = new CompletionCollector(1000);
    a.push(
      enc.encode(
        'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}\n\n',
      ),
    );
    assert.equal(a.completion, 'Hi');
  });
});

interface Counted {
  drops: Record<string, number>;
  failures: number;
  delivered: number;
}

function exporterDeps(overrides: Partial<ExporterDeps> = {}): ExporterDeps & { counted: Counted; lines: string[] } {
  const counted: Counted = { drops: {}, failures: 0, delivered: 0 };
  const lines: string[] = [];
  return {
    post: postThroughFetch(),
    metrics: {
      dropped: (_e: string, reason: DropReason, n: number) =>
        void (counted.drops[reason] = (counted.drops[reason] ?? 0) + n),
      failed: () => void counted.failures++,
      delivered: (_e: string, n: number) => void (counted.delivered += n),
    },
    log: createLogger({ level: 'debug', format: 'json', write: (l) => lines.push(l) }),
    sleep: () => Promise.resolve(),
    ...overrides,
    counted,
    lines,
  };
}

function spansOf(requestId: string) {
  const t = new RequestTrace(requestId, undefined, ['e'], manualClock());
  t.attempt('initial', { model: '', provider: 'openai' }).settle(200);
  return buildSpans(t, OUTCOME, { exporterName: 'e' });
}

describe('OTLP exporter', () => {
  let rx: OtlpReceiver;
  before(async () => {
    rx = await startOtlpReceiver();
  });
  after(() => rx.close());
  const reset = () => {
    rx.posts.length = 0;
    rx.spans.length = 0;
    rx.invalid.length = 0;
    rx.attempts = 0;
    rx.setMode({ kind: 'ok' });
    rx.failNext(0);
  };

  test('delivers batches of at most 100 records with the configured headers, valid OTLP JSON', async () => {
    reset();
    const deps = exporterDeps();
    const ex = new OtlpExporter({ name: 'e', endpoint: rx.url, headers: { authorization: 'Bearer t' } }, deps);
    for (let i = 0; i < 250; i++) ex.offer(spansOf(`r${i}`));
    await ex.close(5000);
    assert.deepEqual(rx.invalid, []);
    assert.equal(rx.spans.length, 250 * 3);
    assert.deepEqual(rx.posts.map((p) => p.spans.length / 3), [100, 100, 50]);
    assert.equal(rx.posts[0]!.headers.authorization, 'Bearer t');
    assert.match(String(rx.posts[0]!.headers['user-agent']), /^sluice\//);
    assert.equal(deps.counted.delivered, 750);
    assert.ok(deps.lines.some((l) => l.includes('sink pipeline started')));
  });

  test('transient failures are retried (4 times at most) with doubling backoff; then the batch is dropped', async () => {
    reset();
    const waits: number[] = [];
    const deps = exporterDeps({ sleep: (ms) => (waits.push(ms), Promise.resolve()) });
    rx.failNext(2);
    const ex = new OtlpExporter({ name: 'e', endpoint: rx.url, headers: {} }, deps);
    ex.offer(spansOf('a'));
    await ex.flush();
    assert.equal(rx.spans.length, 3);
    assert.deepEqual(waits, [200, 400]);
    assert.equal(deps.counted.failures, 2);
    rx.setMode({ kind: 'status', status: 500 });
    ex.offer(spansOf('b'));
    await ex.flush();
    assert.equal(deps.counted.drops.retries_exhausted, 3);
    assert.deepEqual(waits, [200, 400, 200, 400, 800, 1600]);
    assert.ok(deps.lines.some((l) => l.includes('sink delivery dropped after retries')));
    await ex.close(1000);
  });

  test('a 400 is permanent: dropped at once, never retried', async () => {
    reset();
    const deps = exporterDeps();
    rx.setMode({ kind: 'status', status: 400 });
    const ex = new OtlpExporter({ name: 'e', endpoint: rx.url, headers: {} }, deps);
    ex.offer(spansOf('a'));
    await ex.flush();
    assert.equal(rx.attempts, 1);
    assert.deepEqual(deps.counted.drops, { rejected: 3 });
    await ex.close(1000);
  });

  test('transient statuses', () => {
    for (const s of [500, 502, 503, 504, 408, 429]) assert.equal(transientStatus(s), true, String(s));
    for (const s of [400, 401, 403, 404, 413]) assert.equal(transientStatus(s), false, String(s));
  });

  test('a hanging collector: the queue stays bounded, the overflow is counted, offer never waits', async () => {
    reset();
    rx.setMode({ kind: 'hang' });
    const deps = exporterDeps({
      sleep: (ms, signal) =>
        new Promise((r) => {
          const t = setTimeout(r, ms);
          signal.addEventListener('abort', () => (clearTimeout(t), r()));
        }),
    });
    const ex = new OtlpExporter({ name: 'e', endpoint: rx.url, headers: {} }, deps);
    const t0 = performance.now();
    for (let i = 0; i < 1500; i++) ex.offer(spansOf(`r${i}`));
    const took = performance.now() - t0;
    // 100 went into the hanging POST, 1024 wait, the rest was dropped.
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(ex.queued <= 1024, `queued ${ex.queued}`);
    assert.equal(deps.counted.drops.queue_full, (1500 - 1024 - 100) * 3);
    assert.ok(took < 1000, `offering took ${took} ms`);
    // The drain gives up at its deadline and counts what it could not deliver.
    await ex.close(100);
    assert.equal(deps.counted.drops.shutdown, (1024 + 100) * 3);
    ex.offer(spansOf('late'));
    assert.equal(deps.counted.drops.shutdown, (1024 + 101) * 3);
  });

  test('a refused connection is transient, retried, then counted', async () => {
    const closed = await startOtlpReceiver();
    const url = closed.url;
    await closed.close();
    const deps = exporterDeps();
    const ex = new OtlpExporter({ name: 'e', endpoint: url, headers: {} }, deps);
    ex.offer(spansOf('a'));
    await ex.flush();
    assert.equal(deps.counted.failures, 5);
    assert.deepEqual(deps.counted.drops, { retries_exhausted: 3 });
    await ex.close(100);
  });

  test('Workers: with keepAlive every record is sent at once and the delivery is handed over', async () => {
    reset();
    const handed: Promise<void>[] = [];
    const ex = new OtlpExporter(
      { name: 'e', endpoint: rx.url, headers: {} },
      exporterDeps({ keepAlive: (p) => handed.push(p) }),
    );
    ex.offer(spansOf('a'));
    assert.equal(handed.length, 1);
    await Promise.all(handed);
    assert.equal(rx.spans.length, 3);
  });
});

function exporterConfig(over: Partial<ExporterConfig> = {}): ExporterConfig {
  return {
    name: 'e',
    endpoint: 'http://127.0.0.1:1/v1/traces',
    headers: {},
    sample_rate: 1,
    content_mode: 'metadata_only',
    content_max_bytes: 131072,
    enabled: true,
    ...over,
  };
}

describe('Telemetry', () => {
  let rx: OtlpReceiver;
  before(async () => {
    rx = await startOtlpReceiver();
  });
  after(() => rx.close());

  test('inactive without an enabled exporter: no trace is created', () => {
    const t = new Telemetry(exporterDeps(), undefined);
    assert.equal(t.active, false);
    assert.equal(t.begin('r', new Headers()), undefined);
    t.update([exporterConfig({ enabled: false })]);
    assert.equal(t.active, false);
  });

  test('begin continues an inbound traceparent; end hands spans to each exporter that keeps the request', async () => {
    const t = new Telemetry(exporterDeps(), undefined);
    t.update([
      exporterConfig({ name: 'a', endpoint: rx.url }),
      exporterConfig({ name: 'b', endpoint: rx.url, sample_rate: 0 }),
    ]);
    const trace = t.begin('r1', new Headers({ traceparent: TP }))!;
    assert.deepEqual(trace.exporters, ['a']);
    assert.equal(trace.traceId, '0af7651916cd43dd8448eb211c80319c');
    trace.attempt('initial', { model: '', provider: 'openai' }).settle(200);
    t.end(trace, OUTCOME);
    await t.close(2000);
    assert.equal(rx.spans.length, 3);
    assert.equal(rx.spans[0]!.attrs['aisix.exporter_name'], 'a');
  });

  test('a changed exporter is rebuilt and keeps the queued spans; an unchanged one keeps running', async () => {
    rx.spans.length = 0;
    const t = new Telemetry(exporterDeps(), undefined);
    // A first endpoint that is never reached: the records wait in its queue for the one-second timer.
    t.update([exporterConfig({ endpoint: 'http://127.0.0.1:1/v1/traces' })]);
    for (let i = 0; i < 3; i++) {
      const tr = t.begin(`r${i}`, new Headers())!;
      t.end(tr, OUTCOME);
    }
    assert.deepEqual(t.queued(), { e: 3 });
    t.update([exporterConfig({ endpoint: rx.url })]);
    assert.deepEqual(t.queued(), { e: 3 });
    await t.close(2000);
    assert.equal(rx.spans.length, 3);
  });

  test('content capture is asked for only when a keeping exporter has content_mode full', () => {
    const t = new Telemetry(exporterDeps(), undefined);
    t.update([
      exporterConfig({ name: 'a' }),
      exporterConfig({ name: 'b', content_mode: 'full', content_max_bytes: 10 }),
    ]);
    assert.equal(t.captureBytes(t.begin('r', new Headers())!), 10);
    t.update([exporterConfig({ name: 'a' })]);
    assert.equal(t.captureBytes(t.begin('r', new Headers())!), undefined);
    void t.close(10);
  });

  test('observability.tracing.otlp is the exporter `config`, always present when enabled', () => {
    const t = new Telemetry(exporterDeps(), exporterConfig({ name: 'config' }));
    assert.equal(t.active, true);
    t.update([]);
    assert.deepEqual(Object.keys(t.queued()), ['config']);
    void t.close(10);
  });
});
