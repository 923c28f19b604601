// Send one caller request to the model it names (docs/routing.md): choose the targets (`pickTargets`),
// try them in the one retry loop (`runAttempts`), and hand back a whole response or a live stream.
// Every attempt feeds model health, the deployment metrics and the routing state; deadlines are enforced
// here, so every adapter gets them for free.
//
// A direct model is a one-target route under the defaults (failover, `when_all_unavailable: fail`): a model
// in cooldown is still called (it is the only candidate, and docs/routing.md uses cooled targets when only cooled
// ones remain); a model marked unhealthy by its background check answers 503 `all_candidates_unavailable`
// without an upstream call, like a routing model whose targets are all unhealthy.
//
// Deadlines (AISIX `effective_timeouts`, docs/aisix-compatibility.md "Resources"): `timeout` resolves target model → routing
// model (group) → `upstream.timeout_ms`, the first level that says anything wins and an explicit 0 means
// no deadline. The stream budget resolves the resources' `stream_timeout` first (target, then group; 0 or
// absent defers), then the resource-resolved `timeout`, then `upstream.stream_timeout_ms` || `timeout_ms`.
//
// Streams: the stream budget bounds the response head and then every silence between chunks. Only a budget
// that came from the RESOURCES (`streamConfigured`) also covers the first chunk before the 200: the caller's
// response is withheld until that chunk, so a slow first token fails over (first-token failover). With the
// deployment default the attempt succeeds at the upstream's 2xx head; a first-chunk stall is then an in-band
// SSE timeout error. A request none of whose targets has a resource budget may also commit early: if the
// loop has no answer within the SSE keep-alive interval (retries, backoff, slow heads), the gateway commits
// to `200 text/event-stream`, sends keep-alive comments and keeps failing over behind them; a failure after
// that point (or after the first byte) is an SSE error event.
//
// Retries (AISIX `effective_retries`; docs/routing.md): see `retryBudget`; the budget is resolved per target with
// whether another target is queued behind it in this request's order.
//
// Per attempt (docs/aisix-compatibility.md "Metrics"): `aisix_usage_events_emitted_total` +1, and for an attempt on another target than
// the previous one `aisix_routing_{successful,failed}_fallbacks_total{model, fallback_model}` +1.
import type { Config } from '../config/schema.ts';
import { type DeploymentLabels, deploymentLabels, type GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { UpstreamFetch } from '../platform.ts';
import { callProvider } from '../providers/call.ts';
import { adapterFor } from '../providers/index.ts';
import { type Endpoint, type ProviderAdapter, type StreamEnd, UpstreamStreamError } from '../providers/types.ts';
import { upstreamErrorParts } from '../providers/upstream-error.ts';
import type { DirectModel, Model, ProviderKey, Routing, RoutingModel, RoutingTarget } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ModelHealth, UpstreamFailure } from './health.ts';
import {
  type AttemptReport,
  classifyOptions,
  type Outcome,
  retryBudget,
  runAttempts,
  type RunResult,
} from './retry.ts';
import { type Candidate, type HeaderReader, pickTargets, type RoutingState, usableCandidates } from './strategies.ts';
import { RefusedAnswer } from '../upstream-fetch.ts';
import { ipAllowed } from '../util/cidr.ts';
import { IdleTimer } from '../util/idle-timer.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';

export interface DispatchInput {
  snapshot: Snapshot;
  model: Model;
  /** For a direct model reached through a wildcard alias, the upstream model name. */
  upstreamModel?: string;
  endpoint: Endpoint;
  body: Record<string, unknown>;
  stream: boolean;
  /** Aborted when the caller goes away. */
  signal: CancelSignal;
  /** consistent_hash `hash_on` sources: the request headers, the caller's API key id and the client's IP
   *  (the connection's peer, or the address `proxy.real_ip` resolved). */
  headers?: HeaderReader;
  apiKeyId?: string;
  clientIp?: string;
}

/**
 * Why a request could not be answered by an upstream, in routing's own terms; the HTTP layer (src/http)
 * turns it into the caller's envelope. `message` is for the caller (the gateway's words, or an upstream's
 * message the HTTP layer scrubs); `detail` only for the log (a transport's words, e.g. a runtime's advice).
 */
export interface DispatchFailure {
  kind:
    | 'upstream_error'
    | 'upstream_timeout'
    | 'all_candidates_unavailable'
    | 'invalid_request'
    | 'service_unavailable';
  status: number;
  message: string;
  detail?: string;
  retryAfterSecs?: number;
}

export type DispatchResult =
  /**
   * A whole upstream answer: 2xx (a JSON object: a 2xx that is not one is a failure), or a 4xx the caller
   * gets back (its body re-wrapped by the HTTP layer; its Retry-After kept).
   */
  | {
    kind: 'response';
    status: number;
    body: string;
    contentType: string;
    headers: Record<string, string>;
    target: DirectModel;
    served?: ServedBy;
  }
  /**
   * A live SSE body. The caller must run it through the pump and call `settle` exactly once with how it
   * ended (health, metrics and in-flight counts are recorded then); `abort` stops the upstream.
   */
  | {
    kind: 'stream';
    chunks: AsyncIterable<Uint8Array>;
    abort(): void;
    settle(end: StreamEnd): void;
    served?: ServedBy;
  }
  | { kind: 'error'; failure: DispatchFailure; target?: DirectModel; served?: ServedBy }
  /** The caller went away before an answer existed. */
  | { kind: 'aborted' };

/**
 * Which upstream target served a request (or failed it last), for the request metrics and the access log
 * (docs/aisix-compatibility.md "Metrics"). For a stream it describes the target whose first chunk started the answer.
 */
export interface ServedBy {
  /** The direct model (routing target) of the deciding attempt. */
  model: DirectModel;
  key: ProviderKey;
  /** The model name sent upstream. */
  upstreamModel: string;
  /** Upstream attempts made for this request (`routing_attempt_count`). */
  attempts: number;
  /** Attempts that moved to a different target than the previous attempt (`routing_fallback_count`). */
  fallbacks: number;
  /** Whether the deciding attempt was on another target than the first one tried (`is_fallback`). */
  isFallback: boolean;
}

export interface DispatcherDeps {
  config: Config;
  upstream: UpstreamFetch;
  health: ModelHealth;
  routing: RoutingState;
  metrics: GatewayMetrics;
}

/** One routing target, ready to call. Also a strategies `Candidate`. */
interface Target extends Candidate {
  model: DirectModel;
  upstreamModel: string;
  key: ProviderKey;
  adapter: ProviderAdapter;
  labels: DeploymentLabels;
  /** Non-stream deadline, ms (0 = none). */
  timeoutMs: number;
  /** Stream deadline: the head (and, when `streamConfigured`, the first chunk), then the longest silence
   *  between chunks, ms (0 = none). */
  silenceMs: number;
  /** `silenceMs` came from the resources (target or group), not the deployment default: withhold the 200
   *  until the first chunk, so a slow first token fails over. */
  streamConfigured: boolean;
}

/** Deadlines of one target (AISIX `effective_timeouts`); 0 = none. */
export interface TimeoutBudget {
  timeoutMs: number;
  silenceMs: number;
  streamConfigured: boolean;
}

/**
 * Resolve a target's deadlines: `timeout` target → group → `upstream.timeout_ms` (an explicit 0 = no deadline
 * and stops the chain); the stream budget from the resources' `stream_timeout` (0 or absent defers), else the
 * resource-resolved `timeout`, else `upstream.stream_timeout_ms` || `upstream.timeout_ms`.
 */
export function timeoutBudget(
  target: { timeout?: number; stream_timeout?: number },
  group: { timeout?: number; stream_timeout?: number } | undefined,
  upstream: { timeout_ms: number; stream_timeout_ms: number },
): TimeoutBudget {
  const requestLevel = target.timeout ?? group?.timeout;
  const timeoutMs = requestLevel ?? upstream.timeout_ms;
  const resourceStream = positive(target.stream_timeout) ?? positive(group?.stream_timeout);
  if (resourceStream !== undefined) return { timeoutMs, silenceMs: resourceStream, streamConfigured: true };
  if (requestLevel !== undefined) return { timeoutMs, silenceMs: requestLevel, streamConfigured: requestLevel > 0 };
  return { timeoutMs, silenceMs: upstream.stream_timeout_ms || upstream.timeout_ms, streamConfigured: false };
}

const positive = (ms: number | undefined): number | undefined => (ms !== undefined && ms > 0 ? ms : undefined);

/** `aisix_usage_events_emitted_total`'s `status_code`: 2xx|3xx|4xx|5xx|other. Our timeout counts as the 504 and
 *  a transport error as the 502 the caller would get (AISIX maps them to those statuses before bucketing). */
export function statusBucket(outcome: Outcome): string {
  const status = outcome.kind === 'response' ? outcome.status : outcome.kind === 'timeout' ? 504 : 502;
  return status >= 200 && status < 600 ? `${Math.floor(status / 100)}xx` : 'other';
}

/** A stream whose upstream answered 2xx: the attempt succeeded; the rest is read by the caller's pump. */
interface LiveStream {
  /** The first chunk, when the attempt waited for it (a resource-configured stream budget). */
  first?: Uint8Array;
  rest: AsyncIterator<Uint8Array>;
  /** Abort the upstream request. */
  abort(): void;
  /** Release what the attempt holds (deadline timer, caller-gone listener, in-flight count). Idempotent. */
  end(): void;
}

/** What one attempt produced: runAttempts' `Outcome`, plus the answer itself. */
type AttemptOutcome =
  | {
    kind: 'response';
    status: number;
    retryAfter: string | null;
    body: string;
    contentType: string;
    /** The gateway refused the call before any upstream one (a 400 with this message). */
    refusal?: string;
    live?: undefined;
  }
  | { kind: 'response'; status: number; retryAfter: null; live: LiveStream }
  | { kind: 'timeout' }
  /** No usable answer: a transport failure (`message` is the transport's words, for the log), or a 2xx whose
   *  body is not the JSON the endpoint promises (`callerMessage`: our words for the caller; `retryable: false`:
   *  fail over, do not retry — e.g. an answer over upstream.max_response_bytes). `failure`: what the caller is
   *  told of an answer the transport refused (`RefusedAnswer`); `notUpstream`: the gateway's own limit refused
   *  it, so the target's health is not charged. */
  | {
    kind: 'transport';
    message: string;
    callerMessage?: string;
    retryable?: false;
    failure?: DispatchFailure;
    notUpstream?: true;
  };

type Run = RunResult<Target, AttemptOutcome>;
type Plan = {
  kind: 'ok';
  order: [Target, ...Target[]];
  /** The routing block of a routing model; undefined for a direct model requested by name. */
  routing?: Routing;
} | {
  kind: 'error';
  failure: DispatchFailure;
};

const TIMED_OUT = 'sluice:timeout';
const CALLER_GONE = 'sluice:caller-gone';

export class Dispatcher {
  constructor(private readonly d: DispatcherDeps) {}

  async dispatch(input: DispatchInput): Promise<DispatchResult> {
    const plan = this.plan(input);
    if (plan.kind === 'error') return { kind: 'error', failure: plan.failure };
    if (!input.stream) {
      // JSON: the caller's own signal is the only one the loop needs (the runtime aborts it when the
      // connection closes before the response finished).
      const a = this.answer(await this.run(input, plan, input.signal));
      if (a.kind === 'live') throw new Error('unreachable: only a streamed request produces a live stream');
      return a;
    }
    // A stream's consumer can also stop the loop (the caller left while it was still failing over).
    const controller = new Cancel();
    if (input.signal.aborted) controller.abort();
    else input.signal.addEventListener('abort', () => controller.abort(), { once: true });
    const run = this.run(input, plan, controller);
    // A resource-configured stream budget withholds the 200 until the first chunk: no early commit then.
    const withhold = plan.order.some((t) => t.streamConfigured);
    const commitAfterMs = withhold ? 0 : this.d.config.downstream.sse_keepalive_interval_secs * 1000;
    const early = commitAfterMs > 0 ? await settledWithin(run, commitAfterMs) : { value: await run };
    if (early) {
      const a = this.answer(early.value);
      if (a.kind !== 'live') return a;
      return this.streamResult(run, controller, a.served);
    }
    return this.streamResult(run, controller);
  }

  // ---- planning ---------------------------------------------------------------------------------------------

  private plan(input: DispatchInput): Plan {
    const m = input.model;
    if (m.kind === 'direct') {
      const t = this.target(input.snapshot, m, input.upstreamModel ?? m.model_name, undefined);
      if (!t) {
        return { kind: 'error', failure: upstreamFailure(`model "${m.display_name}" has no usable provider key`) };
      }
      if (!usableCandidates([t], 'fail')) return { kind: 'error', failure: allUnavailable(m.display_name) };
      return { kind: 'ok', order: [t] };
    }
    const candidates: Target[] = [];
    for (const rt of m.routing.targets) {
      const tm = input.snapshot.modelByName(rt.model);
      // AISIX drops a target whose own allowed_cidrs exclude the caller before the strategy picks.
      if (tm?.kind !== 'direct' || !ipAllowed(tm.allowed_cidrs, input.clientIp)) continue;
      const t = this.target(input.snapshot, tm, tm.model_name, m, rt);
      if (t) candidates.push(t);
    }
    if (candidates.length === 0) {
      return {
        kind: 'error',
        failure: upstreamFailure(`no target of model "${m.display_name}" has a usable provider key`),
      };
    }
    const picked = pickTargets(m.routing, candidates, {
      routingModelId: m.id,
      state: this.d.routing,
      headers: input.headers,
      apiKeyId: input.apiKeyId,
      clientIp: input.clientIp,
    });
    if (picked.kind === 'all_unavailable') return { kind: 'error', failure: allUnavailable(m.display_name) };
    return { kind: 'ok', order: picked.order, routing: m.routing };
  }

  private target(
    snapshot: Snapshot,
    model: DirectModel,
    upstreamModel: string,
    group: RoutingModel | undefined,
    rt?: RoutingTarget,
  ): Target | undefined {
    const key = snapshot.providerKeys.get(model.provider_key_id);
    const adapter = key ? adapterFor(key.adapter) : undefined;
    if (!key || !adapter) return undefined;
    return {
      modelId: model.id,
      weight: rt?.weight ?? 1,
      priority: rt?.priority ?? 0,
      health: this.d.health.state(model),
      cost: costPer1k(model.cost),
      model,
      upstreamModel,
      key,
      adapter,
      labels: deploymentLabels(model, key),
      ...timeoutBudget(model, group, this.d.config.upstream),
    };
  }

  // ---- the loop -----------------------------------------------------------------------------------------------

  private run(input: DispatchInput, plan: Extract<Plan, { kind: 'ok' }>, signal: CancelSignal): Promise<Run> {
    let previous: Target | undefined;
    return runAttempts<Target, AttemptOutcome>({
      targets: plan.order,
      attempt: (t) => this.attempt(input, t, signal),
      budget: (t, queuedBehind) =>
        retryBudget({
          model: t.model,
          routing: plan.routing,
          upstreamRetries: this.d.config.upstream.retries,
          queuedBehind,
        }),
      classify: classifyOptions(plan.routing),
      signal,
      onAttempt: (r) => {
        const moved = previous !== undefined && previous.model.id !== r.target.model.id;
        previous = r.target;
        this.recordAttempt(input, r, signal, moved);
      },
    });
  }

  /** One upstream call under the target's deadline. Never throws: failures become outcomes. */
  private async attempt(input: DispatchInput, t: Target, signal: CancelSignal): Promise<AttemptOutcome> {
    const cancel = new Cancel();
    const onCallerGone = () => cancel.abort(CALLER_GONE);
    signal.addEventListener('abort', onCallerGone, { once: true });
    const deadlineMs = input.stream ? t.silenceMs : t.timeoutMs;
    const timer = deadlineMs > 0 ? setTimeout(() => cancel.abort(TIMED_OUT), deadlineMs) : undefined;
    this.d.metrics.deploymentRequests.inc(t.labels);
    const releaseInFlight = this.d.routing.begin(t.model.id);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onCallerGone);
      releaseInFlight();
    };
    try {
      const r = await callProvider(t.adapter, {
        endpoint: input.endpoint,
        body: { ...input.body, model: t.upstreamModel },
        stream: input.stream,
        key: t.key,
        upstream: this.d.upstream,
        signal: cancel,
        ...(input.headers ? { callerHeaders: input.headers } : {}),
      });
      if (r.kind === 'refused') {
        end();
        return { kind: 'response', status: 400, retryAfter: null, body: '', contentType: '', refusal: r.message };
      }
      if (r.kind === 'response') {
        end();
        if (r.status < 200 || r.status >= 300) {
          return {
            kind: 'response',
            status: r.status,
            retryAfter: r.retryAfter,
            body: r.body,
            contentType: r.contentType,
          };
        }
        // A 2xx is a success only when its body is the JSON object the endpoint promises: anything else is an
        // upstream failure, retried and failed over like one (and counted as one).
        if (!looksLikeJsonObject(r.body)) {
          return {
            kind: 'transport',
            message: `upstream answered ${r.status} with a body that is not JSON`,
            callerMessage: `upstream answered ${r.status} with a body that is not JSON`,
          };
        }
        return { kind: 'response', status: r.status, retryAfter: null, body: r.body, contentType: r.contentType };
      }
      const rest = r.chunks[Symbol.asyncIterator]();
      const abort = () => cancel.abort(CALLER_GONE);
      if (!t.streamConfigured) {
        // The deployment default commits at the 2xx head; the first chunk is read under the silence limit.
        clearTimeout(timer);
        return { kind: 'response', status: 200, retryAfter: null, live: { rest, abort, end } };
      }
      const first = await rest.next(); // still under the deadline: no first chunk in time is a timeout
      if (first.done) {
        end();
        void r.cancel().catch(() => {});
        return { kind: 'transport', message: 'the upstream closed the stream before sending anything' };
      }
      clearTimeout(timer); // from here on, the silence between chunks is bounded by the reader
      return { kind: 'response', status: 200, retryAfter: null, live: { first: first.value, rest, abort, end } };
    } catch (e) {
      end();
      if (cancel.reason === TIMED_OUT) return { kind: 'timeout' };
      if (e instanceof RefusedAnswer) {
        // The same answer would come back on a retry: fail over to the next target instead (if any).
        const refused = { kind: 'transport', message: e.message, failure: e.caller, retryable: false } as const;
        return e.upstreamAtFault ? refused : { ...refused, notUpstream: true };
      }
      return { kind: 'transport', message: (e as Error)?.message ?? String(e) };
    }
  }

  /**
   * Health, deployment metrics, routing state, the usage event and the fallback counters for one finished
   * attempt. `moved`: this attempt is on another target than the previous attempt of the request.
   */
  private recordAttempt(
    input: DispatchInput,
    r: AttemptReport<Target, AttemptOutcome>,
    signal: CancelSignal,
    moved: boolean,
  ): void {
    const { target: t, outcome } = r;
    const ok = outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;
    // A caller who went away interrupted the attempt: that says nothing about the upstream.
    if (signal.aborted && !ok) return;
    if (!(outcome.kind === 'transport' && outcome.notUpstream)) this.recordHealth(t, outcome, r.retryAfterSecs);
    if (ok) this.d.routing.observeLatency(t.model.id, r.durationMs);
    // A stream's success or failure is counted when it ends (settle); everything else now.
    if (!(outcome.kind === 'response' && outcome.live)) {
      (ok ? this.d.metrics.deploymentSuccess : this.d.metrics.deploymentFailure).inc(t.labels);
    }
    const asked = input.model.display_name;
    this.d.metrics.usageEvents.inc([
      input.endpoint,
      statusBucket(outcome),
      input.endpoint === 'messages' ? 'anthropic' : 'openai',
      asked,
      t.model.provider_key_id,
      t.key.display_name,
    ]);
    if (moved) {
      (ok ? this.d.metrics.successfulFallbacks : this.d.metrics.failedFallbacks).inc([asked, t.model.display_name]);
    }
  }

  private recordHealth(t: Target, outcome: AttemptOutcome | UpstreamFailure, retryAfterSecs?: number): void {
    const before = this.d.health.cooledDownTotal(t.model.id);
    // AISIX's admin health level counts failed upstream calls that are not 4xx; a 4xx neither counts nor resets.
    if (!(outcome.kind === 'response' && outcome.status >= 400 && outcome.status < 500)) {
      this.d.health.noteAttempt(t.model.id, outcome.kind === 'response' && outcome.status < 400);
    }
    if (outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300) {
      this.d.health.recordSuccess(t.model);
    } else if (outcome.kind === 'response') {
      this.d.health.recordFailure(t.model, { kind: 'response', status: outcome.status, retryAfterSecs });
    } else this.d.health.recordFailure(t.model, { kind: outcome.kind });
    const started = this.d.health.cooledDownTotal(t.model.id) - before;
    if (started > 0) this.d.metrics.cooledDown.inc(t.labels, started);
  }

  // ---- answers --------------------------------------------------------------------------------------------------

  /** The caller's answer from the loop's result; a stream that started comes back as `live`. */
  private answer(
    run: Run,
  ):
    | Exclude<DispatchResult, { kind: 'stream' }>
    | { kind: 'live'; target: Target; live: LiveStream; served: ServedBy } {
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
        message: `model "${t.model.display_name}" did not answer in time`,
      };
      return { kind: 'error', failure, target: t.model, served };
    }
    if (o.kind === 'transport') {
      // The transport's own words (a runtime's advice text among them) go to the log only.
      const failure = o.failure ??
        (o.callerMessage !== undefined
          ? upstreamFailure(o.callerMessage)
          : { ...upstreamFailure(TRANSPORT_FAILED), detail: `${TRANSPORT_FAILED}: ${o.message}` });
      return { kind: 'error', failure, target: t.model, served };
    }
    if (o.live) return { kind: 'live', target: t, live: o.live, served };
    if (o.refusal !== undefined) {
      const failure: DispatchFailure = { kind: 'invalid_request', status: 400, message: o.refusal };
      return { kind: 'error', failure, target: t.model, served };
    }
    if (o.status >= 500) {
      return { kind: 'error', failure: upstreamFailure(`upstream answered ${o.status}`), target: t.model, served };
    }
    const headers: Record<string, string> = o.retryAfter ? { 'retry-after': o.retryAfter } : {};
    return {
      kind: 'response',
      status: o.status,
      body: o.body,
      contentType: o.contentType,
      headers,
      target: t.model,
      served,
    };
  }

  /**
   * The SSE body of a streamed request, whether the loop has already produced a live stream or is still
   * failing over behind keep-alive comments.
   */
  private streamResult(run: Promise<Run>, controller: Cancel, served?: ServedBy): DispatchResult {
    let live: { target: Target; live: LiveStream } | undefined;
    let settled = false;
    // A stream the loop produced after the caller's body had already ended is nobody's: close it.
    void run.then((r) => {
      if (!settled || live) return;
      for (const o of r.kind === 'aborted' ? r.attempts.map((a) => a.outcome) : [r.outcome]) {
        if (o.kind === 'response' && o.live) closeLive(o.live);
      }
    }, () => {});
    // The first chunk once the loop has a live stream, then the rest under the silence limit.
    let rest: SilenceLimited | undefined;
    let over = false;
    const DONE: IteratorResult<Uint8Array> = { done: true, value: undefined };
    const first = async (): Promise<IteratorResult<Uint8Array>> => {
      const a = this.answer(await run);
      if (a.kind === 'aborted') return DONE;
      if (a.kind === 'error') {
        throw new UpstreamStreamError(
          a.failure.kind === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_error',
          a.failure.message,
        );
      }
      if (a.kind === 'response') {
        // Only the upstream's message (scrubbed by the pump), never its raw body.
        const { message } = upstreamErrorParts(a.body);
        throw new UpstreamStreamError('upstream_error', `upstream answered ${a.status}: ${message}`);
      }
      if (settled || over) {
        closeLive(a.live);
        return DONE;
      }
      live = a;
      rest = new SilenceLimited(a.live, a.target.silenceMs);
      if (a.live.first) return { done: false, value: a.live.first };
      // Committed at the head (deployment-default budget): the first chunk comes under the silence limit, and
      // a stream that ends before sending anything is an upstream error, not an empty answer.
      const r = await rest.next();
      if (r.done) {
        throw new UpstreamStreamError('upstream_error', 'the upstream closed the stream before sending anything');
      }
      return r;
    };
    const iterator: AsyncIterator<Uint8Array> = {
      next: () => (rest ? rest.next() : over ? Promise.resolve(DONE) : first().then((r) => {
        if (r.done) over = true;
        return r;
      }, (e) => {
        over = true;
        throw e;
      })),
      return: () => {
        over = true;
        rest?.stop();
        return Promise.resolve(DONE);
      },
    };
    return {
      kind: 'stream',
      ...(served ? { served } : {}),
      chunks: { [Symbol.asyncIterator]: () => iterator },
      abort: () => {
        controller.abort();
        live?.live.abort();
      },
      settle: (end) => {
        if (settled) return;
        settled = true;
        if (!live) {
          controller.abort(); // the caller left while the loop was still failing over
          return;
        }
        const { target: t, live: l } = live;
        l.end();
        if (end === 'complete' || end === 'client_closed') {
          if (end === 'client_closed') l.abort();
          this.d.metrics.deploymentSuccess.inc(t.labels);
          return;
        }
        this.d.metrics.deploymentFailure.inc(t.labels);
        this.recordHealth(t, end === 'upstream_timeout' ? { kind: 'timeout' } : { kind: 'transport' });
      },
    };
  }
}

/**
 * The rest of a live stream; a silence longer than `silenceMs` (0 = none) aborts it with `upstream_timeout`.
 * Written as an iterator, not an async generator: it runs once per SSE chunk, and each generator layer (with
 * `yield*` between them) costs several promise turns per chunk (measured on Node: ~5% of the gateway's CPU
 * under SSE/200).
 */
class SilenceLimited implements AsyncIterator<Uint8Array> {
  private silence: IdleTimer | undefined;
  private timedOut = false;
  private stopped = false;

  constructor(private readonly live: LiveStream, private readonly silenceMs: number) {}

  async next(): Promise<IteratorResult<Uint8Array>> {
    if (this.stopped) return { done: true, value: undefined };
    // Only time spent waiting on the upstream counts as silence; the timer starts with the first wait.
    if (this.silenceMs > 0) {
      if (this.silence) this.silence.touch();
      else {this.silence = new IdleTimer(this.silenceMs, () => {
          this.timedOut = true;
          this.live.abort();
        });}
    }
    let r: IteratorResult<Uint8Array>;
    try {
      r = await this.live.rest.next();
    } catch (e) {
      this.stop();
      throw this.timedOut ? this.timeout() : e;
    }
    if (this.timedOut) {
      this.stop();
      throw this.timeout();
    }
    if (r.done) this.stop();
    else this.silence?.pause(); // a slow caller is not a silent upstream
    return r;
  }

  stop(): void {
    this.stopped = true;
    this.silence?.stop();
  }

  private timeout(): UpstreamStreamError {
    return new UpstreamStreamError('upstream_timeout', `upstream sent nothing for ${this.silenceMs} ms`);
  }
}

/** The `ServedBy` of a finished loop: the deciding attempt's target and the request's attempt counts. */
function servedBy(run: Extract<Run, { kind: 'finished' }>): ServedBy {
  const { attempts, target: t } = run;
  let fallbacks = 0;
  for (let i = 1; i < attempts.length; i++) {
    if (attempts[i]!.target.model.id !== attempts[i - 1]!.target.model.id) fallbacks++;
  }
  return {
    model: t.model,
    key: t.key,
    upstreamModel: t.upstreamModel,
    attempts: attempts.length,
    fallbacks,
    isFallback: attempts.length > 0 && attempts[0]!.target.model.id !== t.model.id,
  };
}

/** least_cost's key: `cost.input_per_1k + cost.output_per_1k` (AISIX `cost_key`); undefined without a cost. */
function costPer1k(cost: Record<string, number> | undefined): number | undefined {
  if (!cost) return undefined;
  return (cost.input_per_1k ?? 0) + (cost.output_per_1k ?? 0);
}

/** The caller's words for an upstream that gave no answer; the transport's own go to the log (`detail`). */
const TRANSPORT_FAILED = 'upstream request failed: no answer from the upstream';

function upstreamFailure(message: string): DispatchFailure {
  return { kind: 'upstream_error', status: 502, message };
}

function allUnavailable(model: string): DispatchFailure {
  return {
    kind: 'all_candidates_unavailable',
    status: 503,
    message: `every routing candidate of model "${model}" is unavailable`,
    retryAfterSecs: 30,
  };
}

/**
 * Whether `text` is shaped as a JSON object: `{` … `}` around it, blanks aside. It runs on every JSON answer,
 * so it does not parse it (a full parse cost ~3 % of the gateway's CPU under JSON/50, and the usage reader
 * and the translators read what they need): HTML, plain text, an empty or truncated body all fail it.
 */
function looksLikeJsonObject(text: string): boolean {
  let i = 0;
  let j = text.length - 1;
  while (i <= j && isBlank(text.charCodeAt(i))) i++;
  while (j > i && isBlank(text.charCodeAt(j))) j--;
  return j > i && text.charCodeAt(i) === 123 && text.charCodeAt(j) === 125; // { … }
}

function isBlank(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

function closeLive(live: LiveStream): void {
  live.abort();
  live.end();
}

/** `{ value }` if `p` settles within `ms`, else undefined (the timer never outlives the race). */
async function settledWithin<T>(p: Promise<T>, ms: number): Promise<{ value: T } | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
  });
  try {
    return await Promise.race([p.then((value) => ({ value })), late]);
  } finally {
    clearTimeout(timer);
  }
}
