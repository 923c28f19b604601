// SPEC §9: the exposition must pass `promtool check metrics`. A real Node gateway process serves real
// traffic (a success, a failover with a cooldown, a routing model, an unknown model, a stream), then its
// /metrics body is piped through promtool. promtool ships in Debian's `prometheus` package.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { type MockUpstream, startMockUpstream } from './support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, spawnGateway } from './support/process.ts';

const INSTALL_HINT =
  'promtool is not installed: run `apt-get install -y prometheus` (Debian/Ubuntu; it provides /usr/bin/promtool), ' +
  'or put the promtool binary from a Prometheus release on PATH';

let mock: MockUpstream;
let gw: GatewayProcess;

before(async () => {
  mock = await startMockUpstream();
  gw = await spawnGateway({
    config: baseConfig(),
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
});

after(async () => {
  await gw.stop();
  await mock.close();
});

async function chat(model: string, stream = false): Promise<number> {
  const res = await fetch(gw.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

test('the /metrics exposition of a gateway that served traffic passes `promtool check metrics`', async () => {
  const which = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) assert.fail(INSTALL_HINT);

  mock.script({ status: 502 });
  assert.equal(await chat('smart'), 200); // flaky 502 → cooldown, fails over to steady
  assert.equal(await chat('steady', true), 200);
  assert.equal(await chat('quote"d'), 200);
  assert.equal(await chat('nope'), 404);

  const res = await fetch(gw.url('/metrics', 'status'));
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const body = await res.text();
  for (
    const family of [
      'aisix_deployment_state',
      'aisix_deployment_requests_total',
      'aisix_deployment_failure_responses_total',
      'aisix_deployment_success_responses_total',
      'aisix_deployment_cooled_down_total',
      'aisix_proxy_requests_total',
      'aisix_proxy_request_duration_seconds_bucket',
      'aisix_routing_successful_fallbacks_total',
      'aisix_usage_events_emitted_total',
    ]
  ) {
    assert.match(body, new RegExp(`^${family}\\{`, 'm'), `${family} has a sample`);
  }
  assert.match(
    body,
    /^aisix_deployment_state\{provider="openai",model="flaky",upstream_model="flaky-up",provider_key_id="[^"]+"\} 2$/m,
  );

  const check = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
  assert.equal(
    check.status,
    0,
    `promtool check metrics failed:\n${check.stdout}${check.stderr}\n--- exposition ---\n${body}`,
  );
});
