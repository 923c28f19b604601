// Budgets (docs/budgets.md): which budgets a call meets (its key's, its team's, its user's, its model's), the
// reservation before dispatch, the charge when the answer ends, and what a charge crossing a threshold does
// (a metric, a log line, the webhook). The store decides atomically; this file only words and reports.
import type { Budget } from '../resources/budget-schema.ts';
import { budgetName } from '../resources/budget-schema.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { BudgetMetrics } from '../observability/budget-metrics.ts';
import type { Clock } from '../util/clock.ts';
import type { Amount, BudgetLine, BudgetStore, LineState, ReserveOutcome } from './store.ts';
import { type Period, PeriodCache } from './window.ts';

export type BudgetScope = 'api_key' | 'team' | 'user' | 'model';

/** One budget a call meets, and whose it is. */
export interface BudgetSubject {
  scope: BudgetScope;
  /** The key's, model's id; the team's or user's id as the key names it. */
  id: string;
  budget: Budget;
}

/** Why a call was refused: the first hard budget it does not fit in. */
export interface BudgetRefusal {
  subject: BudgetSubject;
  period: Period;
  state: LineState;
  /** What the call would have reserved. */
  amount: Amount;
  /** Which limit it does not fit in. */
  unit: 'usd' | 'tokens';
}

/** A reservation held until the answer ends. */
export interface BudgetHold {
  /** Settle at `actual` (the reservation's rest released). Idempotent: the first call counts. */
  commit(actual: Amount): Promise<void>;
}

export type Admission =
  | { kind: 'admitted'; hold: BudgetHold }
  | { kind: 'refused'; refusal: BudgetRefusal }
  /** The store did not answer and a hard budget covers the call (`on_store_unavailable: refuse`). */
  | { kind: 'unavailable' };

/** A threshold a charge crossed (1: the limit), as the webhook and the log line say it. */
export interface BudgetAlert {
  event: 'budget.threshold_crossed' | 'budget.limit_reached';
  scope: BudgetScope;
  subject: string;
  budget: string;
  threshold: number;
  unit: 'usd' | 'tokens';
  limit_usd?: number;
  spent_usd?: number;
  limit_tokens?: number;
  spent_tokens?: number;
  period_start: string | null;
  period_resets_at: string | null;
}

/** What budgets read from config.yaml `budgets`. */
export interface BudgetSettings {
  on_store_unavailable: 'refuse' | 'allow';
  reservation_ttl_secs: number;
  default_max_output_tokens: number;
  teams: Record<string, Budget[]>;
  users: Record<string, Budget[]>;
}

export interface BudgetsDeps {
  store: BudgetStore;
  settings: BudgetSettings;
  clock: Clock;
  /** The metric families, registered on first use (a gateway without budgets exposes none). */
  metrics?: () => BudgetMetrics;
  /** Each threshold crossing, once per budget period across replicas (the webhook; a log line). */
  alert?: (a: BudgetAlert) => void;
  warn?: (msg: string, fields: Record<string, unknown>) => void;
}

export const BUDGET_MSG = {
  storeDown: 'budget store unavailable; calls under a hard budget are refused until it answers',
  storeDownOpen: 'budget store unavailable; calls go on uncounted until it answers (on_store_unavailable: allow)',
  commitFailed: 'budget charge failed; the reservation expires after reservation_ttl_secs',
} as const;

/** A counter outlives its period by this long, so a late charge still finds it. */
const GRACE_MS = 3_600_000;

let instanceSeq = 0;

export class Budgets {
  private readonly periods = new WeakMap<Budget, PeriodCache>();
  private readonly applies = new WeakMap<Snapshot, boolean>();
  private readonly instance = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}-${++instanceSeq}`;
  private seq = 0;
  private storeDown = false;

  constructor(private readonly d: BudgetsDeps) {}

  private get m(): BudgetMetrics | undefined {
    return this.d.metrics?.();
  }

  get settings(): BudgetSettings {
    return this.d.settings;
  }

  /** Whether any call served from `snapshot` can meet a budget (else budgets stay off its pipeline). */
  configuredFor(snapshot: Snapshot): boolean {
    let on = this.applies.get(snapshot);
    if (on === undefined) {
      const s = this.d.settings;
      on = Object.keys(s.teams).length > 0 || Object.keys(s.users).length > 0 ||
        snapshot.apiKeys.anyBudgets() ||
        [...snapshot.models.values()].some((m) => (m.budgets?.length ?? 0) > 0);
      this.applies.set(snapshot, on);
    }
    return on;
  }

  /** The budgets a call by `key` to `model` meets: the key's, its team's, its user's, the model's. */
  subjectsOf(key: ApiKey, model: Model | undefined): BudgetSubject[] {
    const out: BudgetSubject[] = [];
    const add = (scope: BudgetScope, id: string | null | undefined, list: readonly Budget[] | null | undefined) => {
      if (!id || !list) return;
      for (const budget of list) out.push({ scope, id, budget });
    };
    add('api_key', key.id, key.budgets);
    add('team', key.team_id, key.team_id ? this.d.settings.teams[key.team_id] : undefined);
    add('user', key.user_id, key.user_id ? this.d.settings.users[key.user_id] : undefined);
    if (model) add('model', model.id, model.budgets);
    return out;
  }

  /** Reserve `amount` on every budget of `subjects`, all or nothing; `key` labels AISIX's gauges. */
  async admit(subjects: readonly BudgetSubject[], amount: Amount, key?: ApiKey): Promise<Admission> {
    const now = this.d.clock();
    const periods = subjects.map((s) => this.periodOf(s.budget, now));
    const lines = subjects.map((s, i) => lineOf(s, periods[i]!));
    const id = `${this.instance}:${++this.seq}`;
    let outcome: ReserveOutcome;
    try {
      outcome = await this.d.store.reserve(lines, id, amount, this.d.settings.reservation_ttl_secs * 1000);
      this.storeDown = false;
    } catch (e) {
      const refuse = this.d.settings.on_store_unavailable === 'refuse' && lines.some((l) => l.hard);
      this.failed('reserve', e, refuse);
      return refuse ? { kind: 'unavailable' } : { kind: 'admitted', hold: NO_HOLD };
    }
    if (key) this.keyGauges(key, subjects, periods, outcome.states, now);
    const r = outcome.refused;
    if (r !== undefined) {
      const subject = subjects[r]!;
      const state = outcome.states[r]!;
      const line = lines[r]!;
      const usdFits = line.limitMicroUsd === undefined ||
        state.spentMicroUsd + state.reservedMicroUsd + amount.microUsd <= line.limitMicroUsd;
      this.m?.refusals.inc(labelsOf(subject));
      return {
        kind: 'refused',
        refusal: { subject, period: periods[r]!, state, amount, unit: usdFits ? 'tokens' : 'usd' },
      };
    }
    return { kind: 'admitted', hold: this.hold(subjects, periods, lines, id) };
  }

  private periodOf(b: Budget, now: number): Period {
    let p = this.periods.get(b);
    if (!p) this.periods.set(b, p = new PeriodCache(b));
    return p.at(now);
  }

  private hold(subjects: readonly BudgetSubject[], periods: Period[], lines: BudgetLine[], id: string): BudgetHold {
    let settled = false;
    return {
      commit: async (actual) => {
        if (settled) return;
        settled = true;
        const charged = { microUsd: Math.max(0, Math.round(actual.microUsd)), tokens: Math.max(0, actual.tokens) };
        let after: LineState[];
        try {
          after = await this.d.store.commit(lines, id, charged);
        } catch (e) {
          this.failed('commit', e, false);
          return;
        }
        after.forEach((s, i) => this.charged(subjects[i]!, periods[i]!, lines[i]!, s, charged));
      },
    };
  }

  /** Report one line's charge: its gauges, and each threshold this charge crossed (once: the store serialises). */
  private charged(subject: BudgetSubject, period: Period, line: BudgetLine, s: LineState, actual: Amount): void {
    const labels = labelsOf(subject);
    this.m?.budgetSpentUsd.set(labels, s.spentMicroUsd / 1e6);
    this.m?.budgetSpentTokens.set(labels, s.spentTokens);
    const b = subject.budget;
    const marks = [...b.alert_thresholds, 1];
    const crossings: [number, 'usd' | 'tokens'][] = [];
    const check = (limit: number | undefined, after: number, by: number, unit: 'usd' | 'tokens') => {
      if (limit === undefined || by <= 0) return;
      for (const t of marks) if (after - by < t * limit && after >= t * limit) crossings.push([t, unit]);
    };
    check(line.limitMicroUsd, s.spentMicroUsd, actual.microUsd, 'usd');
    check(line.limitTokens, s.spentTokens, actual.tokens, 'tokens');
    for (const [t, unit] of crossings) {
      this.m?.thresholds.inc([...labels, String(t)]);
      this.d.alert?.({
        event: t === 1 ? 'budget.limit_reached' : 'budget.threshold_crossed',
        scope: subject.scope,
        subject: subject.id,
        budget: budgetName(b),
        threshold: t,
        unit,
        ...(b.limit_usd !== undefined ? { limit_usd: b.limit_usd, spent_usd: s.spentMicroUsd / 1e6 } : {}),
        ...(b.limit_tokens !== undefined ? { limit_tokens: b.limit_tokens, spent_tokens: s.spentTokens } : {}),
        period_start: period.startMs > 0 ? new Date(period.startMs).toISOString() : null,
        period_resets_at: resetsAt(period),
      });
    }
  }

  /** AISIX's per-key gauges, from the USD budget with the least left. */
  private keyGauges(
    key: ApiKey,
    subjects: readonly BudgetSubject[],
    periods: Period[],
    states: LineState[],
    now: number,
  ) {
    const m = this.m;
    if (!m) return;
    const labels = [key.id, key.team_id || 'unknown', key.user_id || 'unknown'];
    let best = -1;
    let bestLeft = Infinity;
    subjects.forEach((s, i) => {
      if (s.budget.limit_usd === undefined) return;
      const left = Math.round(s.budget.limit_usd * 1e6) - states[i]!.spentMicroUsd;
      if (left < bestLeft) [best, bestLeft] = [i, left];
    });
    m.detailsPresent.set(labels, best < 0 ? 0 : 1);
    if (best < 0) return;
    m.limitUsd.set(labels, subjects[best]!.budget.limit_usd!);
    m.spentUsd.set(labels, states[best]!.spentMicroUsd / 1e6);
    m.remainingUsd.set(labels, Math.max(0, bestLeft) / 1e6);
    const end = periods[best]!.endMs;
    if (Number.isFinite(end)) m.resetSeconds.set(labels, Math.max(0, Math.ceil((end - now) / 1000)));
  }

  private failed(op: 'reserve' | 'commit', e: unknown, refusing: boolean): void {
    this.m?.storeFailures.inc([op]);
    if (op === 'commit') {
      this.d.warn?.(BUDGET_MSG.commitFailed, { error: String((e as Error)?.message ?? e) });
      return;
    }
    if (this.storeDown) return;
    this.storeDown = true;
    this.d.warn?.(refusing ? BUDGET_MSG.storeDown : BUDGET_MSG.storeDownOpen, {
      error: String((e as Error)?.message ?? e),
    });
  }
}

const NO_HOLD: BudgetHold = { commit: () => Promise.resolve() };

function labelsOf(s: BudgetSubject): string[] {
  return [s.scope, s.id, budgetName(s.budget)];
}

function lineOf(s: BudgetSubject, p: Period): BudgetLine {
  const b = s.budget;
  return {
    counter: `${s.scope}:${s.id}:${budgetName(b)}:${Math.floor(p.startMs / 1000)}`,
    limitMicroUsd: b.limit_usd === undefined ? undefined : Math.round(b.limit_usd * 1e6),
    limitTokens: b.limit_tokens,
    hard: b.action === 'refuse',
    expiresAtMs: p.endMs + GRACE_MS,
  };
}

/** When the period ends (RFC 3339), null for one that never does. */
export function resetsAt(p: Period): string | null {
  return Number.isFinite(p.endMs) ? new Date(p.endMs).toISOString() : null;
}
