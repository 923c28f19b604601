// No upstream redirect is followed, on Node, Bun and Deno (docs/security.md "Upstream URLs and
// credentials"): keys whose upstream answers 307 or 308 to a second recording server, which must receive
// nothing — no `x-api-key`, no Azure `api-key`, no prompt — while the caller gets a 502 upstream failure in
// its own envelope, never the 3xx and never the second server's answer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { type RedirectPair, startRedirectPair } from '../support/redirect-upstream.ts';

const OPENAI_KEY = 'sk-openai-REDIR-KEY-1111';
const ANTHROPIC_KEY = 'sk-ant-REDIR-KEY-2222';
const AZURE_KEY = 'AZURE-REDIR-KEY-3333';
const PROMPT = 'confidential prompt';

function resources(base: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: ${OPENAI_KEY}, api_base: "${base}/v1" }
  - { display_name: ant, provider: anthropic, api_key: ${ANTHROPIC_KEY}, api_base: "${base}" }
  - { display_name: az, adapter: azure-openai, api_key: ${AZURE_KEY}, api_base: "${base}" }
models:
  - { display_name: m-oai, provider_key: oai, model_name: gpt-4o, retries: 0 }
  - { display_name: m-oai-308, provider_key: oai, model_name: gpt-308, retries: 0 }
  - { display_name: m-ant, provider_key: ant, model_name: claude-3, retries: 0 }
  - { display_name: m-az, provider_key: az, model_name: dep1, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

let pair: RedirectPair;
const running: GatewayProcess[] = [];
before(async () => {
  pair = await startRedirectPair();
});
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await pair.close();
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: an upstream that redirects`, () => {
    let gw: GatewayProcess;

    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': resources(pair.redirector.url) },
      });
      running.push(gw);
      await gw.waitReady();
    });

    after(async () => {
      await gw.stop();
    });

    test('307 and 308 on three wires: a 502 upstream failure; the redirect target receives nothing', async () => {
      const sentBefore = pair.redirector.requests.length;
      const calls: [string, string, unknown][] = [
        ['m-oai', '/v1/chat/completions', { messages: [{ role: 'user', content: PROMPT }] }],
        ['m-oai-308', '/v1/chat/completions', { messages: [{ role: 'user', content: PROMPT }] }],
        ['m-az', '/v1/chat/completions', { messages: [{ role: 'user', content: PROMPT }] }],
        ['m-ant', '/v1/messages', { max_tokens: 8, messages: [{ role: 'user', content: PROMPT }] }],
      ];
      for (const [model, path, body] of calls) {
        const res = await fetch(gw.url(path), {
          method: 'POST',
          headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model, ...body as object }),
          redirect: 'manual',
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        assert.equal(res.status, 502, `${model}: ${text}`);
        assert.equal(res.headers.get('location'), null, model);
        const json = JSON.parse(text) as { type?: string; error: { type: string; message: string } };
        if (path === '/v1/messages') assert.equal(json.type, 'error', 'the Anthropic envelope');
        assert.match(json.error.message, /redirect/, model);
        assert.doesNotMatch(text, /stolen|steal/, model);
      }
      assert.equal(pair.redirector.requests.length - sentBefore, 4, 'each call reached the redirecting upstream once');
      assert.equal(
        pair.target.requests.length,
        0,
        `the redirect target received: ${pair.target.requests.map((r) => `${r.path} ${r.body}`).join('\n')}`,
      );
    });
  });
}
