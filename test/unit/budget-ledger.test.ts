// The budget engine over the memory store on an injected clock (docs/budgets.md "Enforcement"): reservations
// all or nothing, refusals, the window reset (in a time zone), the overshoot bound under concurrent calls,
// expired reservations, thresholds once, and a store that does not answer.
// Run: node --import tsx --test test/unit/budget-ledger.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type Admission,
  type BudgetAlert,
  type BudgetHold,
  Budgets,
  type BudgetSettings,
  type BudgetSubject,
} from '../../src/budgets/budgets.ts';
import { reservationOf } from '../../src/budgets/estimate.ts';
import { type Amount, type BudgetStore, MemoryBudgetStore } from '../../src/budgets/store.ts';
import { BudgetSchema } from '../../src/resources/budget-schema.ts';

const SETTINGS: BudgetSettings = {
  on_store_unavailable: 'refuse',
  reservation_ttl_secs: 60,
  default_max_output_tokens: 100,
  teams: {},
  users: {},
};

function rig(opts: { store?: BudgetStore; settings?: Partial<BudgetSettings>; start?: string } = {}) {
  const clock = { now: Date.parse(opts.start ?? '2026-12-05T12:00:00Z') };
  const alerts: BudgetAlert[] = [];
  const warns: string[] = [];
  const store = opts.store ?? new MemoryBudgetStore({ now: () => clock.now });
  const budgets = new Budgets({
    store,
    settings: { ...SETTINGS, ...opts.settings },
    clock: () => clock.now,
    alert: (a) => alerts.push(a),
    warn: (m) => warns.push(m),
  });
  return { clock, alerts, warns, budgets };
}

const subject = (b: Record<string, unknown>, scope: BudgetSubject['scope'] = 'team', id = 'red'): BudgetSubject => ({
  scope,
  id,
  budget: BudgetSchema.parse(b),
});
const usd = (dollars: number): Amount => ({ microUsd: Math.round(dollars * 1e6), tokens: 0 });

function held(a: Admission): BudgetHold {
  assert.equal(a.kind, 'admitted', `expected an admission, got ${JSON.stringify(a)}`);
  return (a as Extract<Admission, { kind: 'admitted' }>).hold;
}

describe('budget engine', () => {
  test('a reservation over what is left is refused, naming the budget; settling frees the rest', async () => {
    const { budgets } = rig();
    const team = [subject({ limit_usd: 1, window: 'daily' })];
    const h = held(await budgets.admit(team, usd(0.6)));
    const r = await budgets.admit(team, usd(0.5));
    assert.equal(r.kind, 'refused');
    if (r.kind !== 'refused') return;
    assert.equal(r.refusal.subject.id, 'red');
    assert.equal(r.refusal.unit, 'usd');
    assert.deepEqual(r.refusal.state, {
      spentMicroUsd: 0,
      spentTokens: 0,
      reservedMicroUsd: 600_000,
      reservedTokens: 0,
    });
    await h.commit(usd(0.2));
    held(await budgets.admit(team, usd(0.5))); // 0.2 spent + 0.5 reserved fits
    assert.equal((await budgets.admit(team, usd(0.31))).kind, 'refused');
  });

  test('all or nothing: a refusal by one budget reserves nothing on the others', async () => {
    const { budgets } = rig();
    const key = subject({ limit_usd: 10, window: 'daily' }, 'api_key', 'k1');
    const team = subject({ limit_usd: 1, window: 'daily' });
    assert.equal((await budgets.admit([key, team], usd(2))).kind, 'refused');
    held(await budgets.admit([key], usd(10)));
  });

  test('the window resets at midnight in the budget’s time zone', async () => {
    // Tokyo is UTC+9: its day ends at 15:00 UTC.
    const { budgets, clock } = rig({ start: '2026-12-05T14:00:00Z' });
    const team = [subject({ limit_usd: 1, window: 'daily', time_zone: 'Asia/Tokyo' })];
    await held(await budgets.admit(team, usd(1))).commit(usd(1));
    clock.now = Date.parse('2026-12-05T14:59:59Z');
    const refused = await budgets.admit(team, usd(0.01));
    assert.equal(refused.kind, 'refused');
    if (refused.kind === 'refused') assert.equal(refused.refusal.period.endMs, Date.parse('2026-12-05T15:00:00Z'));
    clock.now = Date.parse('2026-12-05T15:00:00Z');
    held(await budgets.admit(team, usd(1)));
  });

  test('a token budget refuses on tokens', async () => {
    const { budgets } = rig();
    const team = [subject({ limit_tokens: 1000, window: 'weekly' })];
    await held(await budgets.admit(team, { microUsd: 0, tokens: 900 })).commit({ microUsd: 0, tokens: 950 });
    const r = await budgets.admit(team, { microUsd: 0, tokens: 51 });
    assert.equal(r.kind === 'refused' && r.refusal.unit, 'tokens');
  });

  test('concurrent calls never overshoot when each spends at most its reservation', async () => {
    const { budgets } = rig();
    const team = [subject({ limit_usd: 1, window: 'daily' })];
    const each = usd(0.1);
    const admissions = await Promise.all(Array.from({ length: 50 }, () => budgets.admit(team, each)));
    const holds = admissions.filter((a) => a.kind === 'admitted').map(held);
    assert.equal(holds.length, 10);
    await Promise.all(holds.map((h) => h.commit(usd(0.1))));
    const after = await budgets.admit(team, usd(0.000001));
    assert.equal(after.kind === 'refused' && after.refusal.state.spentMicroUsd, 1_000_000);
  });

  test('overshoot is bounded by what calls spent beyond their reservations', async () => {
    const { budgets } = rig();
    const team = [subject({ limit_usd: 1, window: 'daily' })];
    const admissions = await Promise.all(Array.from({ length: 50 }, () => budgets.admit(team, usd(0.1))));
    const holds = admissions.filter((a) => a.kind === 'admitted').map(held);
    // Each spends 0.15 (a prompt larger than estimated): the bound is 10 × 0.05 over the limit.
    await Promise.all(holds.map((h) => h.commit(usd(0.15))));
    const after = await budgets.admit(team, usd(0.000001));
    assert.equal(after.kind === 'refused' && after.refusal.state.spentMicroUsd, 1_500_000);
  });

  test('a reservation never settled (a crashed replica) is released after reservation_ttl_secs', async () => {
    const { budgets, clock } = rig();
    const team = [subject({ limit_usd: 1, window: 'monthly' })];
    held(await budgets.admit(team, usd(1)));
    assert.equal((await budgets.admit(team, usd(0.5))).kind, 'refused');
    clock.now += 60_000;
    held(await budgets.admit(team, usd(0.5)));
  });

  test('settling twice charges once', async () => {
    const { budgets } = rig();
    const team = [subject({ limit_usd: 1, window: 'daily' })];
    const h = held(await budgets.admit(team, usd(0.5)));
    await h.commit(usd(0.5));
    await h.commit(usd(0.5));
    held(await budgets.admit(team, usd(0.5)));
  });

  test('each threshold notifies once per period, the limit as threshold 1', async () => {
    const { budgets, alerts, clock } = rig();
    const team = [subject({ limit_usd: 1, window: 'daily', alert_thresholds: [0.5, 0.8], action: 'notify' })];
    const spend = async (d: number) => (await held(await budgets.admit(team, usd(0))).commit(usd(d)));
    await spend(0.4);
    assert.equal(alerts.length, 0);
    await spend(0.2);
    assert.deepEqual(alerts.map((a) => [a.event, a.threshold, a.spent_usd]), [['budget.threshold_crossed', 0.5, 0.6]]);
    await spend(0.1);
    await spend(0.5); // over 0.8 and over the limit in one charge; a notify budget never refuses
    assert.deepEqual(alerts.map((a) => a.threshold), [0.5, 0.8, 1]);
    assert.deepEqual(alerts[2], {
      event: 'budget.limit_reached',
      scope: 'team',
      subject: 'red',
      budget: 'daily',
      threshold: 1,
      unit: 'usd',
      limit_usd: 1,
      spent_usd: 1.2,
      period_start: '2026-12-05T00:00:00.000Z',
      period_resets_at: '2026-12-06T00:00:00.000Z',
    });
    await spend(0.5);
    assert.equal(alerts.length, 3);
    clock.now += 86_400_000;
    await spend(0.6);
    assert.deepEqual(alerts.map((a) => a.threshold), [0.5, 0.8, 1, 0.5]);
  });

  test('a store that does not answer: a hard budget refuses (fail closed), allow lets calls go on', async () => {
    const down: BudgetStore = {
      reserve: () => Promise.reject(new Error('connection refused')),
      commit: () => Promise.reject(new Error('connection refused')),
    };
    const hard = [subject({ limit_usd: 1, window: 'daily' })];
    const closed = rig({ store: down });
    assert.equal((await closed.budgets.admit(hard, usd(0.1))).kind, 'unavailable');
    assert.equal((await closed.budgets.admit(hard, usd(0.1))).kind, 'unavailable');
    assert.deepEqual(closed.warns, [
      'budget store unavailable; calls under a hard budget are refused until it answers',
    ]);
    const soft = [subject({ limit_usd: 1, window: 'daily', action: 'notify' })];
    assert.equal((await closed.budgets.admit(soft, usd(0.1))).kind, 'admitted');
    const open = rig({ store: down, settings: { on_store_unavailable: 'allow' } });
    await held(await open.budgets.admit(hard, usd(0.1))).commit(usd(0.1));
  });
});

describe('reservation of a call', () => {
  const price = { input_per_1k: 1, output_per_1k: 2 };

  test('max_tokens × output price + the prompt’s JSON length / 3 at the input price', () => {
    const body = { model: 'gpt', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] };
    const prompt = Math.ceil(JSON.stringify(body).length / 3);
    assert.deepEqual(reservationOf('chat', body, price, 4096), {
      amount: { microUsd: prompt * 1000 + 100 * 2000, tokens: prompt + 100 },
      prompt: { microUsd: prompt * 1000, tokens: prompt },
    });
  });

  test('each endpoint’s maximum: chat × n, responses, embeddings none, else the default', () => {
    const out = (call: string, body: Record<string, unknown>) =>
      reservationOf(call, body, price, 4096).amount.tokens - reservationOf(call, body, price, 4096).prompt.tokens;
    assert.equal(out('chat', { max_completion_tokens: 10, max_tokens: 99, n: 3 }), 30);
    assert.equal(out('responses', { max_output_tokens: 7 }), 7);
    assert.equal(out('messages', { max_tokens: 9 }), 9);
    assert.equal(out('embeddings', { input: 'x', max_tokens: 9 }), 0);
    assert.equal(out('completions', {}), 4096);
  });
});

describe('the memory store', () => {
  const line = {
    counter: 'team:red:b:0',
    limitMicroUsd: 10,
    limitTokens: undefined,
    hard: true,
    expiresAtMs: Infinity,
  };
  const one = { microUsd: 1, tokens: 0 };

  test('each reservation is released at its own expiry, whatever order they were made in', () => {
    let now = 1_000_000;
    const store = new MemoryBudgetStore({ now: () => now });
    // Settling an id never reserved, for nothing: the counter as it is now, with nothing held or spent.
    const reserved = () => store.commitSync([line], 'none', { microUsd: 0, tokens: 0 })[0]!.reservedMicroUsd;
    store.reserveSync([line], 'long', one, 60_000);
    store.reserveSync([line], 'short', one, 10_000); // made later, expires first
    now += 9_999;
    assert.equal(reserved(), 2);
    now += 1;
    assert.equal(reserved(), 1, 'the later, shorter reservation expired on time');
    now += 49_999;
    assert.equal(reserved(), 1);
    now += 1;
    assert.equal(reserved(), 0, 'the first, longer one expired on time');
  });

  test('a settled reservation is not released twice when its expiry passes', () => {
    let now = 0;
    const store = new MemoryBudgetStore({ now: () => now });
    store.reserveSync([line], 'a', one, 1_000);
    store.reserveSync([line], 'b', one, 5_000);
    store.commitSync([line], 'a', one);
    now += 1_000;
    const s = store.reserveSync([line], 'c', one, 1_000).states[0]!;
    assert.deepEqual([s.spentMicroUsd, s.reservedMicroUsd], [1, 2]); // b and c held, a spent once
  });
});
