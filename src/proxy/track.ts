// Every `/v1` request holds an in-flight slot until its last byte, gets a request id, one access-log line
// and one sample in every request family — refusals before dispatch (413, auth, bad JSON) included, with
// model `unresolved` and provider `unknown` (docs/aisix-compatibility.md "Metrics"). A body whose declared length is
// over `proxy.request_body_limit_bytes` is refused here, before authentication (body-limit.ts).
import type { Context, Next } from 'hono';
import type { Gateway } from '../gateway.ts';
import { MSG } from '../observability/messages.ts';
import { BodyLimit } from './body-limit.ts';
import type { ProxyEnv } from './env.ts';
import { ACCESS_LOG_TARGET, accessLogFields, ENDPOINTS, recordRequestMetrics, type RequestRecord } from './record.ts';
import { requestIdFrom } from './request-id.ts';

export function trackRequests(gw: Gateway): (c: Context<ProxyEnv>, next: Next) => Promise<void> {
  const cfg = gw.config;
  const accessLog = gw.log.withTarget(ACCESS_LOG_TARGET);
  const bodyLimit = new BodyLimit(gw, cfg.proxy.request_body_limit_bytes);
  const acceptHeaders = cfg.proxy.request_id.accept_headers;

  const finish = (rec: RequestRecord, status: number) => {
    const latency = Date.now() - rec.start;
    rec.served ??= rec.result && rec.result.kind !== 'aborted' ? rec.result.served : undefined;
    recordRequestMetrics(gw, rec, status, latency / 1000);
    if (cfg.observability.access_log) accessLog.info(MSG.requestCompleted, accessLogFields(rec, status, latency));
  };

  return async function trackRequest(c, next) {
    const headers = c.req.raw.headers;
    const endpoint = ENDPOINTS[c.req.path] ?? 'other';
    const rec: RequestRecord = {
      start: Date.now(),
      method: c.req.method,
      path: c.req.path,
      endpoint,
      protocol: c.req.path === '/v1/messages' ? 'anthropic' : 'openai',
      requestId: requestIdFrom(headers, acceptHeaders),
      peer: c.env?.peer,
      downstreamRequestId: headers.get('x-request-id') ?? undefined,
    };
    c.set('rec', rec);
    const inFlight = [endpoint, rec.protocol] as const;
    gw.metrics.proxyInFlight.inc(inFlight);
    if (gw.lifecycle.draining) {
      gw.lifecycle.recordArrival();
      gw.log.info(MSG.arrivedWhileDraining, {
        method: rec.method,
        path: rec.path,
        request_id: rec.requestId,
        peer: rec.peer,
        downstream_request_id: rec.downstreamRequestId,
      });
    }
    const releaseSlot = gw.lifecycle.acquire();
    const release = () => {
      releaseSlot();
      gw.metrics.proxyInFlight.inc(inFlight, -1);
    };
    // A declared length over the limit: refused before authentication, the body drained so the caller reads
    // the answer (body-limit.ts).
    const declaredOver = bodyLimit.over(c.req.raw);
    if (declaredOver !== undefined) c.res = await bodyLimit.refuse(c.req.raw, rec, declaredOver);
    else await next(); // a throw below is turned into a response by onError before next() returns
    const res = c.res;
    if (!c.get('stamped')) res.headers.set('x-aisix-request-id', rec.requestId);
    const stream = c.get('stream');
    if (stream) {
      // A streamed body holds the slot until its last byte; the pump reports the end.
      stream.onEnd = () => {
        release();
        finish(rec, res.status);
      };
    } else {
      release();
      finish(rec, res.status);
    }
  };
}
