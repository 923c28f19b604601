// Where budget counters live (docs/budgets.md "Enforcement"): per counter (one budget's one period) what was
// spent and what admitted calls have reserved, in micro-USD and tokens. `reserve` is all or nothing across
// the lines of one call; `commit` settles a reservation. The memory store is exact for one process; the
// Redis store (store-redis.ts) runs the same arithmetic in Lua, so replicas share the counters.

/** One budget period a call is checked against and charged to. */
export interface BudgetLine {
  /** `<scope>:<id>:<budget name>:<period start, Unix s>`: the period is part of the name. */
  counter: string;
  limitMicroUsd: number | undefined;
  limitTokens: number | undefined;
  /** A hard line refuses a reservation over its limit; a soft one only counts. */
  hard: boolean;
  /** When the counter may be forgotten (its period's end plus a grace), Unix ms; Infinity: never. */
  expiresAtMs: number;
}

export interface Amount {
  microUsd: number;
  tokens: number;
}

/** A counter as the store saw it. */
export interface LineState {
  spentMicroUsd: number;
  spentTokens: number;
  reservedMicroUsd: number;
  reservedTokens: number;
}

export interface ReserveOutcome {
  /** The first hard line the amount does not fit in (its index); undefined when admitted. */
  refused?: number;
  /** Per line: after the reservation when admitted, before it when refused. */
  states: LineState[];
}

export interface BudgetStore {
  /**
   * If the amount fits every hard line (spent + reserved + amount ≤ limit, per unit a line limits), hold it
   * on every line as reservation `id`, released after `ttlMs` unless settled; otherwise change nothing.
   */
  reserve(lines: readonly BudgetLine[], id: string, amount: Amount, ttlMs: number): Promise<ReserveOutcome>;
  /**
   * Release reservation `id` (if still held) and add `actual` to what was spent, on every line. Returns the
   * states after it.
   */
  commit(lines: readonly BudgetLine[], id: string, actual: Amount): Promise<LineState[]>;
  close?(): Promise<void>;
}

/** Whether `amount` fits `line` given `s`. */
export function fits(line: BudgetLine, s: LineState, amount: Amount): boolean {
  if (!line.hard) return true;
  if (line.limitMicroUsd !== undefined && s.spentMicroUsd + s.reservedMicroUsd + amount.microUsd > line.limitMicroUsd) {
    return false;
  }
  return line.limitTokens === undefined || s.spentTokens + s.reservedTokens + amount.tokens <= line.limitTokens;
}

interface Counter extends LineState {
  held: Map<string, Amount & { untilMs: number }>;
  /**
   * No reservation in `held` expires before this (a lower bound: a settled one may have set it), so the
   * reservations are looked over once one can have expired, not on every call: a look is as long as the calls
   * in flight.
   */
  nextExpiryMs: number;
  expiresAtMs: number;
}

/** Exact for one process: a reservation runs to completion before another starts. */
export class MemoryBudgetStore implements BudgetStore {
  private readonly counters = new Map<string, Counter>();
  private opsSinceSweep = 0;
  private readonly now: () => number;

  static readonly SWEEP_EVERY = 1024;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? Date.now;
  }

  reserve(lines: readonly BudgetLine[], id: string, amount: Amount, ttlMs: number): Promise<ReserveOutcome> {
    return Promise.resolve(this.reserveSync(lines, id, amount, ttlMs));
  }

  reserveSync(lines: readonly BudgetLine[], id: string, amount: Amount, ttlMs: number): ReserveOutcome {
    const now = this.now();
    this.maybeSweep(now);
    const counters = lines.map((l) => this.counter(l, now));
    const refused = lines.findIndex((l, i) => !fits(l, counters[i]!, amount));
    if (refused >= 0) return { refused, states: counters.map(stateOf) };
    for (const c of counters) {
      c.reservedMicroUsd += amount.microUsd;
      c.reservedTokens += amount.tokens;
      const untilMs = now + ttlMs;
      c.held.set(id, { microUsd: amount.microUsd, tokens: amount.tokens, untilMs });
      if (untilMs < c.nextExpiryMs) c.nextExpiryMs = untilMs;
    }
    return { states: counters.map(stateOf) };
  }

  commit(lines: readonly BudgetLine[], id: string, actual: Amount): Promise<LineState[]> {
    return Promise.resolve(this.commitSync(lines, id, actual));
  }

  commitSync(lines: readonly BudgetLine[], id: string, actual: Amount): LineState[] {
    const now = this.now();
    return lines.map((l) => {
      const c = this.counter(l, now);
      const h = c.held.get(id);
      if (h) {
        c.held.delete(id);
        c.reservedMicroUsd -= h.microUsd;
        c.reservedTokens -= h.tokens;
      }
      c.spentMicroUsd += actual.microUsd;
      c.spentTokens += actual.tokens;
      return stateOf(c);
    });
  }

  /** The counter of `line`, its expired reservations released. */
  private counter(line: BudgetLine, now: number): Counter {
    let c = this.counters.get(line.counter);
    if (!c) {
      c = {
        spentMicroUsd: 0,
        spentTokens: 0,
        reservedMicroUsd: 0,
        reservedTokens: 0,
        held: new Map(),
        nextExpiryMs: Infinity,
        expiresAtMs: line.expiresAtMs,
      };
      this.counters.set(line.counter, c);
    }
    if (c.nextExpiryMs <= now) releaseExpired(c, now);
    return c;
  }

  private maybeSweep(now: number): void {
    if (++this.opsSinceSweep < MemoryBudgetStore.SWEEP_EVERY) return;
    this.opsSinceSweep = 0;
    for (const [k, c] of this.counters) if (c.expiresAtMs <= now) this.counters.delete(k);
  }
}

/** Release `c`'s reservations expired at `now`, and note when the next of those left expires. */
function releaseExpired(c: Counter, now: number): void {
  let next = Infinity;
  for (const [id, h] of c.held) {
    if (h.untilMs > now) {
      if (h.untilMs < next) next = h.untilMs;
      continue;
    }
    c.held.delete(id);
    c.reservedMicroUsd -= h.microUsd;
    c.reservedTokens -= h.tokens;
  }
  c.nextExpiryMs = next;
}

function stateOf(c: LineState): LineState {
  return {
    spentMicroUsd: c.spentMicroUsd,
    spentTokens: c.spentTokens,
    reservedMicroUsd: c.reservedMicroUsd,
    reservedTokens: c.reservedTokens,
  };
}
