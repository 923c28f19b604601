// What every finished attempt leaves behind (docs/routing.md "Model health", "Metrics of this path"): model
// health, the deployment families, the routing state and the fallback counters (usage events: src/usage).
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import { statusClass } from '../observability/metrics.ts';
import type { CancelSignal } from '../util/cancel.ts';
import type { AttemptOutcome, DispatchInput, Target } from './dispatch-types.ts';
import type { ModelHealth, UpstreamFailure } from './health.ts';
import type { AttemptReport, Outcome } from './retry.ts';
import type { RoutingState } from './strategies.ts';

/** What attempt recording writes to. */
export interface RecordDeps {
  health: ModelHealth;
  routing: RoutingState;
  metrics: GatewayMetrics;
}

/** `aisix_usage_events_emitted_total`'s `status_code`: 2xx|3xx|4xx|5xx|other. Our timeout counts as the 504 and
 *  a transport error as the 502 the caller would get (AISIX maps them to those statuses before bucketing). */
export function statusBucket(outcome: Outcome): string {
  const status = outcome.kind === 'response' ? outcome.status : outcome.kind === 'timeout' ? 504 : 502;
  return statusClass(status);
}

export class AttemptRecorder {
  constructor(private readonly d: RecordDeps) {}

  /**
   * One finished attempt. `moved`: it is on another target than the previous attempt of the request. A
   * stream's success or failure in the deployment families waits for its end (`streamEnded`).
   */
  attempt(input: DispatchInput, r: AttemptReport<Target, AttemptOutcome>, signal: CancelSignal, moved: boolean): void {
    const { target: t, outcome } = r;
    const ok = outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;
    // A caller who went away interrupted the attempt: that says nothing about the upstream.
    if (signal.aborted && !ok) return;
    // Nothing the upstream did: the gateway's own limit refused its answer, or the call was refused unsent.
    const notUpstream = outcome.kind === 'transport'
      ? outcome.notUpstream
      : outcome.kind === 'response' && !outcome.live && outcome.refusal !== undefined;
    if (!notUpstream) this.health(t, outcome, r.retryAfterSecs);
    if (ok) this.d.routing.observeLatency(t.model.id, r.durationMs);
    if (!(outcome.kind === 'response' && outcome.live)) {
      (ok ? this.d.metrics.deploymentSuccess : this.d.metrics.deploymentFailure).inc(t.labels);
    }
    const asked = input.model.display_name;
    if (moved) {
      (ok ? this.d.metrics.successfulFallbacks : this.d.metrics.failedFallbacks).inc([asked, t.model.display_name]);
    }
  }

  /** A live stream of `t` ended: whole or cut by the caller is a success, anything else a failure. */
  streamEnded(t: Target, failure: UpstreamFailure | undefined): void {
    if (!failure) {
      this.d.metrics.deploymentSuccess.inc(t.labels);
      return;
    }
    this.d.metrics.deploymentFailure.inc(t.labels);
    this.health(t, failure);
  }

  private health(t: Target, outcome: AttemptOutcome | UpstreamFailure, retryAfterSecs?: number): void {
    if (outcome.kind === 'over_limit') return; // never called (attempt() skips these too)
    const h = this.d.health;
    const before = h.cooledDownTotal(t.model.id);
    // AISIX's admin health level counts failed upstream calls that are not 4xx; a 4xx neither counts nor resets.
    if (!(outcome.kind === 'response' && outcome.status >= 400 && outcome.status < 500)) {
      h.noteAttempt(t.model.id, outcome.kind === 'response' && outcome.status < 400);
    }
    if (outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300) h.recordSuccess(t.model);
    else if (outcome.kind === 'response') {
      h.recordFailure(t.model, { kind: 'response', status: outcome.status, retryAfterSecs });
    } else h.recordFailure(t.model, { kind: outcome.kind });
    const started = h.cooledDownTotal(t.model.id) - before;
    if (started > 0) this.d.metrics.cooledDown.inc(t.labels, started);
  }
}
