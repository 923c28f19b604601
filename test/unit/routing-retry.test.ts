import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RoutingSchema } from '../../src/resources/schema.ts';
import {
  type AttemptReport,
  backoffMs,
  budgetCovers,
  classify,
  type ClassifyOptions,
  classifyOptions,
  type Outcome,
  parseRetryAfter,
  retryBudget,
  runAttempts,
} from '../../src/routing/retry.ts';
import { sleep as sleepMs } from '../../src/util/sleep.ts';

const plain: ClassifyOptions = { retryOn429: false };
const res = (status: number, retryAfter?: string): Outcome => ({ kind: 'response', status, retryAfter });

test('classification table', () => {
  const rows: [Outcome, ClassifyOptions, string][] = [
    [res(200), plain, 'success'],
    [res(201), plain, 'success'],
    [res(304), plain, 'return'],
    [res(400), plain, 'return'],
    [res(401), plain, 'return'],
    [res(403), plain, 'return'],
    [res(404), plain, 'return'],
    [res(408), plain, 'return'],
    [res(422), plain, 'return'],
    [res(429), plain, 'return'],
    [res(429), { retryOn429: true }, 'retry'],
    [res(429), { retryOn429: false, fallbackOnStatuses: [429] }, 'fallback'],
    [res(429), { retryOn429: true, fallbackOnStatuses: [429] }, 'retry'],
    [res(404), { retryOn429: false, fallbackOnStatuses: [404, 400] }, 'fallback'],
    [res(400), { retryOn429: false, fallbackOnStatuses: [404] }, 'return'],
    [res(500), plain, 'retry'],
    [res(502), plain, 'retry'],
    [res(503), { retryOn429: false, fallbackOnStatuses: [503] }, 'retry'],
    [res(599), plain, 'retry'],
    [{ kind: 'timeout' }, plain, 'retry'],
    [{ kind: 'transport', message: 'ECONNRESET' }, plain, 'retry'],
  ];
  for (const [outcome, opts, want] of rows) {
    assert.equal(classify(outcome, opts), want, JSON.stringify([outcome, opts]));
  }
});

test('classifyOptions from a routing block, defaults for a direct model', () => {
  assert.deepEqual(classifyOptions(undefined), { retryOn429: false, fallbackOnStatuses: undefined });
  const r = RoutingSchema.parse({ targets: [{ model: 'm' }], retry_on_429: true, fallback_on_statuses: [404] });
  assert.deepEqual(classifyOptions(r), { retryOn429: true, fallbackOnStatuses: [404] });
});

test('retry budget (AISIX effective_retries): model → routing → 0 with a target queued behind, else upstream.retries', () => {
  for (const queuedBehind of [false, true]) {
    assert.deepEqual(
      retryBudget({ model: { retries: 0 }, routing: { retries: 4 }, upstreamRetries: 2, queuedBehind }),
      { retries: 0, configured: true },
      'an explicit 0 is honoured as written',
    );
    assert.deepEqual(
      retryBudget({ model: { retries: 3 }, routing: { retries: 4 }, upstreamRetries: 2, queuedBehind }),
      { retries: 3, configured: true },
    );
    assert.deepEqual(
      retryBudget({ model: {}, routing: { retries: 4 }, upstreamRetries: 2, queuedBehind }),
      { retries: 4, configured: true },
    );
  }
  assert.deepEqual(retryBudget({ model: {}, upstreamRetries: 2, queuedBehind: true }), {
    retries: 0,
    configured: false,
  });
  assert.deepEqual(retryBudget({ model: {}, upstreamRetries: 2, queuedBehind: false }), {
    retries: 2,
    configured: false,
  });
});

test('budgetCovers: a default budget is never spent on a timeout; a configured one is', () => {
  const dflt = { retries: 2, configured: false };
  const conf = { retries: 2, configured: true };
  assert.equal(budgetCovers(dflt, { kind: 'timeout' }), false);
  assert.equal(budgetCovers(dflt, { kind: 'transport', message: 'reset' }), true);
  assert.equal(budgetCovers(dflt, res(503)), true);
  assert.equal(budgetCovers(conf, { kind: 'timeout' }), true);
});

test('parseRetryAfter: seconds, HTTP-date, garbage', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('180', () => now), 180);
  assert.equal(parseRetryAfter(' 2 ', () => now), 2);
  assert.equal(parseRetryAfter('1.5', () => now), 1.5);
  assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', () => now), 30);
  assert.equal(parseRetryAfter('Tue, 31 Dec 2024 23:59:00 GMT', () => now), 0);
  assert.equal(parseRetryAfter('soon', () => now), undefined);
  assert.equal(parseRetryAfter('-5', () => now), undefined);
  assert.equal(parseRetryAfter('', () => now), undefined);
  assert.equal(parseRetryAfter(null, () => now), undefined);
  assert.equal(parseRetryAfter(undefined, () => now), undefined);
  // The clock is read for a date only: most answers carry no Retry-After, or seconds.
  const unread = (): number => assert.fail('the clock was read');
  assert.equal(parseRetryAfter('180', unread), 180);
  assert.equal(parseRetryAfter(null, unread), undefined);
});

test('backoff: 250 ms doubling to a 2 s cap, plus up to 25 % jitter', () => {
  const none = (): number => 0;
  const most = (): number => 0.999;
  assert.deepEqual([1, 2, 3, 4, 5, 9].map((n) => backoffMs(n, undefined, none)), [
    250,
    500,
    1000,
    2000,
    2000,
    2000,
  ]);
  assert.equal(backoffMs(1, undefined, most), 312);
  assert.equal(backoffMs(4, undefined, most), 2499);
});

test('backoff honours Retry-After ≤ 5 s (seconds or date), not a longer one', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  const r = (): number => 0;
  assert.equal(backoffMs(1, parseRetryAfter('3', () => now), r), 3000);
  assert.equal(backoffMs(1, parseRetryAfter('5', () => now), r), 5000);
  assert.equal(backoffMs(1, parseRetryAfter('Wed, 01 Jan 2025 00:00:04 GMT', () => now), r), 4000);
  assert.equal(backoffMs(1, parseRetryAfter('6', () => now), r), 250);
  assert.equal(backoffMs(2, parseRetryAfter('120', () => now), r), 500);
});

// ---- runAttempts ------------------------------------------------------------------------------------------

interface Script {
  sleeps: number[];
  reports: AttemptReport<string>[];
  calls: string[];
}

async function run(
  targets: [string, ...string[]],
  outcomes: Record<string, Outcome[]>,
  opts: { budget?: number; configured?: boolean; classify?: ClassifyOptions; signal?: AbortSignal } = {},
) {
  const s: Script = { sleeps: [], reports: [], calls: [] };
  const result = await runAttempts<string, Outcome>({
    targets,
    attempt: async (t) => {
      s.calls.push(t);
      const next = outcomes[t]!.shift();
      assert.ok(next, `unexpected extra attempt on ${t}`);
      return next;
    },
    budget: () => ({ retries: opts.budget ?? 2, configured: opts.configured ?? true }),
    classify: opts.classify ?? plain,
    signal: opts.signal,
    sleep: async (ms) => void s.sleeps.push(ms),
    random: () => 0,
    now: () => 0,
    onAttempt: (r) => s.reports.push(r),
  });
  return { result, ...s };
}

test('runAttempts: success on the first try', async () => {
  const { result, calls, sleeps } = await run(['a', 'b'], { a: [res(200)] });
  assert.equal(result.kind, 'finished');
  assert.equal(result.kind === 'finished' && result.target, 'a');
  assert.deepEqual(calls, ['a']);
  assert.deepEqual(sleeps, []);
});

test('runAttempts: retries a 5xx with backoff, then fails over when the budget is spent', async () => {
  const { result, calls, sleeps, reports } = await run(['a', 'b'], {
    a: [res(500), res(502), res(503)],
    b: [res(200)],
  });
  assert.deepEqual(calls, ['a', 'a', 'a', 'b']);
  assert.deepEqual(sleeps, [250, 500]);
  assert.deepEqual(reports.map((r) => r.next), ['retry', 'retry', 'fallback', 'done']);
  assert.deepEqual(reports.map((r) => [r.targetIndex, r.retry]), [[0, 0], [0, 1], [0, 2], [1, 0]]);
  assert.equal(result.kind === 'finished' && result.verdict, 'success');
});

test('runAttempts: timeout and transport errors are retried under a configured budget', async () => {
  const { calls, result } = await run(['a'], {
    a: [{ kind: 'timeout' }, { kind: 'transport', message: 'reset' }, res(200)],
  });
  assert.deepEqual(calls, ['a', 'a', 'a']);
  assert.equal(result.kind === 'finished' && result.verdict, 'success');
});

test('runAttempts: a default budget retries a transport error but not a timeout (the timeout ends it)', async () => {
  const { calls, result } = await run(['a'], {
    a: [{ kind: 'transport', message: 'reset' }, { kind: 'timeout' }],
  }, { configured: false });
  assert.deepEqual(calls, ['a', 'a']);
  assert.ok(result.kind === 'finished');
  assert.deepEqual(result.outcome, { kind: 'timeout' });
});

test('runAttempts: the budget callback learns whether a target is queued behind', async () => {
  const seen: [string, boolean][] = [];
  await runAttempts<string, Outcome>({
    targets: ['a', 'b', 'c'],
    attempt: async () => res(500),
    budget: (t, queuedBehind) => {
      seen.push([t, queuedBehind]);
      return { retries: 0, configured: false };
    },
    classify: plain,
    sleep: async () => {},
    now: () => 0,
  });
  assert.deepEqual(seen, [['a', true], ['b', true], ['c', false]]);
});

test('runAttempts: a plain 4xx goes straight back — no retry, no failover', async () => {
  const { result, calls } = await run(['a', 'b'], { a: [res(400)], b: [res(200)] });
  assert.deepEqual(calls, ['a']);
  assert.ok(result.kind === 'finished');
  assert.equal(result.verdict, 'return');
  assert.deepEqual(result.outcome, res(400));
});

test('runAttempts: 429 goes back without retry_on_429, is retried with it', async () => {
  const without = await run(['a', 'b'], { a: [res(429)] });
  assert.deepEqual(without.calls, ['a']);
  const withRetry = await run(['a', 'b'], { a: [res(429, '1'), res(200)] }, { classify: { retryOn429: true } });
  assert.deepEqual(withRetry.calls, ['a', 'a']);
  assert.deepEqual(withRetry.sleeps, [1000]);
  assert.equal(withRetry.reports[0]!.retryAfterSecs, 1);
});

test('runAttempts: a Retry-After over 5 s fails over at once instead of sleeping', async () => {
  const { calls, sleeps, reports } = await run(['a', 'b'], { a: [res(503, '60')], b: [res(200)] });
  assert.deepEqual(calls, ['a', 'b']);
  assert.deepEqual(sleeps, []);
  assert.equal(reports[0]!.retryAfterSecs, 60);
  assert.equal(reports[0]!.next, 'fallback');
});

test('runAttempts: fallback_on_statuses moves to the next target without retrying', async () => {
  const { calls, sleeps } = await run(['a', 'b'], { a: [res(404)], b: [res(200)] }, {
    classify: { retryOn429: false, fallbackOnStatuses: [404] },
  });
  assert.deepEqual(calls, ['a', 'b']);
  assert.deepEqual(sleeps, []);
});

test('runAttempts: all targets exhausted → the last failure is the result', async () => {
  const { result, calls } = await run(['a', 'b'], { a: [res(500)], b: [{ kind: 'timeout' }] }, { budget: 0 });
  assert.deepEqual(calls, ['a', 'b']);
  assert.ok(result.kind === 'finished');
  assert.deepEqual(result.outcome, { kind: 'timeout' });
  assert.equal(result.target, 'b');
  assert.equal(result.attempts.length, 2);
});

test('runAttempts: an aborted caller stops the loop', async () => {
  const ac = new AbortController();
  const s: string[] = [];
  const result = await runAttempts<string, Outcome>({
    targets: ['a', 'b'],
    attempt: async (t) => {
      s.push(t);
      return res(500);
    },
    budget: () => ({ retries: 3, configured: true }),
    classify: plain,
    signal: ac.signal,
    sleep: async () => ac.abort(),
    now: () => 0,
  });
  assert.equal(result.kind, 'aborted');
  assert.deepEqual(s, ['a']);
  assert.equal(result.attempts.length, 1);
});

test('sleepMs ends early on abort', async () => {
  const ac = new AbortController();
  const started = Date.now();
  const p = sleepMs(60_000, ac.signal);
  ac.abort();
  await p;
  assert.ok(Date.now() - started < 1000);
  await sleepMs(1);
});
