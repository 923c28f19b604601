// Retries and failover (docs/routing.md "One request, step by step"): how one attempt's outcome is
// classified, how many retries a target gets, the wait between them, and THE loop that runs
// retry-then-failover. The loop knows nothing about HTTP clients, metrics or health: it reports each attempt
// to `onAttempt` and its caller (routing/dispatch.ts) does those.
import type { Routing } from '../resources/schema.ts';
import { sleep as sleepMs } from '../util/sleep.ts';
import type { CancelSignal } from '../util/cancel.ts';

/** What one attempt against one target produced. Callers may extend it (e.g. with the `Response`). */
export type Outcome =
  /** The upstream answered: success (2xx) or an upstream error status. `retryAfter` is the raw header. */
  | { kind: 'response'; status: number; retryAfter?: string | null }
  /** Our deadline (timeout / stream_timeout) expired before the upstream answered. */
  | { kind: 'timeout' }
  /**
   * No usable HTTP answer: DNS, connect, TLS, reset — or one the transport refused to read (`retryable:
   * false`, e.g. over upstream.max_response_bytes: the same target would send it again, so fail over).
   */
  | { kind: 'transport'; message: string; retryable?: false }
  /** The target's own rate limits refused it before any call: fail over, never retry it. */
  | { kind: 'over_limit' };

/**
 * success: done, answer it. retry: try the same target again if budget remains, else fail over.
 * fallback: try the next target now. return: hand this upstream answer to the caller as it is.
 */
export type Verdict = 'success' | 'retry' | 'fallback' | 'return';

export interface ClassifyOptions {
  retryOn429: boolean;
  /** Statuses that fail over to the next target instead of going back to the caller. */
  fallbackOnStatuses?: readonly number[];
}

export const BACKOFF_BASE_MS = 250;
export const BACKOFF_CAP_MS = 2000;
/** Jitter added on top of the backoff, as a fraction of it (0–25 %). */
export const BACKOFF_JITTER = 0.25;
/** The longest upstream Retry-After the loop sleeps on before retrying the same target. */
export const MAX_HONOURED_RETRY_AFTER_SECS = 5;

/** The classification options of a routing model; a direct model requested by name has the defaults. */
export function classifyOptions(routing?: Routing): ClassifyOptions {
  return { retryOn429: routing?.retry_on_429 ?? false, fallbackOnStatuses: routing?.fallback_on_statuses };
}

export function classify(outcome: Outcome, opts: ClassifyOptions): Verdict {
  if (outcome.kind === 'over_limit') return 'fallback';
  if (outcome.kind === 'transport' && outcome.retryable === false) return 'fallback';
  if (outcome.kind !== 'response') return 'retry';
  const { status } = outcome;
  if (status >= 200 && status < 300) return 'success';
  if (status >= 500) return 'retry';
  if (status === 429 && opts.retryOn429) return 'retry';
  if (opts.fallbackOnStatuses?.includes(status)) return 'fallback';
  return 'return';
}

/** Same-target retries (not attempts) one target may spend, and whether the operator configured them. */
export interface RetryBudget {
  retries: number;
  /** From the target model's `retries` or the routing model's `routing.retries` (not the deployment default). */
  configured: boolean;
}

/**
 * AISIX's `effective_retries` (docs/aisix-compatibility.md "Resources"): the target model's own `retries`, else the routing
 * model's `routing.retries` — an explicit value, 0 included, is honoured as written; else, with nothing
 * configured, 0 while another target is still queued behind this one in the request's attempt order (fail
 * over rather than grind a failing upstream), and `upstream.retries` on the last one. A direct model
 * requested by name is a lone last target.
 */
export function retryBudget(from: {
  model?: { retries?: number };
  routing?: { retries?: number };
  upstreamRetries: number;
  /** Whether another target follows this one in the attempt order (after health filtering and the cap). */
  queuedBehind: boolean;
}): RetryBudget {
  const explicit = from.model?.retries ?? from.routing?.retries;
  if (explicit !== undefined) return { retries: explicit, configured: true };
  return { retries: from.queuedBehind ? 0 : from.upstreamRetries, configured: false };
}

/**
 * Whether `outcome` may spend `budget` (AISIX `RetryBudget::covers`): a budget from the deployment default is
 * never spent on our own timeout — the operator bounded the wait, so the timeout fails over (or ends the
 * request on the last target); 5xx and transport errors spend it. A configured budget covers everything.
 */
export function budgetCovers(budget: RetryBudget, outcome: Outcome): boolean {
  return budget.configured || outcome.kind !== 'timeout';
}

/**
 * Wait before retry number `attempt` (1 = the first retry) of the same target: an upstream Retry-After
 * (`retryAfterSecs`, as `parseRetryAfter` reads it) of at most 5 s exactly; otherwise 250 ms doubling to a 2 s
 * cap, plus up to 25 % jitter from `random()` (in [0, 1)).
 */
export function backoffMs(attempt: number, retryAfterSecs: number | undefined, random: () => number): number {
  if (retryAfterSecs !== undefined && retryAfterSecs <= MAX_HONOURED_RETRY_AFTER_SECS) {
    return Math.ceil(retryAfterSecs * 1000);
  }
  const base = Math.min(BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1), BACKOFF_CAP_MS);
  return base + Math.floor(random() * base * BACKOFF_JITTER);
}

/**
 * A Retry-After value in seconds (≥ 0, fractional for dates): delta-seconds (`120`) or an HTTP-date
 * (`Wed, 21 Oct 2015 07:28:00 GMT`, relative to `now()` in ms, read only for a date: most answers carry no
 * Retry-After; a past date is 0). Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: () => number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, (at - now()) / 1000);
}

// ---- the loop ---------------------------------------------------------------------------------------------

export interface AttemptReport<T, O extends Outcome = Outcome> {
  target: T;
  /** Position of the target in the order: 0 is the first pick, 1+ are fallbacks. */
  targetIndex: number;
  /** 0 for the first attempt on this target, n for its n-th retry. */
  retry: number;
  outcome: O;
  verdict: Verdict;
  /** The response's Retry-After in seconds, when it had a readable one (feeds ModelHealth's cooldown). */
  retryAfterSecs?: number;
  startedAt: number;
  durationMs: number;
  /**
   * What the loop does after this attempt: `retry` the same target, `fallback` to the next one, or `done`
   * (this outcome is the result, or the request was aborted). Not `done` → discard this outcome's body.
   */
  next: 'retry' | 'fallback' | 'done';
}

export interface RunOptions<T, O extends Outcome> {
  /** Ordered, non-empty: the first pick then the fallbacks. */
  targets: readonly [T, ...T[]];
  /** One upstream attempt. Must not throw for upstream failures; map them to `timeout` / `transport`. */
  attempt: (target: T, signal: CancelSignal | undefined) => Promise<O>;
  /** Retries allowed on a target (see `retryBudget`); `queuedBehind`: another target follows it. */
  budget: (target: T, queuedBehind: boolean) => RetryBudget;
  classify: ClassifyOptions;
  /** The caller's request signal: once aborted, no further attempt starts and any backoff ends. */
  signal?: CancelSignal;
  /** Waits `ms`, resolving early (not rejecting) when `signal` aborts. Default: a timer. */
  sleep?: (ms: number, signal?: CancelSignal) => Promise<void>;
  random?: () => number;
  now?: () => number;
  onAttempt?: (report: AttemptReport<T, O>) => void;
}

export type RunResult<T, O extends Outcome> =
  /** `outcome` is the answer to give: a success, a `return`ed upstream status, or the last failure. */
  | { kind: 'finished'; outcome: O; target: T; verdict: Verdict; attempts: AttemptReport<T, O>[] }
  /** The caller's signal aborted; the last attempt's outcome (if any) still needs its body discarded. */
  | { kind: 'aborted'; attempts: AttemptReport<T, O>[] };

/** Retry-then-failover over `targets`; stops at the first success or non-retryable outcome. */
export async function runAttempts<T, O extends Outcome>(opts: RunOptions<T, O>): Promise<RunResult<T, O>> {
  const sleep = opts.sleep ?? sleepMs;
  const random = opts.random ?? Math.random;
  const now = opts.now ?? Date.now;
  const { signal } = opts;
  const attempts: AttemptReport<T, O>[] = [];
  for (let targetIndex = 0; targetIndex < opts.targets.length; targetIndex++) {
    const target = opts.targets[targetIndex]!;
    const isLastTarget = targetIndex === opts.targets.length - 1;
    const budget = opts.budget(target, !isLastTarget);
    for (let retry = 0;; retry++) {
      if (signal?.aborted) return { kind: 'aborted', attempts };
      const startedAt = now();
      let outcome: O;
      try {
        outcome = await opts.attempt(target, signal);
      } catch (err) {
        if (signal?.aborted) return { kind: 'aborted', attempts };
        throw err;
      }
      const verdict = classify(outcome, opts.classify);
      const retryAfterSecs = outcome.kind === 'response' ? parseRetryAfter(outcome.retryAfter, now) : undefined;
      const budgetLeft = retry < budget.retries && budgetCovers(budget, outcome);
      const next = nextStep(verdict, budgetLeft, retryAfterSecs, isLastTarget, signal?.aborted === true);
      const report: AttemptReport<T, O> = {
        target,
        targetIndex,
        retry,
        outcome,
        verdict,
        startedAt,
        durationMs: now() - startedAt,
        next,
      };
      // Set when there is one, not spread in: no empty object per attempt.
      if (retryAfterSecs !== undefined) report.retryAfterSecs = retryAfterSecs;
      attempts.push(report);
      opts.onAttempt?.(report);
      if (signal?.aborted) return { kind: 'aborted', attempts };
      if (next === 'done') return { kind: 'finished', outcome, target, verdict, attempts };
      if (next === 'fallback') break;
      await sleep(backoffMs(retry + 1, retryAfterSecs, random), signal);
    }
  }
  // Unreachable: the last target always ends in `done`.
  throw new Error('runAttempts: fell off the end of the target list');
}

function nextStep(
  verdict: Verdict,
  budgetLeft: boolean,
  retryAfterSecs: number | undefined,
  isLastTarget: boolean,
  aborted: boolean,
): AttemptReport<unknown>['next'] {
  if (aborted || verdict === 'success' || verdict === 'return') return 'done';
  const mayRetry = verdict === 'retry' && budgetLeft &&
    (retryAfterSecs === undefined || retryAfterSecs <= MAX_HONOURED_RETRY_AFTER_SECS);
  if (mayRetry) return 'retry';
  return isLastTarget ? 'done' : 'fallback';
}
