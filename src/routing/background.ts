// Background model checks (docs/routing.md "Model health"): when each enabled model is checked, how many
// at once, and the deadline of each; results go to `ModelHealth.recordCheck`. Sending a check is the
// caller's `check` (model-check.ts); timers are injected so tests drive time and the core imports no runtime.
import type { DirectModel, Model } from '../resources/schema.ts';
import type { CheckResult, ModelHealth } from './health.ts';

/** The timer functions the checker uses (the globals fit; tests pass fakes). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Sends one check of `model`. Should stop when `signal` aborts; may return `{ timeout: true }` itself. */
export type ModelCheck = (model: DirectModel, signal: AbortSignal) => Promise<CheckResult>;

export interface BackgroundCheckerOptions {
  health: Pick<ModelHealth, 'recordCheck'>;
  check: ModelCheck;
  timers?: Timers;
  /** Checks running at once across all models. Default 4. */
  maxConcurrent?: number;
}

export const DEFAULT_CHECK_CONCURRENCY = 4;

interface Job {
  model: DirectModel;
  intervalMs: number;
  /** Pending timer for the next check. */
  timer?: unknown;
  queued: boolean;
  /** Left the configuration (or the checker stopped): never scheduled or recorded again. */
  removed?: boolean;
  /** Set while a check runs: ends it without recording anything. */
  cancel?: () => void;
}

const globalTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** One per process: `update(models)` at the first apply and after every reload, `stop()` at shutdown. */
export class BackgroundChecker {
  private readonly jobs = new Map<string, Job>();
  private readonly queue: Job[] = [];
  private readonly timers: Timers;
  private readonly maxConcurrent: number;
  private runningCount = 0;
  private stopped = false;

  constructor(private readonly opts: BackgroundCheckerOptions) {
    this.timers = opts.timers ?? globalTimers;
    this.maxConcurrent = Math.max(1, opts.maxConcurrent ?? DEFAULT_CHECK_CONCURRENCY);
  }

  /** Apply a (new) model list: start, keep, reschedule or cancel checks by model id. */
  update(models: Iterable<Model>): void {
    if (this.stopped) return;
    const wanted = new Map<string, DirectModel>();
    for (const m of models) if (m.kind === 'direct' && m.background_model_check?.enabled) wanted.set(m.id, m);
    for (const [id, job] of this.jobs) {
      if (!wanted.has(id)) {
        this.jobs.delete(id);
        this.cancel(job);
      }
    }
    for (const [id, model] of wanted) {
      const intervalMs = model.background_model_check!.interval_seconds * 1000;
      const job = this.jobs.get(id);
      if (!job) {
        const fresh: Job = { model, intervalMs, queued: false };
        this.jobs.set(id, fresh);
        this.enqueue(fresh);
        continue;
      }
      job.model = model;
      if (job.intervalMs !== intervalMs) {
        job.intervalMs = intervalMs;
        if (job.timer !== undefined) {
          this.timers.clearTimeout(job.timer);
          this.schedule(job);
        }
      }
    }
  }

  /** Stop every timer and running check; nothing is recorded afterwards. Final. */
  stop(): void {
    this.stopped = true;
    for (const job of this.jobs.values()) this.cancel(job);
    this.jobs.clear();
  }

  /** Checks running now. */
  get running(): number {
    return this.runningCount;
  }

  /** Ids of the models being checked. */
  modelIds(): string[] {
    return [...this.jobs.keys()];
  }

  private schedule(job: Job): void {
    job.timer = this.timers.setTimeout(() => {
      job.timer = undefined;
      this.enqueue(job);
    }, job.intervalMs);
  }

  private enqueue(job: Job): void {
    if (job.queued || job.cancel) return;
    job.queued = true;
    this.queue.push(job);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.runningCount < this.maxConcurrent && this.queue.length > 0) {
      const job = this.queue.shift()!;
      job.queued = false;
      if (!job.removed) this.start(job);
    }
  }

  private start(job: Job): void {
    this.runningCount++;
    const controller = new AbortController();
    const model = job.model;
    let settled = false;
    const finish = (result: CheckResult | undefined): void => {
      if (settled) return;
      settled = true;
      this.timers.clearTimeout(deadline);
      job.cancel = undefined;
      this.runningCount--;
      const current = !this.stopped && !job.removed;
      if (current && result) this.opts.health.recordCheck(model, result);
      if (current) this.schedule(job);
      this.pump();
    };
    job.cancel = () => {
      controller.abort();
      finish(undefined);
    };
    const deadline = this.timers.setTimeout(() => {
      controller.abort();
      finish({ timeout: true });
    }, model.background_model_check!.timeout_seconds * 1000);
    let pending: Promise<CheckResult>;
    try {
      pending = this.opts.check(model, controller.signal);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (result) => finish(result),
      (err: unknown) => finish({ error: err instanceof Error ? err.message : String(err) }),
    );
  }

  private cancel(job: Job): void {
    job.removed = true;
    if (job.timer !== undefined) this.timers.clearTimeout(job.timer);
    job.timer = undefined;
    if (job.queued) {
      const i = this.queue.indexOf(job);
      if (i >= 0) this.queue.splice(i, 1);
      job.queued = false;
    }
    job.cancel?.();
  }
}
