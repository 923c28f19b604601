// One upstream attempt (docs/routing.md "Deadlines and streams"): one provider call under the target's
// deadline, mapped to an outcome the retry loop classifies. Deadlines live here so every adapter has them.
import type { Config } from '../config/schema.ts';
import type { UpstreamFetch } from '../platform.ts';
import { callProvider } from '../providers/call.ts';
import type { ProviderCall, ProviderResult } from '../providers/types.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import { certificateProblem, RefusedAnswer, UnsendableHeader } from '../upstream-fetch.ts';
import { invalidCredentials } from '../providers/failures.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import {
  type AttemptOutcome,
  certificateFailed,
  type DispatchInput,
  type LiveStream,
  type Target,
  type WatchedAttempt,
} from './dispatch-types.ts';
import { type Clock, systemClock } from '../util/clock.ts';
import type { RoutingState } from './strategies.ts';
import { upstreamBody } from './upstream-body.ts';

/** What an attempt uses. */
export interface AttemptDeps {
  upstream: UpstreamFetch;
  /** `max_sse_event_bytes`, for the adapters that parse or edit a stream. */
  config: { upstream: Pick<Config['upstream'], 'max_sse_event_bytes'> };
  routing: Pick<RoutingState, 'begin'>;
  metrics: Pick<GatewayMetrics, 'deploymentRequests'>;
  /** The attempt's start and its first chunk (the time to first token); default the system's. */
  clock?: Clock;
}

/** The abort reasons of an attempt's own `Cancel`. */
const TIMED_OUT = 'sluice:timeout';
const CALLER_GONE = 'sluice:caller-gone';

/**
 * One upstream call to `t` under its deadline (`silenceMs` for a stream's head — and, when the resources set
 * it, its first chunk — else `timeoutMs`). Never throws: failures become outcomes.
 */
export async function attemptUpstream(
  d: AttemptDeps,
  input: DispatchInput,
  t: Target,
  signal: CancelSignal,
  watched?: WatchedAttempt,
): Promise<AttemptOutcome> {
  const now = d.clock ?? systemClock;
  const a: Attempt = { t, now, startedAt: now(), first: {}, call: new UnderDeadline(d, input, t, signal), watched };
  try {
    const r = await callProvider(t.adapter, providerCall(d, input, t, a));
    // A whole answer is an outcome at once: no second turn for it.
    const o = outcomeOfResult(r, a);
    return o instanceof Promise ? await o : o;
  } catch (e) {
    a.call.end();
    return outcomeOfError(e, a.call);
  }
}

/**
 * The adapter's call: every member in one order, an absent one `undefined`, so each call has one shape (spreads
 * of optional members gave it one per combination, and every reader of a call a megamorphic load).
 */
function providerCall(d: AttemptDeps, input: DispatchInput, t: Target, a: Attempt): ProviderCall {
  const caching = t.model.auto_prompt_caching;
  return {
    endpoint: input.endpoint,
    body: upstreamBody(input.body, t),
    form: input.form,
    stream: input.stream,
    key: t.key,
    upstream: a.call.upstream,
    maxSseEventBytes: d.config.upstream.max_sse_event_bytes,
    signal: a.call.cancel,
    callerModel: typeof input.body.model === 'string' ? input.body.model : t.model.display_name,
    provider: t.model.provider ?? t.key.provider,
    capabilities: t.model.capabilities,
    promptCacheTtl: caching?.enabled ? caching.ttl ?? '5m' : undefined,
    callerHeaders: input.headers,
    traceparent: a.watched?.traceparent,
    requestId: input.requestId || undefined,
    firstUpstreamChunk: input.stream ? firstUpstreamChunkOf(a) : undefined,
    apiKey: input.apiKey,
    model: t.model,
    forTranslation: undefined,
  };
}

/** What a translation that writes nothing until later calls when its upstream's first chunk came. */
function firstUpstreamChunkOf(a: Attempt): () => void {
  return () => {
    a.first.at ??= a.now();
    if (a.first.live) a.first.live.firstAt ??= a.first.at;
    a.watched?.firstByte();
  };
}

/** One attempt in progress: its target, its clock readings and the call under its deadline. */
interface Attempt {
  t: Target;
  now: Clock;
  startedAt: number;
  /** When the upstream's first chunk came, and the live stream to tell once there is one. */
  first: { at?: number; live?: LiveStream };
  call: UnderDeadline;
  watched: WatchedAttempt | undefined;
}

/**
 * What holds a call to its deadline: the cancel both the timer and the caller abort, and what to release. A
 * class: its reads are methods of one object, not closures made per attempt.
 */
class UnderDeadline {
  readonly cancel = new Cancel();
  readonly deadlineMs: number;
  /** The adapter's fetch: it marks the request as sent. */
  readonly upstream: UpstreamFetch;
  /** Whether the request left: a throw before it did (translation, serialisation) is about the body. */
  sent = false;
  private ended = false;
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onCallerGone: () => void;
  private readonly releaseInFlight: () => void;

  /** Start the deadline, listen for the caller leaving and count the attempt in flight. */
  constructor(d: AttemptDeps, input: DispatchInput, t: Target, private readonly signal: CancelSignal) {
    const cancel = this.cancel;
    this.onCallerGone = () => cancel.abort(CALLER_GONE);
    // No `once`: `end()` removes it, and a native AbortSignal (Bun's `request.signal`) reads an options object
    // on every call (docs/performance.md "Decisions on the hot path").
    signal.addEventListener('abort', this.onCallerGone);
    this.deadlineMs = input.stream ? t.silenceMs : t.timeoutMs;
    this.timer = this.deadlineMs > 0 ? setTimeout(() => cancel.abort(TIMED_OUT), this.deadlineMs) : undefined;
    d.metrics.deploymentRequests.inc(t.labels);
    this.releaseInFlight = d.routing.begin(t.model.id);
    this.upstream = (req) => {
      this.sent = true;
      return d.upstream(req);
    };
  }

  stopTimer(): void {
    clearTimeout(this.timer);
  }

  /** Release the timer, the caller-gone listener and the in-flight count. Idempotent. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.timer);
    this.signal.removeEventListener('abort', this.onCallerGone);
    this.releaseInFlight();
  }
}

/**
 * A provider's result as an outcome: a refusal, a whole answer, or a live stream; a promise only when the stream's
 * first chunk is read under the deadline (a stream the resources configured).
 */
function outcomeOfResult(r: ProviderResult, a: Attempt): AttemptOutcome | Promise<AttemptOutcome> {
  const { t, call } = a;
  if (r.kind === 'refused') {
    call.end();
    const refused = {
      kind: 'response',
      status: 400,
      retryAfter: null,
      body: '',
      contentType: '',
      refusal: r.message,
    } as const;
    return r.unavailable ? { ...refused, unavailable: true } : refused;
  }
  if (r.kind === 'response') {
    call.end();
    const answer = wholeAnswer(r.status, r.retryAfter, r.body, r.contentType);
    if (answer.kind !== 'response' || answer.live) return answer;
    // wholeAnswer's object is this call's own: set on it, not spread into a copy (a slow path on JavaScriptCore).
    if (r.headers) answer.headers = r.headers;
    if (r.counted) answer.counted = r.counted;
    return answer;
  }
  const rest = r.chunks[Symbol.asyncIterator]();
  if (t.streamConfigured) return firstChunkOutcome(r, a, rest);
  // The deployment default commits at the 2xx head; the first chunk is read under the silence limit.
  call.stopTimer();
  const live: LiveStream = {
    rest,
    abort: () => call.cancel.abort(CALLER_GONE),
    end: () => call.end(), // a live stream's, called on its own
    startedAt: a.startedAt,
    counted: r.counted,
    headers: r.headers,
  };
  a.first.live = live;
  if (a.first.at !== undefined) live.firstAt = a.first.at;
  return { kind: 'response', status: 200, retryAfter: null, live };
}

/** A configured stream's outcome once its first chunk came, read still under the deadline (none in time is a timeout). */
async function firstChunkOutcome(
  r: Extract<ProviderResult, { kind: 'stream' }>,
  a: Attempt,
  rest: AsyncIterator<Uint8Array>,
): Promise<AttemptOutcome> {
  const { call, startedAt } = a;
  const abort = () => call.cancel.abort(CALLER_GONE);
  const end = () => call.end(); // a live stream's, called on its own
  const { counted, headers } = r;
  const first = await rest.next();
  if (first.done) {
    end();
    void r.cancel().catch(() => {});
    return { kind: 'transport', message: 'the upstream closed the stream before sending anything' };
  }
  call.stopTimer(); // from here on, the silence between chunks is bounded by the reader
  a.watched?.firstByte();
  const live = { first: first.value, rest, abort, end, startedAt, firstAt: a.first.at ?? a.now(), counted, headers };
  a.first.live = live;
  return { kind: 'response', status: 200, retryAfter: null, live };
}

/** A throw from the call as an outcome: the deadline, a secret that cannot be sent, a refused answer, a transport failure. */
function outcomeOfError(e: unknown, call: UnderDeadline): AttemptOutcome {
  if (call.cancel.reason === TIMED_OUT) return { kind: 'timeout', afterMs: call.deadlineMs };
  if (e instanceof UnsendableHeader) {
    // AISIX's class for a secret that cannot be sent: 401, and no retry can fix it.
    const r = invalidCredentials(`${e.message}; check the provider key's secret`);
    return { kind: 'response', status: r.status, retryAfter: null, body: r.body, contentType: r.contentType };
  }
  if (e instanceof RefusedAnswer) {
    // The same answer would come back on a retry: fail over to the next target instead (if any).
    const refused = { kind: 'transport', message: e.message, failure: e.caller, retryable: false } as const;
    return e.upstreamAtFault ? refused : { ...refused, notUpstream: true };
  }
  const message = (e as Error)?.message ?? String(e);
  if (!call.sent) return unpreparable(message);
  const certificate = certificateProblem(e);
  // The same certificate would come back on a retry: fail over instead, and tell the caller why.
  if (certificate) {
    return { kind: 'transport', message, callerMessage: certificateFailed(certificate), retryable: false };
  }
  return { kind: 'transport', message };
}

/**
 * The caller's 400 for a body the gateway could not turn into this target's request: nothing was sent, so the
 * target's health is not charged (a refusal is never a transport failure) and no retry can help.
 */
function unpreparable(why: string): AttemptOutcome {
  const refusal = "the request body could not be prepared for this model's upstream; check what it holds";
  return { kind: 'response', status: 400, retryAfter: null, body: '', contentType: '', refusal, refusalDetail: why };
}

/**
 * A whole upstream answer as an outcome. A 2xx is a success only when its body is the JSON object the
 * endpoint promises: anything else is an upstream failure, retried and failed over like one (and counted as
 * one).
 */
function wholeAnswer(status: number, retryAfter: string | null, body: string, contentType: string): AttemptOutcome {
  if (status < 200 || status >= 300) return { kind: 'response', status, retryAfter, body, contentType };
  if (!looksLikeJsonObject(body)) {
    const message = `upstream answered ${status} with a body that is not JSON`;
    return { kind: 'transport', message, callerMessage: message };
  }
  return { kind: 'response', status, retryAfter: null, body, contentType };
}

/**
 * Whether `text` is shaped as a JSON object: `{` … `}` around it, blanks aside. It runs on every JSON answer,
 * so it does not parse it (the usage reader and the translators read what they need; docs/performance.md):
 * HTML, plain text, an empty or truncated body all fail it.
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
