// One upstream attempt (docs/routing.md "Deadlines and streams"): one provider call under the target's
// deadline, mapped to an outcome the retry loop classifies. Deadlines live here so every adapter has them.
import type { Config } from '../config/schema.ts';
import type { UpstreamFetch } from '../platform.ts';
import { callProvider } from '../providers/call.ts';
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
} from './dispatch-types.ts';
import { type Clock, systemClock } from '../util/clock.ts';
import type { RoutingState } from './strategies.ts';
import { upstreamBody } from './upstream-body.ts';
import type { AttemptSpan } from '../telemetry/trace.ts';

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
  span?: AttemptSpan,
): Promise<AttemptOutcome> {
  const now = d.clock ?? systemClock;
  const startedAt = now();
  // A translation that writes nothing until later says when its upstream's first chunk came.
  let upstreamFirstAt: number | undefined;
  let live: LiveStream | undefined;
  const firstUpstreamChunk = () => {
    upstreamFirstAt ??= now();
    if (live) live.firstAt ??= upstreamFirstAt;
    span?.firstByte();
  };
  const cancel = new Cancel();
  const onCallerGone = () => cancel.abort(CALLER_GONE);
  signal.addEventListener('abort', onCallerGone, { once: true });
  const deadlineMs = input.stream ? t.silenceMs : t.timeoutMs;
  const timer = deadlineMs > 0 ? setTimeout(() => cancel.abort(TIMED_OUT), deadlineMs) : undefined;
  d.metrics.deploymentRequests.inc(t.labels);
  const releaseInFlight = d.routing.begin(t.model.id);
  // Whether the request left: a throw before it did (translation, serialisation) is about the body, not the target.
  let sent = false;
  const upstream: UpstreamFetch = (req) => {
    sent = true;
    return d.upstream(req);
  };
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
      body: upstreamBody(input.body, t),
      stream: input.stream,
      key: t.key,
      upstream,
      maxSseEventBytes: d.config.upstream.max_sse_event_bytes,
      signal: cancel,
      callerModel: typeof input.body.model === 'string' ? input.body.model : t.model.display_name,
      provider: t.model.provider ?? t.key.provider,
      ...(t.model.capabilities ? { capabilities: t.model.capabilities } : {}),
      ...(t.model.auto_prompt_caching?.enabled ? { promptCacheTtl: t.model.auto_prompt_caching.ttl ?? '5m' } : {}),
      ...(input.headers ? { callerHeaders: input.headers } : {}),
      traceparent: span?.traceparent, // undefined when untraced: no header, and no object to spread
      ...(input.requestId ? { requestId: input.requestId } : {}),
      ...(input.stream ? { firstUpstreamChunk } : {}),
      apiKey: input.apiKey,
      model: t.model,
    });
    if (r.kind === 'refused') {
      end();
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
      end();
      const answer = wholeAnswer(r.status, r.retryAfter, r.body, r.contentType);
      return r.headers && answer.kind === 'response' && !answer.live ? { ...answer, headers: r.headers } : answer;
    }
    const rest = r.chunks[Symbol.asyncIterator]();
    const abort = () => cancel.abort(CALLER_GONE);
    const counted = r.counted;
    const headers = r.headers;
    if (!t.streamConfigured) {
      // The deployment default commits at the 2xx head; the first chunk is read under the silence limit.
      clearTimeout(timer);
      live = { rest, abort, end, startedAt, counted, headers };
      if (upstreamFirstAt !== undefined) live.firstAt = upstreamFirstAt;
      return { kind: 'response', status: 200, retryAfter: null, live };
    }
    const first = await rest.next(); // still under the deadline: no first chunk in time is a timeout
    if (first.done) {
      end();
      void r.cancel().catch(() => {});
      return { kind: 'transport', message: 'the upstream closed the stream before sending anything' };
    }
    clearTimeout(timer); // from here on, the silence between chunks is bounded by the reader
    span?.firstByte();
    live = { first: first.value, rest, abort, end, startedAt, firstAt: upstreamFirstAt ?? now(), counted, headers };
    return { kind: 'response', status: 200, retryAfter: null, live };
  } catch (e) {
    end();
    if (cancel.reason === TIMED_OUT) return { kind: 'timeout', afterMs: deadlineMs };
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
    if (!sent) return unpreparable(message);
    const certificate = certificateProblem(e);
    // The same certificate would come back on a retry: fail over instead, and tell the caller why.
    if (certificate) {
      return { kind: 'transport', message, callerMessage: certificateFailed(certificate), retryable: false };
    }
    return { kind: 'transport', message };
  }
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
