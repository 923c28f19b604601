// Caller rate limits (SPEC §4 `rate_limit` on API keys and on models; §7.2 429 + Retry-After): requests per
// second and per minute, tokens per minute, concurrent requests.
//
// How the proxy calls it, after auth and model resolution, before any upstream call:
//   const d = await limiter.acquire([
//     { scope: 'api_key', id: key.id, limits: key.rate_limit },
//     { scope: 'model', id: model.id, limits: model.rate_limit },
//   ]);
//   if (!d.allowed) → 429 `rate_limit_exceeded` with `Retry-After: d.retryAfterSecs`;
//   else, when the response has ended (stream closed, errored or cancelled): `d.permit.charge(usage.total_tokens)`
//   if usage is known, then `d.permit.release()` — always, exactly once (later calls do nothing).
//
// Windows: FIXED windows aligned to the epoch (each second for rps, each minute for rpm and tpm). Chosen
// because the count and the Retry-After are exact (the window's end), and because a shared store does it
// with one INCRBY + PEXPIRE per counter, with replicas agreeing on the windows through the wall clock. The
// cost: a caller can burst up to twice a limit across a window boundary.
//
// Tokens: a request is admitted while the minute's charged tokens are below `tpm` (its own tokens are unknown
// until the response ends); `charge` adds them afterwards to the minute in which the response ended.
//
// Admission is all-or-nothing across every subject and dimension: a refused request consumes nothing. A
// refusal reports the dimension with the longest wait; a concurrency refusal has no window and says 1 s.
//
// The seam for many replicas is `RateLimitStore`: a Redis implementation runs `consume` as one Lua script
// (check every counter, then increment all) and keeps concurrency slots as counters with a lease TTL, so a
// crashed replica's slots expire. The in-memory store here is exact for one process.
import type { RateLimit } from '../resources/schema.ts';

export type RateLimitScope = 'api_key' | 'model';
export type RateLimitDimension = 'rps' | 'rpm' | 'tpm' | 'concurrency';

/** One counter in a fixed window of `windowMs`: admits while `count < limit` and `count + cost ≤ limit`. */
export interface WindowCounter {
  key: string;
  windowMs: number;
  limit: number;
  /** Added when admitted: 1 for a request counter, 0 for a token gate (tokens are charged later). */
  cost: number;
}

/** A concurrency counter: admits while fewer than `limit` slots are taken. */
export interface SlotCounter {
  key: string;
  limit: number;
}

export interface ConsumeRequest {
  windows: readonly WindowCounter[];
  slots: readonly SlotCounter[];
}

export type ConsumeResult =
  | { ok: true }
  /** Indexes of the refusing counters; `resetAt` (ms) is when each refusing window ends. */
  | { ok: false; windows: { index: number; resetAt: number }[]; slots: number[] };

export interface RateLimitStore {
  /** All or nothing: if every window and slot admits, count them all; otherwise change nothing. */
  consume(req: ConsumeRequest, now: number): Promise<ConsumeResult>;
  /** Add `amount` to the current window of `key`, unchecked (tokens charged after a response). */
  add(key: string, windowMs: number, amount: number, now: number): Promise<void>;
  /** Give back one slot of each key. */
  release(keys: readonly string[]): Promise<void>;
}

export interface RateLimitSubject {
  scope: RateLimitScope;
  id: string;
  limits?: RateLimit;
}

/** Held by an admitted request until its response ends. */
export interface Permit {
  /** Charge the response's tokens to each subject's `tpm`. */
  charge(tokens: number): Promise<void>;
  /** Free the concurrency slots. Idempotent. */
  release(): Promise<void>;
}

export type RateLimitDecision =
  | { allowed: true; permit: Permit }
  | { allowed: false; retryAfterSecs: number; scope: RateLimitScope; id: string; dimension: RateLimitDimension };

const SECOND = 1000;
const MINUTE = 60_000;
/** Retry-After for a concurrency refusal: there is no window to wait for. */
export const CONCURRENCY_RETRY_AFTER_SECS = 1;

interface Labelled {
  scope: RateLimitScope;
  id: string;
  dimension: RateLimitDimension;
}

export class RateLimiter {
  private readonly store: RateLimitStore;
  private readonly now: () => number;

  constructor(opts: { store?: RateLimitStore; now?: () => number } = {}) {
    this.store = opts.store ?? new MemoryRateLimitStore();
    this.now = opts.now ?? Date.now;
  }

  /** Admit one request against every subject's limits, or say how long to wait. */
  async acquire(subjects: readonly RateLimitSubject[]): Promise<RateLimitDecision> {
    const windows: (WindowCounter & Labelled)[] = [];
    const slots: (SlotCounter & Labelled)[] = [];
    const tokenKeys: string[] = [];
    for (const { scope, id, limits } of subjects) {
      if (!limits) continue;
      const key = (dimension: RateLimitDimension): string => `${scope}/${id}/${dimension}`;
      const label = (dimension: RateLimitDimension): Labelled => ({ scope, id, dimension });
      if (limits.rps) windows.push({ key: key('rps'), windowMs: SECOND, limit: limits.rps, cost: 1, ...label('rps') });
      if (limits.rpm) windows.push({ key: key('rpm'), windowMs: MINUTE, limit: limits.rpm, cost: 1, ...label('rpm') });
      if (limits.tpm) {
        windows.push({ key: key('tpm'), windowMs: MINUTE, limit: limits.tpm, cost: 0, ...label('tpm') });
        tokenKeys.push(key('tpm'));
      }
      if (limits.concurrency) {
        slots.push({ key: key('concurrency'), limit: limits.concurrency, ...label('concurrency') });
      }
    }
    if (windows.length === 0 && slots.length === 0) return { allowed: true, permit: NO_OP_PERMIT };
    const now = this.now();
    const result = await this.store.consume({ windows, slots }, now);
    if (!result.ok) return refusal(result, windows, slots, now);
    return { allowed: true, permit: this.permit(tokenKeys, slots.map((s) => s.key)) };
  }

  private permit(tokenKeys: string[], slotKeys: string[]): Permit {
    let released = false;
    return {
      charge: async (tokens) => {
        if (!(tokens > 0)) return;
        const now = this.now();
        for (const key of tokenKeys) await this.store.add(key, MINUTE, tokens, now);
      },
      release: async () => {
        if (released) return;
        released = true;
        if (slotKeys.length > 0) await this.store.release(slotKeys);
      },
    };
  }
}

const NO_OP_PERMIT: Permit = { charge: async () => {}, release: async () => {} };

/** The refusal with the longest wait (ties: the first in subject and dimension order). */
function refusal(
  result: Extract<ConsumeResult, { ok: false }>,
  windows: Labelled[],
  slots: Labelled[],
  now: number,
): RateLimitDecision {
  const waits = [
    ...result.windows.map((w) => ({ ...windows[w.index]!, secs: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) })),
    ...result.slots.map((i) => ({ ...slots[i]!, secs: CONCURRENCY_RETRY_AFTER_SECS })),
  ];
  const worst = waits.reduce((a, b) => (b.secs > a.secs ? b : a));
  return { allowed: false, retryAfterSecs: worst.secs, scope: worst.scope, id: worst.id, dimension: worst.dimension };
}

/** The start of the next fixed window after `now`. */
export function windowEnd(now: number, windowMs: number): number {
  return (Math.floor(now / windowMs) + 1) * windowMs;
}

/** Exact for one process: JavaScript runs `consume` to completion, so check-then-count is atomic. */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly windows = new Map<string, { resetAt: number; count: number }>();
  private readonly slots = new Map<string, number>();
  private opsSinceSweep = 0;

  /** Forget ended windows every this many operations, so idle keys do not accumulate. */
  static readonly SWEEP_EVERY = 1024;

  async consume(req: ConsumeRequest, now: number): Promise<ConsumeResult> {
    this.maybeSweep(now);
    const refusedWindows: { index: number; resetAt: number }[] = [];
    const refusedSlots: number[] = [];
    req.windows.forEach((w, index) => {
      const count = this.count(w.key, w.windowMs, now);
      if (count >= w.limit || count + w.cost > w.limit) {
        refusedWindows.push({ index, resetAt: windowEnd(now, w.windowMs) });
      }
    });
    req.slots.forEach((s, index) => {
      if ((this.slots.get(s.key) ?? 0) >= s.limit) refusedSlots.push(index);
    });
    if (refusedWindows.length > 0 || refusedSlots.length > 0) {
      return { ok: false, windows: refusedWindows, slots: refusedSlots };
    }
    for (const w of req.windows) if (w.cost > 0) this.bump(w.key, w.windowMs, w.cost, now);
    for (const s of req.slots) this.slots.set(s.key, (this.slots.get(s.key) ?? 0) + 1);
    return { ok: true };
  }

  async add(key: string, windowMs: number, amount: number, now: number): Promise<void> {
    this.bump(key, windowMs, amount, now);
  }

  async release(keys: readonly string[]): Promise<void> {
    for (const key of keys) {
      const n = (this.slots.get(key) ?? 0) - 1;
      if (n > 0) this.slots.set(key, n);
      else this.slots.delete(key);
    }
  }

  private count(key: string, windowMs: number, now: number): number {
    const w = this.windows.get(key);
    return w && w.resetAt === windowEnd(now, windowMs) ? w.count : 0;
  }

  private bump(key: string, windowMs: number, amount: number, now: number): void {
    const resetAt = windowEnd(now, windowMs);
    const w = this.windows.get(key);
    if (w && w.resetAt === resetAt) w.count += amount;
    else this.windows.set(key, { resetAt, count: amount });
  }

  private maybeSweep(now: number): void {
    if (++this.opsSinceSweep < MemoryRateLimitStore.SWEEP_EVERY) return;
    this.opsSinceSweep = 0;
    for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
  }
}
