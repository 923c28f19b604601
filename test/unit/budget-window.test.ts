// Budget periods (docs/budgets.md "Windows"): daily, weekly and monthly resets on the wall clock of a time
// zone (DST included), fixed windows, and the budget schema's field errors.
// Run: node --import tsx --test test/unit/budget-window.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Budget, BudgetListSchema, BudgetSchema } from '../../src/resources/budget-schema.ts';
import { PeriodCache, periodOf } from '../../src/budgets/window.ts';
import { loadConfig } from '../../src/config/load.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { BASE_CONFIG, testPlatform } from '../support/platform.ts';

const budget = (b: Record<string, unknown>): Budget => BudgetSchema.parse({ limit_usd: 1, ...b });
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const period = (b: Record<string, unknown>, now: string) => {
  const p = periodOf(budget(b), at(now));
  return [iso(p.startMs), Number.isFinite(p.endMs) ? iso(p.endMs) : 'never'];
};

describe('budget periods', () => {
  test('daily in UTC: midnight to midnight', () => {
    assert.deepEqual(period({ window: 'daily' }, '2026-12-05T13:00:00Z'), [
      '2026-12-05T00:00:00.000Z',
      '2026-12-06T00:00:00.000Z',
    ]);
  });

  test('daily in Europe/Paris: local midnight (UTC+1 in winter)', () => {
    assert.deepEqual(period({ window: 'daily', time_zone: 'Europe/Paris' }, '2026-12-05T23:30:00Z'), [
      '2026-12-05T23:00:00.000Z',
      '2026-12-06T23:00:00.000Z',
    ]);
  });

  test('daily at 09:00 in New York, before today’s reset: the period that began yesterday', () => {
    const b = { window: 'daily', time_zone: 'America/New_York', reset_time: '09:00' };
    assert.deepEqual(period(b, '2026-12-05T13:59:59Z'), ['2026-12-04T14:00:00.000Z', '2026-12-05T14:00:00.000Z']);
    assert.deepEqual(period(b, '2026-12-05T14:00:00Z'), ['2026-12-05T14:00:00.000Z', '2026-12-06T14:00:00.000Z']);
  });

  test('the day DST starts in Paris is 23 hours long', () => {
    assert.deepEqual(period({ window: 'daily', time_zone: 'Europe/Paris' }, '2027-03-28T12:00:00Z'), [
      '2027-03-27T23:00:00.000Z',
      '2027-03-28T22:00:00.000Z',
    ]);
  });

  test('weekly: Monday 00:00 by default; a chosen weekday and time', () => {
    assert.deepEqual(period({ window: 'weekly' }, '2026-12-05T13:00:00Z'), [
      '2026-11-30T00:00:00.000Z',
      '2026-12-07T00:00:00.000Z',
    ]);
    const sat = { window: 'weekly', reset_weekday: 'saturday', reset_time: '18:00' };
    assert.deepEqual(period(sat, '2026-12-05T13:00:00Z'), ['2026-11-28T18:00:00.000Z', '2026-12-05T18:00:00.000Z']);
    assert.deepEqual(period(sat, '2026-12-05T18:00:00Z'), ['2026-12-05T18:00:00.000Z', '2026-12-12T18:00:00.000Z']);
  });

  test('monthly: the reset day in Tokyo; a reset day before today crosses the year', () => {
    assert.deepEqual(period({ window: 'monthly', time_zone: 'Asia/Tokyo' }, '2026-11-30T16:00:00Z'), [
      '2026-11-30T15:00:00.000Z',
      '2026-12-31T15:00:00.000Z',
    ]);
    assert.deepEqual(period({ window: 'monthly', reset_day: 15 }, '2026-01-10T00:00:00Z'), [
      '2025-12-15T00:00:00.000Z',
      '2026-01-15T00:00:00.000Z',
    ]);
  });

  test('fixed: one period until resets_at, then one that never resets', () => {
    const b = { window: 'fixed', resets_at: '2027-01-01T00:00:00+01:00' };
    assert.deepEqual(period(b, '2026-12-05T13:00:00Z'), ['1970-01-01T00:00:00.000Z', '2026-12-31T23:00:00.000Z']);
    assert.deepEqual(period(b, '2026-12-31T23:00:00Z'), ['2026-12-31T23:00:00.000Z', 'never']);
  });

  test('the cache answers the same period until it ends, then the next', () => {
    const c = new PeriodCache(budget({ window: 'daily' }));
    const a = c.at(at('2026-12-05T01:00:00Z'));
    assert.equal(c.at(at('2026-12-05T23:59:59Z')), a);
    assert.equal(iso(c.at(at('2026-12-06T00:00:00Z')).startMs), '2026-12-06T00:00:00.000Z');
  });
});

describe('budget validation', () => {
  const issues = (b: unknown) =>
    BudgetSchema.safeParse(b).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];

  test('each wrong field is named with what to do', () => {
    assert.deepEqual(issues({ window: 'daily' }), ['limit_usd: give limit_usd, limit_tokens or both']);
    assert.deepEqual(issues({ limit_usd: 1, window: 'hourly' }), [
      'window: must be one of daily, weekly, monthly, fixed',
    ]);
    assert.deepEqual(issues({ limit_usd: 1, window: 'daily', time_zone: 'Mars/Olympus' }), [
      'time_zone: unknown IANA time zone (e.g. UTC, Europe/Paris)',
    ]);
    assert.deepEqual(issues({ limit_usd: 1, window: 'fixed' }), ['resets_at: required when window is fixed']);
    assert.deepEqual(issues({ limit_usd: 1, window: 'daily', reset_day: 3 }), ['reset_day: only for window: monthly']);
    assert.deepEqual(issues({ limit_usd: 1, window: 'daily', alert_thresholds: [1.5] }), [
      'alert_thresholds.0: a threshold is a fraction below 1 (0.8 = 80%)',
    ]);
    assert.deepEqual(issues({ limit_usd: -1, window: 'daily' }), ['limit_usd: must be more than 0 (USD)']);
    assert.deepEqual(issues({ limit_usd: 1, window: 'daily', reset_time: '9:00' }), [
      'reset_time: must be HH:MM (24-hour)',
    ]);
  });

  test('two budgets of one owner need distinct names', () => {
    const r = BudgetListSchema.safeParse([{ limit_usd: 1, window: 'daily' }, { limit_tokens: 5, window: 'daily' }]);
    assert.equal(r.error?.issues[0]?.message, "two budgets named 'daily': give each a distinct name");
  });

  test('config.yaml budgets: an error names the team and field', () => {
    const c = loadConfig(
      '/t/config.yaml',
      `${BASE_CONFIG}budgets:\n  teams:\n    red: [{ limit_usd: 5, window: daily, time_zone: Nowhere }]\n`,
      {},
    );
    assert.equal(c.ok, false);
    assert.match(
      c.ok ? '' : c.report.format(),
      /budgets\.teams\.red\[0\]\.time_zone: unknown IANA time zone \(e\.g\. UTC, Europe\/Paris\) \(line 9\)/,
    );
  });

  test('a resources file: an api key’s budget error names the key and field', async () => {
    const r = await loadResourcesFile(
      '/t/resources.yaml',
      `_format_version: "1"
api_keys:
  - { display_name: k, key_env: K, allowed_models: ["*"], budgets: [{ window: daily }] }
`,
      testPlatform({ K: 'sk-1' }).env,
    );
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.report.format(), /budgets.*limit_usd.*give limit_usd, limit_tokens or both/);
  });

  test('an etcd row whose budget is wrong is rejected, not served without it (api keys fail closed)', () => {
    const row = (budget: Record<string, unknown>) =>
      parseDocument('api_keys', 'k1', { key_hash: 'h', allowed_models: ['*'], budgets: [budget] }, 'lenient');
    assert.deepEqual(row({ window: 'daily', limit_usd: 1, time_zone: 'Nowhere' }), {
      ok: false,
      errorKind: 'schema_failed',
      error: 'budgets[0].time_zone: unknown IANA time zone (e.g. UTC, Europe/Paris)',
    });
    // A misspelt limit is dropped as unknown, and the budget without a limit rejects the row.
    const typo = row({ window: 'daily', limit_usdd: 1 });
    assert.equal(typo.ok, false);
    assert.match(typo.ok ? '' : typo.error, /limit_usd: give limit_usd, limit_tokens or both/);
  });
});
