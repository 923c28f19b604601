// Budgets through the proxy app (docs/budgets.md): calls charged at the serving model's cost until a hard
// budget refuses with AISIX's envelope and the budget's headers, every spending endpoint refused at the limit
// and charged under it, an aborted stream charged, the window reset on the gateway's clock, a team budget's
// threshold POSTed to the webhook, and no budget step while none is configured.
// Run: node --import tsx --test test/unit/budget-proxy.test.ts
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Budgets } from '../../src/budgets/budgets.ts';
import { MemoryBudgetStore } from '../../src/budgets/store.ts';
import { budgetStep } from '../../src/proxy/budgets.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import { chatCompletion, chunk } from '../support/mock-upstream.ts';
import { sumSamples } from '../support/metrics.ts';
import { BASE_CONFIG } from '../support/platform.ts';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';
import { latch, until } from '../support/until.ts';

const KEYS = {
  CAPPED: 'sk-capped',
  TOKENS: 'sk-tokens',
  TEAM: 'sk-team',
  OPEN: 'sk-open',
  BOB: 'sk-bob',
  STREAMER: 'sk-streamer',
  LEAVER: 'sk-leaver',
};
const clock = { now: Date.parse('2026-12-05T12:00:00Z') };
const hook: { url: string; posts: Record<string, unknown>[]; server?: http.Server } = { url: '', posts: [] };

before(async () => {
  hook.server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    hook.posts.push({ ...JSON.parse(Buffer.concat(parts).toString('utf8')), auth: req.headers['x-hook-token'] });
    res.end();
  });
  await new Promise<void>((r) => hook.server!.listen(0, '127.0.0.1', r));
  hook.url = `http://127.0.0.1:${(hook.server!.address() as AddressInfo).port}/budget`;
});
after(() => hook.server?.close());

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicBase}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: claude, provider_key: an, model_name: claude-upstream, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: metered, provider_key: oa, model_name: gpt-upstream, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 }, budgets: [{ window: daily, limit_usd: 0.5 }] }
api_keys:
  - { display_name: capped, key_env: CAPPED, allowed_models: ["*"], budgets: [{ window: daily, limit_usd: 1 }] }
  - { display_name: tokens, key_env: TOKENS, allowed_models: ["*"], budgets: [{ window: monthly, limit_tokens: 1 }] }
  - { display_name: team, key_env: TEAM, allowed_models: ["*"], team_id: red }
  - { display_name: bob, key_env: BOB, allowed_models: ["*"], user_id: bob }
  - { display_name: streamer, key_env: STREAMER, allowed_models: ["*"], budgets: [{ window: daily, limit_tokens: 100000 }] }
  - { display_name: leaver, key_env: LEAVER, allowed_models: ["*"], budgets: [{ window: daily, limit_tokens: 100000 }] }
  - { display_name: open, key_env: OPEN, allowed_models: ["*"], budgets: [{ name: big, window: weekly, limit_usd: 1000 }] }
`,
  {
    env: KEYS,
    now: () => new Date(clock.now),
    // The webhook's address is known once its server listens: read when the gateway is built (in `before`).
    get config() {
      return `${BASE_CONFIG}budgets:
  webhook: { url: "${hook.url}", headers: { x-hook-token: t0k } }
  teams:
    red: [{ name: month, window: monthly, limit_usd: 1, alert_thresholds: [0.5] }]
  users:
    bob: [{ window: daily, limit_tokens: 200 }]
`;
    },
  },
);

const user = [{ role: 'user', content: 'hi' }];
/** What the mock says each chat call used: 20 in at $1/1K + 140 out at $2/1K = $0.30. */
const USED = { prompt_tokens: 20, completion_tokens: 140, total_tokens: 160 };
const keyId = (name: string) => [...rig.gw.snapshot!.apiKeys.values()].find((k) => k.display_name === name)!.id;
const spentTokens = (subject: string, budget: string) =>
  sumSamples(rig.gw.metrics.registry.render(), 'sluice_budget_spent_tokens', { subject, budget }) ?? 0;

describe('a hard USD budget on a key', () => {
  test('calls are charged at the model’s cost until the next one may not fit: 429 with the budget', async () => {
    rig.mock.setDefault({ body: { ...chatCompletion('gpt-upstream'), usage: USED } });
    const before = rig.mock.requests.length;
    const body = { model: 'gpt', max_tokens: 150, messages: user };
    for (let i = 0; i < 3; i++) assert.equal((await rig.post('/v1/chat/completions', body, KEYS.CAPPED)).status, 200);
    const res = await rig.post('/v1/chat/completions', body, KEYS.CAPPED);
    assert.equal(res.status, 429);
    assert.equal(rig.mock.requests.length - before, 3, 'the refused call reached no upstream');
    const id = keyId('capped');
    assert.equal(res.headers.get('x-sluice-budget'), `api_key:${id}:daily`);
    assert.equal(res.headers.get('x-sluice-budget-reset'), '2026-12-06T00:00:00.000Z');
    assert.equal(res.headers.get('retry-after'), '43200');
    const prompt = Math.ceil(JSON.stringify(body).length / 3);
    const mayCost = ((prompt * 1000 + 150 * 2000) / 1e6).toFixed(2);
    assert.deepEqual(await res.json(), {
      error: {
        message: `budget exceeded: API key '${id}' budget 'daily' has $0.10 of $1.00 left and this call may cost ` +
          `up to $${mayCost}; lower max_tokens or wait: it resets at 2026-12-06T00:00:00.000Z`,
        type: 'billing_error',
        code: 'budget_exceeded',
        scope: 'api_key',
        scope_ref: id,
        budget: 'daily',
        period: 'daily',
        limit_usd: '1.00',
        spent_usd: '0.90',
        remaining_usd: '0.10',
        period_resets_at: '2026-12-06T00:00:00.000Z',
        retry_after_seconds: 43200,
      },
    });
    const text = rig.gw.metrics.registry.render();
    assert.equal(sumSamples(text, 'aisix_budget_remaining_usd', { api_key_id: id }), 0.1);
    assert.equal(sumSamples(text, 'aisix_budget_details_present', { api_key_id: id }), 1);
    assert.equal(sumSamples(text, 'sluice_budget_refusals_total', { subject: id }), 1);
  });

  test('a smaller maximum still fits; the next day the window has reset', async () => {
    const small = { model: 'gpt', max_tokens: 10, messages: user };
    rig.mock.setDefault({
      body: { ...chatCompletion('gpt-upstream'), usage: { prompt_tokens: 5, completion_tokens: 10 } },
    });
    assert.equal((await rig.post('/v1/chat/completions', small, KEYS.CAPPED)).status, 200);
    rig.mock.setDefault({ body: { ...chatCompletion('gpt-upstream'), usage: USED } });
    const big = { model: 'gpt', max_tokens: 150, messages: user };
    assert.equal((await rig.post('/v1/chat/completions', big, KEYS.CAPPED)).status, 429);
    clock.now += 86_400_000;
    assert.equal((await rig.post('/v1/chat/completions', big, KEYS.CAPPED)).status, 200);
  });
});

describe('every spending endpoint', () => {
  const calls: [string, Record<string, unknown>][] = [
    ['/v1/chat/completions', { model: 'gpt', messages: user }],
    ['/v1/completions', { model: 'gpt', prompt: 'hi' }],
    ['/v1/embeddings', { model: 'gpt', input: 'hi' }],
    ['/v1/messages', { model: 'claude', max_tokens: 5, messages: user }],
    ['/v1/responses', { model: 'gpt', input: 'hi' }],
  ];

  test('is refused at the limit, before any upstream; Anthropic’s in its envelope', async () => {
    const [openai, anthropic] = [rig.mock.requests.length, rig.anth.requests.length];
    for (const [path, body] of calls) {
      const res = await rig.post(path, body, KEYS.TOKENS);
      assert.equal(res.status, 429, path);
      assert.equal(res.headers.get('x-sluice-budget'), `api_key:${keyId('tokens')}:monthly`, path);
      const json = await res.json() as { error: { type: string; message: string }; type?: string };
      if (path === '/v1/messages') {
        assert.equal(json.type, 'error');
        assert.equal(json.error.type, 'rate_limit_error');
      } else assert.equal(json.error.type, 'billing_error', path);
      assert.match(json.error.message, /^budget exceeded: API key '.+' budget 'monthly' has 1 of 1 tokens left/, path);
    }
    assert.equal(rig.mock.requests.length, openai);
    assert.equal(rig.anth.requests.length, anthropic);
  });

  test('counting tokens spends nothing and is never refused', async () => {
    const body = { model: 'claude', messages: user };
    assert.equal((await rig.post('/v1/messages/count_tokens', body, KEYS.TOKENS)).status, 200);
  });

  test('is charged under the limit', async () => {
    rig.mock.setDefault({});
    const id = keyId('open');
    for (const [path, body] of calls) {
      const before = spentTokens(id, 'big');
      const res = await rig.post(path, body, KEYS.OPEN);
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
      await res.arrayBuffer();
      assert.ok(spentTokens(id, 'big') > before, `${path} charged`);
    }
  });
});

test('an aborted stream is charged its estimate', async () => {
  const id = keyId('open');
  const before = spentTokens(id, 'big');
  const hold = latch();
  rig.mock.script({
    sse: [chunk('gpt-upstream', 'hello there'), chunk('gpt-upstream', ' more')],
    chunkHolds: [hold.promise],
  });
  const res = await rig.post('/v1/chat/completions', { model: 'gpt', stream: true, messages: user }, KEYS.OPEN);
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  await reader.cancel();
  hold.resolve();
  await until(() => spentTokens(id, 'big') > before, 5000, 'the aborted stream charged');
});

test('a caller who leaves before any answer is charged the prompt’s reservation', async () => {
  const id = keyId('leaver');
  const hold = latch();
  rig.mock.script({ hold: hold.promise });
  const arrived = rig.mock.waitForRequests(1);
  const body = { model: 'gpt', max_tokens: 150, messages: user };
  const leave = new AbortController();
  const answer = rig.app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.LEAVER}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: leave.signal,
  });
  await arrived;
  leave.abort();
  assert.equal((await answer).status, 499);
  hold.resolve();
  await until(() => spentTokens(id, 'daily') > 0, 5000, 'the abandoned call charged');
  assert.equal(spentTokens(id, 'daily'), Math.ceil(JSON.stringify(body).length / 3));
});

test('a team budget from config.yaml refuses at its limit; its threshold is POSTed to the webhook once', async () => {
  rig.mock.setDefault({ body: { ...chatCompletion('gpt-upstream'), usage: USED } });
  const body = { model: 'gpt', max_tokens: 150, messages: user };
  for (let i = 0; i < 3; i++) assert.equal((await rig.post('/v1/chat/completions', body, KEYS.TEAM)).status, 200);
  await until(() => hook.posts.length >= 1, 5000, 'the webhook POST');
  assert.deepEqual(hook.posts, [{
    event: 'budget.threshold_crossed',
    scope: 'team',
    subject: 'red',
    budget: 'month',
    threshold: 0.5,
    unit: 'usd',
    limit_usd: 1,
    spent_usd: 0.6,
    period_start: '2026-12-01T00:00:00.000Z',
    period_resets_at: '2027-01-01T00:00:00.000Z',
    auth: 't0k',
  }]);
  const res = await rig.post('/v1/chat/completions', body, KEYS.TEAM);
  assert.equal(res.status, 429);
  assert.equal(res.headers.get('x-sluice-budget'), 'team:red:month');
});

test('a model’s budget counts every key’s calls to it', async () => {
  rig.mock.setDefault({ body: { ...chatCompletion('gpt-upstream'), usage: USED } });
  const body = { model: 'metered', max_tokens: 150, messages: user };
  assert.equal((await rig.post('/v1/chat/completions', body, KEYS.OPEN)).status, 200);
  // Another key, within its own budget: the model's refuses.
  const res = await rig.post('/v1/chat/completions', body, KEYS.STREAMER);
  assert.equal(res.status, 429);
  const model = rig.gw.snapshot!.modelByName('metered')!;
  assert.equal(res.headers.get('x-sluice-budget'), `model:${model.id}:daily`);
});

test('a user’s token budget from config.yaml counts the usage the upstream reported', async () => {
  rig.mock.setDefault({ body: { ...chatCompletion('gpt-upstream'), usage: USED } });
  const body = { model: 'gpt', max_tokens: 150, messages: user };
  assert.equal((await rig.post('/v1/chat/completions', body, KEYS.BOB)).status, 200);
  assert.equal(spentTokens('bob', 'daily'), 160);
  const res = await rig.post('/v1/chat/completions', body, KEYS.BOB);
  assert.equal(res.status, 429);
  assert.equal(res.headers.get('x-sluice-budget'), 'user:bob:daily');
  const json = (await res.json()) as { error: Record<string, unknown> };
  assert.deepEqual([json.error.limit_tokens, json.error.spent_tokens], [200, 160]);
});

test('a stream that ends whole is charged the usage its last event reported', async () => {
  const id = keyId('streamer');
  rig.mock.script({
    sse: [
      chunk('gpt-upstream', 'hello'),
      {
        id: 'chatcmpl-mock',
        object: 'chat.completion.chunk',
        choices: [],
        usage: { prompt_tokens: 7, completion_tokens: 35, total_tokens: 42 },
      },
    ],
  });
  const res = await rig.post('/v1/chat/completions', { model: 'gpt', stream: true, messages: user }, KEYS.STREAMER);
  assert.equal(res.status, 200);
  await res.text();
  await until(() => spentTokens(id, 'daily') > 0, 5000, 'the stream charged');
  assert.equal(spentTokens(id, 'daily'), 42);
});

test('no budget configured: no budget step in the snapshot’s pipeline', () => {
  const budgets = new Budgets({
    store: new MemoryBudgetStore(),
    settings: {
      on_store_unavailable: 'refuse',
      reservation_ttl_secs: 60,
      default_max_output_tokens: 1,
      teams: {},
      users: {},
    },
    clock: Date.now,
  });
  assert.equal(budgetStep(budgets, Date.now)(Snapshot.empty()), undefined);
  assert.equal(budgetStep(budgets, Date.now)(rig.gw.snapshot!)?.[0]?.name, 'budget');
});

describe('with an output guardrail', () => {
  // Its own gateway: a file's guardrails apply to every call, and hold streams back.
  const guarded = proxyOverMocks(
    (openaiBase) =>
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
api_keys:
  - { display_name: guarded, key_env: GUARDED, allowed_models: ["*"], budgets: [{ window: daily, limit_tokens: 100000 }] }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbiddenword }] }
`,
    { env: { GUARDED: 'sk-guarded' } },
  );

  test('an answer it refuses is charged what the upstream spent', async () => {
    const id = [...guarded.gw.snapshot!.apiKeys.values()][0]!.id;
    guarded.mock.script({ body: { ...chatCompletion('gpt-upstream', 'it says forbiddenword'), usage: USED } });
    const res = await guarded.post('/v1/chat/completions', { model: 'gpt', messages: user }, 'sk-guarded');
    assert.equal(res.status, 422);
    const text = guarded.gw.metrics.registry.render();
    assert.equal(sumSamples(text, 'sluice_budget_spent_tokens', { subject: id, budget: 'daily' }), 160);
  });
});
