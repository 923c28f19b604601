// Rate-limit policies (docs/rate-limit-policies.md; AISIX's rate_limit_policy model, policy_conditions.rs,
// quota.rs): the two forms, the condition tree, schedules, bucket names, and timelines of requests, tokens and
// clock steps on the memory store and a real Redis (AISIX's key layout), both on one fixed clock.
// Run: node --import tsx --test test/integration/policies.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';
import { policiesAt, policyBuckets, type PolicyRequest } from '../../src/policies/match.ts';
import { inWindow } from '../../src/policies/schedule.ts';
import { type RateLimitPolicy, RateLimitPolicySchema, toPolicy } from '../../src/resources/policy-schema.ts';
import { MemoryRateLimitStore, RateLimiter, type RateLimitStore } from '../../src/routing/rate-limit.ts';
import { RedisRateLimitStore } from '../../src/routing/rate-limit-redis.ts';
import { fixedClockRedis, redisCli, type RedisServer, startRedis } from '../support/redis.ts';

function policy(id: string, row: Record<string, unknown>): RateLimitPolicy {
  const r = RateLimitPolicySchema.safeParse(row);
  if (!r.success) throw new Error(JSON.stringify(r.error.issues));
  return toPolicy(id, r.data);
}

const errorsOf = (row: Record<string, unknown>): string[] => {
  const r = RateLimitPolicySchema.safeParse(row);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('the two forms (B.1)', () => {
  const classic = { name: 'c', scope: 'team', scope_ref: 't-1', window: 'day', max_tokens: 100 };
  const conditional = { name: 'v2', limits: { rpm: 10 } };
  const cases: [string, Record<string, unknown>, RegExp | undefined][] = [
    ['classic', classic, undefined],
    ['conditional', conditional, undefined],
    ['conditional with conditions, group_by, action, schedules', {
      ...conditional,
      conditions: [{ dimension: 'team', operator: 'in', value: ['a', 'b'] }, {
        logic: 'or',
        children: [{ dimension: 'model_name', operator: '~*', value: '^GPT' }, {
          dimension: 'provider',
          operator: '==',
          value: 'openai',
          negate: true,
        }],
      }],
      group_by: ['member', 'model'],
      action: 'reject',
      schedules: [{ timezone: 'Asia/Shanghai', days_of_week: ['sat', 'sun'], start_time: '00:00', end_time: '24:00' }],
    }, undefined],
    ['mixing the forms', { ...classic, limits: { rpm: 1 } }, /scope: not allowed with `limits`/],
    ['classic without a limit', { name: 'c', scope: 'team', scope_ref: 't', window: 'minute' }, /max_requests/],
    ['classic missing scope_ref', { name: 'c', scope: 'team', window: 'minute', max_requests: 1 }, /scope_ref/],
    ['conditional form fields on classic', { ...classic, group_by: ['team'] }, /group_by: only the conditional/],
    ['empty limits', { name: 'v', limits: {} }, /limits: needs at least one limit/],
    ['an unknown limit member', { name: 'v', limits: { rpw: 1 } }, /unrecognized|rpw/i],
    ['group_by repeated', { ...conditional, group_by: ['team', 'team'] }, /must not repeat/],
    ['a regex on team', {
      ...conditional,
      conditions: [{ dimension: 'team', operator: '~~', value: 'a' }],
    }, /operator ~~ is not admitted on team/],
    ['has (wire set, not admitted)', {
      ...conditional,
      conditions: [{ dimension: 'model', operator: 'has', value: 'a' }],
    }, /not admitted/],
    [
      'an unknown operator',
      { ...conditional, conditions: [{ dimension: 'model', operator: '=~', value: 'a' }] },
      /unknown operator/,
    ],
    [
      'in with a string',
      { ...conditional, conditions: [{ dimension: 'model', operator: 'in', value: 'a' }] },
      /list of 1–64/,
    ],
    ['in with 65 values', {
      ...conditional,
      conditions: [{ dimension: 'model', operator: 'in', value: Array.from({ length: 65 }, (_, i) => `m${i}`) }],
    }, /list of 1–64/],
    ['a lookahead (Rust regex has none)', {
      ...conditional,
      conditions: [{ dimension: 'provider', operator: '~~', value: 'a(?=b)' }],
    }, /invalid regex/],
    ['too deep', {
      ...conditional,
      conditions: [{
        logic: 'and',
        children: [{
          logic: 'and',
          children: [{ logic: 'and', children: [{ dimension: 'team', operator: '==', value: 'a' }] }],
        }],
      }],
    }, /at most 3 deep/],
    ['17 leaves', {
      ...conditional,
      conditions: Array.from({ length: 17 }, () => ({ dimension: 'team', operator: '==', value: 'a' })),
    }, /at most 16 leaves/],
    ['a schedule with both selectors', {
      ...conditional,
      schedules: [{
        timezone: 'UTC',
        days_of_week: ['mon'],
        dates: ['2026-01-01'],
        start_time: '00:00',
        end_time: '01:00',
      }],
    }, /exactly one of days_of_week or dates/],
    ['a schedule time out of range', {
      ...conditional,
      schedules: [{ timezone: 'UTC', days_of_week: ['mon'], start_time: '24:00', end_time: '01:00' }],
    }, /start_time/],
  ];
  for (const [name, row, error] of cases) {
    test(name, () => {
      const errs = errorsOf(row);
      if (error === undefined) assert.deepEqual(errs, []);
      else assert.ok(errs.some((e) => error.test(e)), errs.join('\n'));
    });
  }
});

describe('conditions (B.2) and where they reserve (B.4)', () => {
  const key = { apiKeyId: 'k1', teamId: 't-1', userId: 'u-1' };
  const direct: PolicyRequest = { ...key, model: { id: 'm-gpt', name: 'gpt-4o', provider: 'openai' } };
  const viaGroup: PolicyRequest = {
    ...key,
    model: { id: 'm-gpt', name: 'gpt-4o', provider: 'openai' },
    parent: { id: 'g-smart', name: 'smart' },
  };
  const cond = (conditions: unknown[], extra: Record<string, unknown> = {}) =>
    policy('p', { name: 'p', limits: { rpm: 1 }, conditions, ...extra });
  const meets = (p: RateLimitPolicy, r: PolicyRequest) => policyBuckets([p], r, 0).length === 1;

  const table: [string, unknown[], PolicyRequest, boolean][] = [
    ['== team', [{ dimension: 'team', operator: '==', value: 't-1' }], direct, true],
    ['~= team', [{ dimension: 'team', operator: '~=', value: 't-1' }], direct, false],
    ['in member', [{ dimension: 'member', operator: 'in', value: ['u-0', 'u-1'] }], direct, true],
    ['api_key', [{ dimension: 'api_key', operator: '==', value: 'k1' }], direct, true],
    ['regex search, unanchored', [{ dimension: 'model_name', operator: '~~', value: 'pt-4' }], direct, true],
    ['~~ is case-sensitive', [{ dimension: 'model_name', operator: '~~', value: 'GPT' }], direct, false],
    ['~* is not', [{ dimension: 'model_name', operator: '~*', value: 'GPT' }], direct, true],
    ['a leading (?i)', [{ dimension: 'provider', operator: '~~', value: '(?i)OPENAI' }], direct, true],
    [
      'implicit and',
      [
        { dimension: 'team', operator: '==', value: 't-1' },
        { dimension: 'provider', operator: '==', value: 'anthropic' },
      ],
      direct,
      false,
    ],
    [
      'or group',
      [{
        logic: 'or',
        children: [
          { dimension: 'team', operator: '==', value: 'x' },
          { dimension: 'provider', operator: '==', value: 'openai' },
        ],
      }],
      direct,
      true,
    ],
    ['a missing dimension is false even negated', [{ dimension: 'team', operator: '==', value: 'x', negate: true }], {
      ...direct,
      teamId: null,
    }, false],
    [
      'a negated group over a missing dimension is true',
      [{
        logic: 'and',
        negate: true,
        children: [{ dimension: 'team', operator: '==', value: 'x' }],
      }],
      { ...direct, teamId: null },
      true,
    ],
    ['negate flips', [{ dimension: 'provider', operator: '==', value: 'openai', negate: true }], direct, false],
    // The routing pair: target and requested group.
    [
      'group id matches through the group',
      [{ dimension: 'model', operator: 'in', value: ['g-smart'] }],
      viaGroup,
      true,
    ],
    [
      'group id never matches a direct call',
      [{ dimension: 'model', operator: 'in', value: ['g-smart'] }],
      direct,
      false,
    ],
    ['member id matches both', [{ dimension: 'model', operator: '==', value: 'm-gpt' }], viaGroup, true],
    ['group alias by model_name', [{ dimension: 'model_name', operator: '==', value: 'smart' }], viaGroup, true],
    ['~= only when both differ', [{ dimension: 'model_name', operator: '~=', value: 'smart' }], viaGroup, false],
    ['~= when both differ', [{ dimension: 'model_name', operator: '~=', value: 'other' }], viaGroup, true],
    ['negate over the pair', [{ dimension: 'model', operator: '==', value: 'g-smart', negate: true }], viaGroup, false],
  ];
  for (const [name, conditions, req, expected] of table) {
    test(name, () => assert.equal(meets(cond(conditions), req), expected));
  }

  test('group_by: a request without the dimension is not subject; values escaped', () => {
    const p = cond([], { group_by: ['team', 'model'] });
    assert.deepEqual(policyBuckets([p], { ...direct, teamId: null }, 0), []);
    const [b] = policyBuckets([p], { ...direct, teamId: 'a:b=c%d' }, 0);
    assert.equal(b!.spec.bucket, 'policy:v2:p:team=a%3Ab%3Dc%25d:model=m-gpt');
    // The fixed order team, member, api_key, model, provider, whatever order group_by lists.
    const q = policy('q', { name: 'q', limits: { rpm: 1 }, group_by: ['provider', 'api_key', 'member'] });
    assert.equal(policyBuckets([q], direct, 0)[0]!.spec.bucket, 'policy:v2:q:member=u-1:api_key=k1:provider=openai');
  });

  test('classic buckets and limits: window → dimension; tokens per minute and day only', () => {
    const rows: [Record<string, unknown>, string, Record<string, number>][] = [
      [{ scope: 'api_key', scope_ref: 'k1', window: 'second', max_requests: 5 }, 'policy:api_key:k1:P', { rps: 5 }],
      [{ scope: 'team', scope_ref: 't-1', window: 'day', max_tokens: 1000 }, 'policy:team:t-1:P', { tpd: 1000 }],
      [{ scope: 'member', scope_ref: 'u-1', window: 'hour', max_requests: 3, max_tokens: 9 }, 'policy:member:u-1:P', {
        rph: 3,
      }],
      [
        { scope: 'team_member', scope_ref: 't-1', window: 'minute', max_requests: 2, max_tokens: 7 },
        'policy:team_member:t-1:P:u-1',
        {
          rpm: 2,
          tpm: 7,
        },
      ],
      [{ scope: 'model', scope_ref: 'm-gpt', window: 'day', max_requests: 4 }, 'policy:model:m-gpt:P', { rpd: 4 }],
    ];
    for (const [row, bucket, limits] of rows) {
      const [b] = policyBuckets([policy('P', { name: 'n', ...row })], direct, 0);
      assert.equal(b?.spec.bucket, bucket, JSON.stringify(row));
      const got: Record<string, number> = {};
      for (const w of [...b!.spec.tokens, ...b!.spec.requests]) got[w.dim] = w.limit;
      assert.deepEqual(got, limits, JSON.stringify(row));
    }
    const tm = policy('P', { name: 'n', scope: 'team_member', scope_ref: 't-1', window: 'minute', max_requests: 1 });
    assert.deepEqual(policyBuckets([tm], { ...direct, userId: null }, 0), [], 'team_member needs a user_id');
  });

  test('gates: classic model at the request gate and, routed, each target; model-naming conditionals per target', () => {
    const classicModel = policy('a', { name: 'a', scope: 'model', scope_ref: 'm', window: 'minute', max_requests: 1 });
    const classicTeam = policy('b', { name: 'b', scope: 'team', scope_ref: 't', window: 'minute', max_requests: 1 });
    const byModel = policy('c', { name: 'c', limits: { rpm: 1 }, group_by: ['model'] });
    const byTeam = policy('d', {
      name: 'd',
      limits: { rpm: 1 },
      conditions: [{ dimension: 'team', operator: '==', value: 't' }],
    });
    const all = [classicModel, classicTeam, byModel, byTeam];
    const ids = (ps: RateLimitPolicy[]) => ps.map((p) => p.id).join('');
    assert.equal(ids(policiesAt(all, 'request', false)), 'abcd');
    assert.equal(ids(policiesAt(all, 'target', false)), '');
    assert.equal(ids(policiesAt(all, 'request', true)), 'abd');
    assert.equal(ids(policiesAt(all, 'target', true)), 'ac');
  });
});

describe('schedules (B.3)', () => {
  const at = (iso: string) => Date.parse(iso);
  const s = (o: Record<string, unknown>) => ({ timezone: 'UTC', start_time: '09:00', end_time: '17:00', ...o });
  const table: [string, Record<string, unknown>, string, boolean][] = [
    ['inside', s({ days_of_week: ['tue'] }), '2026-12-01T12:00:00Z', true], // a Tuesday
    ['start inclusive', s({ days_of_week: ['tue'] }), '2026-12-01T09:00:00Z', true],
    ['end exclusive', s({ days_of_week: ['tue'] }), '2026-12-01T17:00:00Z', false],
    ['another day', s({ days_of_week: ['mon'] }), '2026-12-01T12:00:00Z', false],
    ['by date', s({ dates: ['2026-12-01'] }), '2026-12-01T12:00:00Z', true],
    ['in the timezone', s({ timezone: 'Asia/Shanghai', days_of_week: ['tue'] }), '2026-12-01T02:00:00Z', true], // 10:00 there
    [
      '24:00 is the end of the day',
      s({ days_of_week: ['tue'], start_time: '20:00', end_time: '24:00' }),
      '2026-12-01T23:59:00Z',
      true,
    ],
    // Crossing midnight belongs to the start day: Tue 22:00 → Wed 06:00.
    [
      'crossing midnight, evening',
      s({ days_of_week: ['tue'], start_time: '22:00', end_time: '06:00' }),
      '2026-12-01T23:00:00Z',
      true,
    ],
    [
      'crossing midnight, next morning',
      s({ days_of_week: ['tue'], start_time: '22:00', end_time: '06:00' }),
      '2026-12-02T05:00:00Z',
      true,
    ],
    [
      'crossing midnight, the morning of the start day',
      s({ days_of_week: ['tue'], start_time: '22:00', end_time: '06:00' }),
      '2026-12-01T05:00:00Z',
      false,
    ],
    [
      'start = end never matches',
      s({ days_of_week: ['tue'], start_time: '10:00', end_time: '10:00' }),
      '2026-12-01T10:00:00Z',
      false,
    ],
    [
      'an unknown timezone never matches',
      s({ timezone: 'Mars/Olympus', days_of_week: ['tue'] }),
      '2026-12-01T12:00:00Z',
      false,
    ],
  ];
  for (const [name, sched, now, expected] of table) {
    test(name, () => assert.equal(inWindow(sched as never, at(now)), expected));
  }
});

// -- timelines -------------------------------------------------------------------------------------------

type Step =
  | { req: PolicyRequest; expect: 'ok' | `refused ${string}`; tokens?: number }
  | { advance: number };

const KEY = { apiKeyId: 'k1', teamId: 't-1', userId: 'u-1' };
const K2 = { apiKeyId: 'k2', teamId: 't-1', userId: 'u-2' };
const M = { id: 'm1', name: 'gpt', provider: 'openai' };
const r1: PolicyRequest = { ...KEY, model: M };
const r2: PolicyRequest = { ...K2, model: M };

interface Timeline {
  name: string;
  policies: RateLimitPolicy[];
  steps: Step[];
  /** Starts at this UTC time (the fixed clock both stores read). */
  start?: string;
}

const TIMELINES: Timeline[] = [
  {
    name: 'team token pool per day: one call may overshoot, then every key of the team is refused',
    policies: [policy('P1', { name: 'pool', scope: 'team', scope_ref: 't-1', window: 'day', max_tokens: 100 })],
    steps: [
      { req: r1, expect: 'ok', tokens: 60 },
      { req: r2, expect: 'ok', tokens: 60 },
      { req: r1, expect: 'refused pool tpd' },
      { req: r2, expect: 'refused pool tpd' },
    ],
  },
  {
    name: 'day windows reset at 00:00 UTC',
    start: '2026-12-01T23:59:30Z',
    policies: [policy('P2', { name: 'daily', scope: 'member', scope_ref: 'u-1', window: 'day', max_requests: 1 })],
    steps: [
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'refused daily rpd' },
      { advance: 29_000 },
      { req: r1, expect: 'refused daily rpd' },
      { advance: 1_000 },
      { req: r1, expect: 'ok' },
    ],
  },
  {
    name: 'per-member buckets of one conditional policy',
    policies: [policy('P3', { name: 'each', limits: { rpm: 1 }, group_by: ['member'] })],
    steps: [
      { req: r1, expect: 'ok' },
      { req: r2, expect: 'ok' },
      { req: r1, expect: 'refused each rpm' },
    ],
  },
  {
    name: 'a suspended policy reserves nothing, and its counts survive the suspension',
    start: '2026-12-01T08:59:00Z',
    policies: [policy('P4', {
      name: 'office',
      limits: { rph: 1 },
      schedules: [{ timezone: 'UTC', days_of_week: ['tue'], start_time: '09:00', end_time: '10:00' }],
    })],
    steps: [
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'refused office rph' },
      { advance: 60_000 }, // 09:00: suspended
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'ok' },
      { advance: 3_600_000 }, // 10:00: enforced again, a new hour
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'refused office rph' },
    ],
  },
  {
    name: 'policies and the inline key limit all apply; a refusal counts nothing anywhere',
    policies: [policy('P5', { name: 'two', scope: 'api_key', scope_ref: 'k1', window: 'minute', max_requests: 2 })],
    steps: [
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'ok' },
      { req: r1, expect: 'refused two rpm' },
      { req: r2, expect: 'ok' },
    ],
  },
];

async function runTimeline(t: Timeline, store: RateLimitStore, clock: { now: number }): Promise<void> {
  const limiter = new RateLimiter({ store });
  for (const [i, step] of t.steps.entries()) {
    if ('advance' in step) {
      clock.now += step.advance;
      continue;
    }
    const subjects = policyBuckets(t.policies, step.req, clock.now).map((b) => ({
      scope: 'policy' as const,
      id: b.policy.id,
      name: b.policy.name,
      spec: b.spec,
    }));
    const d = await limiter.acquire([{ scope: 'api_key', id: step.req.apiKeyId, limits: null }, ...subjects]);
    const got = d.allowed ? 'ok' : `refused ${d.name} ${d.dimension}`;
    assert.equal(got, step.expect, `${t.name}: step ${i}`);
    if (d.allowed) await d.permit.end(step.tokens);
  }
}

describe('timelines on the memory store (fixed clock)', () => {
  for (const t of TIMELINES) {
    test(t.name, async () => {
      const clock = { now: Date.parse(t.start ?? '2026-12-01T12:00:00Z') };
      await runTimeline(t, new MemoryRateLimitStore({ now: () => clock.now }), clock);
    });
  }
});

describe(
  "timelines on a real Redis (AISIX's key layout; the scripts read the fixed clock)",
  { timeout: 60_000 },
  () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(async () => {
      await server?.stop();
    });
    /** A store on the real server whose scripts see `clock.now`; `envId` namespaces its keys. */
    async function withStore(
      clock: { now: number },
      run: (store: RedisRateLimitStore) => Promise<void>,
      envId?: string,
    ): Promise<void> {
      const client = ioredisClient({ mode: 'single', url: server.url, nodes: [], sentinels: [], timeoutMs: 2000 });
      const store = new RedisRateLimitStore({
        client: fixedClockRedis(client, () => clock.now),
        mode: 'single',
        concurrencyTtlSecs: 300,
        timeoutMs: 2000,
        ...(envId ? { envId } : {}),
        now: () => clock.now,
        warn: (msg) => assert.fail(`the store warned: ${msg}`),
        info: () => {},
        onState: () => {},
      });
      try {
        await run(store);
      } finally {
        await store.close();
      }
    }
    for (const t of TIMELINES) {
      test(t.name, async () => {
        redisCli(server.port, 'FLUSHALL');
        const clock = { now: Date.parse(t.start ?? '2026-12-01T12:00:00Z') };
        await withStore(clock, (store) => runTimeline(t, store, clock));
      });
    }
    const DAY = Date.parse('2026-12-01T00:00:00Z') / 1000;
    test("AISIX's key layout: aisix:rl:{policy:team:t-1:<id>}:tpd:<day start>", async () => {
      redisCli(server.port, 'FLUSHALL');
      const clock = { now: Date.parse('2026-12-01T12:00:00Z') };
      await withStore(clock, (store) => runTimeline(TIMELINES[0]!, store, clock));
      const keys = redisCli(server.port, 'KEYS', 'aisix:rl:*').split('\n').sort();
      assert.deepEqual(keys, [`aisix:rl:{policy:team:t-1:P1}:tpd:${DAY}`]);
      assert.equal(redisCli(server.port, 'GET', keys[0]!), '120');
    });
    test('day windows: the key of the next day at 00:00 UTC', async () => {
      redisCli(server.port, 'FLUSHALL');
      const t = TIMELINES[1]!;
      const clock = { now: Date.parse(t.start!) };
      await withStore(clock, (store) => runTimeline(t, store, clock));
      const keys = redisCli(server.port, 'KEYS', 'aisix:rl:*').split('\n').sort();
      assert.deepEqual(keys, [
        `aisix:rl:{policy:member:u-1:P2}:rpd:${DAY}`,
        `aisix:rl:{policy:member:u-1:P2}:rpd:${DAY + 86_400}`,
      ]);
      assert.deepEqual(keys.map((k) => redisCli(server.port, 'GET', k)), ['1', '1']);
    });
    test('with etcd.env_id the keys are namespaced: aisix:rl:<env_id>:{<bucket>}', async () => {
      redisCli(server.port, 'FLUSHALL');
      const clock = { now: Date.parse('2026-12-01T12:00:00Z') };
      await withStore(clock, (store) => runTimeline(TIMELINES[0]!, store, clock), 'prod');
      assert.deepEqual(redisCli(server.port, 'KEYS', 'aisix:rl:*').split('\n'), [
        `aisix:rl:prod:{policy:team:t-1:P1}:tpd:${DAY}`,
      ]);
    });
  },
);

describe('loading (B.9): files resolve names; etcd rows read leniently', () => {
  const FILE = (policies: string) =>
    `_format_version: "1"
provider_keys: [{ display_name: pk, provider: openai, api_key: sk-x }]
models: [{ display_name: gpt, model_name: gpt-4o, provider_key: pk }]
api_keys: [{ display_name: caller, key_hash: "${'a'.repeat(64)}", allowed_models: [gpt] }]
rate_limit_policies:
${policies}`;

  test('a file: scope_ref and condition names become the derived ids; the id is derived from the name', async () => {
    const { loadResourcesFile } = await import('../../src/resources/pipeline.ts');
    const { uuidV5 } = await import('../../src/util/crypto.ts');
    const r = await loadResourcesFile(
      '/r.yaml',
      FILE(`  - { name: per-model, scope: model, scope_ref: gpt, window: minute, max_requests: 5 }
  - name: v2
    limits: { tpm: 100 }
    conditions: [{ dimension: api_key, operator: in, value: [caller] }, { dimension: team, operator: "==", value: t-1 }]
`),
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    if (!r.ok) return;
    const [a, b] = r.snapshot.policies;
    assert.equal(a!.id, uuidV5('rate_limit_policies/per-model'));
    assert.equal(a!.form === 'classic' && a!.scope_ref, uuidV5('models/gpt'));
    assert.deepEqual(b!.conditions![0], {
      dimension: 'api_key',
      operator: 'in',
      value: [uuidV5('api_keys/caller')],
    });
    assert.deepEqual(b!.conditions![1], { dimension: 'team', operator: '==', value: 't-1' }, 'team ids verbatim');
    assert.equal(r.resourceCount, 5);
  });

  test('a file: an unknown name is an error listing the candidates; strict fields', async () => {
    const { loadResourcesFile } = await import('../../src/resources/pipeline.ts');
    const r = await loadResourcesFile(
      '/r.yaml',
      FILE(`  - { name: p, scope: api_key, scope_ref: nobody, window: minute, max_requests: 1 }
  - { name: q, limits: { rpm: 1 }, zz: 1 }
`),
      {},
    );
    assert.equal(r.ok, false);
    if (r.ok) return;
    const text = r.report.format();
    assert.match(
      text,
      /rate_limit_policies\[0\] \("p"\): `scope_ref` references unknown api key "nobody" \(defined api_keys: caller\)/,
    );
    assert.match(text, /rate_limit_policies\[1\] \("q"\): .*zz/);
  });

  test('an etcd row: served, unknown members dropped and reported; a bad row rejected schema_failed', async () => {
    const { parseRow } = await import('../../src/sources/etcd/rows.ts');
    const ok = parseRow(
      '/a',
      '/a/rate_limit_policies/p1',
      JSON.stringify({ name: 'p', limits: { rpm: 1 }, zz: { x: 1 } }),
    );
    assert.ok(ok.ok && ok.kind === 'rate_limit_policies' && ok.resource.form === 'conditional');
    assert.deepEqual(ok.ok && ok.unknownFields, ['zz']);
    const bad = parseRow(
      '/a',
      '/a/rate_limit_policies/p2',
      JSON.stringify({ name: 'p', scope: 'team', limits: { rpm: 1 } }),
    );
    assert.equal(!bad.ok && bad.errorKind, 'schema_failed');
  });
});
