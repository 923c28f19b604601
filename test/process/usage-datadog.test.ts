// Usage events from a real gateway process (docs/usage-events.md) to a real Datadog logs intake on 127.0.0.1
// (test/support/datadog-intake.ts decodes the gzip body and checks the headers): a request, a stream, a
// failover with an event per attempt, the client type and the forwarded client address through a trusted
// proxy, the key read from the environment, a failing intake retried, and the drain delivering what is
// queued. Node by default; SLUICE_USAGE_RUNTIMES=node,bun,deno for the others.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_USAGE_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node'];
const DD_KEY = 'dd-process-key-SECRET';

function resources(mock: MockUpstream, intake: DatadogIntake): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${mock.base}" }
  - { display_name: dead, provider: openai, api_key: sk-dead, api_base: "http://127.0.0.1:9/v1" }
models:
  - { display_name: direct, model_name: up-direct, provider_key: mock, retries: 0 }
  - { display_name: down, model_name: up-down, provider_key: dead, retries: 0 }
  - { display_name: smart, routing: { strategy: failover, targets: [{ model: down }, { model: direct }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: usage-main, service: sluice-gw, tags: ["env:ci"] }
`;
}

const CONFIG = `resources_file: resources.yaml
proxy:
  addr: "127.0.0.1:{{proxy}}"
  real_ip: { header: x-forwarded-for, trusted_proxies: ["127.0.0.1/32"] }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability:
  log_format: json
  metrics:
    prometheus: { addr: "127.0.0.1:{{status}}" }
    client_type_rules: [{ pattern: "^ci-runner/", client: ci }]
shutdown: { min_drain_secs: 0 }
`;

for (const runtime of RUNTIMES) {
  describe(`usage events on ${runtime}`, { concurrency: false, timeout: 120_000 }, () => {
    let mock: MockUpstream;
    let intake: DatadogIntake;
    let gw: GatewayProcess;

    before(async () => {
      mock = await startMockUpstream();
      intake = await startDatadogIntake();
      gw = await spawnGateway({
        runtime,
        config: CONFIG,
        files: { 'resources.yaml': resources(mock, intake) },
        env: { CALLER_KEY, DD_CRED_USAGE_MAIN_API_KEY: DD_KEY },
      });
      await gw.waitReady();
    });
    after(async () => {
      await gw?.stop();
      await Promise.all([mock?.close(), intake?.close()]);
    });

    const chat = async (model: string, o: { stream?: boolean; headers?: Record<string, string> } = {}) => {
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json', ...o.headers },
        body: JSON.stringify({ model, stream: o.stream ?? false, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.text();
      return { status: res.status, requestId: res.headers.get('x-aisix-request-id')! };
    };
    const logsOf = async (id: string, n: number) => {
      await until(() => intake.logs.filter((l) => l['aisix.request_id'] === id).length >= n, 10_000, `${n} logs`);
      return intake.logs.filter((l) => l['aisix.request_id'] === id);
    };

    test('a request: its event at the intake, gzipped, with the key from the environment', async () => {
      mock.script({ body: chatCompletion('up-direct') });
      const r = await chat('direct', {
        headers: { 'user-agent': 'ci-runner/3 curl/8', 'x-forwarded-for': '198.51.100.9' },
      });
      assert.equal(r.status, 200);
      const [log] = await logsOf(r.requestId, 1);
      assert.deepEqual(intake.invalid, []);
      assert.equal(intake.posts.at(-1)!.headers['dd-api-key'], DD_KEY);
      assert.equal(log!.service, 'sluice-gw');
      assert.equal(log!.ddtags, 'env:ci');
      assert.equal(log!.message, `ai-gateway request ${r.requestId} model=up-direct status=200`);
      assert.equal(log!['gen_ai.usage.input_tokens'], 1);
      assert.equal(log!['gen_ai.usage.output_tokens'], 3);
      assert.equal(log!['gen_ai.response.id'], 'chatcmpl-mock');
      assert.equal(log!['aisix.client_source_ip'], '198.51.100.9', 'the trusted proxy forwarded it');
      assert.equal(log!['aisix.client_user_agent'], 'ci-runner/3 curl/8');
      const m = await (await fetch(gw.url('/metrics', 'status'))).text();
      assert.equal(
        sumSamples(m, 'aisix_llm_tokens_by_client_total', { client_type: 'ci', model: 'direct', token_type: 'total' }),
        4,
      );
      assert.doesNotMatch(JSON.stringify(intake.logs), /SECRET/);
    });

    test('a stream: one event at its end', async () => {
      mock.script({ sse: [chunk('up-direct', 'a'), chunk('up-direct', 'b')], chunkDelayMs: 10 });
      const r = await chat('direct', { stream: true });
      const [log, ...more] = await logsOf(r.requestId, 1);
      assert.equal(more.length, 0);
      assert.equal(log!['http.response.status_code'], 200);
      assert.ok((log!['aisix.upstream_ttft_ms'] as number) > 0);
    });

    test('failover: an event per attempt, the failed one naming its target', async () => {
      mock.script({ body: chatCompletion('up-direct') });
      const r = await chat('smart');
      assert.equal(r.status, 200);
      const logs = await logsOf(r.requestId, 2);
      logs.sort((a, b) => (a['aisix.attempt_index'] as number) - (b['aisix.attempt_index'] as number));
      assert.deepEqual(
        logs.map((l) => [l['aisix.attempt_kind'], l['aisix.attempt_model'], l['http.response.status_code']]),
        [
          ['initial', 'down', 502],
          ['fallback', 'direct', 200],
        ],
      );
      assert.equal(logs[0]!['aisix.error_class'], 'transport');
    });

    test('a failing intake is retried; requests do not wait for it', async () => {
      intake.failNext(2, 503);
      mock.script({ body: chatCompletion('up-direct') });
      const started = Date.now();
      const r = await chat('direct');
      assert.ok(Date.now() - started < 1000);
      await logsOf(r.requestId, 1);
      const m = await (await fetch(gw.url('/metrics', 'status'))).text();
      assert.ok((sumSamples(m, 'sluice_usage_exporter_failures_total', { exporter: 'dd' }) ?? 0) >= 2);
    });

    test('the drain delivers what is queued before the process exits', async () => {
      mock.script({ body: chatCompletion('up-direct') });
      const r = await chat('direct');
      assert.equal(await gw.stop(), 0);
      assert.ok(intake.logs.some((l) => l['aisix.request_id'] === r.requestId), 'the last event arrived');
    });
  });
}
