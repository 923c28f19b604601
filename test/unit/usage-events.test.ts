// Usage events through app.request() (docs/usage-events.md): each event checked field by field as a real
// Datadog intake on 127.0.0.1 receives it — chat, a stream, a caller who leaves, failover, embeddings,
// native messages and responses — plus the counters with and without an exporter.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import {
  anthropicEvents,
  anthropicMessage,
  type MockAnthropic,
  startMockAnthropic,
} from '../support/mock-anthropic.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { truncateContent } from '../../src/usage/content.ts';
import { occurredAt } from '../../src/usage/event.ts';
import { ProviderKeySchema } from '../../src/resources/schema.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-caller-usage-1';
const DD_KEY = 'dd-api-key-usage-secret-1';

function resources(mock: MockUpstream, anth: MockAnthropic, intake?: DatadogIntake): string {
  const exporter = intake
    ? `observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: team-a, service: gw, tags: ["env:test", "team:a"] }
`
    : '';
  return `_format_version: "1"
provider_keys:
  - display_name: oa
    provider: openai
    api_key: k-oa
    api_base: "${mock.base}"
    telemetry_tags: { kind: catalog, featured: true, branded_provider: openai, pk_label: "prod\u0007uction" }
  - display_name: dead
    provider: openai
    api_key: k-dead
    api_base: "http://127.0.0.1:9/v1"
    telemetry_tags: { kind: byo, byo_label: team-a }
  - { display_name: bad, provider: openai, api_key: "k-bad\u0007secret", api_base: "${mock.base}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anth.url}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: emb, provider_key: oa, model_name: emb-up, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-up, retries: 0 }
  - { display_name: down, provider_key: dead, model_name: down-up, retries: 0 }
  - { display_name: broken, provider_key: bad, model_name: broken-up, retries: 0 }
  - { display_name: pool, routing: { strategy: failover, targets: [{ model: down }, { model: gpt }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
${exporter}`;
}

interface Rig {
  gw: Gateway;
  platform: TestPlatform;
  app: ReturnType<typeof createProxyApp>;
}

describe('usage events', () => {
  let mock: MockUpstream;
  let anth: MockAnthropic;
  let intake: DatadogIntake;
  let rig: Rig;
  before(async () => {
    mock = await startMockUpstream();
    anth = await startMockAnthropic();
    intake = await startDatadogIntake();
    const { gw, platform } = await gatewayWith(resources(mock, anth, intake), {
      env: { CALLER: KEY, DD_CRED_TEAM_A_API_KEY: DD_KEY },
    });
    rig = { gw, platform, app: createProxyApp(gw) };
  });
  after(async () => {
    await rig.gw.usage.close(1000);
    rig.gw.stop();
    await mock.close();
    await anth.close();
    await intake.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    rig.app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }, { peer: '203.0.113.7:4242' });

  /** The logs of the request `res` answered, once the exporter delivered them. */
  async function logsOf(res: Response): Promise<Record<string, unknown>[]> {
    await res.text();
    const id = res.headers.get('x-aisix-request-id');
    await rig.gw.usage.flush();
    return intake.logs.filter((l) => l['aisix.request_id'] === id);
  }

  test('chat: one event with every field, delivered gzipped with the resolved API key', async () => {
    mock.script({ body: chatCompletion('gpt-up') });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] }, {
      'user-agent': 'OpenAI/Python 1.40.0',
    });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.ok(log);
    // The reserved attributes, then the event's members in AISIX's order (src/usage/event.ts `EVENT_MEMBERS`).
    assert.deepEqual(Object.keys(log), [
      'ddsource',
      'ddtags',
      'service',
      'message',
      'schema_version',
      'aisix.request_id',
      'aisix.occurred_at',
      'aisix.model_id',
      'aisix.api_key_id',
      'aisix.requested_model',
      'gen_ai.usage.input_tokens',
      'gen_ai.usage.output_tokens',
      'aisix.upstream_latency_ms',
      'aisix.downstream_latency_ms',
      'http.response.status_code',
      'gen_ai.response.id',
      'gen_ai.response.model',
      'gen_ai.response.finish_reason',
      'aisix.cost_usd',
      'aisix.guardrail_blocked',
      'aisix.cache_status',
      'aisix.inbound_protocol',
      'aisix.attempt_index',
      'aisix.attempt_kind',
      'aisix.provider_kind',
      'aisix.provider_featured',
      'aisix.branded_provider',
      'aisix.pk_label',
      'aisix.client_source_ip',
      'aisix.client_user_agent',
    ]);
    const id = res.headers.get('x-aisix-request-id')!;
    const key = [...rig.gw.snapshot!.apiKeys.values()][0]!.id;
    const model = rig.gw.snapshot!.modelByName('gpt')!;
    assert.match(log['aisix.occurred_at'] as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(typeof log['aisix.upstream_latency_ms'], 'number');
    assert.equal(typeof log['aisix.downstream_latency_ms'], 'number');
    const { 'aisix.occurred_at': _o, 'aisix.upstream_latency_ms': _u, 'aisix.downstream_latency_ms': _d, ...fixed } =
      log;
    assert.deepEqual(fixed, {
      ddsource: 'aisix-ai-gateway',
      ddtags: 'env:test,team:a',
      service: 'gw',
      message: `ai-gateway request ${id} model=gpt-up status=200`,
      schema_version: '1.0',
      'aisix.request_id': id,
      'aisix.model_id': model.id,
      'aisix.api_key_id': key,
      'aisix.requested_model': 'gpt',
      'gen_ai.usage.input_tokens': 1,
      'gen_ai.usage.output_tokens': 3,
      'http.response.status_code': 200,
      'gen_ai.response.id': 'chatcmpl-mock',
      'gen_ai.response.model': 'gpt-up',
      'gen_ai.response.finish_reason': 'stop',
      'aisix.cost_usd': 0.007,
      'aisix.guardrail_blocked': false,
      'aisix.cache_status': 'disabled',
      'aisix.inbound_protocol': 'openai',
      'aisix.attempt_index': 0,
      'aisix.attempt_kind': 'initial',
      'aisix.provider_kind': 'catalog',
      'aisix.provider_featured': true,
      'aisix.branded_provider': 'openai',
      'aisix.pk_label': 'production',
      'aisix.client_source_ip': '203.0.113.7',
      'aisix.client_user_agent': 'OpenAI/Python 1.40.0',
    });
    const post0 = intake.posts.find((p) => p.logs.includes(log))!;
    assert.equal(post0.headers['dd-api-key'], DD_KEY);
    assert.deepEqual(intake.invalid, []);
  });

  const idOf = (name: string) => rig.gw.snapshot!.modelByName(name)!.id;

  test('a stream: the event at its end, with the upstream TTFT and the stream-long upstream latency', async () => {
    const last = { ...chunk('gpt-up', '!'), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] };
    const usage = {
      ...chunk('gpt-up', ''),
      choices: [],
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    };
    mock.script({ sse: [chunk('gpt-up', 'a'), last, usage], chunkDelayMs: 20 });
    const res = await post('/v1/chat/completions', {
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
    });
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['http.response.status_code'], 200);
    assert.equal(log!['gen_ai.usage.input_tokens'], 2);
    assert.equal(log!['gen_ai.usage.output_tokens'], 5);
    assert.equal(log!['gen_ai.response.id'], 'chatcmpl-mock');
    assert.equal(log!['gen_ai.response.finish_reason'], 'stop');
    assert.equal(log!['aisix.usage_estimated'], undefined);
    assert.equal(log!['aisix.cache_status'], 'disabled', 'a stream never opens the cache gate');
    const ttft = log!['aisix.upstream_ttft_ms'] as number;
    assert.ok(ttft > 0, `ttft ${ttft}`);
    assert.ok((log!['aisix.upstream_latency_ms'] as number) >= ttft + 30, 'the upstream latency lasts to the end');
  });

  test('a caller who leaves mid-stream: 499 with estimated tokens', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    mock.script({
      sse: [chunk('gpt-up', 'Once upon a time, a keeper'), chunk('gpt-up', ' slept.')],
      chunkHolds: [undefined, held],
    });
    const res = await post('/v1/chat/completions', {
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'tell me a long story about the sea' }],
    });
    const id = res.headers.get('x-aisix-request-id');
    const reader = res.body!.getReader();
    let got = '';
    while (!got.includes('keeper')) got += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    release();
    let log: Record<string, unknown> | undefined;
    while (!log) {
      await rig.gw.usage.flush();
      log = intake.logs.find((l) => l['aisix.request_id'] === id);
      if (!log) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(log['http.response.status_code'], 499);
    assert.equal(log['aisix.usage_estimated'], true);
    assert.ok((log['gen_ai.usage.input_tokens'] as number) > 0);
    assert.ok((log['gen_ai.usage.output_tokens'] as number) > 0);
    assert.equal(log['aisix.error_class'], undefined);
  });

  test('failover: one event per attempt, the failed one attributed to its target', async () => {
    mock.script({ body: chatCompletion('gpt-up') });
    const res = await post('/v1/chat/completions', { model: 'pool', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(res.status, 200);
    const logs = await logsOf(res);
    assert.equal(logs.length, 2);
    const [failed, served] = logs;
    assert.equal(failed!['aisix.attempt_index'], 0);
    assert.equal(failed!['aisix.attempt_kind'], 'initial');
    assert.equal(failed!['aisix.attempt_model'], 'down');
    assert.equal(failed!['aisix.model_id'], idOf('down'));
    assert.equal(failed!['http.response.status_code'], 502);
    assert.equal(failed!['aisix.error_class'], 'transport');
    assert.equal(typeof failed!['aisix.error_message'], 'string');
    assert.equal(failed!['gen_ai.usage.input_tokens'], 0);
    assert.equal(failed!['gen_ai.response.id'], undefined);
    assert.equal(failed!['aisix.cache_status'], undefined, 'a failed attempt has no cache outcome');
    assert.equal(failed!['aisix.provider_kind'], 'byo', "each attempt carries its own key's tags");
    assert.equal(failed!['aisix.byo_label'], 'team-a');
    assert.equal(failed!['aisix.provider_featured'], undefined, 'false is left out');
    assert.equal(failed!['aisix.pk_label'], undefined);
    assert.equal(
      failed!['aisix.downstream_latency_ms'],
      undefined,
      'only the terminal event says what the caller waited',
    );
    assert.equal(served!['aisix.attempt_index'], 1);
    assert.equal(served!['aisix.attempt_kind'], 'fallback');
    assert.equal(served!['aisix.attempt_model'], 'gpt');
    assert.equal(served!['aisix.model_id'], idOf('gpt'));
    assert.equal(served!['aisix.requested_model'], 'pool');
    assert.equal(served!['http.response.status_code'], 200);
    assert.equal(served!['gen_ai.usage.output_tokens'], 3);
    assert.equal(served!['aisix.cache_status'], 'disabled');
    assert.equal(served!['aisix.provider_kind'], 'catalog');
    assert.equal(served!['aisix.byo_label'], undefined);
    assert.equal(typeof served!['aisix.downstream_latency_ms'], 'number');
  });

  test('an unusable credential: invalid_credentials, no upstream request', async () => {
    const n = mock.requests.length;
    const res = await post('/v1/chat/completions', { model: 'broken', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(res.status, 401);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(mock.requests.length, n, 'nothing reached the upstream');
    assert.equal(log!['http.response.status_code'], 401);
    assert.equal(log!['aisix.model_id'], idOf('broken'));
    assert.equal(log!['aisix.error_class'], 'invalid_credentials');
    assert.equal(log!['aisix.error_message'], 'invalid upstream credentials: no upstream request was made');
    assert.equal(log!['aisix.upstream_latency_ms'], 0);
    assert.equal(log!['aisix.cache_status'], undefined, 'no answer, no cache outcome');
    assert.ok(!JSON.stringify(log).includes('secret'), 'the credential is never in the event');
  });

  test('embeddings: one event, no provider id', async () => {
    mock.script({
      body: {
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }],
        model: 'emb-up',
        usage: { prompt_tokens: 6, total_tokens: 6 },
      },
    });
    const res = await post('/v1/embeddings', { model: 'emb', input: 'hello' });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['gen_ai.usage.input_tokens'], 6);
    assert.equal(log!['gen_ai.usage.output_tokens'], 0);
    assert.equal(log!['gen_ai.response.id'], undefined);
    assert.equal(log!['aisix.attempt_index'], 0);
    assert.equal(log!['aisix.model_id'], idOf('emb'));
    assert.equal(log!['aisix.cache_status'], undefined, 'only chat has a cache gate');
  });

  test('native messages: the Anthropic protocol, its cache counters apart from the prompt', async () => {
    anth.script({
      body: {
        ...anthropicMessage('claude-up'),
        usage: { input_tokens: 5, output_tokens: 4, cache_creation_input_tokens: 10, cache_read_input_tokens: 20 },
      },
    });
    const res = await post('/v1/messages', {
      model: 'claude',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x' }],
    }, {
      'user-agent': 'claude-cli/1.0.0 (external, cli)',
    });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['aisix.inbound_protocol'], 'anthropic');
    assert.equal(log!['gen_ai.usage.input_tokens'], 5);
    assert.equal(log!['gen_ai.usage.output_tokens'], 4);
    assert.equal(log!['aisix.cache_creation_tokens'], 10);
    assert.equal(log!['aisix.cache_read_tokens'], 20);
    assert.equal(log!['gen_ai.response.id'], 'msg_mock');
    assert.equal(log!['gen_ai.response.finish_reason'], 'end_turn');
    const m = rig.gw.metrics.render();
    const by = (t: string) =>
      sumSamples(m, 'aisix_llm_tokens_by_client_total', { client_type: 'claude-code', model: 'claude', token_type: t });
    assert.deepEqual([by('input'), by('output'), by('total')], [5, 4, 39]);
  });

  test('native messages streamed: the id of message_start, the event at the end', async () => {
    anth.script({ events: anthropicEvents('claude-up') });
    const res = await post('/v1/messages', {
      model: 'claude',
      stream: true,
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x' }],
    });
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['gen_ai.response.id'], 'msg_mock');
    assert.equal(log!['gen_ai.usage.input_tokens'], 5);
    assert.equal(log!['gen_ai.usage.output_tokens'], 7);
    assert.equal(log!['http.response.status_code'], 200);
  });

  test("Anthropic's counts, input stated only on message_delta in data-only events: native and chat, JSON and SSE", async () => {
    const usage = { input_tokens: 30, cache_read_input_tokens: 10, cache_creation_input_tokens: 2, output_tokens: 4 };
    const [start, ...rest] = anthropicEvents('claude-up');
    const opening = {
      ...(start![1] as Record<string, unknown>),
      message: { ...anthropicMessage('claude-up'), usage: { output_tokens: 1 } },
    };
    const events: [string, unknown][] = [
      [start![0], opening],
      ...rest.slice(0, -2),
      ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage }],
      rest.at(-1)!,
    ];
    const m = () => rig.gw.metrics.render();
    const byClient = (t: string) =>
      sumSamples(m(), 'aisix_llm_tokens_by_client_total', { client_type: 'unknown', model: 'claude', token_type: t }) ??
        0;
    const got: unknown[] = [];
    for (
      const [path, stream] of [
        ['/v1/messages', true],
        ['/v1/messages', false],
        ['/v1/chat/completions', true],
        ['/v1/chat/completions', false],
      ] as const
    ) {
      if (stream) anth.script({ events, dataOnly: 'spaced' });
      else anth.script({ body: { ...anthropicMessage('claude-up'), usage } });
      const before = ['input', 'output', 'total'].map(byClient);
      const res = await post(path, {
        model: 'claude',
        stream,
        max_tokens: 10,
        messages: [{ role: 'user', content: 'x' }],
      });
      assert.equal(res.status, 200);
      const [log, ...more] = await logsOf(res);
      assert.deepEqual(more, []);
      got.push({
        path,
        stream,
        event: [
          log!['gen_ai.usage.input_tokens'],
          log!['gen_ai.usage.output_tokens'],
          log!['aisix.cache_read_tokens'],
          log!['aisix.cache_creation_tokens'],
        ],
        byClient: ['input', 'output', 'total'].map((t, i) => byClient(t) - before[i]!),
      });
    }
    // AISIX's canonical counters whatever the caller's wire: the prompt without the cache counts, which ride
    // beside it in the event and in the cache-inclusive total.
    const want = { event: [30, 4, 10, 2], byClient: [30, 4, 46] };
    assert.deepEqual(got, [
      { path: '/v1/messages', stream: true, ...want },
      { path: '/v1/messages', stream: false, ...want },
      { path: '/v1/chat/completions', stream: true, ...want },
      { path: '/v1/chat/completions', stream: false, ...want },
    ]);
  });

  test('responses: the resp_ id and the handler in the emitted counter', async () => {
    mock.script({
      body: {
        id: 'resp_mock1',
        object: 'response',
        status: 'completed',
        model: 'gpt-up',
        output: [{ type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'hi' }] }],
        usage: {
          input_tokens: 3,
          output_tokens: 2,
          total_tokens: 5,
          input_tokens_details: { cached_tokens: 1 },
          output_tokens_details: { reasoning_tokens: 1 },
        },
      },
    });
    const res = await post('/v1/responses', { model: 'gpt', input: 'hi' });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['gen_ai.response.id'], 'resp_mock1');
    assert.equal(log!['gen_ai.usage.input_tokens'], 3);
    assert.equal(log!['aisix.cached_prompt_tokens'], 1);
    assert.equal(log!['aisix.reasoning_tokens'], 1);
    const m = rig.gw.metrics.render();
    assert.ok(
      (sumSamples(m, 'aisix_usage_events_emitted_total', { handler: 'responses', status_code: '2xx' }) ?? 0) >= 1,
    );
  });

  test('a refusal before dispatch: one event with the status; an unauthenticated request: none', async () => {
    const res = await post('/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(res.status, 404);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log!['http.response.status_code'], 404);
    assert.equal(log!['aisix.model_id'], undefined);
    assert.equal(typeof log!['aisix.error_class'], 'string');
    assert.equal(log!['aisix.cache_status'], undefined, 'an early error has no cache outcome');
    assert.equal(log!['aisix.provider_kind'], undefined, 'no key was chosen');
    const before = intake.logs.length;
    const anon = await rig.app.request('/v1/chat/completions', { method: 'POST', body: '{}' });
    assert.equal(anon.status, 401);
    await logsOf(anon);
    assert.equal(intake.logs.length, before);
  });
});

describe('usage events: guardrail hits, a cache hit, content', () => {
  let mock: MockUpstream;
  let intake: DatadogIntake;
  let full: DatadogIntake;
  let gw: Gateway;
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    mock = await startMockUpstream();
    intake = await startDatadogIntake();
    full = await startDatadogIntake();
    ({ gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${mock.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - { name: watch-pii, kind: pii, created_at: "2024-01-01T00:00:00Z", enforcement_mode: monitor, detectors: [{ type: email }] }
  - { name: watch, kind: keyword, created_at: "2024-01-02T00:00:00Z", enforcement_mode: monitor, patterns: [{ kind: literal, value: suspicious }] }
  - { name: pii, kind: pii, created_at: "2024-01-03T00:00:00Z", detectors: [{ type: email }] }
  - { name: words, kind: keyword, created_at: "2024-01-04T00:00:00Z", patterns: [{ kind: literal, value: forbidden }] }
cache_policies: [{ name: main }]
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: a, service: gw }
  - { name: full, kind: datadog, site: "${full.site}", credential_ref: a, service: gw, content_mode: full, content_max_bytes: 160 }
`,
      { env: { CALLER: KEY, DD_CRED_A_API_KEY: DD_KEY } },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    await gw.usage.close(1000);
    gw.stop();
    await mock.close();
    await intake.close();
    await full.close();
  });

  const chat = async (content: string) => {
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content }] }),
    });
    await res.text();
    await gw.usage.flush();
    const id = res.headers.get('x-aisix-request-id');
    return { status: res.status, logs: intake.logs.filter((l) => l['aisix.request_id'] === id) };
  };

  test('a masked prompt: the attached set, the monitor hits (would_mask, would_block) and the enforced mask', async () => {
    mock.script({ body: chatCompletion('gpt-up') });
    const r = await chat('mail a@b.example.com, this is suspicious');
    assert.equal(r.status, 200);
    const [log, ...rest] = r.logs;
    assert.deepEqual(rest, []);
    assert.equal(log!['aisix.guardrail_blocked'], false);
    // Each member as it ran on each hook (the record's own list; the access log has the same).
    const hooks = (hook: string) => ['pii', 'keyword', 'pii', 'keyword'].map((kind) => ({ kind, hook }));
    assert.deepEqual(log!['aisix.applied_guardrails'], [...hooks('input'), ...hooks('output')]);
    assert.deepEqual(log!['aisix.redacted_entity_counts'], { email: 1 });
    const monitor = log!['aisix.guardrail_monitor_hits'] as Record<string, unknown>[];
    assert.deepEqual(monitor.map((h) => [h.guardrail_name, h.hook, h.action]), [
      ['watch-pii', 'input', 'would_mask'],
      ['watch', 'input', 'would_block'],
    ]);
    assert.deepEqual(monitor[0]!.counts, { email: 1 });
    const enforced = log!['aisix.guardrail_enforced_hits'] as Record<string, unknown>[];
    assert.deepEqual(enforced.map((h) => [h.guardrail_name, h.hook, h.action, h.counts]), [
      ['pii', 'input', 'masked', { email: 1 }],
    ]);
    assert.equal(typeof enforced[0]!.duration_us, 'number');
    assert.equal(log!['aisix.cache_status'], 'miss');
  });

  test('a blocked prompt: guardrail_blocked, the enforced block, no upstream attempt', async () => {
    const n = mock.requests.length;
    const r = await chat('this is forbidden');
    assert.equal(r.status, 422);
    assert.equal(mock.requests.length, n);
    const [log, ...rest] = r.logs;
    assert.deepEqual(rest, []);
    assert.equal(log!['aisix.guardrail_blocked'], true);
    assert.equal(log!['http.response.status_code'], 422);
    assert.equal(log!['aisix.error_class'], 'content_filter');
    const enforced = log!['aisix.guardrail_enforced_hits'] as Record<string, unknown>[];
    assert.deepEqual(enforced.map((h) => [h.guardrail_name, h.action]), [['words', 'blocked']]);
    assert.equal(log!['gen_ai.response.id'], undefined);
    assert.equal(log!['aisix.cache_status'], undefined, 'refused before the cache gate');
  });

  test('content: only the full exporter gets the masked prompt and the answer, cut to its cap', async () => {
    mock.script({ body: chatCompletion('gpt-up', 'the answer is here') });
    const r = await chat(`write to a@b.example.com now ${'and more words '.repeat(12)}`);
    assert.equal(r.status, 200);
    assert.equal(r.logs[0]!['gen_ai.prompt'], undefined, 'metadata_only gets no content');
    const id = r.logs[0]!['aisix.request_id'];
    await until(() => full.logs.some((l) => l['aisix.request_id'] === id), 5000, 'the full log');
    const log = full.logs.find((l) => l['aisix.request_id'] === id)!;
    const prompt = log['gen_ai.prompt'] as string;
    assert.ok(new TextEncoder().encode(prompt).length <= 160, prompt);
    assert.doesNotMatch(prompt, /a@b\.example\.com/, 'the masked prompt, never the original');
    assert.ok(JSON.parse(prompt), 'still JSON');
    assert.equal(log['gen_ai.completion'], 'the answer is here');
    assert.equal(log.content_truncated, true);
  });

  test('a cache hit: its stored usage, no provider id, no cost, the saved tokens', async () => {
    mock.script({ body: chatCompletion('gpt-up') });
    const first = await chat('cache me please');
    assert.equal(first.status, 200);
    const hit = await chat('cache me please');
    assert.equal(hit.status, 200);
    const [log, ...rest] = hit.logs;
    assert.deepEqual(rest, []);
    assert.equal(log!['aisix.cache_status'], 'hit');
    assert.equal(log!['aisix.cache_hit_layer'], 'exact');
    assert.equal(log!['aisix.cache_hit_saved_input_tokens'], 1);
    assert.equal(log!['aisix.cache_hit_saved_output_tokens'], 3);
    assert.equal(log!['gen_ai.response.id'], undefined);
    assert.equal(log!['aisix.cost_usd'], 0);
    assert.equal(log!['aisix.attempt_kind'], undefined);
  });
});

describe('provider key telemetry_tags', () => {
  const key = (tags: unknown) =>
    ProviderKeySchema.safeParse({ display_name: 'k', provider: 'openai', api_key: 'x', telemetry_tags: tags });
  test("AISIX's members: kind catalog or byo, featured false by default, the three labels", () => {
    const ok = key({ kind: 'byo', byo_label: 'team' });
    assert.ok(ok.success);
    assert.deepEqual(ok.data.telemetry_tags, { kind: 'byo', featured: false, byo_label: 'team' });
    assert.ok(key({}).success);
    assert.ok(key(null).success);
  });
  test('another kind or an unknown member is refused with its path', () => {
    const bad = key({ kind: 'vendor' });
    assert.ok(!bad.success);
    assert.deepEqual(bad.error.issues[0]!.path, ['telemetry_tags', 'kind']);
    const extra = key({ label: 'x' });
    assert.ok(!extra.success);
    assert.deepEqual(extra.error.issues[0]!.path, ['telemetry_tags']);
  });
});

describe('content capture', () => {
  test('the ladder keeps JSON valid: compacted, strings capped, data URIs replaced, arrays cut around a marker', () => {
    assert.deepEqual(truncateContent('{"a": 1}', 100), { text: '{"a": 1}', truncated: false });
    assert.deepEqual(truncateContent('{ "b": 1,   "a": 2 }', 15), { text: '{"b":1,"a":2}', truncated: true });
    const doc = JSON.stringify({
      z: 'x'.repeat(5000),
      a: Array.from({ length: 200 }, (_, i) => i),
      u: `data:image/png;base64,${'A'.repeat(3000)}`,
    });
    const r = truncateContent(doc, 1200);
    assert.equal(r.truncated, true);
    const back = JSON.parse(r.text);
    assert.deepEqual(Object.keys(back), ['a', 'u', 'z']);
    assert.match(back.z, /^x+\.\.\.\[aisix: truncated, 5000 bytes total\]$/);
    assert.equal(back.u, '[aisix: base64 data uri omitted, 3022 bytes]');
    // The third rung fits: strings at 512 bytes, arrays cut to 10 + marker + 4.
    assert.deepEqual(back.a, [
      ...Array.from({ length: 10 }, (_, i) => i),
      { _aisix_truncated: true, omitted_items: 186 },
      196,
      197,
      198,
      199,
    ]);
    assert.equal(back.z.length, 512 + '...[aisix: truncated, 5000 bytes total]'.length);
    assert.ok(new TextEncoder().encode(r.text).length <= 1200);
    const plain = truncateContent('é'.repeat(100), 11);
    assert.deepEqual(plain, { text: 'é'.repeat(5), truncated: true });
  });
});

describe('occurred_at', () => {
  test('whole seconds in RFC 3339 UTC, for times in any order within and across seconds', () => {
    const at = Date.UTC(2026, 11, 7, 5, 30, 0);
    for (const ms of [at + 999, at, at + 1000, at + 1, at - 1, at + 86_400_000, at + 999]) {
      assert.equal(occurredAt(ms), new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z'), `${ms}`);
    }
    assert.equal(occurredAt(at + 500), '2026-12-07T05:30:00Z');
    assert.equal(occurredAt(at - 500), '2026-12-07T05:29:59Z');
  });
});
