// docs/aisix-compatibility.md "Metrics" and docs/aisix-compatibility.md "Metrics": the exposition of a real Node gateway process after scripted traffic —
// a JSON answer, an SSE stream, a rescued request (a failing target, then another), an Anthropic-wire
// request and refused ones (401, a declared-length 413, an unknown model) — has AISIX's families, label
// names in AISIX's order and label values, and passes `promtool check metrics` (Debian's `prometheus`
// package ships promtool).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { labelNamesOf, labelsOf, sumSamples } from '../support/metrics.ts';
import { REQUEST_LABELS, SLO_LABELS, TOKEN_LABELS } from '../../src/observability/gateway-metrics.ts';

const INSTALL_HINT =
  'promtool is not installed: run `apt-get install -y prometheus` (Debian/Ubuntu; it provides /usr/bin/promtool), ' +
  'or put the promtool binary from a Prometheus release on PATH';
const LIMIT = 4096;

let mock: MockUpstream;
let gw: GatewayProcess;
let body = '';

before(async () => {
  mock = await startMockUpstream();
  gw = await spawnGateway({
    config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}", request_body_limit_bytes: ${LIMIT} }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`,
    env: { CALLER_KEY },
    files: {
      'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-upstream-SECRET, api_base: "${mock.base}" }
  - { display_name: offline, provider: echo }
models:
  - { display_name: flaky, provider_key: mock, model_name: flaky-up, retries: 0 }
  - { display_name: steady, provider_key: offline, model_name: echo-1 }
  - { display_name: "quote\\"d", provider_key: offline, model_name: echo-2 }
  - { display_name: smart, routing: { targets: [{ model: flaky }, { model: steady }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`,
    },
  });
  await gw.waitReady();

  const post = async (path: string, payload: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(gw.url(path), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json', ...headers },
      body: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
    await res.arrayBuffer();
    return res.status;
  };
  const chat = (model: string, extra: Record<string, unknown> = {}) =>
    post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi there' }], ...extra });

  mock.script({ status: 502 });
  assert.equal(await chat('smart'), 200); // flaky 502 → cooldown, rescued by steady
  assert.equal(await chat('steady'), 200); // JSON
  assert.equal(await chat('steady', { stream: true, stream_options: { include_usage: true } }), 200); // SSE
  assert.equal(await chat('quote"d'), 200);
  assert.equal(
    await post('/v1/messages', { model: 'steady', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    200,
  );
  assert.equal(await chat('nope'), 404);
  assert.equal(await post('/v1/chat/completions', { model: 'steady' }, { authorization: 'Bearer wrong' }), 401);
  assert.equal(await post('/v1/chat/completions', 'x'.repeat(LIMIT + 1)), 413);

  const res = await fetch(gw.url('/metrics', 'status'));
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  body = await res.text();
});

after(async () => {
  await gw.stop();
  await mock.close();
});

/** The one sample line of `name` whose labels include `labels`. */
function only(name: string, labels: Record<string, string>): Record<string, string> {
  const lines = body.split('\n').filter((l) => l.startsWith(`${name}{`)).map(labelsOf)
    .filter((have) => Object.entries(labels).every(([k, v]) => have[k] === v));
  assert.equal(lines.length, 1, `${name} ${JSON.stringify(labels)}: ${lines.length} samples\n${body}`);
  return lines[0]!;
}

test('request families: names, label names in AISIX order', () => {
  const request = [...REQUEST_LABELS];
  const duration = request.filter((l) => l !== 'is_fallback');
  const expected: [string, string[]][] = [
    ['aisix_requests_total', ['provider', 'model', 'status', 'outcome']],
    ['aisix_request_duration_seconds', ['provider', 'model', 'status', 'quantile']],
    ['aisix_proxy_requests_total', request],
    ['aisix_proxy_failed_requests_total', request],
    ['aisix_proxy_request_duration_seconds', [...duration, 'quantile']],
    ['aisix_llm_requests_total', request],
    ['aisix_llm_request_duration_seconds', [...duration, 'quantile']],
    ['aisix_request_e2e_latency_seconds_bucket', [...SLO_LABELS, 'le']],
    ['aisix_request_ttft_seconds_bucket', [...SLO_LABELS, 'le']],
    ['aisix_llm_time_to_first_token_seconds', [...TOKEN_LABELS, 'quantile']],
    ['aisix_llm_input_tokens_total', [...TOKEN_LABELS]],
    ['aisix_llm_output_tokens_total', [...TOKEN_LABELS]],
    ['aisix_llm_total_tokens_total', [...TOKEN_LABELS]],
    ['aisix_tokens_consumed_total', ['provider', 'model']],
    ['aisix_proxy_in_flight_requests', ['endpoint', 'inbound_protocol']],
    ['aisix_proxy_request_body_limit_rejections_total', ['endpoint', 'inbound_protocol', 'outcome']],
    ['aisix_deployment_requests_total', ['provider', 'model', 'upstream_model', 'provider_key_id']],
  ];
  for (const [name, labels] of expected) assert.deepEqual(labelNamesOf(body, name), labels, name);
  assert.deepEqual([...REQUEST_LABELS], [
    'endpoint',
    'inbound_protocol',
    'provider',
    'model',
    'upstream_model',
    'provider_key_id',
    'provider_key_name',
    'api_key_id',
    'team_id',
    'user_id',
    'user_name',
    'stream',
    'is_fallback',
    'status',
    'outcome',
  ]);
});

test('label values: JSON, SSE, Anthropic wire, refusals', () => {
  const json = only('aisix_proxy_requests_total', {
    model: 'steady',
    stream: 'false',
    endpoint: '/v1/chat/completions',
  });
  assert.equal(json.inbound_protocol, 'openai');
  assert.equal(json.provider, 'echo');
  assert.equal(json.upstream_model, 'echo-1');
  assert.match(json.provider_key_id!, /^[0-9a-f-]{36}$/);
  assert.equal(json.provider_key_name, 'offline');
  assert.match(json.api_key_id!, /^[0-9a-f-]{36}$/);
  assert.deepEqual([json.team_id, json.user_id, json.user_name], ['unknown', 'unknown', 'unknown']);
  assert.deepEqual([json.is_fallback, json.status, json.outcome], ['false', '200', 'success']);
  assert.equal(only('aisix_llm_requests_total', json).status, '200');

  const sse = only('aisix_proxy_requests_total', { model: 'steady', stream: 'true' });
  assert.equal(sse.status, '200');
  const messages = only('aisix_proxy_requests_total', { endpoint: '/v1/messages' });
  assert.deepEqual([messages.inbound_protocol, messages.model, messages.status], ['anthropic', 'steady', '200']);

  const unknownModel = only('aisix_proxy_requests_total', { status: '404' });
  assert.deepEqual([unknownModel.model, unknownModel.provider, unknownModel.outcome], [
    'unresolved',
    'unknown',
    'client_error',
  ]);
  const unauth = only('aisix_proxy_requests_total', { status: '401' });
  assert.deepEqual([unauth.model, unauth.api_key_id], ['unresolved', 'unknown']);
  only('aisix_proxy_failed_requests_total', { status: '401' });
  only('aisix_proxy_failed_requests_total', { status: '413', model: 'unresolved', provider: 'unknown' });
  assert.equal(
    sumSamples(body, 'aisix_requests_total', { provider: 'unknown', model: 'unresolved', status: '413' }),
    1,
  );
  assert.equal(
    sumSamples(body, 'aisix_proxy_request_body_limit_rejections_total', {
      endpoint: '/v1/chat/completions',
      inbound_protocol: 'openai',
      outcome: 'completed',
    }),
    1,
  );
  assert.equal(sumSamples(body, 'aisix_proxy_failed_requests_total', { status: '200' }), undefined);
  // the echo adapter reports usage on JSON and (include_usage) SSE answers
  assert.ok((sumSamples(body, 'aisix_llm_total_tokens_total', { model: 'steady' }) ?? 0) > 0);
  assert.ok((sumSamples(body, 'aisix_tokens_consumed_total', { provider: 'echo', model: 'steady' }) ?? 0) > 0);
  assert.equal(sumSamples(body, 'aisix_proxy_in_flight_requests'), 0);
  assert.match(
    body,
    /^aisix_deployment_state\{provider="openai",model="flaky",upstream_model="flaky-up",provider_key_id="[^"]+"\} 2$/m,
  );
});

test('the rescued request: labelled with the target that served it, is_fallback="true"', () => {
  const rescued = only('aisix_proxy_requests_total', { model: 'smart' });
  assert.deepEqual(
    [rescued.provider, rescued.upstream_model, rescued.provider_key_name, rescued.is_fallback, rescued.status],
    ['echo', 'echo-1', 'offline', 'true', '200'],
  );
  assert.equal(only('aisix_proxy_request_duration_seconds_count', { model: 'smart' }).is_fallback, undefined);
  assert.equal(
    sumSamples(body, 'aisix_routing_successful_fallbacks_total', { model: 'smart', fallback_model: 'steady' }),
    1,
  );
  // One usage event per upstream attempt: the flaky target's 5xx and the rescuing target's 2xx.
  assert.equal(sumSamples(body, 'aisix_usage_events_emitted_total', { model: 'smart', status_code: '5xx' }), 1);
  assert.equal(sumSamples(body, 'aisix_usage_events_emitted_total', { model: 'smart', status_code: '2xx' }), 1);
});

test("AISIX's B4: SLO series carry no per-key labels; legacy series stay summaries; one stream counts once", () => {
  for (const family of ['aisix_request_e2e_latency_seconds', 'aisix_request_ttft_seconds']) {
    const lines = body.split('\n').filter((l) => l.startsWith(family));
    assert.ok(lines.length > 0, family);
    for (const perKey of ['api_key_id=', 'user_id=', 'team_id=', 'provider_key_id=', 'user_name=']) {
      assert.ok(!lines.some((l) => l.includes(perKey)), `${family} has ${perKey}`);
    }
  }
  for (
    const legacy of [
      'aisix_llm_request_duration_seconds',
      'aisix_proxy_request_duration_seconds',
      'aisix_request_duration_seconds',
    ]
  ) {
    assert.ok(!body.includes(`${legacy}_bucket`), `${legacy} has buckets`);
    assert.match(body, new RegExp(`^# TYPE ${legacy} summary$`, 'm'));
  }
  // The one streamed chat request: once in each histogram, with AISIX's default edges.
  const streamed = { endpoint: '/v1/chat/completions', model: 'steady', streaming: 'true' };
  assert.equal(sumSamples(body, 'aisix_request_e2e_latency_seconds_count', streamed), 1);
  assert.equal(sumSamples(body, 'aisix_request_ttft_seconds_count', streamed), 1);
  assert.equal(only('aisix_request_ttft_seconds_bucket', { ...streamed, le: '300' }).status_class, '2xx');
  assert.equal(only('aisix_request_e2e_latency_seconds_bucket', { ...streamed, le: '600' }).env_id, 'unknown');
});

test('the exposition passes `promtool check metrics`', () => {
  const which = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) assert.fail(INSTALL_HINT);
  const check = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
  assert.equal(
    check.status,
    0,
    `promtool check metrics failed:\n${check.stdout}${check.stderr}\n--- exposition ---\n${body}`,
  );
});
