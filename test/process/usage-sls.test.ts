// Usage events from a real gateway process on Node, Bun and Deno to a real Aliyun SLS intake on 127.0.0.1
// (docs/usage-events.md "Aliyun SLS"; test/support/sls-intake.ts refuses a PutLogs whose Content-MD5, date or
// signature SLS would refuse, LZ4-decompresses the body to `x-log-bodyrawsize` and decodes the LogGroup). Each
// runtime computes the MD5, the LZ4 block and the HMAC-SHA1 signature with its own code paths, so each one is run.
// Run: node build.mjs && node --import tsx --test test/process/usage-sls.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { SLS_KEY_ID, SLS_SECRET, type SlsIntake, startSlsIntake } from '../support/sls-intake.ts';
import { until } from '../support/until.ts';

const resources = (mock: MockUpstream, intake: SlsIntake) =>
  `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${mock.base}" }
models:
  - { display_name: direct, model_name: up-direct, provider_key: mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
observability_exporters:
  - { name: sls, kind: aliyun_sls, endpoint: "${intake.endpoint}", project: proj, logstore: usage, credential_ref: ops.main }
`;

let mock: MockUpstream;
let intake: SlsIntake;
const running: GatewayProcess[] = [];
before(async () => {
  [mock, intake] = await Promise.all([startMockUpstream(), startSlsIntake()]);
});
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await Promise.all([mock.close(), intake.close()]);
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: usage events to Aliyun SLS`, () => {
    test('a request: its event at the intake, signed, LZ4-compressed, every field as text', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        files: { 'resources.yaml': resources(mock, intake) },
        env: { CALLER_KEY, SLS_CRED_OPS_MAIN_AK_ID: SLS_KEY_ID, SLS_CRED_OPS_MAIN_AK_SECRET: SLS_SECRET },
      });
      running.push(gw);
      await gw.waitReady();
      mock.script({ body: chatCompletion('up-direct') });
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'direct', messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(15_000),
      });
      assert.equal(res.status, 200);
      await res.text();
      const id = res.headers.get('x-aisix-request-id')!;
      await until(() => intake.logs.some((l) => l.request_id === id), 10_000, 'the event at the intake');
      assert.deepEqual(intake.invalid, [], 'every PutLogs signed and encoded as SLS checks it');
      const log = intake.logs.find((l) => l.request_id === id)!;
      assert.equal(log.schema_version, '1.0');
      assert.equal(log.prompt_tokens, '1');
      assert.equal(log.completion_tokens, '3');
      assert.equal(log.status_code, '200');
      assert.equal(log.provider_request_id, 'chatcmpl-mock');
      assert.equal(log.guardrail_blocked, 'false');
      assert.match(log.__time__!, /^\d+$/);
      assert.doesNotMatch(JSON.stringify(intake.logs), /SECRET/);
      await gw.stop();
    });
  });
}
