// Spend reports (docs/admin.md "Spend reports"): what the budget counters hold, summed per key, team, user or
// model over a range. A counter is one budget's one period (src/budgets/budgets.ts `lineOf`), so a report
// covers exactly the subjects that have a budget, at their budgets' granularity, for as long as the store
// keeps each period (its end plus an hour).
import type { BudgetScope } from '../budgets/budgets.ts';

export const SPEND_BY = ['key', 'team', 'user', 'model'] as const;
export type SpendBy = (typeof SPEND_BY)[number];
const SCOPE_OF: Record<SpendBy, BudgetScope> = { key: 'api_key', team: 'team', user: 'user', model: 'model' };

/** One counter as its store holds it: `<scope>:<id>:<budget>:<period start, Unix s>` and what was spent. */
export interface CounterTotal {
  counter: string;
  spentMicroUsd: number;
  spentTokens: number;
}

/** Where the counters come from: Redis (spend-redis.ts), or a list in tests. */
export interface SpendSource {
  counters(): Promise<CounterTotal[]>;
  close?(): Promise<void>;
}

export interface SpendPeriod {
  start: string;
  spent_usd: number;
  spent_tokens: number;
}

/** One subject's one budget over the range. */
export interface SpendRow {
  id: string;
  /** A key's or model's `display_name`, from the resources the report was named with (`nameRows`). */
  name?: string;
  /** A key's team and user, likewise. */
  team_id?: string;
  user_id?: string;
  budget: string;
  spent_usd: number;
  spent_tokens: number;
  periods: SpendPeriod[];
}

export interface SpendReport {
  by: SpendBy;
  since: string;
  until: string;
  rows: SpendRow[];
}

/** The parts of a counter name; the id may hold `:` (the budget name and the start never do). */
function parseCounter(c: string): { scope: string; id: string; budget: string; startSecs: number } | undefined {
  const first = c.indexOf(':');
  const last = c.lastIndexOf(':');
  const beforeLast = c.lastIndexOf(':', last - 1);
  if (first < 0 || beforeLast <= first) return undefined;
  const startSecs = Number(c.slice(last + 1));
  if (!Number.isInteger(startSecs)) return undefined;
  return {
    scope: c.slice(0, first),
    id: c.slice(first + 1, beforeLast),
    budget: c.slice(beforeLast + 1, last),
    startSecs,
  };
}

const usd = (micro: number) => Math.round(micro) / 1e6;

/**
 * The periods of `by`'s subjects that started in [sinceMs, untilMs), per subject and budget, most spent first.
 * Two budgets of one subject (daily and monthly) count the same calls each: they are separate rows, never summed.
 */
export function spendReport(
  counters: readonly CounterTotal[],
  by: SpendBy,
  sinceMs: number,
  untilMs: number,
): SpendReport {
  const scope = SCOPE_OF[by];
  const rows = new Map<string, SpendRow & { micro: number }>();
  for (const c of counters) {
    const p = parseCounter(c.counter);
    if (!p || p.scope !== scope) continue;
    const startMs = p.startSecs * 1000;
    if (startMs < sinceMs || startMs >= untilMs) continue;
    const k = `${p.id}\u0000${p.budget}`;
    let row = rows.get(k);
    if (!row) {
      row = { id: p.id, budget: p.budget, spent_usd: 0, spent_tokens: 0, periods: [], micro: 0 };
      rows.set(k, row);
    }
    row.micro += c.spentMicroUsd;
    row.spent_tokens += c.spentTokens;
    row.periods.push({
      start: new Date(startMs).toISOString(),
      spent_usd: usd(c.spentMicroUsd),
      spent_tokens: c.spentTokens,
    });
  }
  const out = [...rows.values()].map(({ micro, ...r }) => ({
    ...r,
    spent_usd: usd(micro),
    periods: r.periods.sort((a, b) => a.start.localeCompare(b.start)),
  }));
  out.sort((a, b) => b.spent_usd - a.spent_usd || a.id.localeCompare(b.id) || a.budget.localeCompare(b.budget));
  return { by, since: new Date(sinceMs).toISOString(), until: new Date(untilMs).toISOString(), rows: out };
}

/**
 * A range bound: a duration back from now (`30m`, `24h`, `7d`, `2w`) or an RFC 3339 time. Undefined with the
 * reason a person can act on otherwise.
 */
export function parseTimeBound(s: string, nowMs: number): number | string {
  const m = /^(\d+)([mhdw])$/.exec(s);
  if (m) return nowMs - Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[m[2] as 'm'];
  const t = /^\d{4}-\d\d-\d\dT/.test(s) ? Date.parse(s) : NaN;
  if (Number.isFinite(t)) return t;
  return `"${s}" is neither a duration back from now (30m, 24h, 7d, 2w) nor an RFC 3339 time`;
}

/** The report a query asks for, or the message of its first bad parameter. */
export async function spendQuery(
  source: SpendSource,
  q: { by?: string; since?: string; until?: string },
  nowMs: number,
): Promise<SpendReport | string> {
  const by = q.by ?? 'key';
  if (!(SPEND_BY as readonly string[]).includes(by)) return `by: one of ${SPEND_BY.join(', ')}`;
  const since = parseTimeBound(q.since ?? '30d', nowMs);
  if (typeof since === 'string') return `since: ${since}`;
  const until = q.until === undefined ? nowMs + 1 : parseTimeBound(q.until, nowMs);
  if (typeof until === 'string') return `until: ${until}`;
  if (until <= since) return 'until: must be after since';
  return spendReport(await source.counters(), by as SpendBy, since, until);
}

/** The rows that name a report's keys and models: the served snapshot's, or etcd's for the command. */
export interface SpendNames {
  readonly api_keys: readonly { id: string; display_name?: string; team_id?: string; user_id?: string }[];
  readonly models: readonly { id: string; display_name?: string }[];
}

/**
 * The report with each key row's `name`, `team_id` and `user_id` and each model row's `name`, where a resource
 * has the row's id. Teams and users are ids in config.yaml with nothing more to show.
 */
export function nameRows(report: SpendReport, names: SpendNames): SpendReport {
  if (report.by !== 'key' && report.by !== 'model') return report;
  const found = new Map<string, { display_name?: string; team_id?: string; user_id?: string }>(
    (report.by === 'key' ? names.api_keys : names.models).map((r) => [r.id, r]),
  );
  const rows = report.rows.map(({ id, ...rest }) => {
    const r = found.get(id);
    return {
      id,
      ...(r?.display_name !== undefined ? { name: r.display_name } : {}),
      ...(r?.team_id !== undefined ? { team_id: r.team_id } : {}),
      ...(r?.user_id !== undefined ? { user_id: r.user_id } : {}),
      ...rest,
    };
  });
  return { ...report, rows };
}
