// Trace export on Cloudflare Workers (docs/operations.md "Tracing"), black-box under `wrangler dev --local`
// (workerd, offline): a Worker whose bundled resources name a mock upstream and an OTLP receiver on loopback.
// workerd's own fetch carries each delivery, kept alive by the request's `waitUntil`; the receiver gets the
// span tree of a JSON and of a streamed chat, and the upstream got the attempt span as its parent.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { startWranglerDev, type WranglerDev } from '../support/wrangler-dev.ts';
import { until } from '../support/until.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const CALLER_KEY = 'sk-caller-SECRET-7a21';

describe('trace export on Workers (wrangler dev --local, workerd)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'sluice-workers-traces-'));
  let upstream: MockUpstream;
  let rx: OtlpReceiver;
  let worker: WranglerDev;

  before(async () => {
    [upstream, rx] = await Promise.all([startMockUpstream(), startOtlpReceiver()]);
    const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(
      readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'),
    )?.[1];
    assert.ok(compatibilityDate, 'wrangler.toml has a compatibility_date');
    const bundle = {
      configPath: 'bundle/config.yaml',
      files: {
        'bundle/config.yaml':
          'resources_file: resources.yaml\nproxy: { addr: "0.0.0.0:8787" }\nadmin: { enabled: false }\n',
        'bundle/resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: up, provider: openai, api_base: "${upstream.base}", api_key: sk-up-1 }
models:
  - { display_name: m, model_name: up-model, provider_key: up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
observability_exporters:
  - { name: edge, kind: otlp_http, endpoint: "${rx.url}" }
`,
      },
    };
    writeFileSync(
      join(scratch, 'worker.ts'),
      `import { createWorker } from ${JSON.stringify(join(ROOT, 'runtimes/workers-handler.ts'))};
export default createWorker(${JSON.stringify(bundle)});
`,
    );
    writeFileSync(
      join(scratch, 'wrangler.toml'),
      `name = "sluice-test-traces"\nmain = "worker.ts"\ncompatibility_date = "${compatibilityDate}"\n`,
    );
    worker = await startWranglerDev(['--var', `CALLER_KEY:${CALLER_KEY}`], scratch, join(scratch, 'state'));
  });

  after(async () => {
    await worker?.stop();
    await Promise.all([upstream?.close(), rx?.close()]);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** One chat through the Worker; its spans once the receiver has all three (SERVER, logical, attempt). */
  const traced = async (stream: boolean, headers: Record<string, string> = {}) => {
    const n = upstream.requests.length;
    const res = await worker.fetch('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: 'hi from the edge' }] }),
    });
    assert.equal(res.status, 200);
    await res.text();
    const id = res.headers.get('x-aisix-request-id');
    const mine = () => rx.spans.filter((s) => s.attrs['aisix.request_id'] === id);
    await until(
      () => mine().length >= 3,
      15_000,
      () => `3 spans of ${id} (have ${mine().length}; ${worker.output.join('\n')})`,
    );
    return { spans: mine(), upstreamGot: upstream.requests[n]! };
  };

  const assertTree = (spans: ReceivedSpan[]) => {
    const [server, logical, attempt] = spans as [ReceivedSpan, ReceivedSpan, ReceivedSpan];
    assert.deepEqual(spans.map((s) => s.kind), [2, 3, 3]);
    assert.equal(new Set(spans.map((s) => s.traceId)).size, 1);
    assert.equal(logical.parentSpanId, server.spanId);
    assert.equal(attempt.parentSpanId, logical.spanId);
    assert.equal(attempt.attrs['gen_ai.request.model'], 'm');
    assert.equal(attempt.attrs['gen_ai.provider.name'], 'openai');
    assert.equal(attempt.attrs['server.address'], '127.0.0.1');
    assert.equal(attempt.resource['service.name'], 'aisix-dp');
    for (const s of spans) assert.equal(s.status, 1);
    assert.deepEqual(rx.invalid, [], 'every POST is valid OTLP JSON');
  };

  test('a JSON chat: the span tree arrives, the caller trace continued, the upstream joined it', async () => {
    const { spans, upstreamGot } = await traced(false, {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    assertTree(spans);
    assert.equal(spans[0]!.traceId, '0af7651916cd43dd8448eb211c80319c');
    assert.equal(spans[0]!.parentSpanId, 'b7ad6b7169203331');
    assert.equal(upstreamGot.headers.traceparent, `00-0af7651916cd43dd8448eb211c80319c-${spans[2]!.spanId}-01`);
    assert.deepEqual(spans[2]!.attrs['gen_ai.response.finish_reasons'], ['stop']);
  });

  test("a streamed chat: its spans are sent when the stream ends, in that request's waitUntil", async () => {
    const last = { ...chunk('up-model', ''), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] };
    upstream.script({ sse: [chunk('up-model', 'a'), chunk('up-model', 'b'), last], chunkDelayMs: 5 });
    const { spans } = await traced(true);
    assertTree(spans);
    assert.deepEqual(spans[2]!.attrs['gen_ai.response.finish_reasons'], ['stop']);
    assert.equal(typeof spans[2]!.attrs['aisix.upstream_ttft_ms'], 'number');
  });
});
