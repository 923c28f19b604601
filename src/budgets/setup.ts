// Budgets built from config.yaml `budgets` (docs/budgets.md "config.yaml"): the memory store, or the Redis
// store when `backend: redis` and the runtime can open TCP sockets (a runtime that cannot counts per isolate
// and says so at boot); the alert as a log line and, with `webhook`, a POST. Nothing of it runs per request
// while no budget is configured (src/proxy/budgets.ts leaves the step out).
import { redisClientOptions } from '../config/redis.ts';
import type { Config } from '../config/schema.ts';
import { BudgetMetrics } from '../observability/budget-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { Registry } from '../observability/metrics.ts';
import type { Platform } from '../platform.ts';
import type { Clock } from '../util/clock.ts';
import { type BudgetAlert, Budgets } from './budgets.ts';
import { MemoryBudgetStore } from './store.ts';
import type { BudgetStore } from './store.ts';
import { RedisBudgetStore } from './store-redis.ts';

export const BUDGET_SETUP_MSG = {
  noTcp: 'budgets.backend is redis but this runtime cannot open TCP sockets; budgets are counted per isolate',
  alert: 'budget threshold crossed',
  webhookFailed: 'budget webhook failed',
} as const;

export interface BudgetsSetup {
  budgets: Budgets;
  close(): Promise<void>;
}

/** POSTs one alert to the webhook; failures are logged, never retried (the metric has the crossing). */
export function webhookPoster(
  hook: NonNullable<Config['budgets']['webhook']>,
  log: Pick<Logger, 'warn'>,
  post: typeof fetch = fetch,
): (a: BudgetAlert) => void {
  return (a) => {
    const signal = AbortSignal.timeout(hook.timeout_ms);
    void post(hook.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...hook.headers },
      body: JSON.stringify(a),
      signal,
    }).then(async (res) => {
      await res.body?.cancel();
      if (!res.ok) log.warn(BUDGET_SETUP_MSG.webhookFailed, { status: res.status, event: a.event });
    }, (e) => log.warn(BUDGET_SETUP_MSG.webhookFailed, { error: String((e as Error)?.message ?? e), event: a.event }));
  };
}

export function createBudgets(
  config: Config,
  platform: Pick<Platform, 'redis' | 'name'>,
  log: Logger,
  registry: Registry,
  clock: Clock,
  post?: typeof fetch,
): BudgetsSetup {
  const c = config.budgets;
  let store: BudgetStore;
  if (c.backend === 'redis' && c.redis && platform.redis) {
    store = new RedisBudgetStore({
      client: platform.redis(redisClientOptions(c.redis, 'budgets.redis')),
      timeoutMs: c.redis.timeout_secs * 1000,
      ...(config.etcd.env_id ? { envId: config.etcd.env_id } : {}),
    });
  } else {
    if (c.backend === 'redis') log.warn(BUDGET_SETUP_MSG.noTcp, { runtime: platform.name });
    store = new MemoryBudgetStore({ now: clock });
  }
  const hook = c.webhook ? webhookPoster(c.webhook, log, post) : undefined;
  let metrics: BudgetMetrics | undefined;
  const budgets = new Budgets({
    store,
    settings: c,
    clock,
    metrics: () => (metrics ??= new BudgetMetrics(registry)),
    alert: (a) => {
      log.info(BUDGET_SETUP_MSG.alert, { ...a });
      hook?.(a);
    },
    warn: (m, f) => log.warn(m, f),
  });
  return { budgets, close: () => store.close?.() ?? Promise.resolve() };
}
