// Time to first token (docs/aisix-compatibility.md "Metrics"): it stops at the upstream's first frame, the
// role-only opening chunk of a chat stream, and on a Responses stream translated through chat at the first
// chunk the bridged upstream sent, not at the first Responses event (which waits for text). Through
// app.request() against a real loopback upstream paced by latches, on an injected clock that the test moves
// as the gateway pulls each chunk from the upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import type { UpstreamFetch } from '../../src/platform.ts';
import { sumSamples } from '../support/metrics.ts';
import { BASE_CONFIG, testPlatform } from '../support/platform.ts';
import { type Latch, latch, within } from '../support/until.ts';

const CALLER = 'sk-ttft-caller';
const T0 = Date.UTC(2026, 0, 1, 12);
/** When the upstream's first frame reached the gateway, and when the rest did (ms after the attempt began). */
const FIRST_FRAME_MS = 100;
const REST_MS = 3000;

let now = T0;
/** Released when the gateway asks the upstream for its second read: the first frame was taken in whole. */
let secondRead: Latch = latch();

/** The upstream's body, moving the clock as the gateway pulls it: the first frame at +100 ms, the rest at +3 s. */
function paced(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      let reads = 0;
      return {
        next() {
          reads++;
          if (reads === 1) now = T0 + FIRST_FRAME_MS;
          if (reads === 2) {
            now = T0 + REST_MS;
            secondRead.resolve();
          }
          return it.next();
        },
        return: () => it.return?.() ?? Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'up',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const frame = (v: unknown) => `data: ${JSON.stringify(v)}\n\n`;

let server: http.Server;
let gw: Gateway;
let logs: Record<string, unknown>[];
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  // An OpenAI-wire upstream: the role-only chunk at once, the rest only once the gateway came back for more.
  server = http.createServer(async (req, res) => {
    for await (const _ of req) { /* the request body */ }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(frame(chunk({ role: 'assistant', content: '' })));
    await secondRead.promise;
    res.write(frame(chunk({ content: 'hello' })));
    res.write(frame(chunk({}, 'stop')));
    res.write(frame({ ...chunk({}), choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const upstream = (): UpstreamFetch => {
    const f = fetchUpstream();
    return async (req) => {
      const res = await f(req);
      return { ...res, body: paced(res.body) };
    };
  };
  const platform = { ...testPlatform({ CALLER }), upstream };
  logs = platform.logs;
  const c = loadConfig('/t/config.yaml', BASE_CONFIG, platform.env);
  if (!c.ok) throw new Error(c.report.format());
  gw = new Gateway(c.config, platform, { clock: () => now });
  const r = await loadResourcesFile(
    '/t/resources.yaml',
    `_format_version: "1"
provider_keys:
  - { display_name: ds, provider: deepseek, adapter: openai, api_key: k-ds, api_base: "${base}" }
models:
  - { display_name: deep, provider_key: ds, model_name: deep-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
    platform.env,
  );
  if (!r.ok) throw new Error(r.report.format());
  gw.apply(r.snapshot, { configHash: 'ttft' });
  gw.lifecycle.serve();
  app = createProxyApp(gw);
});

after(async () => {
  gw.stop();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** The TTFT the families and the access log recorded for one streamed request to `path`. */
async function ttftOf(path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  now = T0;
  secondRead = latch();
  const endpoint = { endpoint: path, model: 'deep' };
  const render = () => gw.metrics.render();
  const sums = () => [
    sumSamples(render(), 'aisix_request_ttft_seconds_sum', endpoint) ?? 0,
    sumSamples(render(), 'aisix_llm_time_to_first_token_seconds_sum', endpoint) ?? 0,
  ];
  const before = sums();
  const res = await app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'deep', stream: true, ...body }),
  });
  assert.equal(res.status, 200);
  const text = await within(res.text(), 10_000, 'the whole stream');
  assert.match(text, /hello/);
  const log = logs.filter((l) => l.msg === 'proxy request completed').at(-1)!;
  const [histogram, summary] = sums().map((v, i) => Math.round((v - before[i]!) * 1000));
  // The access log's `ttft_ms` is the caller's wait for its first byte, `latency_ms` the whole stream.
  return { histogram, summary, callerFirstByte: log.ttft_ms, latency: log.latency_ms };
}

describe('time to first token', () => {
  test('a chat stream: at the role-only opening chunk', async () => {
    const got = await ttftOf('/v1/chat/completions', { messages: [{ role: 'user', content: 'q' }] });
    assert.deepEqual(got, { histogram: 100, summary: 100, callerFirstByte: 100, latency: 3000 });
  });

  test('a Responses stream translated through chat: at the bridged upstream first chunk, not the first event', async () => {
    const got = await ttftOf('/v1/responses', { input: 'q' });
    // The caller's first byte (`response.created`) waits for the text; the upstream's first frame did not.
    assert.deepEqual(got, { histogram: 100, summary: 100, callerFirstByte: 3000, latency: 3000 });
  });
});
