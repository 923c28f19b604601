// Upstream answers the gateway refuses to pass on, through app.request() against real loopback upstreams
// (docs/operations.md "Limits and failure behaviour"): a stream request answered 2xx with something other than
// `text/event-stream` fails over before the first byte and is a 502 in the caller's envelope; answers read
// whole beyond `upstream.max_buffered_response_bytes` together fail with 503 and do not charge the model.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, testPlatform } from '../support/platform.ts';

const CALLER = 'sk-caller-answers-SECRET-1';
const MESSAGES = [{ role: 'user', content: 'hello there' }];

/** A Gateway whose upstream client applies the configured answer limits (the test platform's ignores them). */
async function gateway(resources: string, config = ''): Promise<Gateway> {
  const platform = { ...testPlatform({ CALLER }), upstream: fetchUpstreamWithLimits };
  const c = loadConfig('/t/config.yaml', BASE_CONFIG + config, platform.env);
  if (!c.ok) throw new Error(c.report.format());
  const gw = new Gateway(c.config, platform);
  const r = await loadResourcesFile('/t/resources.yaml', resources, platform.env);
  if (!r.ok) throw new Error(r.report.format());
  gw.apply(r.snapshot, { configHash: 'test' });
  gw.lifecycle.serve();
  return gw;
}

function fetchUpstreamWithLimits(o: { maxResponseBytes?: number; maxBufferedBytes?: number }) {
  return fetchUpstream(fetch, o);
}

function post(gw: Gateway, path: string, body: Record<string, unknown>): Promise<Response> {
  return Promise.resolve(
    createProxyApp(gw).request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
}

describe('a stream request answered 2xx without text/event-stream', () => {
  let a: MockUpstream;
  let b: MockUpstream;
  let gw: Gateway;
  before(async () => {
    [a, b] = await Promise.all([startMockUpstream(), startMockUpstream()]);
    gw = await gateway(`_format_version: "1"
provider_keys:
  - { display_name: pa, provider: openai, api_key: sk-up-a, api_base: ${a.base} }
  - { display_name: pb, provider: openai, api_key: sk-up-b, api_base: ${b.base} }
models:
  - { display_name: m-a, provider_key: pa, model_name: up-a }
  - { display_name: m-a2, provider_key: pa, model_name: up-a2 }
  - { display_name: m-b, provider_key: pb, model_name: up-b, retries: 0 }
  - { display_name: pair, routing: { targets: [{ model: m-a2 }, { model: m-b }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`);
  });
  after(async () => {
    await gw.stop();
    await Promise.all([a.close(), b.close()]);
  });

  test('is a 502 upstream_error in the OpenAI envelope, not relayed, and not retried on the same target', async () => {
    const n = a.requests.length;
    a.script({ body: { id: 'x', object: 'chat.completion', choices: [] } });
    const res = await post(gw, '/v1/chat/completions', { model: 'm-a', messages: MESSAGES, stream: true });
    assert.equal(res.status, 502);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(await res.json(), {
      error: {
        message: 'upstream answered 200 to a stream request with content-type application/json, not text/event-stream',
        type: 'upstream_error',
      },
    });
    assert.equal(a.requests.length - n, 1, 'the same answer would come back: no retry');
  });

  test('an answer without a content type is refused the same way; on /v1/messages in the Anthropic envelope', async () => {
    a.script({ body: 'data: {}\n\n', headers: { 'content-type': '' } });
    const res = await post(gw, '/v1/messages', {
      model: 'm-a',
      max_tokens: 16,
      messages: MESSAGES,
      stream: true,
    });
    assert.equal(res.status, 502);
    const body = await res.json() as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, 'api_error');
    assert.match(
      body.error.message,
      /^upstream answered 200 to a stream request with (no content-type|content-type ), not/,
    );
  });

  test('fails over before the first byte: the next target streams the answer', async () => {
    const [na, nb] = [a.requests.length, b.requests.length];
    a.script({ body: { id: 'x', object: 'chat.completion', choices: [] } });
    const res = await post(gw, '/v1/chat/completions', { model: 'pair', messages: MESSAGES, stream: true });
    assert.equal(res.status, 200);
    assert.deepEqual([a.requests.length - na, b.requests.length - nb], [1, 1]);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    // The caller's model name is in the chunks; the serving target is named in x-aisix-served-by.
    assert.equal(res.headers.get('x-aisix-served-by'), 'm-b');
    const text = await res.text();
    assert.match(text, /"model":"pair"/);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });

  test('text/event-stream with parameters and in capitals is a stream', async () => {
    a.script({
      sse: [{ id: 'c', object: 'chat.completion.chunk', model: 'up-a', choices: [] }],
      headers: { 'content-type': 'Text/Event-Stream; charset=utf-8' },
    });
    const res = await post(gw, '/v1/chat/completions', { model: 'm-a', messages: MESSAGES, stream: true });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /"model":"m-a"/);
  });
});

describe('upstream.max_buffered_response_bytes', () => {
  /** Answers 700,000 bytes of a chat.completion, 600,000 of them at once, the rest after a hold. */
  let server: http.Server;
  let base: string;
  let hits = 0;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let gw: Gateway;
  before(async () => {
    const head = '{"id":"big","object":"chat.completion","choices":[{"message":{"content":"';
    const tail = '"}}]}';
    const filler = 'a'.repeat(700_000 - head.length - tail.length);
    server = http.createServer(async (req, res) => {
      for await (const _ of req) { /* drain the body */ }
      hits++;
      res.writeHead(200, { 'content-type': 'application/json' }); // chunked: no declared length
      res.write(head + filler.slice(0, 600_000));
      await held;
      res.end(filler.slice(600_000) + tail);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    gw = await gateway(
      `_format_version: "1"
provider_keys:
  - { display_name: big, provider: openai, api_key: sk-up, api_base: ${base} }
models:
  - { display_name: m-big, provider_key: big, model_name: up-big }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      'upstream: { max_buffered_response_bytes: 1000000 }\n',
    );
  });
  after(async () => {
    release();
    await gw.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('two 700 KB answers read at once under a 1 MB budget: one is a 503 at once, the other is whole', async () => {
    const answers = [1, 2].map(() => post(gw, '/v1/chat/completions', { model: 'm-big', messages: MESSAGES }));
    // Neither upstream finishes before one caller has its answer: that one was refused for want of room.
    const first = await Promise.race(answers);
    release();
    assert.equal(first.status, 503);
    assert.equal(first.headers.get('retry-after'), '1');
    assert.deepEqual(await first.json(), {
      error: {
        message:
          'the gateway is holding its limit of 1000000 bytes of upstream answers (upstream.max_buffered_response_bytes); retry shortly',
        type: 'service_unavailable',
      },
    });
    const all = await Promise.all(answers);
    const whole = all.find((r) => r !== first)!;
    assert.equal(whole.status, 200);
    // The upstream's 700,000 bytes whole, plus the caller's model name the chat answer gains.
    assert.equal((await whole.text()).length, 700_000 + ',"model":"m-big"'.length);
    assert.equal(hits, 2, 'a refusal for room is not retried');
    const model = gw.snapshot!.modelByName('m-big')!;
    assert.equal(gw.health.consecutiveFailures(model.id), 0, "the gateway's own limit does not charge the model");
    // The budget is free again: the next answer fits.
    const again = await post(gw, '/v1/chat/completions', { model: 'm-big', messages: MESSAGES });
    assert.equal(again.status, 200);
  });
});
