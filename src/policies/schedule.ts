// Suspension windows of a rate-limit policy (docs/rate-limit-policies.md "Schedules"): while now falls in any
// window the policy reserves nothing. Wall-clock fields are read in the window's IANA timezone.
import type { Schedule } from '../resources/policy-schema.ts';

const WEEKDAY = { Mon: 'mon', Tue: 'tue', Wed: 'wed', Thu: 'thu', Fri: 'fri', Sat: 'sat', Sun: 'sun' } as const;
type Weekday = (typeof WEEKDAY)[keyof typeof WEEKDAY];

interface WallClock {
  date: string;
  weekday: Weekday;
  minute: number;
}

const formats = new Map<string, Intl.DateTimeFormat | undefined>();

function formatFor(timezone: string): Intl.DateTimeFormat | undefined {
  if (formats.has(timezone)) return formats.get(timezone);
  let f: Intl.DateTimeFormat | undefined;
  try {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
    });
  } catch {
    f = undefined;
  }
  formats.set(timezone, f);
  return f;
}

function wallClock(ms: number, timezone: string): WallClock | undefined {
  const f = formatFor(timezone);
  if (!f) return undefined;
  const parts: Record<string, string> = {};
  for (const p of f.formatToParts(ms)) parts[p.type] = p.value;
  const weekday = WEEKDAY[parts.weekday as keyof typeof WEEKDAY];
  return {
    date: `${parts.year}-${parts.month}-${parts.day}`,
    weekday,
    minute: Number(parts.hour) * 60 + Number(parts.minute),
  };
}

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

function opensOn(s: Schedule, day: WallClock): boolean {
  return s.days_of_week ? s.days_of_week.includes(day.weekday) : (s.dates ?? []).includes(day.date);
}

/**
 * Whether `s` covers `nowMs`. Start is inclusive, end exclusive (`24:00` = end of day); start > end crosses
 * midnight and belongs to the start day; start = end never matches; an unknown timezone never matches, so the
 * policy stays enforced.
 */
export function inWindow(s: Schedule, nowMs: number): boolean {
  const now = wallClock(nowMs, s.timezone);
  if (!now) return false;
  const start = minutes(s.start_time);
  const end = minutes(s.end_time);
  if (start === end) return false;
  if (start < end) return opensOn(s, now) && now.minute >= start && now.minute < end;
  if (now.minute >= start && opensOn(s, now)) return true;
  if (now.minute >= end) return false;
  // The early part of a window that opened the day before: that day, in the same timezone.
  const yesterday = wallClock(nowMs - (now.minute + 1) * 60_000, s.timezone);
  return yesterday !== undefined && opensOn(s, yesterday);
}

export function suspended(schedules: readonly Schedule[] | undefined, nowMs: number): boolean {
  return schedules !== undefined && schedules.some((s) => inWindow(s, nowMs));
}
