// Budgets on the paths outside the chat family (docs/budgets.md "Joining budgets"): a media call reserved and
// charged at its model's cost, a passthrough request charged the tokens its upstream reported at the price of the
// model its body names and refused at a hard budget, and an MCP tool call, an A2A call and a Realtime session
// refused once their key's budget has no room left.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { sumSamples } from '../support/metrics.ts';
import { MEDIA_KEY, type MockMedia, startMockMedia } from '../support/mock-media.ts';
import { gatewayWith } from '../support/platform.ts';

const KEYS = { MEDIA: 'sk-media-capped', RAW: 'sk-raw-capped', SPENT: 'sk-spent' };
let media: MockMedia;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  media = await startMockMedia();
  // Nothing listens on the MCP server's or the agent's address: a refused call never reaches them.
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: media, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${media.base}" }
models:
  - { display_name: image, provider_key: media, model_name: gpt-image-1, retries: 0, cost: { input_per_1k: 1, output_per_1k: 1 } }
mcp_servers: [{ name: tools, url: "http://127.0.0.1:9/mcp" }]
a2a_agents: [{ name: echo, url: "http://127.0.0.1:9" }]
passthrough_routes:
  - { name: raw, path_prefix: /raw, target_url: "${media.base}", provider_key: media }
api_keys:
  - { display_name: media, key_env: MEDIA, allowed_models: ["*"], budgets: [{ window: daily, limit_usd: 2 }] }
  - { display_name: raw, key_env: RAW, allowed_models: [], allowed_routes: [raw], budgets: [{ window: daily, limit_usd: 2 }] }
  - display_name: spent
    key_env: SPENT
    allowed_models: ["*"]
    mcp_access: { allow: ["*"] }
    allowed_agents: ["*"]
    budgets: [{ window: daily, limit_tokens: 100 }]
`,
    { env: KEYS },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await media.close();
});

const keyId = (name: string) => [...gw.snapshot!.apiKeys.values()].find((k) => k.display_name === name)!.id;
const spentUsd = (name: string) =>
  sumSamples(gw.metrics.registry.render(), 'sluice_budget_spent_usd', { subject: keyId(name) });
const post = (path: string, body: unknown, key: string) =>
  Promise.resolve(app.request(path, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify(body),
  }, { peer: '127.0.0.1:1' }));

/** The mock's gpt-image-1 answer: 11 in + 1056 out at $1/1K each = $1.067, whatever `max_tokens` says. */
const image = (model: string, maxTokens: number) => ({ model, prompt: 'a lighthouse', max_tokens: maxTokens });

async function assertBudgetRefusal(res: Response): Promise<void> {
  assert.equal(res.status, 429);
  const body = await res.json() as { error: { code: string; type: string } };
  assert.equal(body.error.code, 'budget_exceeded');
  assert.equal(body.error.type, 'billing_error');
}

describe('media and passthrough spend', () => {
  test('an image generation is charged at its model cost; the next that may not fit is refused', async () => {
    const first = await post('/v1/images/generations', image('image', 900), KEYS.MEDIA);
    assert.equal(first.status, 200);
    await first.arrayBuffer();
    assert.equal(spentUsd('media'), 1.067);
    const sent = media.requests.length;
    // Reserves about 910 tokens at $1/1K: $1.067 + $0.91 fits $2; 1000 output tokens more does not.
    await assertBudgetRefusal(await post('/v1/images/generations', image('image', 1000), KEYS.MEDIA));
    assert.equal(media.requests.length, sent, 'nothing sent upstream');
  });

  test('a passthrough request is charged the reported tokens at the price of the model its body names', async () => {
    const first = await post('/raw/images/generations', image('gpt-image-1', 900), KEYS.RAW);
    assert.equal(first.status, 200);
    await first.arrayBuffer();
    assert.equal(spentUsd('raw'), 1.067);
    const sent = media.requests.length;
    await assertBudgetRefusal(await post('/raw/images/generations', image('gpt-image-1', 1000), KEYS.RAW));
    assert.equal(media.requests.length, sent, 'nothing relayed');
  });
});

describe('calls that spend nothing themselves', () => {
  test('a key whose token budget is spent may not call MCP tools or A2A agents', async () => {
    // Reserves about 20 tokens, spends the answer's 1067: the budget of 100 has no room left.
    const spend = await post('/v1/images/generations', image('image', 1), KEYS.SPENT);
    assert.equal(spend.status, 200);
    await spend.arrayBuffer();
    const tool = await post('/mcp', {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'tools__echo', arguments: { text: 'x' } },
    }, KEYS.SPENT);
    await assertBudgetRefusal(tool);
    const agent = await post('/a2a/echo', {
      jsonrpc: '2.0',
      id: 1,
      method: 'message/send',
      params: { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] } },
    }, KEYS.SPENT);
    await assertBudgetRefusal(agent);
    // A Realtime session is admitted only while its budgets have room: refused before the upgrade, and before
    // any upstream socket is opened.
    let opened = 0;
    const platform = gw.platform;
    const withSockets = gw as unknown as { platform: typeof platform };
    withSockets.platform = {
      ...platform,
      connectWebSocket: () => {
        opened++;
        throw new Error('no upstream for a refused session');
      },
    };
    const realtime = createProxyApp(gw);
    let upgraded = 0;
    const session = await realtime.request('/v1/realtime?model=image', {
      headers: {
        authorization: `Bearer ${KEYS.SPENT}`,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    }, {
      peer: '127.0.0.1:1',
      upgradeWebSocket: () => {
        upgraded++;
        throw new Error('a refused session is never upgraded');
      },
    });
    withSockets.platform = platform;
    await assertBudgetRefusal(session);
    assert.equal(upgraded, 0);
    assert.equal(opened, 0);
  });
});
