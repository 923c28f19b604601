// Two Node gateway replicas on one real Redis hold one budget (docs/budgets.md "Redis"): concurrent calls
// spread over both admit exactly what fits, both refuse at the limit (whole and streamed calls), and each
// replica's /metrics reports the shared spend after its own charges.
// Run: node build.mjs && node --import tsx --test test/process/budget-redis-fleet.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { sumSamples } from '../support/metrics.ts';

const KEY = 'sk-budget-fleet';
let redis: RedisServer;
let mock: MockUpstream;
let replicas: GatewayProcess[] = [];

before(async () => {
  redis = await startRedis();
  mock = await startMockUpstream();
  const resources = `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: "${mock.base}" }
models:
  - { display_name: gpt, model_name: gpt-up, provider_key: mock, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
api_keys:
  - { display_name: fleet, key_env: FLEET_KEY, allowed_models: ["*"], budgets: [{ window: monthly, limit_usd: 1 }] }
`;
  const config = baseConfig(
    `budgets: { backend: redis, redis: { url: "${redis.url}", timeout_secs: 2, command_timeout_ms: 1000 } }\n`,
  );
  replicas = await Promise.all(
    [0, 1].map(() => spawnGateway({ config, files: { 'resources.yaml': resources }, env: { FLEET_KEY: KEY } })),
  );
  await Promise.all(replicas.map((g) => g.waitReady()));
});

after(async () => {
  await Promise.all(replicas.map((g) => g.stop()));
  await mock.close();
  await redis.close();
});

const call = (g: GatewayProcess, extra: Record<string, unknown> = {}) =>
  fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt', max_tokens: 150, messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });

test('two replicas admit exactly what fits in the shared budget, then both refuse', async () => {
  // $0.30 spent per call; each reserves about $0.32, so three fit in $1 however the calls interleave.
  mock.setDefault({
    delayMs: 100,
    body: { ...chatCompletion('gpt-up'), usage: { prompt_tokens: 20, completion_tokens: 140, total_tokens: 160 } },
  });
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call(replicas[i % 2]!)));
  await Promise.all(answers.map((r) => r.arrayBuffer()));
  const statuses = answers.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 3, statuses.join(' '));
  assert.equal(statuses.filter((s) => s === 429).length, 17, statuses.join(' '));
  assert.equal(mock.requests.length, 3);

  for (const g of replicas) {
    for (const extra of [{}, { stream: true }]) {
      const res = await call(g, extra);
      assert.equal(res.status, 429);
      assert.match(res.headers.get('x-sluice-budget') ?? '', /^api_key:.+:monthly$/);
      assert.match(res.headers.get('x-sluice-budget-reset') ?? '', /^\d{4}-\d{2}-01T00:00:00\.000Z$/);
      const body = (await res.json()) as { error: { code: string; spent_usd: string; limit_usd: string } };
      assert.deepEqual([body.error.code, body.error.spent_usd, body.error.limit_usd], [
        'budget_exceeded',
        '0.90',
        '1.00',
      ]);
    }
  }
  assert.equal(mock.requests.length, 3, 'no refused call reached the upstream');

  const spent = await Promise.all(replicas.map(async (g) => {
    const text = await (await fetch(g.url('/metrics', 'status'))).text();
    return sumSamples(text, 'aisix_budget_spent_usd');
  }));
  assert.deepEqual(spent, [0.9, 0.9], 'each replica saw the shared spend at its last reservation');
});
