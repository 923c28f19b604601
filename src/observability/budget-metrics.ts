// The budgets' metric families (docs/budgets.md "Metrics"): AISIX's five `aisix_budget_*` gauges per api key
// (the budget closest to its limit), and Sluice's per budget. Labels are configured names (keys, teams, users,
// models, budgets), never a caller's text. Registered only when budgets are configured.
import { Counter, Gauge, type Registry } from './metrics.ts';

/** AISIX's labels of its budget gauges (`unknown` for a key without a team or user). */
export const BUDGET_KEY_LABELS = ['api_key_id', 'team_id', 'user_id'] as const;
/** Sluice's labels of a budget's own series. */
export const BUDGET_LABELS = ['scope', 'subject', 'budget'] as const;

export class BudgetMetrics {
  readonly limitUsd: Gauge;
  readonly spentUsd: Gauge;
  readonly remainingUsd: Gauge;
  readonly resetSeconds: Gauge;
  readonly detailsPresent: Gauge;
  readonly budgetSpentUsd: Gauge;
  readonly budgetSpentTokens: Gauge;
  readonly thresholds: Counter;
  readonly refusals: Counter;
  readonly storeFailures: Counter;

  constructor(r: Registry) {
    const keyGauge = (name: string, help: string) => r.register(new Gauge(name, help, BUDGET_KEY_LABELS));
    this.limitUsd = keyGauge('aisix_budget_limit_usd', 'The USD limit of the key’s budget closest to its limit.');
    this.spentUsd = keyGauge('aisix_budget_spent_usd', 'USD spent in that budget’s current period.');
    this.remainingUsd = keyGauge('aisix_budget_remaining_usd', 'USD left in that budget’s current period.');
    this.resetSeconds = keyGauge('aisix_budget_reset_seconds', 'Seconds until that budget’s period resets.');
    this.detailsPresent = keyGauge('aisix_budget_details_present', '1 when the key’s last call met a USD budget.');
    this.budgetSpentUsd = r.register(
      new Gauge('sluice_budget_spent_usd', 'USD spent in the budget’s current period (as of its last charge).', [
        ...BUDGET_LABELS,
      ]),
    );
    this.budgetSpentTokens = r.register(
      new Gauge('sluice_budget_spent_tokens', 'Tokens spent in the budget’s current period (as of its last charge).', [
        ...BUDGET_LABELS,
      ]),
    );
    this.thresholds = r.register(
      new Counter(
        'sluice_budget_threshold_crossings_total',
        'A budget’s spend crossed one of its alert thresholds (threshold 1: its limit).',
        [...BUDGET_LABELS, 'threshold'],
      ),
    );
    this.refusals = r.register(
      new Counter('sluice_budget_refusals_total', 'Calls a hard budget refused.', [...BUDGET_LABELS]),
    );
    this.storeFailures = r.register(
      new Counter('sluice_budget_store_failures_total', 'Budget store operations that failed (op: reserve, commit).', [
        'op',
      ]),
    );
  }
}
