// The declared-length 413 against real listeners (docs/aisix-compatibility.md "Logs".5): a caller still sending a body
// far over `proxy.request_body_limit_bytes` reads the 413 (the gateway drains what it sends), without
// credentials (refused before authentication), and the gateway writes its `aisix::body_limit` line.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

const RESOURCES = `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: echo, provider_key: offline, model_name: e1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;

const running: GatewayProcess[] = [];
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: request body limit`, () => {
    test('a 2 MiB body over a 1 KiB limit: 413 read by the caller, drained, logged', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig().replace(
          'proxy: { addr: "127.0.0.1:{{proxy}}" }',
          'proxy: { addr: "127.0.0.1:{{proxy}}", request_body_limit_bytes: 1024 }',
        ),
        env: { CALLER_KEY },
        files: { 'resources.yaml': RESOURCES },
      });
      running.push(gw);
      await gw.waitReady();
      const big = 'x'.repeat(2 * 1024 * 1024);
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-aisix-request-id': `big-${runtime}` },
        body: big,
        signal: AbortSignal.timeout(15_000),
      });
      assert.equal(res.status, 413);
      assert.deepEqual(await res.json(), {
        error: { message: 'request body exceeds 1024-byte limit', type: 'invalid_request_error' },
      });
      const line = await gw.waitForLog((l) => l.target === 'aisix::body_limit');
      assert.equal(line.level, 'INFO');
      assert.equal(line.msg, 'request body exceeded the configured limit');
      assert.equal(line.request_id, `big-${runtime}`);
      assert.equal(line.declared_content_length, big.length);
      assert.equal(line.drained_bytes, big.length);
      assert.equal(line.drain_outcome, 'completed');
      const access = await gw.waitForLog((l) =>
        l.msg === 'proxy request completed' && l.request_id === `big-${runtime}`
      );
      assert.equal(access.status, 413);
      assert.equal(access.target, 'aisix_obs::access_log');
      // the gateway still serves
      const ok = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(ok.status, 200);
      await ok.text();
    });
  });
}
