// Black-box: the official `@anthropic-ai/sdk` pointed at a passthrough route of a real gateway process on Node,
// Bun and Deno (docs/endpoints.md "Passthrough routes"): the route injects the provider key's `x-api-key` and
// `anthropic-version` (the mock refuses anything else, as the real API does), the caller's gateway key never
// reaches the upstream, and a streamed answer arrives event by event through the SDK.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { MESSAGE_USAGE, type ProviderMock, startProviderMock } from '../support/passthrough-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const UPSTREAM_KEY = 'sk-ant-upstream-SECRET-process';

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`a passthrough route under the Anthropic SDK (${runtime})`, { timeout: 120_000 }, () => {
    let mock: ProviderMock;
    let gw: GatewayProcess;
    let client: Anthropic;
    before(async () => {
      mock = await startProviderMock({ anthropic: UPSTREAM_KEY });
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: {
          'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: ant, provider: anthropic, secret: ${UPSTREAM_KEY} }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: [], allowed_routes: [raw-anthropic] }
passthrough_routes:
  - { name: raw-anthropic, path_prefix: /raw/anthropic, target_url: "${mock.url}", provider_key: ant }
`,
        },
      });
      await gw.waitReady();
      client = new Anthropic({ apiKey: CALLER_KEY, baseURL: gw.url('/raw/anthropic'), maxRetries: 0 });
    });
    after(async () => {
      await gw?.stop();
      await mock?.close();
    });

    test('messages.create: the upstream sees the injected key, never the caller key', async () => {
      const m = await client.messages.create({
        model: 'claude-sonnet-4',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      });
      assert.deepEqual(m.content, [{ type: 'text', text: 'Hello there' }]);
      assert.deepEqual(m.usage, MESSAGE_USAGE);
      const seen = mock.requests.at(-1)!;
      assert.equal(seen.url, '/v1/messages');
      assert.equal(seen.headers['x-api-key'], UPSTREAM_KEY);
      assert.ok(seen.headers['anthropic-version'], 'the SDK’s own version header is relayed');
      assert.equal(JSON.stringify(seen.headers).includes(CALLER_KEY), false);
    });

    test('messages.stream: every event through, the final message whole', async () => {
      const stream = client.messages.stream({
        model: 'claude-sonnet-4',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      });
      let text = '';
      stream.on('text', (t) => {
        text += t;
      });
      const final = await stream.finalMessage();
      assert.equal(text, 'Hello there');
      assert.equal(final.stop_reason, 'end_turn');
      assert.equal(final.usage.output_tokens, MESSAGE_USAGE.output_tokens);
      await until(
        () =>
          gw.logs.some((l) =>
            l.msg === 'proxy request completed' && l.provider === 'raw-anthropic' && l.completion_tokens === 7
          ),
        10_000,
        'the access log line with the streamed answer’s tokens',
      );
    });

    test('a compressed answer arrives decodable (relayed encoded, or decoded without its encoding header)', async () => {
      const res = await fetch(gw.url('/raw/anthropic/v1/gzip'), {
        headers: { 'x-api-key': CALLER_KEY, 'accept-encoding': 'gzip' },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { zipped: true });
    });

    test('a wrong caller key: 401 from the gateway, nothing sent upstream', async () => {
      const before = mock.requests.length;
      const bad = new Anthropic({ apiKey: 'sk-not-a-key', baseURL: gw.url('/raw/anthropic'), maxRetries: 0 });
      await assert.rejects(
        bad.messages.create({ model: 'x', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof Anthropic.AuthenticationError,
      );
      assert.equal(mock.requests.length, before);
    });
  });
}
