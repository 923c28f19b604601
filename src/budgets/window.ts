// A budget's current period (docs/budgets.md "Windows"): daily, weekly and monthly periods start at the
// budget's reset time on the wall clock of its IANA time zone (a DST change moves the instant, not the wall
// time); a fixed window is one period ending at `resets_at`, then one that never resets. Pure: the caller
// passes the time.
import type { Budget, Weekday } from '../resources/budget-schema.ts';
import { WEEKDAYS } from '../resources/budget-schema.ts';

/** One period of a budget: [startMs, endMs); `endMs` Infinity for one that never resets. */
export interface Period {
  startMs: number;
  endMs: number;
}

interface Wall {
  y: number;
  /** 1-12 */
  m: number;
  d: number;
  /** 0 = Monday … 6 = Sunday */
  wd: number;
  minute: number;
}

const formats = new Map<string, Intl.DateTimeFormat>();
const WD: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

function formatFor(tz: string): Intl.DateTimeFormat {
  let f = formats.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      weekday: 'short',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(tz, f);
  }
  return f;
}

function wall(ms: number, tz: string): Wall & { second: number } {
  const p: Record<string, string> = {};
  for (const part of formatFor(tz).formatToParts(ms)) p[part.type] = part.value;
  return {
    y: Number(p.year),
    m: Number(p.month),
    d: Number(p.day),
    wd: WD[p.weekday!] ?? 0,
    minute: Number(p.hour) * 60 + Number(p.minute),
    second: Number(p.second),
  };
}

/** The zone's offset from UTC at `ms` (ms to add to UTC to get the wall clock). */
function offsetAt(ms: number, tz: string): number {
  const w = wall(ms, tz);
  const asUtc = Date.UTC(w.y, w.m - 1, w.d, 0, w.minute, w.second);
  return asUtc - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant the wall clock of `tz` reads y-m-d at `minute` past midnight (month and day may overflow, as
 * Date.UTC's do). A wall time a DST gap skips is the instant just after the gap.
 */
export function zonedInstant(y: number, m: number, d: number, minute: number, tz: string): number {
  const guess = Date.UTC(y, m - 1, d, 0, minute);
  const first = guess - offsetAt(guess, tz);
  const second = guess - offsetAt(first, tz);
  return first === second ? first : Math.max(first, second);
}

const minutesOf = (hhmm: string | undefined) => hhmm ? Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5)) : 0;
const weekdayIndex = (w: Weekday | undefined) => (w ? WEEKDAYS.indexOf(w) : 0);

/** The period of `b` holding `nowMs`. */
export function periodOf(b: Budget, nowMs: number): Period {
  if (b.window === 'fixed') {
    const end = Date.parse(b.resets_at!);
    return nowMs < end ? { startMs: 0, endMs: end } : { startMs: end, endMs: Infinity };
  }
  const tz = b.time_zone;
  const at = minutesOf(b.reset_time);
  const w = wall(nowMs, tz);
  // The latest reset on the wall clock at or before now, then the one after it.
  const y = w.y;
  let m = w.m, d = w.d;
  let stepDays = 0, stepMonths = 0;
  if (b.window === 'daily') stepDays = 1;
  else if (b.window === 'weekly') {
    stepDays = 7;
    d -= (w.wd - weekdayIndex(b.reset_weekday) + 7) % 7;
  } else {
    stepMonths = 1;
    d = b.reset_day ?? 1;
  }
  let start = zonedInstant(y, m, d, at, tz);
  if (start > nowMs) {
    d -= stepDays;
    m -= stepMonths;
    start = zonedInstant(y, m, d, at, tz);
  }
  const end = zonedInstant(y, m + stepMonths, d + stepDays, at, tz);
  return { startMs: start, endMs: end };
}

/** A budget's period, kept until it ends: one comparison per call on all but the first call of a period. */
export class PeriodCache {
  private period: Period | undefined;

  constructor(private readonly budget: Budget) {}

  at(nowMs: number): Period {
    const p = this.period;
    if (p !== undefined && nowMs >= p.startMs && nowMs < p.endMs) return p;
    return (this.period = periodOf(this.budget, nowMs));
  }
}
