// Send one caller request to the model it names (SPEC §7.3, §7.4): choose the targets (`pickTargets`),
// try them in the one retry loop (`runAttempts`), and hand back a whole response or a live stream.
// Every attempt feeds model health, the deployment metrics and the routing state; deadlines are enforced
// here, so every adapter gets them for free.
//
// A direct model is a one-target route under the defaults (failover, `when_all_unavailable: fail`): a model
// in cooldown is still called (it is the only candidate, and SPEC §7.3 uses cooled targets when only cooled
// ones remain); a model marked unhealthy by its background check answers 503 `all_candidates_unavailable`
// without an upstream call, like a routing model whose targets are all unhealthy.
//
// Streams: the attempt's deadline (`stream_timeout`, else `upstream.stream_timeout_ms`, else the model's
// `timeout`) covers the response head AND the first chunk, so a stream that fails before its first byte
// fails over like JSON. The caller's response is held until that first chunk — unless none has arrived
// within the SSE keep-alive interval: then the gateway commits to `200 text/event-stream`, sends keep-alive
// comments, and keeps failing over behind them; a failure after that point (or after the first byte) is an
// SSE error event. Between chunks the same deadline bounds the silence.
import type { Config } from '../config/schema.ts';
import { type DeploymentLabels, deploymentLabels, type GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { UpstreamFetch } from '../platform.ts';
import { callProvider } from '../providers/call.ts';
import { adapterFor } from '../providers/index.ts';
import { type Endpoint, type ProviderAdapter, UpstreamStreamError } from '../providers/types.ts';
import { errors, type ProxyError } from '../proxy/errors.ts';
import type { StreamEnd } from '../proxy/stream.ts';
import type { DirectModel, Model, ProviderKey, Routing, RoutingTarget } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ModelHealth, UpstreamFailure } from './health.ts';
import { type AttemptReport, classifyOptions, retryBudget, runAttempts, type RunResult } from './retry.ts';
import { type Candidate, type HeaderReader, pickTargets, type RoutingState, usableCandidates } from './strategies.ts';
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
  /** consistent_hash: the request headers (`hash_header`) and the caller's API key id. */
  headers?: HeaderReader;
  apiKeyId?: string;
  /** The caller's address (proxy.real_ip resolved), for `hash_on: client_ip`. */
  clientIp?: string;
}

export type DispatchResult =
  /** A whole upstream answer: 2xx, or a 4xx passed back as the upstream sent it (with its Retry-After). */
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
  | { kind: 'error'; error: ProxyError; target?: DirectModel; served?: ServedBy }
  /** The caller went away before an answer existed. */
  | { kind: 'aborted' };

/**
 * Which upstream target served a request (or failed it last), for the request metrics and the access log
 * (aisix-contract.md §1 C, D). For a stream it describes the target whose first chunk started the answer.
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
  routingTarget?: RoutingTarget;
  labels: DeploymentLabels;
  /** Non-stream deadline, ms (0 = none). */
  timeoutMs: number;
  /** Stream deadline: head + first chunk, and the longest silence between chunks, ms (0 = none). */
  silenceMs: number;
}

/** A stream whose first chunk arrived: the attempt succeeded; the rest is read by the caller's pump. */
interface LiveStream {
  first: Uint8Array;
  rest: AsyncIterator<Uint8Array>;
  /** Abort the upstream request. */
  abort(): void;
  /** Release what the attempt holds (deadline timer, caller-gone listener, in-flight count). Idempotent. */
  end(): void;
}

/** What one attempt produced: runAttempts' `Outcome`, plus the answer itself. */
type AttemptOutcome =
  | { kind: 'response'; status: number; retryAfter: string | null; body: string; contentType: string; live?: undefined }
  | { kind: 'response'; status: number; retryAfter: null; live: LiveStream }
  | { kind: 'timeout' }
  | { kind: 'transport'; message: string };

type Run = RunResult<Target, AttemptOutcome>;
type Plan = { kind: 'ok'; order: [Target, ...Target[]]; routing?: Routing; routingName?: string } | {
  kind: 'error';
  error: ProxyError;
};

const TIMED_OUT = 'sluice:timeout';
const CALLER_GONE = 'sluice:caller-gone';

export class Dispatcher {
  constructor(private readonly d: DispatcherDeps) {}

  async dispatch(input: DispatchInput): Promise<DispatchResult> {
    const plan = this.plan(input);
    if (plan.kind === 'error') return { kind: 'error', error: plan.error };
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
    const commitAfterMs = this.d.config.downstream.sse_keepalive_interval_secs * 1000;
    const early = commitAfterMs > 0 ? await settledWithin(run, commitAfterMs) : { value: await run };
    if (early) {
      const a = this.answer(early.value);
      if (a.kind !== 'live') return a;
    }
    return this.streamResult(run, controller);
  }

  // ---- planning ---------------------------------------------------------------------------------------------

  private plan(input: DispatchInput): Plan {
    const m = input.model;
    if (m.kind === 'direct') {
      const t = this.target(input.snapshot, m, input.upstreamModel ?? m.model_name);
      if (!t) return { kind: 'error', error: errors.upstream(`model "${m.display_name}" has no usable provider key`) };
      if (!usableCandidates([t], 'fail')) return { kind: 'error', error: errors.allUnavailable(m.display_name) };
      return { kind: 'ok', order: [t] };
    }
    const candidates: Target[] = [];
    for (const rt of m.routing.targets) {
      const tm = input.snapshot.modelByName(rt.model);
      const t = tm?.kind === 'direct' ? this.target(input.snapshot, tm, tm.model_name, rt) : undefined;
      if (t) candidates.push(t);
    }
    if (candidates.length === 0) {
      return {
        kind: 'error',
        error: errors.upstream(`no target of model "${m.display_name}" has a usable provider key`),
      };
    }
    const picked = pickTargets(m.routing, candidates, {
      routingModelId: m.id,
      state: this.d.routing,
      headers: input.headers,
      apiKeyId: input.apiKeyId,
    });
    if (picked.kind === 'all_unavailable') return { kind: 'error', error: errors.allUnavailable(m.display_name) };
    return { kind: 'ok', order: picked.order, routing: m.routing, routingName: m.display_name };
  }

  private target(
    snapshot: Snapshot,
    model: DirectModel,
    upstreamModel: string,
    rt?: RoutingTarget,
  ): Target | undefined {
    const key = snapshot.providerKeys.get(model.provider_key_id);
    const adapter = key ? adapterFor(key.adapter) : undefined;
    if (!key || !adapter) return undefined;
    const up = this.d.config.upstream;
    const timeoutMs = model.timeout ?? up.timeout_ms;
    return {
      modelId: model.id,
      weight: rt?.weight ?? 1,
      priority: rt?.priority ?? 0,
      health: this.d.health.state(model),
      model,
      upstreamModel,
      key,
      adapter,
      routingTarget: rt,
      labels: deploymentLabels(model, key),
      timeoutMs,
      silenceMs: model.stream_timeout ?? (up.stream_timeout_ms || timeoutMs),
    };
  }

  // ---- the loop -----------------------------------------------------------------------------------------------

  private run(input: DispatchInput, plan: Extract<Plan, { kind: 'ok' }>, signal: CancelSignal): Promise<Run> {
    return runAttempts<Target, AttemptOutcome>({
      targets: plan.order,
      attempt: (t) => this.attempt(input, t, signal),
      budget: (t) =>
        retryBudget({
          target: t.routingTarget,
          model: t.model,
          routing: plan.routing,
          upstreamRetries: this.d.config.upstream.retries,
        }),
      classify: classifyOptions(plan.routing),
      signal,
      onAttempt: (r) => this.recordAttempt(r, signal, plan.routingName),
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
      if (r.kind === 'response') {
        end();
        return {
          kind: 'response',
          status: r.status,
          retryAfter: r.retryAfter,
          body: r.body,
          contentType: r.contentType,
        };
      }
      const rest = r.chunks[Symbol.asyncIterator]();
      const first = await rest.next(); // still under the deadline: no first chunk in time is a timeout
      if (first.done) {
        end();
        void r.cancel().catch(() => {});
        return { kind: 'transport', message: 'the upstream closed the stream before sending anything' };
      }
      clearTimeout(timer); // from here on, the silence between chunks is bounded by the reader
      return {
        kind: 'response',
        status: 200,
        retryAfter: null,
        live: { first: first.value, rest, abort: () => cancel.abort(CALLER_GONE), end },
      };
    } catch (e) {
      end();
      if (cancel.reason === TIMED_OUT) return { kind: 'timeout' };
      return { kind: 'transport', message: (e as Error)?.message ?? String(e) };
    }
  }

  /** Health, deployment metrics and routing state for one finished attempt. */
  private recordAttempt(r: AttemptReport<Target, AttemptOutcome>, signal: CancelSignal, routingName?: string): void {
    const { target: t, outcome } = r;
    const ok = outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;
    // A caller who went away interrupted the attempt: that says nothing about the upstream.
    if (signal.aborted && !ok) return;
    this.recordHealth(t, outcome, r.retryAfterSecs);
    if (ok) this.d.routing.observeLatency(t.model.id, r.durationMs);
    // A stream's success or failure is counted when it ends (settle); everything else now.
    if (!(outcome.kind === 'response' && outcome.live)) {
      (ok ? this.d.metrics.deploymentSuccess : this.d.metrics.deploymentFailure).inc(t.labels);
    }
    if (r.next === 'fallback' && routingName !== undefined) this.d.metrics.fallbacks.inc([routingName]);
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
  ): Exclude<DispatchResult, { kind: 'stream' }> | { kind: 'live'; target: Target; live: LiveStream } {
    if (run.kind === 'aborted') {
      for (const a of run.attempts) if (a.outcome.kind === 'response' && a.outcome.live) closeLive(a.outcome.live);
      return { kind: 'aborted' };
    }
    const { outcome: o, target: t } = run;
    if (o.kind === 'timeout') {
      return {
        kind: 'error',
        error: errors.timeout(`model "${t.model.display_name}" did not answer in time`),
        target: t.model,
      };
    }
    if (o.kind === 'transport') {
      return { kind: 'error', error: errors.upstream(`upstream request failed: ${o.message}`), target: t.model };
    }
    if (o.live) return { kind: 'live', target: t, live: o.live };
    if (o.status >= 500) {
      return { kind: 'error', error: errors.upstream(`upstream answered ${o.status}`), target: t.model };
    }
    const headers: Record<string, string> = o.retryAfter ? { 'retry-after': o.retryAfter } : {};
    return { kind: 'response', status: o.status, body: o.body, contentType: o.contentType, headers, target: t.model };
  }

  /**
   * The SSE body of a streamed request, whether the loop has already produced a live stream or is still
   * failing over behind keep-alive comments.
   */
  private streamResult(run: Promise<Run>, controller: Cancel): DispatchResult {
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
        throw new UpstreamStreamError(a.error.status === 504 ? 'upstream_timeout' : 'upstream_error', a.error.message);
      }
      if (a.kind === 'response') {
        throw new UpstreamStreamError('upstream_error', `upstream answered ${a.status}: ${a.body.slice(0, 500)}`);
      }
      if (settled || over) {
        closeLive(a.live);
        return DONE;
      }
      live = a;
      rest = new SilenceLimited(a.live, a.target.silenceMs);
      return { done: false, value: a.live.first };
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
