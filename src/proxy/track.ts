// The pipeline's first and last steps for every `/v1` request (pipeline.ts): an in-flight slot held until the
// last byte, a request id and the request's record; then telemetry — one access-log line and one sample in
// every request family, refusals before dispatch included (docs/aisix-compatibility.md "Metrics") — and the
// hooks that joined (traces: begin and end). A body whose declared length is over
// `proxy.request_body_limit_bytes` is refused here, before authentication (body-limit.ts).
import type { Context } from 'hono';
import type { Config } from '../config/schema.ts';
import type { Lifecycle } from '../lifecycle/state.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import type { Clock } from '../util/clock.ts';
import { BodyLimit } from './body-limit.ts';
import { CallState } from './call-state.ts';
import { CALL_WATCH, type CallWatch, joinWatches } from './call-watch.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import type { StreamEnd } from '../providers/types.ts';
import {
  ACCESS_LOG_LAYOUT,
  ACCESS_LOG_TARGET,
  PROVIDER_CALL_LAYOUT,
  PROVIDER_CALL_TARGET,
  RequestRecord,
} from './record.ts';
import type { AnyHandler, ThrowAnswer } from './frame.ts';
import { serverHeader } from './identity.ts';
import { requestIdFrom } from './request-id.ts';
import type { Route } from './routes.ts';

/** What tracking reads and writes. */
export interface TrackDeps {
  readonly config: Config;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  readonly lifecycle: Pick<Lifecycle, 'draining' | 'acquire' | 'recordArrival'>;
  /** The clock of `log`, of `metrics`' summaries and of `lifecycle`: one reading serves all three. */
  readonly clock: Clock;
}

/**
 * What joins every `/v1` request at its start and once its last byte is out, after its samples and log lines
 * (traces: src/telemetry/request-hooks.ts).
 */
export interface RequestHooks {
  /** The request's record was just made; what the hook returns watches the call (call-watch.ts). */
  begin(rec: RequestRecord, headers: Headers): CallWatch | undefined | void;
  /**
   * The request's last byte is out, or it failed; `status` is what the caller got, `own` what this hook's
   * `begin` returned, `call` every hook's watch of the call joined (its `traceId`).
   */
  end(rec: RequestRecord, status: number, own: CallWatch | undefined, call: CallWatch | undefined): void;
}

/** The hooks' watches of one call: each hook's own, by hook, and all of them joined. */
interface Watches {
  readonly own: readonly (CallWatch | undefined)[];
  readonly call: CallWatch;
}

/**
 * What a stream's end does, built outside the async middleware: a closure of that middleware's frame, called
 * at the stream's end, kept every streamed request's objects alive through V8's young-generation collections
 * (docs/performance.md "Streams and the young generation").
 */
function streamEnd(
  rec: RequestRecord,
  watch: Watches | undefined,
  status: number,
  release: () => void,
  telemetry: (rec: RequestRecord, watch: Watches | undefined, status: number, latency?: number) => void,
  clock: Clock,
  tracker: StreamTracker,
): (end: StreamEnd, recorded?: Promise<void>) => void {
  return (_end, recorded) => {
    release();
    const stated = tracker.status ?? status;
    if (!recorded) return telemetry(rec, watch, stated);
    // The latency is the stream's, not the wait for its record.
    const latency = clock() - rec.start;
    const write = () => telemetry(rec, watch, stated, latency);
    void recorded.then(write, write);
  };
}

/** Each hook's `begin`; undefined when no hook watches the call. */
function beginHooks(hooks: readonly RequestHooks[], rec: RequestRecord, headers: Headers): Watches | undefined {
  let own: (CallWatch | undefined)[] | undefined;
  let call: CallWatch | undefined;
  for (let i = 0; i < hooks.length; i++) {
    const w = hooks[i]!.begin(rec, headers);
    if (!w) continue;
    (own ??= new Array<CallWatch | undefined>(hooks.length))[i] = w;
    call = call ? joinWatches(call, w) : w;
  }
  return call && own ? { own, call } : undefined;
}

export function trackRequests(
  d: TrackDeps,
  hooks: readonly RequestHooks[],
  /** Answers a throw of the handler tracked (app.ts). */
  thrown: ThrowAnswer,
  /** The route of every request tracked, when the path does not name it (passthrough routes). */
  route?: Route,
): (c: Context<ProxyEnv>, inner: AnyHandler) => Promise<Response> {
  const cfg = d.config;
  const server = serverHeader(cfg.proxy.identity);
  const accessLog = d.log.withTarget(ACCESS_LOG_TARGET);
  const providerCallLog = d.log.withTarget(PROVIDER_CALL_TARGET);
  const bodyLimit = new BodyLimit(d, cfg.proxy.request_body_limit_bytes);
  const acceptHeaders = cfg.proxy.request_id.accept_headers;
  const accessLogOn = cfg.observability.access_log;

  /** Telemetry: the request families and the access-log line, once its last byte is out. */
  const telemetry = (rec: RequestRecord, watch: Watches | undefined, status: number, latency?: number) => {
    const now = d.clock();
    latency ??= now - rec.start;
    // One reading of the clock for the summaries' window and both lines' time (each a call into the runtime).
    rec.recordMetrics(d.metrics, status, latency / 1000, now);
    // AISIX writes its provider-call line whatever `access_log` says, and before the access log.
    const call = rec.providerCallValues(status, now);
    if (call) providerCallLog.logLine('info', MSG.providerCallCompleted, PROVIDER_CALL_LAYOUT, call, now);
    if (accessLogOn) {
      accessLog.logLine('info', MSG.requestCompleted, ACCESS_LOG_LAYOUT, rec.accessLogValues(status, latency), now);
    }
    for (let i = 0; i < hooks.length; i++) hooks[i]!.end(rec, status, watch?.own[i], watch?.call);
  };

  return async function trackRequest(c, inner) {
    const headers = c.req.raw.headers;
    const rec = new RequestRecord(
      d.clock(),
      c.req.method,
      c.req.path,
      requestIdFrom(headers, acceptHeaders),
      c.env?.peer,
      headers.get('x-request-id') ?? undefined,
      route,
    );
    c.set('rec', rec);
    const state = new CallState();
    c.set('state', state);
    // Kept here too: a throw empties the call's slots before the end hooks run.
    const watch = beginHooks(hooks, rec, headers);
    if (watch) state.set(CALL_WATCH, watch.call);
    const inFlight = [rec.endpoint, rec.inbound] as const;
    d.metrics.proxyInFlight.inc(inFlight);
    if (d.lifecycle.draining) {
      d.lifecycle.recordArrival();
      d.log.info(MSG.arrivedWhileDraining, {
        method: rec.method,
        path: rec.path,
        request_id: rec.requestId,
        peer: rec.peer,
        downstream_request_id: rec.downstreamRequestId,
      });
    }
    const releaseSlot = d.lifecycle.acquire(rec.start);
    // A declared length over the limit: refused before authentication, the body drained so the caller reads
    // the answer (body-limit.ts).
    const declaredOver = bodyLimit.over(c.req.raw);
    let res: Response;
    if (declaredOver !== undefined) res = await bodyLimit.refuse(c.req.raw, rec, declaredOver);
    else {
      try {
        res = await inner(c);
      } catch (e) {
        res = thrown(e, c); // the record says why before telemetry writes it
      }
    }
    if (!c.get('stamped')) {
      res.headers.set('x-aisix-request-id', rec.requestId);
      res.headers.set('server', server);
    }
    const stream = c.get('stream');
    // A streamed body holds the slot until its last byte; the pump reports the end.
    if (stream) {
      const release = () => {
        releaseSlot();
        d.metrics.proxyInFlight.inc(inFlight, -1);
      };
      stream.onEnd = streamEnd(rec, watch, res.status, release, telemetry, d.clock, stream);
    } else {
      // A whole answer is released here and now: no closure for it.
      releaseSlot();
      d.metrics.proxyInFlight.inc(inFlight, -1);
      telemetry(rec, watch, res.status);
    }
    return res;
  };
}
