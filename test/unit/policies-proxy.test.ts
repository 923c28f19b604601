// Rate-limit policies through the proxy app (docs/rate-limit-policies.md "A refusal"): AISIX's 429 envelope
// naming the policy, the metric's policy_id, and routing members' own limits (docs/routing.md) with hit
// counts at a real mock upstream.
// Run: node --import tsx --test test/unit/policies-proxy.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { policiesStep } from '../../src/proxy/policies.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith, midMinute } from '../support/platform.ts';

const KEY = 'sk-policy-caller';
const CHAT = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });

function resources(base: string, extra: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: pk, provider: openai, api_key: sk-up, api_base: "${base}" }
models:
  - { display_name: a, model_name: up-a, provider_key: pk }
  - { display_name: b, model_name: up-b, provider_key: pk }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"], team_id: t-1, user_id: u-1 }
${extra}`;
}

describe('policies through the proxy', () => {
  let mock: MockUpstream;
  before(async () => {
    mock = await startMockUpstream();
  });
  after(() => mock.close());

  async function app(extra: string) {
    const { gw } = await gatewayWith(resources(mock.base, extra), { env: { CALLER_KEY: KEY }, now: midMinute() });
    const proxy = createProxyApp(gw);
    const chat = (model: string) =>
      proxy.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: CHAT(model),
      });
    return { gw, chat };
  }

  test("a policy refusal: 429 in AISIX's words with error.policy, Retry-After, the metric's policy_id", async () => {
    const { gw, chat } = await app(`rate_limit_policies:
  - { name: team-rpm, scope: team, scope_ref: t-1, window: minute, max_requests: 1 }
`);
    const before = mock.requests.length;
    assert.equal((await chat('a')).status, 200);
    const res = await chat('b');
    assert.equal(res.status, 429);
    const body = await res.json();
    const id = gw.snapshot!.policies[0]!.id;
    assert.deepEqual(body, {
      error: {
        message: "request limit exceeded (requests) (policy 'team-rpm')",
        type: 'rate_limit_exceeded',
        policy: { id, name: 'team-rpm' },
      },
    });
    assert.match(res.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(mock.requests.length - before, 1, 'the refused call never reached the upstream');
    const metrics = await (await createStatusApp(gw).request('/metrics')).text();
    assert.match(
      metrics,
      new RegExp(`aisix_ratelimit_rejections_total\\{scope="requests",layer="policy",policy_id="${id}"\\} 1`),
    );
  });

  test('a team token pool: the call that overshoots is served, the next is refused', async () => {
    const { chat } = await app(`rate_limit_policies:
  - { name: pool, limits: { tpd: 5 }, group_by: [team] }
`);
    assert.equal((await chat('a')).status, 200); // 4 tokens
    assert.equal((await chat('a')).status, 200); // 8: over, charged after the answer
    const res = await chat('b');
    assert.equal(res.status, 429);
    assert.equal((await res.json()).error.message, "token limit exceeded (tokens) (policy 'pool')");
  });

  test('no policy: the snapshot gets no policies step in its pipeline', async () => {
    const { gw, chat } = await app('');
    for (let i = 0; i < 3; i++) assert.equal((await chat('a')).status, 200);
    assert.equal(policiesStep(() => 0)(gw.snapshot!), undefined, 'no step, so nothing runs per request');
  });

  describe("a routing model's members' own limits (B.6)", () => {
    const group = (a: string, b: string, extra = '') =>
      `_format_version: "1"
provider_keys:
  - { display_name: pk, provider: openai, api_key: sk-up, api_base: "${mock.base}" }
models:
  - { display_name: a, model_name: up-a, provider_key: pk, rate_limit: ${a} }
  - { display_name: b, model_name: up-b, provider_key: pk, rate_limit: ${b} }
  - { display_name: g, routing: { strategy: failover, targets: [{ model: a }, { model: b }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"], team_id: t-1 }
${extra}`;
    async function groupApp(text: string) {
      const { gw } = await gatewayWith(text, { env: { CALLER_KEY: KEY }, now: midMinute() });
      const proxy = createProxyApp(gw);
      const from = mock.requests.length;
      return {
        gw,
        chat: () =>
          proxy.request('/v1/chat/completions', {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: CHAT('g'),
          }),
        chatStream: () =>
          proxy.request('/v1/chat/completions', {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'g', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
          }),
        chatTo: (model: string) =>
          proxy.request('/v1/chat/completions', {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: CHAT(model),
          }),
        hits: () => {
          const out: Record<string, number> = {};
          for (const r of mock.requests.slice(from)) out[String(r.json?.model)] = (out[String(r.json?.model)] ?? 0) + 1;
          return out;
        },
      };
    }

    test('an over-limit member is skipped without a call; the next target serves; a fallback is counted', async () => {
      const g = await groupApp(group('{ rpm: 1 }', '{ rpm: 10 }'));
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 200);
      assert.deepEqual(g.hits(), { 'up-a': 1, 'up-b': 1 });
      const metrics = await (await createStatusApp(g.gw).request('/metrics')).text();
      assert.match(metrics, /aisix_routing_successful_fallbacks_total\{[^}]*\} 1/);
      assert.doesNotMatch(
        metrics,
        /aisix_deployment_failure_total\{[^}]*model="a"/,
        'the skipped member was never called',
      );
    });

    test('all members over: 429 with Retry-After, no upstream call', async () => {
      const g = await groupApp(group('{ rpm: 1 }', '{ rpm: 1 }'));
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 200);
      const res = await g.chat();
      assert.equal(res.status, 429);
      assert.match(res.headers.get('retry-after') ?? '', /^\d+$/);
      assert.deepEqual(await res.json(), {
        error: {
          message: 'routing target "b" is over its model rate limit: request limit exceeded (requests)',
          type: 'upstream_error',
        },
      });
      assert.deepEqual(g.hits(), { 'up-a': 1, 'up-b': 1 });
    });

    test("only the winning member's buckets are charged the tokens", async () => {
      // Each answer is 4 tokens. Were b charged when a answered, b would be over after call 2.
      const g = await groupApp(group('{ tpm: 5 }', '{ tpm: 5 }'));
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await g.chat()).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 429]);
      assert.deepEqual(g.hits(), { 'up-a': 2, 'up-b': 2 });
    });

    test('a per-target policy (group_by model) skips a member like its inline limit; its refusal names it', async () => {
      const g = await groupApp(
        group(
          '{}',
          '{}',
          `rate_limit_policies:
  - { name: per-member, limits: { rpm: 1 }, group_by: [model] }
`,
        ),
      );
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 200);
      const res = await g.chat();
      assert.equal(res.status, 429);
      const body = await res.json();
      assert.equal(body.error.message, "request limit exceeded (requests) (policy 'per-member')");
      assert.deepEqual(g.hits(), { 'up-a': 1, 'up-b': 1 });
    });

    test("a condition on the group's id throttles each member through the group; direct member calls escape it", async () => {
      const g = await groupApp(
        group(
          '{}',
          '{}',
          `rate_limit_policies:
  - { name: via-group, limits: { rpm: 1 }, group_by: [model], conditions: [{ dimension: model, operator: in, value: [g] }] }
`,
        ),
      );
      // Through the group: a serves, then a is over (skipped without a call) and b serves, then both are over.
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 200);
      const res = await g.chat();
      assert.equal(res.status, 429);
      assert.equal((await res.json()).error.message, "request limit exceeded (requests) (policy 'via-group')");
      // Direct calls to the members are not through the group: the condition does not hold.
      for (let i = 0; i < 3; i++) assert.equal((await g.chatTo('a')).status, 200);
      assert.equal((await g.chatTo('b')).status, 200);
      assert.deepEqual(g.hits(), { 'up-a': 4, 'up-b': 2 });
    });

    test('`model_name ==` the group alias matches through the group only, one shared bucket', async () => {
      const g = await groupApp(
        group(
          '{}',
          '{}',
          `rate_limit_policies:
  - { name: alias, limits: { rpm: 1 }, conditions: [{ dimension: model_name, operator: "==", value: g }] }
`,
        ),
      );
      assert.equal((await g.chat()).status, 200);
      const res = await g.chat();
      assert.equal(res.status, 429, 'a and b share the one bucket, so both are over');
      assert.equal((await res.json()).error.message, "request limit exceeded (requests) (policy 'alias')");
      assert.equal((await g.chatTo('a')).status, 200);
      assert.equal((await g.chatTo('a')).status, 200);
      assert.deepEqual(g.hits(), { 'up-a': 3 });
    });

    test('`group_by: [model]` reserves in one bucket per routing target, named by the target id', async () => {
      const g = await groupApp(
        group(
          '{}',
          '{}',
          `rate_limit_policies:
  - { name: per-target, limits: { rpm: 2 }, group_by: [model], conditions: [{ dimension: model_name, operator: "==", value: g }] }
`,
        ),
      );
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await g.chat()).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 429]);
      assert.deepEqual(g.hits(), { 'up-a': 2, 'up-b': 2 });
    });

    test("a stream's tokens are charged to its member's per-target bucket when it ends", async () => {
      const g = await groupApp(
        group(
          '{}',
          '{}',
          `rate_limit_policies:
  - { name: member-tokens, limits: { tpm: 5 }, group_by: [model], conditions: [{ dimension: model, operator: in, value: [g] }] }
`,
        ),
      );
      mock.script(
        { sse: [{ ...chunk('up-a', 'hi'), usage: { prompt_tokens: 1, completion_tokens: 5, total_tokens: 6 } }] },
      );
      assert.equal(await (await g.chatStream()).text().then((t) => t.endsWith('data: [DONE]\n\n')), true);
      // a is over its tpm now (6 > 5): the next call goes to b; then both are over.
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 200);
      assert.equal((await g.chat()).status, 429);
      assert.deepEqual(g.hits(), { 'up-a': 1, 'up-b': 2 });
    });
  });
});
