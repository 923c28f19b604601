// Per-model runtime health (docs/routing.md "Model health"): request-path cooldowns and background-check
// marks, kept per model id so they survive a reload, and read through one derivation (`view`) that routing,
// the `/status/models` row and `aisix_deployment_state` all come from, so they cannot disagree.
import { type Cooldown, CooldownSchema, type Model } from '../resources/schema.ts';
import type { Outcome } from './retry.ts';

export type HealthState = 'healthy' | 'cooldown' | 'unhealthy';

/** `status_reason` values of `/status/models` (docs/routing.md); the one place these strings live. */
export const STATUS_REASONS = [
  'upstream_auth_failure',
  'upstream_request_timeout',
  'upstream_rate_limited',
  'upstream_server_error',
  'upstream_status_failure',
  'request_timeout',
  'transport_error',
  'background_check_failed',
  'ignored_transient_error',
] as const;
export type StatusReason = (typeof STATUS_REASONS)[number];

/** A failed request-path attempt, as ModelHealth needs it (runAttempts' outcome plus parsed Retry-After). */
export type UpstreamFailure =
  | { kind: 'response'; status: number; retryAfterSecs?: number }
  | { kind: 'timeout' }
  | { kind: 'transport' };

/** One background check's result: an upstream status, our timeout, or an error before any status. */
export interface CheckResult {
  status?: number;
  timeout?: boolean;
  error?: string;
}

/** AISIX's wire shape of a timestamp (Rust `SystemTime`): whole seconds plus the sub-second nanoseconds. */
export interface EpochTime {
  secs_since_epoch: number;
  nanos_since_epoch: number;
}

/** One row of `GET /status/models`, keys in wire order. */
export interface ModelStatusRow {
  id: string;
  display_name: string;
  kind: 'direct' | 'routing';
  status: HealthState | 'not_applicable';
  cooldown_until?: EpochTime;
  last_checked_at?: EpochTime;
  last_check_status?: number;
  status_reason?: StatusReason;
}

/** `aisix_deployment_state`: 0 healthy, 2 down — used for both cooldown and unhealthy (out of rotation). */
export type DeploymentState = 0 | 2;

/** The block a direct model without `cooldown` gets (docs/routing.md defaults, from the schema). */
export const DEFAULT_COOLDOWN: Cooldown = CooldownSchema.parse({});

/** What is stored per model id. Times in ms since the epoch. */
interface Entry {
  cooldownUntil?: number;
  cooldownReason?: StatusReason;
  /** When the latest failed background check (re)confirmed the unhealthy mark; undefined = no mark. */
  unhealthySince?: number;
  lastCheckedAt?: number;
  lastCheckStatus?: number;
  /** Whether the latest check was ignored (ignore_statuses): shown as `ignored_transient_error` when healthy. */
  lastCheckIgnored?: boolean;
  cooledDownTotal: number;
}

/** The one derivation: what an entry means for a model's current config at time `now`. */
interface View {
  state: HealthState;
  cooldownUntil?: number;
  reason?: StatusReason;
}

/**
 * One per process, never rebuilt on reload: routing reads `state`, each upstream attempt reports through
 * `recordOutcome`, background checks through `recordCheck`, `/status/models` and `/metrics` read `statusRow`,
 * `deploymentState` and `cooledDownTotal`, and a reload calls `retain` with the snapshot's model ids.
 */
export class ModelHealth {
  private readonly entries = new Map<string, Entry>();
  /** model id → consecutive failed upstream attempts (see noteAttempt). */
  private readonly consecutive = new Map<string, number>();
  private readonly now: () => number;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * A request-path attempt on `model` failed. Starts (or extends) a cooldown when the model's cooldown is
   * on and the failure is one of its triggers; returns whether it did. TTL: the Retry-After (capped at
   * `max_seconds`) when `honor_retry_after` and the response had one, else `default_seconds`.
   */
  recordFailure(model: Model, failure: UpstreamFailure): boolean {
    const cfg = cooldownOf(model);
    if (!cfg || !triggers(cfg, failure)) return false;
    const honoured = failure.kind === 'response' && cfg.honor_retry_after ? failure.retryAfterSecs : undefined;
    const ttlSecs = honoured === undefined ? cfg.default_seconds : Math.min(honoured, cfg.max_seconds);
    if (ttlSecs <= 0) return false;
    const now = this.now();
    const until = Math.round(now + ttlSecs * 1000);
    const e = this.entry(model.id);
    const cooling = e.cooldownUntil !== undefined && e.cooldownUntil > now;
    if (!cooling) e.cooledDownTotal++;
    e.cooldownUntil = cooling ? Math.max(e.cooldownUntil!, until) : until;
    e.cooldownReason = failureReason(failure);
    return true;
  }

  /**
   * One request-path attempt's outcome, as runAttempts reports it (`retryAfterSecs` from the report):
   * 2xx → `recordSuccess`, anything else → `recordFailure`. Returns whether a cooldown started.
   */
  recordOutcome(model: Model, outcome: Outcome, retryAfterSecs?: number): boolean {
    if (outcome.kind === 'over_limit') return false; // never called: says nothing about the upstream
    if (outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300) {
      this.recordSuccess(model);
      return false;
    }
    const failure: UpstreamFailure = outcome.kind === 'response'
      ? { kind: 'response', status: outcome.status, retryAfterSecs }
      : { kind: outcome.kind };
    return this.recordFailure(model, failure);
  }

  /** A request-path attempt on `model` succeeded: its cooldown (if any) ends now. */
  recordSuccess(model: Pick<Model, 'id'>): void {
    const e = this.entries.get(model.id);
    if (!e) return;
    e.cooldownUntil = undefined;
    e.cooldownReason = undefined;
  }

  /**
   * One background check of `model` finished. 2xx clears the unhealthy mark; a status in `ignore_statuses`
   * (a timeout counts as 408) leaves the state as it was and notes `ignored_transient_error`; anything else
   * marks it unhealthy with `last_check_status` = the status (408 on timeout, none for an error).
   */
  recordCheck(model: Model, result: CheckResult): void {
    const now = this.now();
    const e = this.entry(model.id);
    const status = result.timeout ? 408 : result.status;
    e.lastCheckedAt = now;
    e.lastCheckStatus = status;
    e.lastCheckIgnored = false;
    if (!result.timeout && status !== undefined && status >= 200 && status < 300) {
      e.unhealthySince = undefined;
    } else if (status !== undefined && (model.background_model_check?.ignore_statuses ?? []).includes(status)) {
      e.lastCheckIgnored = true;
    } else {
      e.unhealthySince = now;
    }
  }

  /** The model's state for routing. A routing model has no state of its own and reads `healthy`. */
  state(model: Model, now = this.now()): HealthState {
    return this.view(model, now).state;
  }

  /** The model's `/status/models` row (docs/routing.md). */
  statusRow(model: Model, now = this.now()): ModelStatusRow {
    const row: ModelStatusRow = {
      id: model.id,
      display_name: model.display_name,
      kind: model.kind,
      status: 'not_applicable',
    };
    if (model.kind === 'routing') return row;
    const v = this.view(model, now);
    const e = this.entries.get(model.id);
    row.status = v.state;
    if (v.cooldownUntil !== undefined) row.cooldown_until = epochTime(v.cooldownUntil);
    if (e?.lastCheckedAt !== undefined) row.last_checked_at = epochTime(e.lastCheckedAt);
    if (e?.lastCheckStatus !== undefined) row.last_check_status = e.lastCheckStatus;
    if (v.reason !== undefined) row.status_reason = v.reason;
    return row;
  }

  /** `aisix_deployment_state` for a direct model; undefined for a routing model (it is no deployment). */
  deploymentState(model: Model, now = this.now()): DeploymentState | undefined {
    if (model.kind === 'routing') return undefined;
    return this.view(model, now).state === 'healthy' ? 0 : 2;
  }

  /** `aisix_deployment_cooled_down_total`: cooldowns started for this model id since the process began. */
  cooledDownTotal(modelId: string): number {
    return this.entries.get(modelId)?.cooledDownTotal ?? 0;
  }

  /**
   * After a config reload: forget models whose id `keep` lacks (the new snapshot's `models`). Everything kept
   * keyed by id carries over; the cost follows the entries held, not the snapshot's size.
   */
  retain(keep: { has(id: string): boolean }): void {
    for (const id of this.entries.keys()) if (!keep.has(id)) this.entries.delete(id);
    for (const id of this.consecutive.keys()) if (!keep.has(id)) this.consecutive.delete(id);
  }

  /**
   * One upstream attempt on `modelId` ended: a success resets the model's run of consecutive failures, a
   * failure extends it (AISIX's `/admin/v1/health` level: 4–7 degraded, ≥ 8 down).
   */
  noteAttempt(modelId: string, ok: boolean): void {
    if (ok) this.consecutive.delete(modelId);
    else this.consecutive.set(modelId, (this.consecutive.get(modelId) ?? 0) + 1);
  }

  /** Consecutive failed upstream attempts since the model's last success. */
  consecutiveFailures(modelId: string): number {
    return this.consecutive.get(modelId) ?? 0;
  }

  private view(model: Model, now: number): View {
    const e = this.entries.get(model.id);
    if (model.kind === 'routing' || !e) return { state: 'healthy' };
    const cooling = cooldownOf(model) !== undefined && e.cooldownUntil !== undefined && e.cooldownUntil > now;
    const cooldownUntil = cooling ? e.cooldownUntil : undefined;
    if (markActive(model, e, now)) return { state: 'unhealthy', cooldownUntil, reason: 'background_check_failed' };
    if (cooling) return { state: 'cooldown', cooldownUntil, reason: e.cooldownReason };
    return { state: 'healthy', reason: e.lastCheckIgnored ? 'ignored_transient_error' : undefined };
  }

  private entry(id: string): Entry {
    let e = this.entries.get(id);
    if (!e) this.entries.set(id, e = { cooledDownTotal: 0 });
    return e;
  }
}

/** The model's effective cooldown block, or undefined when cooldown is off for it. */
export function cooldownOf(model: Model): Cooldown | undefined {
  if (model.kind === 'routing') return undefined;
  const cfg = model.cooldown ?? DEFAULT_COOLDOWN;
  return cfg.enabled && cfg.default_seconds > 0 ? cfg : undefined;
}

function triggers(cfg: Cooldown, failure: UpstreamFailure): boolean {
  switch (failure.kind) {
    case 'response':
      return cfg.trigger_statuses.includes(failure.status);
    case 'timeout':
      return cfg.trigger_on_timeout;
    case 'transport':
      return cfg.trigger_on_transport;
  }
}

/** The `status_reason` of a request-path failure. */
export function failureReason(failure: UpstreamFailure): StatusReason {
  if (failure.kind === 'timeout') return 'request_timeout';
  if (failure.kind === 'transport') return 'transport_error';
  const { status } = failure;
  if (status === 401 || status === 403) return 'upstream_auth_failure';
  if (status === 408) return 'upstream_request_timeout';
  if (status === 429) return 'upstream_rate_limited';
  if (status >= 500) return 'upstream_server_error';
  return 'upstream_status_failure';
}

/** An unhealthy mark counts while background checks are on for the model and it is not stale. */
function markActive(model: Model, e: Entry, now: number): boolean {
  const check = model.background_model_check;
  if (e.unhealthySince === undefined || !check?.enabled) return false;
  const staleAfter = check.stale_after_seconds;
  return staleAfter === undefined || now - e.unhealthySince <= staleAfter * 1000;
}

export function epochTime(ms: number): EpochTime {
  const secs = Math.floor(ms / 1000);
  return { secs_since_epoch: secs, nanos_since_epoch: Math.min(999_999_999, Math.round((ms - secs * 1000) * 1e6)) };
}
