// A spend budget (docs/budgets.md "Configuration"): a USD and/or token limit per window — daily, weekly,
// monthly at a reset time in an IANA time zone, or one period that ends at a fixed instant — with soft
// thresholds that notify and a hard limit that refuses. The same shape on api keys and models (resources) and
// on teams and users (config.yaml `budgets`); zod only, so both schemas can import it.
import { z } from 'zod';

export const BUDGET_WINDOWS = ['daily', 'weekly', 'monthly', 'fixed'] as const;
export type BudgetWindow = (typeof BUDGET_WINDOWS)[number];
export const WEEKDAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** Whether the runtime knows `tz` as an IANA time zone. */
export function knownTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const BudgetSchema = z.strictObject({
  /** Names the budget among its owner's (its counter, its metric label); default: the window. */
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 of A-Z a-z 0-9 . _ -').optional(),
  limit_usd: z.number().positive('must be more than 0 (USD)').optional(),
  limit_tokens: z.number().int().positive('must be a whole number of tokens above 0').optional(),
  window: z.enum(BUDGET_WINDOWS, { error: `must be one of ${BUDGET_WINDOWS.join(', ')}` }),
  time_zone: z.string().refine(knownTimeZone, 'unknown IANA time zone (e.g. UTC, Europe/Paris)').default('UTC'),
  /** Wall-clock time the window resets at (daily, weekly, monthly). */
  reset_time: z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (24-hour)').optional(),
  /** weekly: the day it resets on. */
  reset_weekday: z.enum(WEEKDAYS).optional(),
  /** monthly: the day of the month it resets on (1-28, so every month has it). */
  reset_day: z.number().int().min(1).max(28, 'must be 1-28 (every month has it)').optional(),
  /** fixed: the instant the period ends (RFC 3339). */
  resets_at: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }).optional(),
  /** Fractions of the limit (0 < t < 1) whose first crossing in a window notifies. */
  alert_thresholds: z.array(z.number().gt(0).lt(1, 'a threshold is a fraction below 1 (0.8 = 80%)')).max(10)
    .default([]),
  /** `refuse`: a hard limit; `notify`: the limit only notifies (its crossing, the thresholds). */
  action: z.enum(['refuse', 'notify']).default('refuse'),
}).superRefine((b, ctx) => {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (b.limit_usd === undefined && b.limit_tokens === undefined) {
    issue('limit_usd', 'give limit_usd, limit_tokens or both');
  }
  if (b.window === 'fixed') {
    if (b.resets_at === undefined) issue('resets_at', 'required when window is fixed');
    if (b.reset_time !== undefined) issue('reset_time', 'only for daily, weekly and monthly windows');
  } else if (b.resets_at !== undefined) issue('resets_at', 'only for window: fixed');
  if (b.reset_weekday !== undefined && b.window !== 'weekly') issue('reset_weekday', 'only for window: weekly');
  if (b.reset_day !== undefined && b.window !== 'monthly') issue('reset_day', 'only for window: monthly');
});
export type Budget = z.infer<typeof BudgetSchema>;

/** An owner's budgets: each names a distinct counter (`name`, else its window). */
export const BudgetListSchema = z.array(BudgetSchema).max(8).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((b, i) => {
    const id = budgetName(b);
    if (seen.has(id)) {
      ctx.addIssue({
        code: 'custom',
        path: [i, 'name'],
        message: `two budgets named '${id}': give each a distinct name`,
      });
    }
    seen.add(id);
  });
});

/** The budget's name among its owner's: its `name`, else its window. */
export function budgetName(b: Pick<Budget, 'name' | 'window'>): string {
  return b.name ?? b.window;
}
