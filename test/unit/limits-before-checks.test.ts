// A caller over its limit costs nothing downstream (docs/security.md "Limits before paid work"): the key's,
// the model's and the policies' limits are reserved before the input checks, so a refused caller drives no
// remote guardrail call; a refused prompt frees its concurrency slot; remote kinds fail closed by default.
// Run: node --import tsx --test test/unit/limits-before-checks.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type MockGuardrails, startMockGuardrails, TRIGGERS } from '../support/mock-guardrails.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith, midMinute } from '../support/platform.ts';

const PEER = { peer: '127.0.0.1:5555' };
const KEYS = { RPM2: 'sk-rpm-two', TEAM: 'sk-team-one', ONE: 'sk-one-slot', ALL: 'sk-all' };

let upstream: MockUpstream;
let guard: MockGuardrails;
let app: ReturnType<typeof createProxyApp>;

function resources(): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${upstream.base} }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0 }
api_keys:
  - { display_name: rpm2, key_env: RPM2, allowed_models: ["*"], rate_limit: { rpm: 2 } }
  - { display_name: team, key_env: TEAM, allowed_models: ["*"], team_id: t-1 }
  - { display_name: one, key_env: ONE, allowed_models: ["*"], rate_limit: { concurrency: 1, rpm: 2 } }
  - { display_name: all, key_env: ALL, allowed_models: ["*"] }
rate_limit_policies:
  - { name: team-rpm, scope: team, scope_ref: t-1, window: minute, max_requests: 1 }
guardrails:
  - { name: mod, kind: openai_moderation, api_key: sk-mod, endpoint: "${guard.url}/v1" }
`;
}

before(async () => {
  upstream = await startMockUpstream();
  guard = await startMockGuardrails();
  const { gw } = await gatewayWith(resources(), { config: BASE_CONFIG, env: KEYS, now: midMinute() });
  app = createProxyApp(gw);
});
after(async () => {
  await upstream.close();
  await guard.close();
});
beforeEach(() => {
  guard.fault = undefined;
  guard.requests.length = 0;
  upstream.requests.length = 0;
});

async function chat(key: string, text = 'hello'): Promise<number> {
  const res = await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: text }] }),
  }, PEER);
  await res.text();
  return res.status;
}

const moderations = () => guard.requests.filter((r) => r.path.endsWith('/moderations')).length;

describe('limits before paid work', () => {
  test('a key with rpm 2: six flagged prompts call the moderation service at most twice', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await chat(KEYS.RPM2, `a ${TRIGGERS.violent} prompt`));
    assert.deepEqual(statuses, [422, 422, 429, 429, 429, 429]);
    const admitted = statuses.filter((s) => s !== 429).length;
    assert.ok(moderations() <= admitted, `${moderations()} moderation calls for ${admitted} admitted requests`);
    assert.equal(upstream.requests.length, 0);
  });

  test('a caller over a policy limit is refused before the checks', async () => {
    assert.equal(await chat(KEYS.TEAM), 200);
    const served = moderations(); // the prompt's and the answer's
    assert.ok(served > 0);
    assert.equal(await chat(KEYS.TEAM), 429);
    assert.equal(await chat(KEYS.TEAM), 429);
    assert.equal(moderations(), served, 'no moderation call for a refused caller');
  });

  test('a refused prompt frees its concurrency slot and counts as a request', async () => {
    assert.equal(await chat(KEYS.ONE, TRIGGERS.violent), 422);
    assert.equal(await chat(KEYS.ONE), 200, 'concurrency 1: the slot was given back');
    assert.equal(await chat(KEYS.ONE), 429, 'rpm 2: the refused prompt took one');
  });

  test('remote kinds fail closed by default: a throttled service refuses the input', async () => {
    guard.fault = { kind: 'status', status: 429 };
    assert.equal(await chat(KEYS.ALL), 422);
    assert.equal(upstream.requests.length, 0, 'nothing unscreened reaches the upstream');
  });
});
