// The semantic rule layer and Aliyun's two guardrail kinds in a real gateway process on Node, Bun and Deno
// (docs/guardrails.md "semantic", "Aliyun"): each runtime signs Aliyun's RPC calls with its own WebCrypto
// (the mock refuses a form whose signature, nonce or timestamp Aliyun would refuse), runs the semantic kind's
// patterns on its own regex engine, and counts the spans left unjudged on /metrics. The echo provider
// answers the prompt back, so what it answers is what the guardrails let through to the upstream.
// Run: node build.mjs && node --import tsx --test test/process/guardrails-kinds-process.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ALIYUN_KEY_ID,
  ALIYUN_SECRET,
  ALIYUN_WORDS,
  type MockAliyun,
  startMockAliyun,
} from '../support/mock-aliyun.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

/** AISIX's example category: tool versions, with hotwords nearby and time units as negative evidence. */
const VERSIONS = {
  name: 'eda_version',
  description: 'a version number of an EDA tool',
  candidate_patterns: ['\\d+(?:\\.\\d+)+[A-Za-z]*'],
  negative_patterns: ['^\\s*(?:ns|ps|ms|s|seconds)\\b'],
  hotword_groups: [{ terms: ['version', 'upgraded'] }, { terms: ['PrimeTime', 'EDA'] }],
};

const resources = (aliyun: string) => {
  const creds = {
    region: 'cn-shanghai',
    endpoint: aliyun,
    access_key_id: ALIYUN_KEY_ID,
    access_key_secret: '${ALI_SECRET}',
  };
  const rows = [
    { name: 'sem', kind: 'semantic', categories: [VERSIONS] },
    { name: 'tm', kind: 'aliyun_text_moderation', hook_point: 'input', risk_level_threshold: 'medium', ...creds },
    { name: 'aig', kind: 'aliyun_ai_guardrail', stream_processing_mode: 'buffer_full', ...creds },
  ];
  return `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: echo, provider_key: offline, model_name: e1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
guardrails:
${rows.map((r) => `  - ${JSON.stringify(r)}`).join('\n')}
`;
};

let ali: MockAliyun;
const running: GatewayProcess[] = [];
before(async () => {
  ali = await startMockAliyun();
});
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await ali.close();
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: semantic and Aliyun guardrails`, () => {
    test('the rule layer masks, Aliyun blocks and masks with signed calls, unjudged spans are counted', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY, ALI_SECRET: ALIYUN_SECRET },
        files: { 'resources.yaml': resources(ali.url) },
      });
      running.push(gw);
      await gw.waitReady();
      const chat = async (content: string) => {
        const res = await fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
          body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content }] }),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        if (res.status !== 200) return { status: res.status, text };
        return {
          status: 200,
          text: (JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
        };
      };
      ali.calls.length = 0;

      // semantic: a hotword next to the version masks it before the upstream sees it.
      assert.deepEqual(await chat('PrimeTime 2022.03 is slow'), {
        status: 200,
        text: 'PrimeTime [EDA_VERSION_REDACTED] is slow',
      });
      // aliyun_text_moderation: a medium risk at threshold medium refuses the request.
      const blocked = await chat(`a ${ALIYUN_WORDS.medium} here`);
      assert.equal(blocked.status, 422);
      assert.equal(
        blocked.text,
        `{"error":{"message":"request blocked by content policy (guardrail 'tm')","type":"content_filter"}}`,
      );
      // aliyun_ai_guardrail: Aliyun's desensitized text replaces the prompt, so the echo answers it masked.
      assert.deepEqual(await chat(`call ${ALIYUN_WORDS.phone} now`), { status: 200, text: 'call 138****5678 now' });
      assert.deepEqual(ali.refused, [], 'every call signed as Aliyun checks it');
      const services = ali.calls.map((c) => c.service);
      assert.ok(
        services.includes('llm_query_moderation') && services.includes('query_security_check_pro'),
        `${services}`,
      );
      assert.ok(services.includes('response_security_check_pro'), 'the answer is checked too');
      const masked = ali.calls.find((c) =>
        c.service === 'response_security_check_pro' && String(c.serviceParameters.content).includes('138')
      );
      assert.equal(masked?.serviceParameters.content, 'call 138****5678 now', 'the upstream only ever saw the mask');
      const line = await gw.waitForLog((l) => l.msg === 'aliyun text moderation blocked content');
      assert.equal(line.aliyun_risk_level, 'medium');
      assert.match(String(line.aliyun_request_id), /^REQ-\d+$/);

      // A span only the model could decide is released and counted on /metrics.
      assert.deepEqual(await chat('the load average was 3.5'), { status: 200, text: 'the load average was 3.5' });
      const metrics = await (await fetch(gw.url('/metrics', 'status'))).text();
      const semantic = metrics.split('\n').filter((l) => l.startsWith('aisix_guardrail_semantic_'));
      // Input and output hooks each see the band span; the row asks its (absent) engine once per category.
      assert.deepEqual(semantic, [
        'aisix_guardrail_semantic_degraded_total{reason="engine_failed"} 1',
        'aisix_guardrail_semantic_degraded_total{reason="prototype_unavailable"} 2',
      ]);
      assert.ok(!metrics.includes('aisix_guardrail_semantic_model_calls_total'));
    });
  });
}
