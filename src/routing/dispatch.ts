// Send one caller request to the model it names (docs/routing.md): plan the targets (dispatch-plan.ts), try
// them in the one retry loop (retry.ts) one attempt at a time (dispatch-attempt.ts), record every attempt
// (dispatch-record.ts), and hand back a whole response, a live stream (dispatch-stream.ts) or a failure value.
import type { Config } from '../config/schema.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { UpstreamFetch } from '../platform.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import type { Clock } from '../util/clock.ts';
import { attemptUpstream } from './dispatch-attempt.ts';
import { planTargets } from './dispatch-plan.ts';
import { attemptFact } from './attempt-fact.ts';
import { AttemptRecorder } from './dispatch-record.ts';
import { settledWithin, streamResult } from './dispatch-stream.ts';
import {
  type Answer,
  type AttemptOutcome,
  closeLive,
  type DispatchFailure,
  type DispatchInput,
  type DispatchResult,
  type Plan,
  type Run,
  type ServedBy,
  type Target,
  TRANSPORT_FAILED,
  upstreamFailure,
  type WatchedAttempt,
} from './dispatch-types.ts';
import type { ModelHealth } from './health.ts';
import { classifyOptions, retryBudget, runAttempts } from './retry.ts';
import type { RoutingState } from './strategies.ts';

export type { DispatchFailure, DispatchInput, DispatchResult, ServedBy, TimeoutBudget } from './dispatch-types.ts';
export { timeoutBudget } from './dispatch-plan.ts';
export { statusBucket } from './dispatch-record.ts';

export interface DispatcherDeps {
  /** `upstream` (deadlines, retries) and the keep-alive interval that times the early commit. */
  config: { upstream: Config['upstream']; downstream: Pick<Config['downstream'], 'sse_keepalive_interval_secs'> };
  upstream: UpstreamFetch;
  health: ModelHealth;
  routing: RoutingState;
  metrics: GatewayMetrics;
  /** Times each attempt and its first chunk (the time to first token); default the system's. */
  clock?: Clock;
}

export class Dispatcher {
  private readonly recorder: AttemptRecorder;
  /** What planning reads, made once rather than per request. */
  private readonly planDeps: Parameters<typeof planTargets>[0];

  constructor(private readonly d: DispatcherDeps) {
    this.recorder = new AttemptRecorder(d);
    this.planDeps = { upstream: d.config.upstream, health: d.health, routing: d.routing };
  }

  /** Not an async function: a JSON request's answer is one `then` on the loop, without a frame around it. */
  dispatch(input: DispatchInput): Promise<DispatchResult> {
    try {
      const plan = planTargets(this.planDeps, input);
      if (!('order' in plan)) return Promise.resolve({ kind: 'error', failure: plan });
      // JSON: the caller's own signal is the only one the loop needs (the runtime aborts it when the
      // connection closes before the response finished).
      if (!input.stream) return this.run(input, plan, input.signal).then(wholeAnswerOf);
      return this.dispatchStream(input, plan);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private async dispatchStream(input: DispatchInput, plan: Plan): Promise<DispatchResult> {
    // A stream's consumer can also stop the loop (the caller left while it was still failing over).
    const controller = new Cancel();
    if (input.signal.aborted) controller.abort();
    else input.signal.addEventListener('abort', () => controller.abort(), { once: true });
    const run = this.run(input, plan, controller);
    // A resource-configured stream budget withholds the 200 until the first chunk: no early commit then.
    // Otherwise, with no answer within the keep-alive interval, commit to the stream and fail over behind it.
    const withhold = input.relay === true || plan.order.some((t) => t.streamConfigured);
    const commitAfterMs = withhold ? 0 : this.d.config.downstream.sse_keepalive_interval_secs * 1000;
    const early = commitAfterMs > 0 ? await settledWithin(run, commitAfterMs) : { value: await run };
    if (early) {
      const a = answerOf(early.value);
      if (a.kind !== 'live') return a;
      return streamResult(
        run,
        controller,
        answerOf,
        this.recorder,
        a.served,
        input.attempts,
        a.live.headers,
        this.d.clock,
      );
    }
    return streamResult(run, controller, answerOf, this.recorder, undefined, input.attempts, undefined, this.d.clock);
  }

  /** The retry loop over the plan's targets, every attempt recorded. */
  private run(input: DispatchInput, plan: Plan, signal: CancelSignal): Promise<Run> {
    let previous: Target | undefined;
    const upstreamRetries = this.d.config.upstream.retries;
    const watch = input.attempts;
    let watched: WatchedAttempt | undefined;
    const call = (t: Target) => {
      if (watch) watched = watch.attempt(input, t);
      return attemptUpstream(this.d, input, t, signal, watched);
    };
    const reserve = plan.routing ? input.reserveTarget : undefined;
    return runAttempts<Target, AttemptOutcome>({
      targets: plan.order,
      attempt: reserve
        ? async (t) => {
          const gate = await reserve(t.model);
          if (gate.ok) return call(t);
          watched = undefined;
          return { kind: 'over_limit', ...gate };
        }
        : call,
      budget: (t, queuedBehind) =>
        retryBudget({ model: t.model, routing: plan.routing, upstreamRetries, queuedBehind }),
      classify: classifyOptions(plan.routing),
      signal,
      now: this.d.clock, // undefined: runAttempts' own
      onAttempt: (r) => {
        const moved = previous !== undefined && previous.model.id !== r.target.model.id;
        if (input.onAttempt) {
          input.onAttempt(attemptFact(r, previous === undefined ? 'initial' : moved ? 'fallback' : 'retry'));
        }
        previous = r.target;
        // A target refused by its own limits was never called: no upstream sample of it.
        if (r.outcome.kind === 'over_limit') return;
        this.recorder.attempt(input, r, signal, moved);
        if (watched) watched.settled(r.outcome);
      },
    });
  }
}

/** A JSON request's answer from the loop's result. */
function wholeAnswerOf(run: Run): DispatchResult {
  const a = answerOf(run);
  if (a.kind === 'live') throw new Error('unreachable: only a streamed request produces a live stream');
  return a;
}

/** The caller's answer from the loop's result; a stream that started comes back as `live`. */
function answerOf(run: Run): Answer {
  if (run.kind === 'aborted') {
    for (const a of run.attempts) if (a.outcome.kind === 'response' && a.outcome.live) closeLive(a.outcome.live);
    return { kind: 'aborted' };
  }
  const { outcome: o, target: t } = run;
  const served = servedBy(run);
  if (o.kind === 'timeout') {
    const failure: DispatchFailure = {
      kind: 'upstream_timeout',
      status: 504,
      message: `upstream request timed out after ${o.afterMs}ms`,
      detail: `model "${t.model.display_name}" did not answer within its deadline`,
    };
    return { kind: 'error', failure, target: t.model, served };
  }
  if (o.kind === 'over_limit') {
    // Every target was over its own limits: the last refusal answers.
    // AISIX: the inline limit's refusal is an upstream_error, a policy's its own 429.
    const failure: DispatchFailure = {
      kind: o.byPolicy ? 'rate_limit_exceeded' : 'upstream_error',
      status: 429,
      message: o.message,
      retryAfterSecs: o.retryAfterSecs,
    };
    return { kind: 'error', failure, target: t.model, served };
  }
  if (o.kind === 'transport') {
    // The transport's own words (a runtime's advice text among them) go to the log only.
    const failure = o.failure ??
      (o.callerMessage === undefined
        ? { ...upstreamFailure(TRANSPORT_FAILED), detail: `${TRANSPORT_FAILED}: ${o.message}` }
        : o.callerMessage === o.message
        ? upstreamFailure(o.callerMessage)
        : { ...upstreamFailure(o.callerMessage), detail: `${o.callerMessage}: ${o.message}` });
    return { kind: 'error', failure, target: t.model, served };
  }
  if (o.live) return { kind: 'live', target: t, live: o.live, served };
  if (o.refusal !== undefined) {
    const failure: DispatchFailure = o.unavailable
      ? {
        kind: 'provider_unavailable',
        status: 503,
        message: o.refusal,
        detail:
          `provider_key "${t.key.display_name}" of vendor "${t.key.provider}" names no adapter (openai, anthropic, bedrock, vertex, azure-openai)`,
      }
      : {
        kind: 'invalid_request',
        status: 400,
        message: o.refusal,
        ...(o.refusalDetail ? { detail: o.refusalDetail } : {}),
      };
    return { kind: 'error', failure, target: t.model, served };
  }
  if (o.status >= 500) {
    return { kind: 'error', failure: upstreamFailure(`upstream answered ${o.status}`), target: t.model, served };
  }
  // Members set one by one, not spread: JavaScriptCore copies a spread through a slow path, on every answer.
  const headers: Record<string, string> = {};
  if (o.headers) { for (const k in o.headers) headers[k] = o.headers[k]!; }
  if (o.retryAfter) headers['retry-after'] = o.retryAfter;
  const answer: Answer = {
    kind: 'response',
    status: o.status,
    body: o.body,
    contentType: o.contentType,
    headers,
    target: t.model,
    served,
  };
  if (o.counted && o.status < 300) answer.counted = o.counted;
  return answer;
}

/** The `ServedBy` of a finished loop: the deciding attempt's target and the request's attempt counts. */
function servedBy(run: Extract<Run, { kind: 'finished' }>): ServedBy {
  const { attempts, target: t } = run;
  let fallbacks = 0;
  for (let i = 1; i < attempts.length; i++) {
    if (attempts[i]!.target.model.id !== attempts[i - 1]!.target.model.id) fallbacks++;
  }
  const last = attempts[attempts.length - 1];
  const before = attempts[attempts.length - 2];
  return {
    model: t.model,
    key: t.key,
    upstreamModel: t.upstreamModel,
    attempts: attempts.length,
    fallbacks,
    isFallback: attempts.length > 0 && attempts[0]!.target.model.id !== t.model.id,
    kind: !before ? 'initial' : before.target.model.id === t.model.id ? 'retry' : 'fallback',
    startedAt: last?.startedAt ?? Date.now(),
    durationMs: last?.durationMs ?? 0,
  };
}
