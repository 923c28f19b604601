// `upstream.max_sse_event_bytes` reaches the streams Sluice translates (docs/configuration.md): a caller of
// OpenAI chat served by an Anthropic upstream gets the error event naming the configured bound once one
// event outgrows it, through app.request(); under the default bound the same stream passes whole.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import { anthropicEvents, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';

const KEY = 'sk-caller-bound';
const BOUND = 1024;
let mock: MockAnthropic;
before(async () => (mock = await startMockAnthropic()));
after(() => mock.close());

const resources = () =>
  `_format_version: "1"
provider_keys:
  - display_name: ant
    provider: anthropic
    api_key: sk-ant-test
    api_base: ${mock.url}
models:
  - display_name: m
    provider_key: ant
    model_name: claude-up
api_keys:
  - display_name: caller
    key_env: CALLER
    allowed_models: ["*"]
`;

/** A streamed chat request answered by one text delta of `size` characters. */
async function streamed(config: string, size: number): Promise<string> {
  const { gw } = await gatewayWith(resources(), { config, env: { CALLER: KEY } });
  mock.script({ events: anthropicEvents('claude-up', ['x'.repeat(size)]) });
  const r = await createProxyApp(gw).request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  }, { peer: '127.0.0.1:5' });
  assert.equal(r.status, 200);
  return r.text();
}

test('a translated stream ends with the error event at the configured bound', async () => {
  const body = await streamed(`${BASE_CONFIG}upstream: { max_sse_event_bytes: ${BOUND} }\n`, 2 * BOUND);
  const error = `data: ${
    JSON.stringify({
      error: {
        message: `upstream stream event over ${BOUND} bytes without an end (upstream.max_sse_event_bytes)`,
        type: 'upstream_error',
      },
    })
  }\n\n`;
  assert.ok(body.endsWith(error), body.slice(-400));
  assert.ok(!body.includes('x'.repeat(BOUND)), 'the oversized event was not relayed');
});

test('under the default bound the same stream passes whole', async () => {
  const body = await streamed(BASE_CONFIG, 2 * BOUND);
  assert.ok(body.includes('x'.repeat(2 * BOUND)));
  assert.ok(body.endsWith('data: [DONE]\n\n'), body.slice(-200));
});
