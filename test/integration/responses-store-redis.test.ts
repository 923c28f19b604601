// The Responses store on a real Redis (docs/routing.md "Responses state"): two gateways sharing one Redis
// continue each other's translated answers, by `previous_response_id` and by `item_reference`, under
// `sluice:responses:<owner>:<id>` keys with the configured TTL; another key still gets the 400; while Redis is
// down, a 503 that says so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import type { Gateway } from '../../src/gateway.ts';
import type { RedisClient } from '../../src/platform.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { RESPONSES_STORE_MSG } from '../../src/responses/store.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';
import { until } from '../support/until.ts';
import { redisCli, type RedisServer, startRedis } from '../support/redis.ts';

const A = 'sk-fleet-a';
const B = 'sk-fleet-b';
type Json = Record<string, unknown>;

let redis: RedisServer;
let mock: MockUpstream;
const gateways: Gateway[] = [];
const logs: Record<string, unknown>[][] = [];
const clients: RedisClient[] = [];
let apps: ReturnType<typeof createProxyApp>[] = [];

const keys = () => redisCli(redis.port, '--scan', '--pattern', 'sluice:responses:*').split('\n').filter(Boolean);

/** The write is off the caller's path: until the response's key is in Redis. */
async function landed(id: string): Promise<void> {
  // Generous: each poll runs redis-cli, and a loaded CI machine runs the files two at a time.
  await until(() => keys().some((k) => k.endsWith(`:${id}`)), 20_000, `the stored ${id}`);
}

async function post(app: ReturnType<typeof createProxyApp>, body: Json, key = A) {
  const res = await app.request('/v1/responses', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() as Json };
}

describe('responses_store on Redis, two gateways', { timeout: 60_000 }, () => {
  before(async () => {
    redis = await startRedis();
    mock = await startMockUpstream({ rules: true });
    const resources = `_format_version: "1"
provider_keys:
  - { display_name: ds, provider: deepseek, adapter: openai, api_key: k-ds, api_base: "${mock.base}" }
models:
  - { display_name: deep, provider_key: ds, model_name: deep-upstream, retries: 0 }
api_keys:
  - { display_name: a, key_env: KEY_A, allowed_models: ["*"] }
  - { display_name: b, key_env: KEY_B, allowed_models: ["*"] }
`;
    const config = `${BASE_CONFIG}responses_store: { backend: redis, ttl_secs: 120, redis: { url: "${redis.url}" } }\n`;
    for (let i = 0; i < 2; i++) {
      const { gw, platform } = await gatewayWith(resources, {
        config,
        env: { KEY_A: A, KEY_B: B },
        redis: (o) => {
          const c = ioredisClient(o);
          clients.push(c);
          return c;
        },
      });
      gateways.push(gw);
      logs.push(platform.logs);
    }
    apps = gateways.map((gw) => createProxyApp(gw));
  });
  after(async () => {
    for (const gw of gateways) gw.stop();
    await Promise.all(clients.map((c) => c.quit().catch(() => {})));
    await mock?.close();
    await redis?.close();
  });

  test('an answer from one gateway continues on the other; another key gets the 400', async () => {
    assert.equal(gateways[0]!.responses.store.kind, 'redis');
    mock.script({
      body: {
        ...chatCompletion('deep-upstream'),
        choices: [{
          index: 0,
          message: {
            role: 'assistant',
            content: 'Checking.',
            tool_calls: [{ id: 'call_r', type: 'function', function: { name: 'weather', arguments: '{}' } }],
          },
          finish_reason: 'tool_calls',
        }],
      },
    });
    const turn1 = await post(apps[0]!, { model: 'deep', input: 'weather?' });
    assert.equal(turn1.status, 200);
    const id = String(turn1.json.id);
    const fc = (turn1.json.output as Json[]).find((i) => i.type === 'function_call')!;
    await landed(id);
    const stored = keys();
    assert.equal(stored.length, 3, stored.join(', ')); // the response, its message and its function call
    assert.ok(stored.some((k) => k.endsWith(`:${id}`)));
    const ttl = Number(redisCli(redis.port, 'TTL', stored.find((k) => k.endsWith(`:${id}`))!));
    assert.ok(ttl > 110 && ttl <= 120, `TTL ${ttl}`);

    const turn2 = await post(apps[1]!, {
      model: 'deep',
      input: [
        { role: 'user', content: 'weather?' },
        { type: 'item_reference', id: fc.id },
        { type: 'function_call_output', call_id: 'call_r', output: 'rain' },
      ],
    });
    assert.equal(turn2.status, 200, JSON.stringify(turn2.json));
    assert.deepEqual((mock.requests.at(-1)!.json!.messages as Json[]).map((m) => m.role), [
      'user',
      'assistant',
      'tool',
    ]);

    await landed(String(turn2.json.id));
    // The chain across the fleet: the second answer (kept by the other gateway) holds the whole conversation.
    const turn3 = await post(apps[0]!, { model: 'deep', input: 'thanks', previous_response_id: turn2.json.id });
    assert.equal(turn3.status, 200, JSON.stringify(turn3.json));
    assert.deepEqual(mock.requests.at(-1)!.json!.messages, [
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_r', type: 'function', function: { name: 'weather', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_r', content: 'rain' },
      { role: 'assistant', content: 'hi from mock' },
      { role: 'user', content: 'thanks' },
    ]);

    const other = await post(apps[1]!, { model: 'deep', input: 'x', previous_response_id: id }, B);
    assert.equal(other.status, 400);
    assert.match(String((other.json.error as Json).message), new RegExp(`"${id}" is not known`));
  });

  test('Redis down: a 503 saying so, not an unknown id; one WARN', async () => {
    await redis.stop();
    try {
      const r = await post(apps[0]!, { model: 'deep', input: 'x', previous_response_id: 'resp_any' });
      assert.equal(r.status, 503, JSON.stringify(r.json));
      assert.match(String((r.json.error as Json).message), /^the responses store is unreachable/);
      const warns = () => logs[0]!.filter((l) => l.msg === RESPONSES_STORE_MSG.lookupFailed);
      await until(() => warns().length > 0, 10_000, 'the store-unreachable WARN');
      assert.equal(warns().length, 1);
    } finally {
      await redis.start();
    }
  });
});
