// Guardrails in a real gateway process on Node, Bun and Deno (docs/guardrails.md): an input block, an output
// block on a whole answer and on a stream (the error frame, no [DONE]), an output mask on a stream, from a
// resources file, with the echo provider answering the prompt back.
// Run: node build.mjs && node --import tsx --test test/process/guardrails-process.test.ts
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

const RESOURCES = `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: echo, provider_key: offline, model_name: e1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden }] }
  - { name: answers, kind: keyword, hook_point: output, patterns: [{ kind: regex, value: "(?i)secret\\\\s*word" }] }
  - { name: pii, kind: pii, hook_point: output, detectors: [{ type: email }] }
`;

const running: GatewayProcess[] = [];
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
});

const block = (side: string, name: string) =>
  `{"error":{"message":"${side} blocked by content policy (guardrail '${name}')","type":"content_filter"}}`;

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: guardrails`, () => {
    test('input and output blocks, a stream blocked and a stream masked', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': RESOURCES },
      });
      running.push(gw);
      await gw.waitReady();
      const chat = (content: string, stream = false) =>
        fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
          body: JSON.stringify({ model: 'echo', stream, messages: [{ role: 'user', content }] }),
          signal: AbortSignal.timeout(15_000),
        });
      const input = await chat('a forbidden prompt');
      assert.equal(input.status, 422);
      assert.equal(await input.text(), block('request', 'words'));
      const output = await chat('say the Secret Word');
      assert.equal(output.status, 422);
      assert.equal(await output.text(), block('response', 'answers'));
      const stream = await chat('one two secret word three', true);
      assert.equal(stream.status, 200);
      const st = await stream.text();
      assert.ok(st.endsWith(`event: error\ndata: ${block('response', 'answers')}\n\n`), st);
      assert.ok(!st.includes('[DONE]') && !st.includes('one'), 'nothing of the answer, no terminator');
      const masked = await chat('mail bob@example.com now', true);
      const mt = await masked.text();
      const text = mt.split('\n').filter((l) => l.startsWith('data: {')).map((l) =>
        JSON.parse(l.slice(6)).choices[0].delta.content ?? ''
      ).join('');
      assert.equal(text, 'mail [EMAIL_REDACTED] now');
      assert.ok(mt.endsWith('data: [DONE]\n\n'));
      const line = await gw.waitForLog((l) => l.msg === 'guardrail blocked request');
      assert.equal(line.guardrail, 'words');
    });
  });
}
