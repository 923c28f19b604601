// Request ids, provider response ids and per-attempt records in the logs and traces (docs/aisix-compatibility.md
// "Logs"): refusals before dispatch still write `proxy request completed`; the provider's response id joins the
// request id on the access log and on AISIX's `provider call completed` line; a caller's id is the id end to
// end; each attempt of a failover is its own span; upstream and downstream latency are separate figures.
// Through app.request() against real mock upstreams and a real OTLP receiver, the log sink captured.
// Run: node --import tsx --test test/unit/request-logs.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { PROVIDER_CALL_LAYOUT, PROVIDER_CALL_TARGET } from '../../src/proxy/record.ts';
import {
  anthropicEvents,
  anthropicMessage,
  type MockAnthropic,
  startMockAnthropic,
} from '../support/mock-anthropic.ts';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';

const KEY = 'sk-logs-caller';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const LIMIT = 1024;
const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0", request_body_limit_bytes: ${LIMIT} }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;
const MSGS = [{ role: 'user', content: 'hi' }];

function resources(openaiBase: string, anthropicUrl: string, otlpUrl: string, guardrail = ''): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicUrl}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0 }
  - { display_name: gpt-b, provider_key: oa, model_name: gpt-b-up, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-up, retries: 0 }
  - { display_name: "oa/*", provider_key: oa, model_name: "*", retries: 0 }
  - { display_name: group, routing: { strategy: failover, targets: [{ model: gpt }, { model: gpt-b }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
observability_exporters:
  - { name: t, kind: otlp_http, endpoint: "${otlpUrl}" }
${guardrail}`;
}

let mock: MockUpstream;
let anth: MockAnthropic;
let rx: OtlpReceiver;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  mock = await startMockUpstream();
  anth = await startMockAnthropic();
  rx = await startOtlpReceiver();
  ({ gw, platform } = await gatewayWith(resources(mock.base, anth.url, rx.url), {
    config: CONFIG,
    env: { CALLER: KEY },
  }));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await mock.close();
  await anth.close();
  await rx.close();
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}, on = app) =>
  on.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
const linesOf = (msg: string, id: string | null, logs = platform.logs) =>
  logs.filter((l) => l.msg === msg && l.request_id === id);
const access = (id: string | null, logs = platform.logs) => linesOf('proxy request completed', id, logs);
const calls = (id: string | null, logs = platform.logs) => linesOf('provider call completed', id, logs);
/** A log line without its timestamp (the only field a test cannot know). */
const shape = (l: Record<string, unknown>) => {
  const { time: _time, ...rest } = l;
  return rest;
};

describe('requests refused before dispatch', () => {
  test('a declared length over the limit: 413, and its access-log line with the request id and status', async () => {
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': String(LIMIT + 1),
        'x-aisix-request-id': 'big-declared',
      },
      body: 'x'.repeat(LIMIT + 1),
    });
    assert.equal(res.status, 413);
    assert.equal(res.headers.get('x-aisix-request-id'), 'big-declared');
    await res.text();
    assert.deepEqual(access('big-declared').map(shape), [{
      level: 'INFO',
      target: 'aisix_obs::access_log',
      msg: 'proxy request completed',
      method: 'POST',
      path: '/v1/chat/completions',
      status: 413,
      latency_ms: access('big-declared')[0]!.latency_ms as number,
      request_id: 'big-declared',
      error_kind: 'invalid_request_error',
      error: `request body exceeds ${LIMIT}-byte limit`,
    }]);
    assert.deepEqual(calls('big-declared'), []);
  });

  test('a chunked body over the limit: 413 after authentication, logged with the caller key', async () => {
    const enc = new TextEncoder();
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        'x-aisix-request-id': 'big-chunked',
      },
      body: new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < 4; i++) c.enqueue(enc.encode('y'.repeat(LIMIT / 2)));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
    assert.equal(res.headers.get('x-aisix-request-id'), 'big-chunked');
    await res.text();
    const [line, ...more] = access('big-chunked');
    assert.deepEqual(more, []);
    assert.equal(line!.status, 413);
    assert.equal(line!.error_kind, 'invalid_request_error');
    assert.equal(line!.error, `request body exceeds ${LIMIT}-byte limit`);
    assert.equal(typeof line!.api_key_id, 'string');
    assert.deepEqual(calls('big-chunked'), []);
  });
});

describe("the provider's response id", () => {
  test('a JSON answer: on the provider-call line, then on the access-log line; the transport header is neither', async () => {
    mock.script({
      body: { ...chatCompletion('gpt-up-2024'), id: 'chatcmpl-json-1' },
      headers: { 'x-request-id': 'req_transport_1' },
    });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS });
    assert.equal(res.status, 200);
    await res.text();
    const id = res.headers.get('x-aisix-request-id');
    const [call] = calls(id);
    assert.deepEqual(shape(call!), {
      level: 'INFO',
      target: 'aisix_obs::usage',
      msg: 'provider call completed',
      request_id: id,
      provider_request_id: 'chatcmpl-json-1',
      attempt_index: 0,
      attempt_kind: 'initial',
      handler: 'chat',
      status: 200,
      requested_model: 'gpt',
      provider_model_version: 'gpt-up',
      upstream_latency_ms: call!.upstream_latency_ms,
      ...(call!.downstream_latency_ms === undefined ? {} : { downstream_latency_ms: call!.downstream_latency_ms }),
    });
    assert.equal(typeof call!.upstream_latency_ms, 'number');
    const [line] = access(id);
    assert.equal(line!.provider_request_id, 'chatcmpl-json-1');
    // AISIX's order: the provider-call line first (its usage event), then the access log.
    assert.ok(platform.logs.indexOf(call!) < platform.logs.indexOf(line!));
    assert.ok(!JSON.stringify(platform.logs.filter((l) => l.request_id === id)).includes('req_transport_1'));
  });

  test('a stream: the provider-call line at its end, with the attempt-scoped latency', async () => {
    mock.script({
      sse: [{ ...chunk('gpt-up', 'a'), id: 'chatcmpl-s-1' }, { ...chunk('gpt-up', 'b'), id: 'chatcmpl-s-1' }],
      chunkDelayMs: 40,
    });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS, stream: true });
    const id = res.headers.get('x-aisix-request-id');
    assert.deepEqual(calls(id), [], 'nothing before the stream ended');
    await res.text();
    const [call, ...more] = calls(id);
    assert.deepEqual(more, []);
    assert.equal(call!.provider_request_id, 'chatcmpl-s-1');
    assert.equal(call!.handler, 'chat');
    assert.equal(call!.attempt_kind, 'initial');
    assert.equal(call!.status, 200);
    // Scoped to the attempt, measured to the stream's end: both chunks' delays are in it.
    assert.ok((call!.upstream_latency_ms as number) >= 75, String(call!.upstream_latency_ms));
  });

  test('/v1/responses, JSON and streamed, and native /v1/messages streamed: handler and id per path', async () => {
    mock.script({ body: { id: 'resp_json_1', object: 'response', model: 'gpt-up', output: [] } });
    const json = await post('/v1/responses', { model: 'gpt', input: 'hi' });
    await json.text();
    const jsonId = json.headers.get('x-aisix-request-id');
    assert.deepEqual(calls(jsonId).map((l) => [l.handler, l.provider_request_id]), [['responses', 'resp_json_1']]);
    assert.equal(access(jsonId)[0]!.provider_request_id, 'resp_json_1');

    mock.script({
      sse: [
        { type: 'response.created', response: { id: 'resp_sse_1', object: 'response', model: 'gpt-up' } },
        { type: 'response.completed', response: { id: 'resp_sse_1', object: 'response', model: 'gpt-up' } },
      ],
    });
    const sse = await post('/v1/responses', { model: 'gpt', input: 'hi', stream: true });
    await sse.text();
    const sseId = sse.headers.get('x-aisix-request-id');
    assert.deepEqual(calls(sseId).map((l) => [l.handler, l.provider_request_id]), [['responses', 'resp_sse_1']]);

    anth.script({ events: anthropicEvents('claude-up') });
    const msg = await post('/v1/messages', { model: 'claude', max_tokens: 8, messages: MSGS, stream: true });
    await msg.text();
    const msgId = msg.headers.get('x-aisix-request-id');
    assert.deepEqual(calls(msgId).map((l) => [l.handler, l.provider_request_id]), [['messages', 'msg_mock']]);
  });

  test('a wildcard hit: the model as the caller wrote it, and the upstream name it was sent as', async () => {
    mock.script({ body: { ...chatCompletion('gpt-x'), id: 'chatcmpl-wild' } });
    const res = await post('/v1/chat/completions', { model: 'oa/gpt-x', messages: MSGS });
    assert.equal(res.status, 200);
    await res.text();
    const [call] = calls(res.headers.get('x-aisix-request-id'));
    assert.deepEqual([call!.requested_model, call!.provider_model_version], ['oa/gpt-x', 'gpt-x']);
  });

  test('no line where the answer has no id', async () => {
    mock.script({
      body: { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1] }], model: 'gpt-up' },
    });
    const res = await post('/v1/embeddings', { model: 'gpt', input: 'x' });
    assert.equal(res.status, 200);
    await res.text();
    const id = res.headers.get('x-aisix-request-id');
    assert.equal(access(id).length, 1);
    assert.deepEqual(calls(id), []);
  });
});

describe("the caller's request id", () => {
  test('is the id of the response, the upstream call, both log lines and every span', async () => {
    const n = mock.requests.length;
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS }, {
      'x-aisix-request-id': 'mine-e2e-1',
    });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(res.headers.get('x-aisix-request-id'), 'mine-e2e-1');
    assert.equal(mock.requests[n]!.headers['x-aisix-request-id'], 'mine-e2e-1');
    assert.equal(access('mine-e2e-1').length, 1);
    assert.equal(calls('mine-e2e-1').length, 1);
    await gw.telemetry.flush();
    const spans = rx.spans.filter((s) => s.attrs['aisix.request_id'] === 'mine-e2e-1');
    assert.deepEqual(spans.map((s) => s.kind), [2, 3, 3]);
  });

  test("is also a chat success's `x-aisix-call-id`, JSON and streamed; not an error's, not another endpoint's", async () => {
    const json = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS }, { 'x-aisix-request-id': 'c-1' });
    await json.text();
    assert.equal(json.headers.get('x-aisix-call-id'), 'c-1');
    const sse = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS, stream: true }, {
      'x-aisix-request-id': 'c-2',
    });
    await sse.text();
    assert.equal(sse.headers.get('x-aisix-call-id'), 'c-2');
    mock.script({ status: 400, body: { error: { message: 'bad', type: 'invalid_request_error' } } });
    const failed = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS }, {
      'x-aisix-request-id': 'c-3',
    });
    await failed.text();
    assert.equal(failed.status, 400);
    assert.equal(failed.headers.get('x-aisix-request-id'), 'c-3');
    assert.equal(failed.headers.get('x-aisix-call-id'), null);
    anth.script({ body: anthropicMessage('claude-up') });
    const msg = await post('/v1/messages', { model: 'claude', max_tokens: 8, messages: MSGS });
    await msg.text();
    assert.equal(msg.status, 200);
    assert.equal(msg.headers.get('x-aisix-call-id'), null);
  });

  test('without one, chat, embeddings and messages send the minted UUID upstream', async () => {
    const sent: [string, unknown, string | null][] = [];
    let n = mock.requests.length;
    const chat = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS });
    await chat.text();
    sent.push(['chat', mock.requests[n]!.headers['x-aisix-request-id'], chat.headers.get('x-aisix-request-id')]);
    n = mock.requests.length;
    mock.script({
      body: { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1] }], model: 'gpt-up' },
    });
    const emb = await post('/v1/embeddings', { model: 'gpt', input: 'x' });
    await emb.text();
    sent.push(['embeddings', mock.requests[n]!.headers['x-aisix-request-id'], emb.headers.get('x-aisix-request-id')]);
    const a = anth.requests.length;
    anth.script({ body: anthropicMessage('claude-up') });
    const msg = await post('/v1/messages', { model: 'claude', max_tokens: 8, messages: MSGS });
    await msg.text();
    sent.push(['messages', anth.requests[a]!.headers['x-aisix-request-id'], msg.headers.get('x-aisix-request-id')]);
    for (const [what, upstream, answered] of sent) {
      assert.match(String(upstream), UUID, what);
      assert.equal(upstream, answered, what);
    }
    assert.equal(new Set(sent.map((s) => s[1])).size, 3);
  });
});

describe('attempts', () => {
  test('a failover of two attempts: two attempt records sharing the request id, each naming its own target', async () => {
    mock.script({ status: 500 }, { body: { ...chatCompletion('gpt-b-up'), id: 'chatcmpl-won' } });
    const res = await post('/v1/chat/completions', { model: 'group', messages: MSGS });
    assert.equal(res.status, 200);
    await res.text();
    const id = res.headers.get('x-aisix-request-id')!;
    await gw.telemetry.flush();
    const attempts = rx.spans.filter((s) => s.attrs['aisix.request_id'] === id && 'aisix.attempt_index' in s.attrs);
    assert.deepEqual(
      attempts.map((
        s,
      ) => [s.attrs['aisix.attempt_index'], s.attrs['aisix.attempt_kind'], s.attrs['aisix.attempt_model']]),
      [[0, 'initial', 'gpt'], [1, 'fallback', 'gpt-b']],
    );
    assert.deepEqual(attempts.map((s) => s.attrs['http.response.status_code']), [500, 200]);
    const [failed, won] = attempts.map((s) => s.attrs['aisix.model_id']);
    assert.equal(typeof failed, 'string');
    assert.notEqual(failed, won, "each attempt's aisix.model_id is its own target's");
    // The log's record of the call that answered: the second attempt, a fallback.
    assert.deepEqual(
      calls(id).map((l) => [l.attempt_index, l.attempt_kind, l.provider_request_id, l.provider_model_version]),
      [[1, 'fallback', 'chatcmpl-won', 'gpt-b-up']],
    );
    assert.equal(access(id)[0]!.routing_attempt_count, 2);
  });
});

describe('upstream and downstream latency', () => {
  let held: Gateway;
  let heldLogs: TestPlatform;
  let heldApp: ReturnType<typeof createProxyApp>;
  before(async () => {
    ({ gw: held, platform: heldLogs } = await gatewayWith(
      resources(
        mock.base,
        anth.url,
        rx.url,
        `guardrails:
  - { name: words, kind: keyword, created_at: "2024-01-01T00:00:00Z", patterns: [{ kind: literal, value: forbidden }] }
`,
      ),
      { config: CONFIG, env: { CALLER: KEY } },
    ));
    heldApp = createProxyApp(held);
  });
  after(() => held.stop());

  test('an answer a guardrail refused has no provider-call line', async () => {
    mock.script({ body: { ...chatCompletion('gpt-up', 'a forbidden word'), id: 'chatcmpl-blocked' } });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS }, {}, heldApp);
    assert.equal(res.status, 422);
    await res.text();
    const id = res.headers.get('x-aisix-request-id');
    assert.equal(access(id, heldLogs.logs).length, 1);
    assert.deepEqual(calls(id, heldLogs.logs), []);
  });

  test('differ when an output guardrail holds a stream back; the winner is emitted at the stream end', async () => {
    mock.script({
      sse: [chunk('gpt-up', 'a'), chunk('gpt-up', 'b'), chunk('gpt-up', 'c'), chunk('gpt-up', 'd')],
      chunkDelayMs: 100,
    });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MSGS, stream: true }, {}, heldApp);
    const id = res.headers.get('x-aisix-request-id')!;
    await held.telemetry.flush();
    assert.deepEqual(rx.spans.filter((s) => s.attrs['aisix.request_id'] === id), [], 'nothing before the end');
    await res.text();
    const [call] = calls(id, heldLogs.logs);
    const up = (call!.upstream_ttft_ms as number | undefined) ?? 0; // omitted when under a millisecond
    const down = call!.downstream_latency_ms as number;
    const attempt = call!.upstream_latency_ms as number;
    // Four chunks 100 ms apart: the caller waited for all of them, the upstream's first came at once.
    assert.ok(down - up >= 250, `downstream_latency_ms ${down}, upstream_ttft_ms ${up}`);
    assert.ok(attempt >= 300, `upstream_latency_ms ${attempt}`);
    await held.telemetry.flush();
    const spans = rx.spans.filter((s) => s.attrs['aisix.request_id'] === id);
    const winner = spans.find((s) => s.attrs['aisix.attempt_index'] === 0)!;
    // The span's clock is the trace's own: the same figure within a millisecond's rounding.
    assert.ok(Math.abs(Number(winner.attrs['aisix.upstream_ttft_ms'] ?? 0) - up) <= 2);
    assert.equal(winner.attrs['aisix.downstream_latency_ms'], down);
    // The winner's span is scoped to its attempt and lasts to the stream's end.
    assert.ok(Number(winner.end - winner.start) / 1e6 >= 300);
  });
});

describe('the provider-call line (golden)', () => {
  test("AISIX's text shape: target, message, fields in its order, then the attempt's latency figures", () => {
    const lines: string[] = [];
    const at = new Date('2026-03-04T05:06:07.089Z');
    const log = createLogger({ level: 'info', format: 'text', write: (l) => lines.push(l), clock: () => at.getTime() });
    log.withTarget(PROVIDER_CALL_TARGET).logLine('info', 'provider call completed', PROVIDER_CALL_LAYOUT, [
      'req-1',
      'chatcmpl-abc',
      0,
      'initial',
      'chat',
      200,
      'gpt',
      'gpt-up',
      12,
      undefined,
      15,
    ]);
    assert.deepEqual(lines, [
      '2026-03-04T05:06:07.089000Z  INFO aisix_obs::usage: provider call completed request_id="req-1" ' +
      'provider_request_id="chatcmpl-abc" attempt_index=0 attempt_kind="initial" handler="chat" status=200 ' +
      'requested_model="gpt" provider_model_version="gpt-up" upstream_latency_ms=12 downstream_latency_ms=15',
    ]);
  });
});
