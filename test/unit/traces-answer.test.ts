// What a traced request's spans say about its answer (docs/operations.md "Tracing"), through app.request()
// to a real OTLP receiver: `gen_ai.response.finish_reasons` from the answer the caller got, on every wire and
// in JSON and streams; a response-cache hit as its SERVER span alone with the cache's decision on it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { gatewayWith } from '../support/platform.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { anthropicEvents, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';

const KEY = 'sk-caller-traces-answer-1';

describe('a traced answer', () => {
  let mock: MockUpstream;
  let claude: MockAnthropic;
  let rx: OtlpReceiver;
  let gw: Gateway;
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    [mock, claude, rx] = await Promise.all([startMockUpstream(), startMockAnthropic(), startOtlpReceiver()]);
    ({ gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-up-1, api_base: "${mock.base}" }
  - { display_name: ant, provider: anthropic, api_key: sk-up-2, api_base: "${claude.url}" }
models:
  - { display_name: m, model_name: up, provider_key: oai, retries: 0 }
  - { display_name: c, model_name: claude-up, provider_key: ant, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
observability_exporters:
  - { name: t, kind: otlp_http, endpoint: "${rx.url}" }
`,
      { env: { CALLER: KEY } },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    await gw.telemetry.close(1000);
    gw.stop();
    await Promise.all([mock.close(), claude.close(), rx.close()]);
  });

  /** The request's spans once delivered, SERVER first. */
  const call = async (path: string, body: Record<string, unknown>): Promise<ReceivedSpan[]> => {
    const res = await app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.text();
    await gw.telemetry.flush();
    const id = res.headers.get('x-aisix-request-id');
    return rx.spans.filter((s) => s.attrs['aisix.request_id'] === id);
  };
  const messages = [{ role: 'user', content: 'hi' }];
  /** The serving attempt's span: the last one (carrier of the event set). */
  const reasons = (spans: ReceivedSpan[]) => spans.at(-1)!.attrs['gen_ai.response.finish_reasons'];

  test('chat: a JSON answer and a stream give their finish_reason; only the serving attempt carries it', async () => {
    const json = await call('/v1/chat/completions', { model: 'm', messages });
    assert.deepEqual(json.map((s) => s.kind), [2, 3, 3]);
    assert.deepEqual(reasons(json), ['stop']);
    assert.equal(json[0]!.attrs['gen_ai.response.finish_reasons'], undefined);
    assert.equal(json[1]!.attrs['gen_ai.response.finish_reasons'], undefined);
    const last = { ...chunk('up', ''), choices: [{ index: 0, delta: {}, finish_reason: 'length' }] };
    mock.script({ sse: [chunk('up', 'a'), last] });
    assert.deepEqual(reasons(await call('/v1/chat/completions', { model: 'm', stream: true, messages })), ['length']);
  });

  test('completions: the choice finish_reason, JSON and stream', async () => {
    const completion = (finish: string | null, text = 'x') => ({
      id: 'cmpl-1',
      object: 'text_completion',
      created: 1,
      model: 'up',
      choices: [{ index: 0, text, finish_reason: finish }],
    });
    mock.script({
      body: { ...completion('length'), usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
    });
    assert.deepEqual(reasons(await call('/v1/completions', { model: 'm', prompt: 'hi' })), ['length']);
    mock.script({ sse: [completion(null, 'a'), completion('stop', '')] });
    assert.deepEqual(reasons(await call('/v1/completions', { model: 'm', prompt: 'hi', stream: true })), ['stop']);
  });

  test("messages: Anthropic's stop_reason, JSON and stream (message_start's null is not one)", async () => {
    assert.deepEqual(reasons(await call('/v1/messages', { model: 'c', max_tokens: 5, messages })), ['end_turn']);
    const events = anthropicEvents('claude-up').map(([name, data]): [string, unknown] =>
      name === 'message_delta' ? [name, { ...(data as object), delta: { stop_reason: 'max_tokens' } }] : [name, data]
    );
    claude.script({ events });
    assert.deepEqual(
      reasons(await call('/v1/messages', { model: 'c', max_tokens: 5, stream: true, messages })),
      ['max_tokens'],
    );
  });

  test("chat answered by Anthropic: the caller's wire's reason (translated), JSON and stream", async () => {
    assert.deepEqual(reasons(await call('/v1/chat/completions', { model: 'c', messages })), ['stop']);
    assert.deepEqual(reasons(await call('/v1/chat/completions', { model: 'c', stream: true, messages })), ['stop']);
  });

  test('embeddings: no finish reason', async () => {
    mock.script({
      body: {
        object: 'list',
        model: 'up',
        data: [{ index: 0, embedding: [0.5] }],
        usage: { prompt_tokens: 1, total_tokens: 1 },
      },
    });
    const spans = await call('/v1/embeddings', { model: 'm', input: 'hi' });
    assert.equal(spans.length, 3);
    for (const s of spans) assert.equal(s.attrs['gen_ai.response.finish_reasons'], undefined);
  });
});

describe('a traced response-cache hit', () => {
  test('the miss goes upstream with aisix.cache_status miss; the hit is its SERVER span alone, marked', async () => {
    const rx = await startOtlpReceiver();
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: local, provider: echo }]
models:
  - { display_name: e, model_name: echo-1, provider_key: local }
api_keys: [{ display_name: caller, key_env: CALLER, allowed_models: ["*"] }]
cache_policies: [{ name: main }]
observability_exporters:
  - { name: t, kind: otlp_http, endpoint: "${rx.url}" }
`,
      { env: { CALLER: KEY } },
    );
    const app = createProxyApp(gw);
    const ask = async () => {
      const res = await app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'e', messages: [{ role: 'user', content: 'hello there' }] }),
      });
      const answer = await res.json() as { usage: { prompt_tokens: number; completion_tokens: number } };
      await gw.telemetry.flush();
      const id = res.headers.get('x-aisix-request-id');
      return { res, answer, spans: rx.spans.filter((s) => s.attrs['aisix.request_id'] === id) };
    };
    try {
      const miss = await ask();
      assert.equal(miss.res.headers.get('x-aisix-cache'), 'miss');
      assert.deepEqual(miss.spans.map((s) => s.kind), [2, 3, 3]);
      assert.equal(miss.spans[2]!.attrs['aisix.cache_status'], 'miss');
      assert.deepEqual(miss.spans[2]!.attrs['gen_ai.response.finish_reasons'], ['stop']);

      const hit = await ask();
      assert.equal(hit.res.headers.get('x-aisix-cache'), 'hit');
      assert.deepEqual(hit.spans.map((s) => s.kind), [2], 'no CLIENT span is invented for a hit');
      const a = hit.spans[0]!.attrs;
      assert.equal(a['aisix.cache_status'], 'hit');
      assert.equal(a['aisix.cache_hit_layer'], 'exact');
      assert.equal(a['aisix.cache_similarity'], undefined);
      assert.equal(a['aisix.cache_hit_saved_input_tokens'], miss.answer.usage.prompt_tokens);
      assert.equal(a['aisix.cache_hit_saved_output_tokens'], miss.answer.usage.completion_tokens);
      assert.equal(a['gen_ai.usage.input_tokens'], miss.answer.usage.prompt_tokens, 'the stored usage');
      assert.equal(a['http.response.status_code'], 200);
      assert.equal(hit.spans[0]!.status, 1);
      // AISIX's hit: no provider response id, model version, finish reason or attempt.
      for (const k of ['gen_ai.response.id', 'gen_ai.response.model', 'gen_ai.response.finish_reasons']) {
        assert.equal(a[k], undefined, k);
      }
      assert.equal(a['aisix.attempt_index'], undefined);
    } finally {
      await gw.telemetry.close(1000);
      gw.stop();
      await rx.close();
    }
  });
});
