// allowed_cidrs against real listeners (docs/aisix-compatibility.md "Resources"): the peer address each runtime reports
// (`127.0.0.1:port`, or an IPv4-mapped `[::ffff:127.0.0.1]:port` on a dual-stack socket) is matched as the
// caller's IPv4 address; a model whose list excludes it answers 403 before any upstream call.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

const RESOURCES = `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: local, provider_key: offline, model_name: e1, allowed_cidrs: ["127.0.0.0/8", "::1/128"] }
  - { display_name: lan, provider_key: offline, model_name: e2, allowed_cidrs: ["10.0.0.0/8"] }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;

const running: GatewayProcess[] = [];
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: allowed_cidrs with the connection's peer`, () => {
    test('127.0.0.1 is inside 127.0.0.0/8 and outside 10.0.0.0/8', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': RESOURCES },
      });
      running.push(gw);
      await gw.waitReady();
      const chat = (model: string) =>
        fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
        });
      const ok = await chat('local');
      assert.equal(ok.status, 200, await ok.clone().text());
      await ok.text();
      const no = await chat('lan');
      assert.equal(no.status, 403);
      assert.equal((await no.json() as { error: { code: string } }).error.code, 'ip_restricted');
      const line = await gw.waitForLog((l) => l.msg === 'request rejected: client IP not in model allowed_cidrs');
      assert.equal(line.source_ip, '127.0.0.1');
      assert.equal(line.target, 'aisix_proxy::dispatch');
    });
  });
}
