// The handler of every model call — chat completions, legacy completions, embeddings and Anthropic
// messages: admission (admission.ts), then dispatch, then the answer in the caller's wire. Caller rate-limit
// permits are released (and tokens charged) when the answer's body ends. Errors reach the caller only
// through src/http: upstream error answers re-wrapped, every configured secret scrubbed.
import type { Context } from 'hono';
import type { Gateway } from '../gateway.ts';
import { bearerToken } from '../http/auth.ts';
import {
  envelopeFor,
  errorResponse,
  errors,
  fromFailure,
  ProxyError,
  upstreamErrorBody,
  type Wire,
} from '../http/errors.ts';
import { type Scrub, scrubberFor } from '../http/scrub.ts';
import { anthropicSseErrorEvent, sseErrorEvent } from '../http/sse.ts';
import type { Endpoint } from '../providers/types.ts';
import type { Dispatcher } from '../routing/dispatch.ts';
import { admitModelCall, authenticateCaller } from './admission.ts';
import { readJsonObject } from './body.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import { SERVER } from './record.ts';
import { pumpSse } from './stream.ts';
import { meteredChunks, readBody, StreamUsage, totalOf } from './usage.ts';
import { validateBody } from './validate.ts';

export interface ModelCallDeps {
  gw: Gateway;
  dispatcher: Dispatcher;
  clientIpOf: (peer: string | undefined, headers: Headers) => string | undefined;
}

/** The caller's error in its wire, recorded for the access log. */
export function fail(c: Context<ProxyEnv>, e: ProxyError): Response {
  const rec = c.get('rec');
  rec.errorKind = e.type;
  rec.error = e.message;
  return errorResponse(e, envelopeFor(rec.protocol));
}

export function modelCall(d: ModelCallDeps, endpoint: Endpoint) {
  const { gw, dispatcher } = d;
  const cfg = gw.config;
  const keepaliveMs = cfg.downstream.sse_keepalive_interval_secs * 1000;
  const adminKeys = cfg.admin.admin_keys;
  const wire: Wire = endpoint === 'messages' ? 'anthropic' : 'openai';
  /** The terminator a whole answer of this wire ends with, for the failure accounting of a stream. */
  const terminator = wire === 'anthropic' ? '`message_stop`' : '`data: [DONE]`';

  return async function handleModelCall(c: Context<ProxyEnv>): Promise<Response> {
    const rec = c.get('rec');
    const headers = c.req.raw.headers;
    const who = await authenticateCaller(gw, headers, rec);
    if (who instanceof ProxyError) return fail(c, who);
    const body = await readJsonObject(c.req.raw, cfg.proxy.request_body_limit_bytes);
    if (body instanceof ProxyError) return fail(c, body);
    const invalid = validateBody(endpoint, body);
    if (invalid) return fail(c, errors.badRequest(invalid));
    const clientIp = d.clientIpOf(c.env?.peer, headers);
    const admitted = await admitModelCall(gw, who, body.model as string, clientIp, rec);
    if (admitted instanceof ProxyError) return fail(c, admitted);
    const { resolved, permit, limitHeaders } = admitted;
    const chargesTokens = permit.chargesTokens;
    const stream = endpoint !== 'embeddings' && body.stream === true;
    rec.stream = stream;
    if (resolved.model.kind === 'direct') {
      const key = who.snapshot.providerKeys.get(resolved.model.provider_key_id);
      if (key) {
        rec.direct = { model: resolved.model, key, upstreamModel: resolved.upstreamModel ?? resolved.model.model_name };
      }
    }
    let scrubber: Scrub | undefined;
    const scrub = (): Scrub => (scrubber ??= scrubberFor(who.snapshot, adminKeys, bearerToken(headers)));
    let r: Awaited<ReturnType<Dispatcher['dispatch']>>;
    try {
      r = await dispatcher.dispatch({
        snapshot: who.snapshot,
        model: resolved.model,
        upstreamModel: resolved.upstreamModel,
        endpoint,
        body,
        stream,
        signal: c.env?.closed ?? c.req.raw.signal,
        headers,
        apiKeyId: who.key.id,
        clientIp,
      });
    } catch (e) {
      void permit.end();
      throw e;
    }
    rec.result = r;
    if (r.kind === 'response' && r.status < 300) {
      const read = readBody(r.body);
      rec.usage = read.usage;
      rec.providerRequestId = read.id;
      await permit.end(chargesTokens ? totalOf(read.usage) ?? 0 : undefined);
    } else if (r.kind !== 'stream') void permit.end();
    if (r.kind === 'aborted') {
      rec.errorKind = 'client_closed';
      rec.error = 'the caller closed the connection before the answer';
      return new Response(null, { status: 499 }); // nginx's "client closed request": nobody reads it
    }
    if (r.kind === 'error') {
      const e = fromFailure(r.failure);
      const res = fail(c, new ProxyError(e.status, e.type, scrub()(e.message), e.code, e.headers));
      if (r.failure.detail !== undefined) rec.error = r.failure.detail;
      return res;
    }
    if (r.kind === 'response') {
      if (r.status >= 400) {
        // An upstream's error answer: its status, type and message in our envelope; nothing else of its body
        // and no secret (an upstream may echo the credential it was sent).
        rec.errorKind = 'upstream_status';
        rec.error = `upstream answered ${r.status}`;
        const s = scrub();
        const extra: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) extra[k] = s(v);
        return stampedResponse(c, upstreamErrorBody(wire, r.status, r.body, s), r.status, {
          'content-type': 'application/json',
          ...extra,
          ...limitHeaders,
          server: SERVER,
          'x-aisix-request-id': rec.requestId,
        });
      }
      return stampedResponse(c, r.body, r.status, {
        'content-type': r.contentType,
        ...r.headers,
        ...limitHeaders,
        server: SERVER,
        'x-aisix-request-id': rec.requestId,
      });
    }
    const usage = new StreamUsage();
    const settle = r.settle;
    const tracker: StreamTracker = { onEnd: undefined };
    c.set('stream', tracker);
    return stampedResponse(
      c,
      pumpSse({
        chunks: meteredChunks(r.chunks, usage, scrub),
        keepaliveMs,
        abortUpstream: r.abort,
        errorEvent: wire === 'anthropic' ? anthropicSseErrorEvent : sseErrorEvent,
        scrub: (text) => scrub()(text),
        onEnd: (end, detail) => {
          rec.usage = usage.usage();
          // A stream the pump delivered whole is still a failure when the upstream reported an error in it or
          // ended it without its wire's terminator: the caller saw 200, the outcome says what happened.
          if (end === 'complete' && (usage.errored || !usage.terminated)) {
            end = 'upstream_error';
            detail = usage.errored
              ? 'the upstream reported an error in the stream'
              : `the upstream stream ended without its terminator (${terminator})`;
          }
          if (end !== 'complete') {
            rec.errorKind = end;
            rec.error = detail ?? end;
            if (end !== 'client_closed') rec.outcome = 'upstream_error';
          }
          settle(end);
          rec.providerRequestId = usage.id;
          void permit.end(chargesTokens ? totalOf(rec.usage) : undefined);
          tracker.onEnd?.(end);
        },
      }),
      200,
      {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        ...limitHeaders,
        server: SERVER,
        'x-aisix-request-id': rec.requestId,
      },
    );
  };
}

/**
 * A response built with every header it needs (the callers put `Server` and the request id last in `headers`,
 * one object literal, no copy), which the middlewares leave alone: reading `res.headers` makes
 * @hono/node-server turn the plain header object into a `Headers` and back, a cost on every proxied answer.
 */
function stampedResponse(
  c: Context<ProxyEnv>,
  body: BodyInit | null,
  status: number,
  headers: Record<string, string> & { server: string; 'x-aisix-request-id': string },
): Response {
  c.set('stamped', true);
  return new Response(body, { status, headers });
}
