// The pipeline's dispatch step and the answer in the caller's wire (pipeline.ts): a whole answer, an
// upstream's error re-wrapped, a failure, or a stream through the pump. The usage commit (the caller's rate
// limit permit released, tokens charged) happens when the answer's last byte is out. Errors reach the caller
// only through src/http: upstream error answers re-wrapped, every configured secret scrubbed.
import type { Context } from 'hono';
import { bearerToken } from '../http/auth.ts';
import { envelopeFor, errorResponse, fromFailure, ProxyError, upstreamErrorBody } from '../http/errors.ts';
import { type Scrub, scrubberFor } from '../http/scrub.ts';
import { anthropicSseErrorEvent, sseErrorEvent } from '../http/sse.ts';
import { answerText } from '../providers/answer-text.ts';
import { type Counting, estimatePromptTokens, estimateTokens, fillMissing } from '../providers/estimate.ts';
import { isMediaEndpoint } from '../providers/media.ts';
import { DROPPED_HEADER } from '../providers/translate/dropped.ts';
import { rerankUsage } from './media-usage.ts';
import { responsesErrorEvent } from '../providers/translate/responses-via-chat.ts';
import type { StreamEnd } from '../providers/types.ts';
import { TargetLimits } from '../policies/target-gate.ts';
import type { RoutingModel } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Dispatcher, DispatchInput, DispatchResult } from '../routing/dispatch.ts';
import { NO_OP_PERMIT, type RateLimiter } from '../routing/rate-limit.ts';
import { CALL_WATCH } from './call-watch.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import type { Answering, ModelCall } from './pipeline.ts';
import type { ModelCallRoute } from './routes.ts';
import { type RequestRecord, SERVER } from './record.ts';
import { pumpSse } from './stream.ts';
import { StreamCount } from './stream-count.ts';
import { DROPPED_RECORD } from './translation-record.ts';
import {
  embeddingsUsage,
  fromCounts,
  isReported,
  meteredChunks,
  readBody,
  StreamUsage,
  totalOf,
  type Usage,
} from './usage.ts';
import type { Clock } from '../util/clock.ts';
import { USAGE_PART } from '../usage/facts.ts';
import { semanticRouteHeader } from './semantic-route.ts';

/** Whether any target of `m` has limits of its own to reserve: its inline `rate_limit`, or a policy. */
function targetsLimited(snapshot: Snapshot, m: RoutingModel): boolean {
  return snapshot.policies.length > 0 || m.routing.targets.some((t) => snapshot.modelByName(t.model)?.rate_limit);
}

/** The caller's error in its wire, recorded for the access log. */
export function fail(c: Context<ProxyEnv>, e: ProxyError): Response {
  const rec = c.get('rec');
  rec.failed(e.type, e.message);
  return errorResponse(e, envelopeFor(rec.protocol));
}

/** What the answer steps read. */
export interface AnswerDeps {
  dispatcher: Pick<Dispatcher, 'dispatch'>;
  /** The secrets of config.yaml (`configSecrets`: the admin keys, the exporter's headers), scrubbed from whatever an upstream says. */
  configSecrets: readonly string[];
  /** `downstream.sse_keepalive_interval_secs`, in ms. */
  keepaliveMs: number;
  /** The caller limiter, for a routing model's targets' own limits. */
  limiter: Pick<RateLimiter, 'acquire'>;
  /** When the answer's first byte goes out (the duration summaries, `ttft_ms`); the limits' windows. */
  clock: Clock;
  /** `upstream.max_sse_event_bytes`: the longest line a passed-through stream may carry; 0 = any. */
  maxSseEventBytes?: number;
  /** `proxy.served_by_header`: false leaves `x-aisix-served-by` off every answer. */
  servedByHeader?: boolean;
  /** A relayed answer's body (media.ts `relayAnswer`): a route with `relay` whose answer is bytes, not SSE. */
  relay?: (
    call: ModelCall,
    r: Extract<DispatchResult, { kind: 'stream' }>,
    d: { clock: Clock; scrub: () => Scrub; headers: Record<string, string> },
  ) => Promise<Response>;
}

/** The dispatch step and the answer built from its result. */
export class Answerer implements Answering {
  constructor(private readonly d: AnswerDeps) {}

  /**
   * Dispatch with its attempts; the permit is released if dispatch throws. Not an async function: the dispatcher's
   * promise is followed by one `then`, without a frame and an await around it.
   */
  dispatch(call: ModelCall): Promise<DispatchResult> {
    let limits: TargetLimits | undefined;
    try {
      limits = this.prepare(call);
    } catch (e) {
      return Promise.reject(e);
    }
    let sent: Promise<DispatchResult>;
    try {
      sent = this.d.dispatcher.dispatch(this.inputOf(call, limits));
    } catch (e) {
      void call.permit.end();
      return Promise.reject(e);
    }
    return sent.then((r) => {
      call.rec.answered(r);
      return r;
    }, (e) => {
      void call.permit.end();
      throw e;
    });
  }

  /** The call's record told what is dispatched, its targets' limits joined to its permit (returned), a watcher told. */
  private prepare(call: ModelCall): TargetLimits | undefined {
    const { resolved, caller, body, rec, route } = call;
    const m = resolved.model;
    const key = m.kind === 'direct' ? caller.snapshot.providerKeys.get(m.provider_key_id) : undefined;
    rec.dispatching(
      route.streams === true && body.stream === true,
      m.kind === 'direct' && key ? { model: m, key, upstreamModel: resolved.upstreamModel ?? m.model_name } : undefined,
    );
    const limits = m.kind === 'routing' && targetsLimited(caller.snapshot, m)
      ? new TargetLimits(this.d.limiter, caller.snapshot, caller.key, m, this.d.clock)
      : undefined;
    if (limits) call.permit = limits.with(call.permit);
    const watch = call.state.get(CALL_WATCH);
    if (watch) watch.sending(body, this.scrubber(call));
    return limits;
  }

  /** The dispatcher's input for `call`. */
  private inputOf(call: ModelCall, limits: TargetLimits | undefined): DispatchInput {
    const { resolved, caller, body, rec, route } = call;
    const stream = route.streams === true && body.stream === true;
    const relay = route.relay === true; // media: the answer's bytes pass as they come (src/media/relay.ts)
    const m = resolved.model;
    const watch = call.state.get(CALL_WATCH);
    // Every member present, an absent one undefined: conditional spreads are copied through a slow path on
    // JavaScriptCore, and gave the input one shape per combination.
    return {
      attempts: watch?.attempts, // undefined when unwatched
      snapshot: caller.snapshot,
      model: m,
      upstreamModel: resolved.upstreamModel,
      endpoint: route.call,
      wire: route.wire,
      body,
      form: call.form,
      stream: stream || relay,
      relay: relay || undefined,
      signal: call.c.env?.closed ?? call.c.req.raw.signal,
      headers: call.headers,
      apiKeyId: caller.key.id,
      apiKey: caller.key,
      clientIp: call.clientIp,
      reserveTarget: limits?.reserve,
      requestId: rec.requestId,
      onAttempt: rec.facet(USAGE_PART).attempt,
    };
  }

  /** A step's refusal, recorded and answered in the caller's wire. */
  refuse(call: ModelCall, e: ProxyError): Response {
    return fail(call.c, e);
  }

  /**
   * An answer's headers: `head`, then `upstream`, `x-aisix-served-by` (unless the operator hides the routing
   * members' names), the semantic route and the limit headers, a later one winning. Set on `head` one by one,
   * not spread into copies: JavaScriptCore copies a spread through a slow path, on every answer.
   */
  private answerHeaders(
    head: Record<string, string>,
    upstream: Record<string, string> | undefined,
    call: ModelCall,
    r: DispatchResult,
  ): Record<string, string> {
    putAll(head, upstream);
    if (this.d.servedByHeader !== false) putServedBy(head, call, r);
    putAll(head, semanticRouteHeader(call));
    putAll(head, call.limitHeaders);
    return head;
  }

  /** A scrubber for this call's answers, built on first use (only error paths need one). */
  private scrubber(call: ModelCall): () => Scrub {
    let s: Scrub | undefined;
    return () => (s ??= scrubberFor(call.caller.snapshot, this.d.configSecrets, bearerToken(call.headers)));
  }

  /** The caller's answer for a dispatch result, in the caller's wire. */
  respond(call: ModelCall, r: DispatchResult): Response | Promise<Response> {
    const dropped = (r.kind === 'stream' || r.kind === 'response') ? r.headers?.[DROPPED_HEADER] : undefined;
    if (dropped !== undefined) call.rec.facet(DROPPED_RECORD).items = dropped;
    if (r.kind === 'stream' && call.route.relay && this.d.relay) {
      const headers = this.answerHeaders({}, r.headers, call, r);
      return this.d.relay(call, r, { clock: this.d.clock, scrub: this.scrubber(call), headers });
    }
    if (r.kind === 'stream') return this.respondStream(call, r, this.scrubber(call));
    const { rec } = call;
    rec.firstByte(this.d.clock());
    if (r.kind === 'response' && r.status < 300) {
      const read = readBody(r.body);
      // The adapter's count where the body cannot state all of it (a chat answer's Anthropic cache counts).
      if (r.counted) read.usage = fromCounts(r.counted);
      if (call.route.call === 'embeddings') read.usage = embeddingsUsage(read.usage);
      if (call.route.call === 'rerank') read.usage = rerankUsage(r.body);
      // The scrubber is made for a watcher only: a plain answer needs none.
      const watch = call.state.get(CALL_WATCH);
      if (watch) watch.answered(r.body, this.scrubber(call));
      const headers = this.answerHeaders({ 'content-type': r.contentType }, r.headers, call, r);
      // The upstream stated its usage and no permit waits for it (the common case): what the chain below would
      // do, without its promises and turns.
      if (call.permit === NO_OP_PERMIT && call.route.call !== 'count_tokens' && isReported(read.usage)) {
        rec.read(read.usage, read.id);
        return stamped(call, r.body, r.status, headers);
      }
      // The permit's end is awaited: a tpm limit must see these tokens before the caller can send again.
      return answerUsage(call, read.usage, () => estimateTokens(answerText(r.body))).then((used) => {
        rec.read(used, read.id);
        return commitUsage(call, totalOf(used) ?? 0);
      }).then(() => stamped(call, r.body, r.status, headers));
    }
    void call.permit.end();
    if (r.kind === 'aborted') {
      rec.failed('client_closed', 'the caller closed the connection before the answer');
      return new Response(null, { status: 499 }); // nginx's "client closed request": nobody reads it
    }
    const scrub = this.scrubber(call);
    if (r.kind === 'error') {
      const e = fromFailure(r.failure);
      const res = fail(call.c, new ProxyError(e.status, e.type, scrub()(e.message), e.code, e.headers));
      if (r.failure.detail !== undefined) rec.failed(e.type, r.failure.detail);
      return res;
    }
    if (r.status >= 400) return upstreamError(call, r, scrub());
    return stamped(call, r.body, r.status, { 'content-type': r.contentType, ...r.headers, ...call.limitHeaders });
  }

  private respondStream(
    call: ModelCall,
    r: Extract<DispatchResult, { kind: 'stream' }>,
    scrub: () => Scrub,
  ): Response {
    const watch = call.state.get(CALL_WATCH);
    // The finish reason is read only for a watcher: nobody else asks for it.
    const usage = new StreamUsage(this.d.maxSseEventBytes, watch !== undefined);
    const count = new StreamCount(
      usage,
      r.counted,
      (output, counting) => answerUsage(call, undefined, output, counting),
      this.d.maxSseEventBytes,
    );
    const tracker: StreamTracker = { onEnd: undefined };
    call.c.set('stream', tracker);
    const see = watch?.streaming();
    const body = pumpSse({
      chunks: meteredChunks(see ? seen(r.chunks, see) : r.chunks, usage, scrub, count),
      keepaliveMs: this.d.keepaliveMs,
      onFirstByte: () => call.rec.firstByte(this.d.clock()),
      abortUpstream: r.abort,
      errorEvent: call.route.call === 'responses'
        ? responsesErrorEvent
        : call.route.wire === 'anthropic'
        ? anthropicSseErrorEvent
        : sseErrorEvent,
      scrub: (text, max) => scrub()(text, max),
      onEnd: (end, detail) => {
        // A stream committed before its target answered learns what the translation dropped only now.
        const dropped = r.headers?.[DROPPED_HEADER] ?? r.servedHeaders?.()?.[DROPPED_HEADER];
        if (dropped !== undefined) call.rec.facet(DROPPED_RECORD).items = dropped;
        // Before the outcome: it reads the stream's unfinished last line.
        const left = end === 'client_closed';
        const used = count.final(left);
        end = streamOutcome(call.rec, call.route, usage, end, detail);
        r.settle(end);
        if (watch) watch.streamEnded(usage.finishReason, scrub);
        call.rec.firstToken(r.ttftMs?.());
        // The record is written once, with the usage: at once (a stream that ended by itself was estimated
        // before its end reached the caller), else once the estimate is made. A caller that left frees its
        // slot at once; its record waits on the estimate.
        const read = (u: Usage | undefined) => {
          call.rec.read(u, usage.id);
          void commitUsage(call, totalOf(u));
        };
        if (!(used instanceof Promise)) {
          read(used);
          tracker.onEnd?.(end);
        } else if (left) tracker.onEnd?.(end, used.then(read));
        else void used.then((u) => (read(u), tracker.onEnd?.(end)));
      },
    });
    const head = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
    return stamped(call, body, 200, this.answerHeaders(head, r.headers, call, r));
  }
}

/**
 * An upstream's error answer: its status, type and message in our envelope; nothing else of its body and no
 * secret (an upstream may echo the credential it was sent).
 */
function upstreamError(call: ModelCall, r: Extract<DispatchResult, { kind: 'response' }>, s: Scrub): Response {
  call.rec.failed('upstream_status', `upstream answered ${r.status}`);
  const extra: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers)) extra[k] = s(v);
  const body = upstreamErrorBody(call.route.wire, r.status, r.body, s);
  return stamped(call, body, r.status, { 'content-type': 'application/json', ...extra, ...call.limitHeaders });
}

/**
 * How a stream ended, recorded. One the pump delivered whole is still a failure when the upstream reported
 * an error in it or ended it without its wire's terminator: the caller saw 200, the outcome says what
 * happened.
 */
function streamOutcome(
  rec: RequestRecord,
  route: ModelCallRoute,
  usage: StreamUsage,
  end: StreamEnd,
  detail: string | undefined,
): StreamEnd {
  if (end === 'complete' && (usage.errored || !usage.terminated)) {
    end = 'upstream_error';
    detail = usage.errored
      ? 'the upstream reported an error in the stream'
      : `the upstream stream ended without its terminator (${terminatorOf(route)})`;
  }
  if (end !== 'complete') rec.streamFailed(end, detail);
  return end;
}

function terminatorOf(route: ModelCallRoute): string {
  if (route.call === 'responses') return '`response.completed`';
  return route.wire === 'anthropic' ? '`message_stop`' : '`data: [DONE]`';
}

/** `x-aisix-served-by` on a routing model's answer: the display name of the target that served it. */
function putServedBy(headers: Record<string, string>, call: ModelCall, r: DispatchResult): void {
  if (call.resolved.model.kind !== 'routing' || r.kind === 'aborted' || !r.served) return;
  headers['x-aisix-served-by'] = r.served.model.display_name;
}

/** Every member of `from` set on `into`, in order. */
function putAll(into: Record<string, string>, from: Record<string, string> | undefined): void {
  if (from) { for (const k in from) into[k] = from[k]!; }
}

/**
 * What an answer used: the upstream's report, else the local estimate of its prompt and `output` tokens
 * (for the limits and telemetry only, marked `estimated`). Counting tokens charges none: undefined.
 */
function answerUsage(
  call: ModelCall,
  reported: Usage | undefined,
  output: () => Promise<number>,
  counting: Counting = 'full',
): Promise<Usage | undefined> {
  const endpoint = call.route.call;
  if (endpoint === 'count_tokens') return Promise.resolve(undefined);
  if (isReported(reported)) return Promise.resolve(reported);
  // Audio, images and rerank charge what the upstream reported, never an estimate (AISIX's accounting).
  if (isMediaEndpoint(endpoint)) return Promise.resolve(undefined);
  const input = () => estimatePromptTokens(endpoint, call.body, undefined, counting);
  const estimate = fillMissing(undefined, { input, output });
  return estimate.then(fromCounts, () => undefined); // no tokenizer on this runtime: nothing counted, as before
}

/**
 * The usage commit: the caller's rate-limit permit released, charged with the answer's tokens when a token
 * limit applies (`tokens` undefined: none known).
 */
export function commitUsage(call: ModelCall, tokens: number | undefined): Promise<void> {
  return call.permit.end(call.permit.chargesTokens ? tokens : undefined);
}

/**
 * A response built with every header it needs (`Server` and the request id last, one object literal, no
 * copy), which the middlewares leave alone: reading `res.headers` makes @hono/node-server turn the plain
 * header object into a `Headers` and back, a cost on every proxied answer. A chat answer that succeeded also
 * carries the request id as `x-aisix-call-id`, as AISIX's chat handler stamps it.
 */
export function stamped(
  call: ModelCall,
  body: BodyInit | null,
  status: number,
  headers: Record<string, string>,
): Response {
  call.c.set('stamped', true);
  headers.server = call.c.get('server') ?? SERVER;
  headers['x-aisix-request-id'] = call.rec.requestId;
  if (status < 300 && call.route.call === 'chat') headers['x-aisix-call-id'] = call.rec.requestId;
  return new Response(body, { status, headers });
}

/** The chunks as they are, each also shown to `see` (the call's watcher). */
function seen(chunks: AsyncIterable<Uint8Array>, see: (chunk: Uint8Array) => void): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = chunks[Symbol.asyncIterator]();
      return {
        async next() {
          const r = await it.next();
          if (!r.done) see(r.value);
          return r;
        },
        return: () => it.return?.() ?? Promise.resolve({ done: true, value: undefined }),
      };
    },
  };
}
