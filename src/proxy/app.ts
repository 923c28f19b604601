// The caller-facing app on the proxy listener: probes, `/v1/models`, chat completions, embeddings and
// Anthropic messages (errors in Anthropic's envelope there). Caller rate limits are admitted here, before
// routing; their permits are released (and tokens charged) when the answer's body ends.
// Every `/v1` request holds an in-flight slot until its last byte, gets a request id and one access-log
// line; the drain's arrival line is written here too.
import { type Context, Hono } from 'hono';
import type { Gateway } from '../gateway.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { MSG } from '../observability/messages.ts';
import type { ConnInfo } from '../platform.ts';
import type { Endpoint } from '../providers/types.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { Dispatcher, type ServedBy } from '../routing/dispatch.ts';
import { VERSION } from '../version.ts';
import { authenticate, modelAllowed } from './auth.ts';
import { readJsonObject } from './body.ts';
import { anthropicEnvelope, errorResponse, errors, openaiEnvelope, ProxyError } from './errors.ts';
import { requestIdFrom } from './request-id.ts';
import { anthropicSseErrorEvent, pumpSse, type StreamEnd } from './stream.ts';
import { meteredChunks, StreamUsage, usageOfBody } from './usage.ts';

/** What the access log and metrics record of one request, filled in as it is served. */
interface RequestRecord {
  start: number;
  method: string;
  path: string;
  endpoint: string;
  requestId: string;
  peer: string | undefined;
  downstreamRequestId: string | undefined;
  model?: string;
  apiKeyId?: string;
  stream?: boolean;
  /** The upstream that served the request (or failed it last), once the dispatcher has said. */
  served?: ServedBy;
  errorKind?: string;
}

type ProxyEnv = { Bindings: ConnInfo; Variables: { rec: RequestRecord } };

const SERVER = `sluice/${VERSION}`;
/** Route templates: the `endpoint` label value (AISIX's convention); anything else is `other`. */
const ENDPOINTS: Record<string, string> = {
  '/v1/chat/completions': '/v1/chat/completions',
  '/v1/completions': '/v1/completions',
  '/v1/embeddings': '/v1/embeddings',
  '/v1/models': '/v1/models',
  '/v1/messages': '/v1/messages',
};
/** Model-inference endpoints: their requests are also counted in the `aisix_llm_*` families. */
const INFERENCE = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/messages']);

/** AISIX's outcome classes: 2xx/3xx success, 429 rate_limited, other 4xx client_error, the rest upstream_error. */
function outcomeOf(status: number): string {
  if (status < 400) return 'success';
  if (status === 429) return 'rate_limited';
  return status < 500 ? 'client_error' : 'upstream_error';
}

export function createProxyApp(gw: Gateway): Hono<ProxyEnv> {
  const app = new Hono<ProxyEnv>();
  const cfg = gw.config;
  const dispatcher = new Dispatcher({
    config: cfg,
    upstream: gw.upstream,
    health: gw.health,
    routing: gw.routingState,
    metrics: gw.metrics,
  });
  const keepaliveMs = cfg.downstream.sse_keepalive_interval_secs * 1000;

  const finish = (rec: RequestRecord, status: number) => {
    const latency = Date.now() - rec.start;
    recordRequestMetrics(gw, rec, status, latency / 1000);
    if (cfg.observability.access_log) {
      gw.log.info(MSG.requestCompleted, {
        method: rec.method,
        path: rec.path,
        status,
        latency_ms: latency,
        model: rec.model,
        request_id: rec.requestId,
        peer: rec.peer,
        downstream_request_id: rec.downstreamRequestId,
        error_kind: rec.errorKind,
      });
    }
  };

  // Hono's compose hands a handler's throw to onError (its default answers a plain-text 500 and writes to
  // console.error), so the middleware below never sees it: answer with the JSON envelope and log it here.
  app.onError((e, c) => {
    const rec = c.get('rec') as RequestRecord | undefined;
    gw.log.error('unhandled error while serving a request', { request_id: rec?.requestId, error: String(e) });
    if (rec) rec.errorKind = 'internal_error';
    return errorResponse(errors.internal(), c.req.path === '/v1/messages' ? anthropicEnvelope : openaiEnvelope);
  });

  app.use('*', async function servedBySluice(c, next) {
    await next();
    if (stamped.has(c.res)) return;
    c.res.headers.set('server', SERVER);
    // SPEC §7.1: every proxy response has a request id; `/v1/*` set theirs already (trackRequest).
    if (!c.res.headers.has('x-aisix-request-id')) {
      c.res.headers.set('x-aisix-request-id', requestIdFrom(c.req.raw.headers, cfg.proxy.request_id.accept_headers));
    }
  });

  const counted = (c: Context) => gw.lifecycle.recordReadyz(readyz(c, gw)); // a 503 while draining counts
  for (const [path, handler] of [['/livez', livez], ['/readyz', counted]] as const) {
    app.get(path, handler);
    app.all(path, methodNotAllowed);
  }

  app.use('/v1/*', async function trackRequest(c, next) {
    const headers = c.req.raw.headers;
    const rec: RequestRecord = {
      start: Date.now(),
      method: c.req.method,
      path: c.req.path,
      endpoint: ENDPOINTS[c.req.path] ?? 'other',
      requestId: requestIdFrom(headers, cfg.proxy.request_id.accept_headers),
      peer: c.env?.peer,
      downstreamRequestId: headers.get('x-request-id') ?? undefined,
    };
    c.set('rec', rec);
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
    const release = gw.lifecycle.acquire();
    await next(); // a throw below is turned into a response by onError before next() returns
    const res = c.res;
    if (!stamped.has(res)) res.headers.set('x-aisix-request-id', rec.requestId);
    const tracked = trackedStreams.get(res);
    if (tracked) {
      // A streamed body holds the slot until its last byte; the pump reports the end.
      tracked.onEnd = (end) => {
        if (end !== 'complete') rec.errorKind = end;
        release();
        finish(rec, res.status);
      };
    } else {
      release();
      finish(rec, res.status);
    }
  });

  const fail = (c: Context<ProxyEnv>, e: ProxyError): Response => {
    c.get('rec').errorKind = e.type;
    return errorResponse(e, c.req.path === '/v1/messages' ? anthropicEnvelope : openaiEnvelope);
  };

  /** Auth (before the body is read), then the snapshot this request is served from. */
  const caller = async (c: Context<ProxyEnv>): Promise<{ key: ApiKey; snapshot: Snapshot } | ProxyError> => {
    const snapshot = gw.snapshot;
    if (!snapshot) return errors.internal();
    const key = await authenticate(c.req.raw.headers, snapshot, Date.now());
    if (key instanceof ProxyError) return key;
    return { key, snapshot };
  };

  app.get('/v1/models', async (c) => {
    const who = await caller(c);
    if (who instanceof ProxyError) return fail(c, who);
    const created = Math.floor(Date.parse(gw.facts.applied?.applied_at ?? new Date().toISOString()) / 1000);
    const data = who.snapshot.listableModels()
      .filter((m) => modelAllowed(who.key, m.display_name))
      .map((m) => ({
        id: m.display_name,
        object: 'model',
        created,
        owned_by: m.kind === 'direct'
          ? (m.provider ?? who.snapshot.providerKeys.get(m.provider_key_id)?.provider ?? 'sluice')
          : 'sluice',
      }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return c.json({ object: 'list', data });
  });

  const complete = (endpoint: Endpoint) => async (c: Context<ProxyEnv>): Promise<Response> => {
    const rec = c.get('rec');
    const who = await caller(c);
    if (who instanceof ProxyError) return fail(c, who);
    const body = await readJsonObject(c.req.raw, cfg.proxy.request_body_limit_bytes);
    if (body instanceof ProxyError) return fail(c, body);
    const invalid = validateBody(endpoint, body);
    if (invalid) return fail(c, errors.badRequest(invalid));
    const name = body.model as string;
    // Permission first: a key must not learn which model names exist beyond the ones it may use.
    if (!modelAllowed(who.key, name)) return fail(c, errors.modelNotAllowed(name));
    const resolved = who.snapshot.resolveModel(name);
    if (!resolved) return fail(c, errors.unknownModel(name));
    rec.model = resolved.model.display_name;
    rec.apiKeyId = who.key.id;
    const admitted = await gw.rateLimiter.acquire([
      { scope: 'api_key', id: who.key.id, limits: who.key.rate_limit },
      { scope: 'model', id: resolved.model.id, name: resolved.model.display_name, limits: resolved.model.rate_limit },
    ]);
    if (!admitted.allowed) {
      const what = `${admitted.scope === 'api_key' ? 'API key' : 'model'} ${admitted.dimension}`;
      const res = fail(c, errors.rateLimited(admitted.retryAfterSecs, what));
      for (const [k, v] of Object.entries(admitted.headers ?? {})) res.headers.set(k, v);
      return res;
    }
    const { permit } = admitted;
    const chargesTokens = permit.chargesTokens;
    const limitHeaders = admitted.headers;
    const stream = endpoint !== 'embeddings' && body.stream === true;
    rec.stream = stream;
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
        headers: c.req.raw.headers,
        apiKeyId: who.key.id,
      });
    } catch (e) {
      void permit.end();
      throw e;
    }
    if (r.kind !== 'aborted' && r.served) rec.served = r.served;
    if (r.kind !== 'stream') {
      if (r.kind === 'response' && chargesTokens && r.status < 300) await permit.end(usageOfBody(r.body) ?? 0);
      else void permit.end();
    }
    if (r.kind === 'aborted') {
      rec.errorKind = 'client_closed';
      return new Response(null, { status: 499 }); // nginx's "client closed request": nobody reads it
    }
    if (r.kind === 'error') return fail(c, r.error);
    if (r.kind === 'response') {
      if (r.status >= 400) rec.errorKind = 'upstream_status';
      return stampedResponse(r.body, r.status, rec, { 'content-type': r.contentType, ...r.headers, ...limitHeaders });
    }
    const usage = chargesTokens ? new StreamUsage() : undefined;
    const settle = r.settle;
    const tracker: StreamTracker = { onEnd: undefined };
    const res = stampedResponse(
      pumpSse({
        chunks: usage ? meteredChunks(r.chunks, usage) : r.chunks,
        keepaliveMs,
        abortUpstream: r.abort,
        errorEvent: endpoint === 'messages' ? anthropicSseErrorEvent : undefined,
        onEnd: (end) => {
          settle(end);
          void permit.end(usage?.tokens());
          tracker.onEnd?.(end);
        },
      }),
      200,
      rec,
      { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...limitHeaders },
    );
    trackedStreams.set(res, tracker);
    return res;
  };

  app.post('/v1/chat/completions', complete('chat'));
  app.post('/v1/embeddings', complete('embeddings'));
  app.post('/v1/messages', complete('messages'));
  app.all('/v1/*', (c) => {
    const known = ENDPOINTS[c.req.path];
    return fail(c, known ? errors.methodNotAllowed(c.req.method, c.req.path) : errors.notFound(c.req.path));
  });
  app.notFound((c) => errorResponse(errors.notFound(c.req.path)));
  return app;
}

interface StreamTracker {
  onEnd: ((end: StreamEnd) => void) | undefined;
}
/** Streamed responses created by a handler, so the tracking middleware can release the slot at the end. */
const trackedStreams = new WeakMap<Response, StreamTracker>();

/**
 * Responses built with every header they need (`Server` and the request id included), which the middlewares
 * leave alone: reading `res.headers` makes @hono/node-server turn the plain header object into a `Headers`
 * and back, a cost on every proxied answer.
 */
const stamped = new WeakSet<Response>();

function stampedResponse(
  body: BodyInit | null,
  status: number,
  rec: RequestRecord,
  headers: Record<string, string>,
): Response {
  const res = new Response(body, {
    status,
    headers: { ...headers, server: SERVER, 'x-aisix-request-id': rec.requestId },
  });
  stamped.add(res);
  return res;
}

/** One proxied request in every request family (aisix-contract.md §1 C); missing identity labels are `unknown`. */
function recordRequestMetrics(gw: Gateway, rec: RequestRecord, status: number, seconds: number): void {
  const m = gw.metrics;
  const s = rec.served;
  const provider = s ? (s.model.provider ?? (s.key.provider || 'unknown')) : 'unknown';
  const model = rec.model ?? 'unresolved';
  const outcome = outcomeOf(status);
  const code = String(status);
  const head = [
    rec.endpoint,
    rec.path === '/v1/messages' ? 'anthropic' : 'openai',
    provider,
    model,
    s?.upstreamModel ?? 'unknown',
    s?.model.provider_key_id ?? 'unknown',
    s?.key.display_name ?? 'unknown',
    rec.apiKeyId ?? 'unknown',
    'unknown',
    'unknown',
    'unknown',
    rec.stream ? 'true' : 'false',
  ];
  const labels = [...head, s?.isFallback ? 'true' : 'false', code, outcome];
  const durationLabels = [...head, code, outcome];
  m.legacyRequests.inc([provider, model, code, outcome]);
  m.legacyDuration.observe([provider, model, code], seconds);
  m.proxyRequests.inc(labels);
  if (outcome !== 'success') m.proxyFailedRequests.inc(labels);
  m.proxyDuration.observe(durationLabels, seconds);
  if (INFERENCE.has(rec.endpoint)) {
    m.llmRequests.inc(labels);
    m.llmDuration.observe(durationLabels, seconds);
  }
}

function validateBody(endpoint: Endpoint, body: Record<string, unknown>): string | undefined {
  if (typeof body.model !== 'string' || body.model === '') return '`model` is required and must be a string';
  if (endpoint === 'chat') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return '`messages` is required and must be a non-empty array';
    }
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  if (endpoint === 'embeddings' && body.input === undefined) return '`input` is required';
  if (endpoint === 'messages') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return '`messages` is required and must be a non-empty array';
    }
    if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
      return '`max_tokens` is required and must be a positive integer';
    }
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  return undefined;
}
