// The caller-facing app on the proxy listener: probes, `/v1/models`, chat completions, legacy completions,
// embeddings and Anthropic messages (errors in Anthropic's envelope there). Caller rate limits are admitted
// here, before routing; their permits are released (and tokens charged) when the answer's body ends.
// Every `/v1` request holds an in-flight slot until its last byte, gets a request id, one access-log line
// and one sample in every request family — refusals before dispatch (413, auth, bad JSON) included, with
// model `unresolved` and provider `unknown` (aisix-contract.md §1 C, D). A body whose declared length is
// over `proxy.request_body_limit_bytes` is refused before authentication (body-limit.ts).
import { type Context, Hono } from 'hono';
import type { Gateway } from '../gateway.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { MSG } from '../observability/messages.ts';
import type { ConnInfo } from '../platform.ts';
import type { Endpoint } from '../providers/types.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { Dispatcher, type DispatchResult, type ServedBy } from '../routing/dispatch.ts';
import { VERSION } from '../version.ts';
import { authenticate, modelAllowed } from './auth.ts';
import { readJsonObject } from './body.ts';
import { BodyLimit } from './body-limit.ts';
import { ipAllowed } from '../util/cidr.ts';
import { clientIpResolver } from './client-ip.ts';
import { anthropicEnvelope, errorResponse, errors, openaiEnvelope, ProxyError } from './errors.ts';
import { requestIdFrom } from './request-id.ts';
import { anthropicSseErrorEvent, pumpSse, type StreamEnd } from './stream.ts';
import { meteredChunks, readBody, StreamUsage, totalOf, type Usage } from './usage.ts';

/** What the access log and metrics record of one request, filled in as it is served. */
export interface RequestRecord {
  start: number;
  method: string;
  path: string;
  endpoint: string;
  /** `inbound_protocol`: `anthropic` on `/v1/messages`, else `openai`. */
  protocol: 'openai' | 'anthropic';
  requestId: string;
  peer: string | undefined;
  downstreamRequestId: string | undefined;
  /** The configured name the caller asked for (a wildcard hit: the wildcard row's name). */
  model?: string;
  /** Whether `model` is a routing model (then `served_by_model` names the target). */
  routing?: boolean;
  key?: ApiKey;
  apiKeyId?: string;
  stream?: boolean;
  /** The dispatcher's answer: `served` says which upstream served it (or failed it last). */
  result?: DispatchResult;
  served?: ServedBy;
  /** A direct model's own upstream, labelling the request when the dispatcher says nothing more. */
  direct?: Upstream;
  usage?: Usage;
  providerRequestId?: string;
  errorKind?: string;
  /** The failure's message (the access log's `error`). */
  error?: string;
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
  const accessLog = gw.log.withTarget(ACCESS_LOG_TARGET);
  const bodyLimit = new BodyLimit(gw, cfg.proxy.request_body_limit_bytes);
  const clientIpOf = clientIpResolver(cfg.proxy.real_ip);

  const finish = (rec: RequestRecord, status: number) => {
    const latency = Date.now() - rec.start;
    rec.served ??= rec.result && rec.result.kind !== 'aborted' ? rec.result.served : undefined;
    recordRequestMetrics(gw, rec, status, latency / 1000);
    if (cfg.observability.access_log) accessLog.info(MSG.requestCompleted, accessLogFields(rec, status, latency));
  };

  // Hono's compose hands a handler's throw to onError (its default answers a plain-text 500 and writes to
  // console.error), so the middleware below never sees it: answer with the JSON envelope and log it here.
  app.onError((e, c) => {
    const rec = c.get('rec') as RequestRecord | undefined;
    gw.log.error('unhandled error while serving a request', { request_id: rec?.requestId, error: String(e) });
    if (rec) {
      rec.errorKind = 'internal_error';
      rec.error = String(e);
    }
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
    const endpoint = ENDPOINTS[c.req.path] ?? 'other';
    const rec: RequestRecord = {
      start: Date.now(),
      method: c.req.method,
      path: c.req.path,
      endpoint,
      protocol: c.req.path === '/v1/messages' ? 'anthropic' : 'openai',
      requestId: requestIdFrom(headers, cfg.proxy.request_id.accept_headers),
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
    if (!stamped.has(res)) res.headers.set('x-aisix-request-id', rec.requestId);
    const tracked = trackedStreams.get(res);
    if (tracked) {
      // A streamed body holds the slot until its last byte; the pump reports the end.
      tracked.onEnd = (end, message) => {
        if (end !== 'complete') {
          rec.errorKind = end;
          rec.error = message ?? end;
        }
        release();
        finish(rec, res.status);
      };
    } else {
      release();
      finish(rec, res.status);
    }
  });

  const fail = (c: Context<ProxyEnv>, e: ProxyError): Response => {
    const rec = c.get('rec');
    rec.errorKind = e.type;
    rec.error = e.message;
    return errorResponse(e, c.req.path === '/v1/messages' ? anthropicEnvelope : openaiEnvelope);
  };

  /** Auth (before the body is read), then the snapshot this request is served from. */
  const caller = async (c: Context<ProxyEnv>): Promise<{ key: ApiKey; snapshot: Snapshot } | ProxyError> => {
    const snapshot = gw.snapshot;
    if (!snapshot) return errors.internal();
    const key = await authenticate(c.req.raw.headers, snapshot, Date.now());
    if (key instanceof ProxyError) return key;
    const rec = c.get('rec');
    rec.key = key;
    rec.apiKeyId = key.id;
    return { key, snapshot };
  };

  app.get('/v1/models', async (c) => {
    const who = await caller(c);
    if (who instanceof ProxyError) return fail(c, who);
    // AISIX: `created` is the time of the answer; `owned_by` the model row's provider, else the gateway's name.
    const created = Math.floor(Date.now() / 1000);
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
    rec.routing = resolved.model.kind === 'routing';
    // allowed_cidrs (AISIX #557): the requested model's own list, and for a routing model at least one
    // target the caller may reach; before any upstream is contacted.
    const clientIp = clientIpOf(c.env?.peer, c.req.raw.headers);
    if (!reachable(who.snapshot, resolved.model, clientIp)) {
      gw.log.withTarget('aisix_proxy::dispatch').warn('request rejected: client IP not in model allowed_cidrs', {
        model: resolved.model.display_name,
        source_ip: clientIp,
        request_id: rec.requestId,
      });
      return fail(c, errors.ipRestricted());
    }
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
    if (resolved.model.kind === 'direct') {
      const key = who.snapshot.providerKeys.get(resolved.model.provider_key_id);
      if (key) {
        rec.direct = {
          model: resolved.model,
          key,
          upstreamModel: resolved.upstreamModel ?? resolved.model.model_name,
        };
      }
    }
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
        clientIp,
      });
    } catch (e) {
      void permit.end();
      throw e;
    }
    rec.result = r;
    if (r.kind !== 'stream') {
      if (r.kind === 'response' && r.status < 300) {
        const read = readBody(r.body);
        rec.usage = read.usage;
        rec.providerRequestId = read.id;
        await permit.end(chargesTokens ? totalOf(read.usage) ?? 0 : undefined);
      } else void permit.end();
    }
    if (r.kind === 'aborted') {
      rec.errorKind = 'client_closed';
      rec.error = 'the caller closed the connection before the answer';
      return new Response(null, { status: 499 }); // nginx's "client closed request": nobody reads it
    }
    if (r.kind === 'error') return fail(c, r.error);
    if (r.kind === 'response') {
      if (r.status >= 400) {
        rec.errorKind = 'upstream_status';
        rec.error = `upstream answered ${r.status}`;
      }
      return stampedResponse(r.body, r.status, rec, { 'content-type': r.contentType, ...r.headers, ...limitHeaders });
    }
    const usage = new StreamUsage();
    const settle = r.settle;
    const tracker: StreamTracker = { onEnd: undefined };
    const res = stampedResponse(
      pumpSse({
        chunks: meteredChunks(r.chunks, usage),
        keepaliveMs,
        abortUpstream: r.abort,
        errorEvent: endpoint === 'messages' ? anthropicSseErrorEvent : undefined,
        onEnd: (end, message) => {
          settle(end);
          rec.usage = usage.usage();
          rec.providerRequestId = usage.id;
          void permit.end(chargesTokens ? totalOf(rec.usage) : undefined);
          tracker.onEnd?.(end, message);
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
  app.post('/v1/completions', complete('completions'));
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
  onEnd: ((end: StreamEnd, message?: string) => void) | undefined;
}

/** AISIX's access-log target (its `aisix_obs::access_log` module). */
export const ACCESS_LOG_TARGET = 'aisix_obs::access_log';

/**
 * Whether the caller at `ip` may use `model` (`allowed_cidrs`): its own list, and for a routing model at least
 * one target's list (AISIX filters targets the caller may not reach before the strategy picks; when none is
 * left the request is refused with the routing model's name).
 */
function reachable(snapshot: Snapshot, model: Model, ip: string | undefined): boolean {
  if (!ipAllowed(model.allowed_cidrs, ip)) return false;
  if (model.kind !== 'routing') return true;
  return model.routing.targets.some((t) => {
    const tm = snapshot.modelByName(t.model);
    return tm === undefined || ipAllowed(tm.allowed_cidrs, ip);
  });
}

/**
 * The access-log line's fields, in AISIX's order (aisix-contract.md §1 D), then Sluice's `peer` and
 * `downstream_request_id`. Absent values are omitted from the line.
 */
function accessLogFields(rec: RequestRecord, status: number, latencyMs: number): Record<string, unknown> {
  const s = rec.served;
  const up = s ?? rec.direct;
  const u = rec.usage;
  return {
    method: rec.method,
    path: rec.path,
    status,
    latency_ms: latencyMs,
    provider: up ? providerOf(up) : undefined,
    model: rec.model,
    api_key_id: rec.apiKeyId,
    prompt_tokens: u?.input,
    completion_tokens: u?.output,
    total_tokens: totalOf(u),
    request_id: rec.requestId,
    provider_request_id: rec.providerRequestId,
    served_by_model: rec.routing && s ? s.model.display_name : undefined,
    routing_attempt_count: s?.attempts,
    routing_fallback_count: s?.fallbacks,
    error_kind: rec.errorKind,
    error: rec.errorKind !== undefined ? (rec.error ?? rec.errorKind) : undefined,
    peer: rec.peer,
    downstream_request_id: rec.downstreamRequestId,
  };
}

/** The upstream a request went to: the part of `ServedBy` the labels read. */
type Upstream = Pick<ServedBy, 'model' | 'key' | 'upstreamModel'>;

function providerOf(s: Upstream): string {
  return s.model.provider ?? (s.key.provider || 'unknown');
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

/** An api key's AISIX identity field (`team_id`, `user_id`, `user_name`), `unknown` when absent. */
function identity(key: ApiKey | undefined, field: 'team_id' | 'user_id' | 'user_name'): string {
  const v = (key as Record<string, unknown> | undefined)?.[field];
  return typeof v === 'string' && v !== '' ? v : 'unknown';
}

/** One proxied request in every request family (aisix-contract.md §1 C); missing identity labels are `unknown`. */
function recordRequestMetrics(gw: Gateway, rec: RequestRecord, status: number, seconds: number): void {
  const m = gw.metrics;
  const s = rec.served;
  const up = s ?? rec.direct;
  const provider = up ? providerOf(up) : 'unknown';
  const model = rec.model ?? 'unresolved';
  const outcome = outcomeOf(status);
  const code = String(status);
  const ident = [
    rec.endpoint,
    rec.protocol,
    provider,
    model,
    up?.upstreamModel ?? 'unknown',
    up?.model.provider_key_id ?? 'unknown',
    up?.key.display_name ?? 'unknown',
    rec.apiKeyId ?? 'unknown',
    identity(rec.key, 'team_id'),
    identity(rec.key, 'user_id'),
    identity(rec.key, 'user_name'),
  ];
  const head = [...ident, rec.stream ? 'true' : 'false'];
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
  const u = rec.usage;
  const total = totalOf(u);
  if (u && total !== undefined) {
    if (u.input) m.llmInputTokens.inc(ident, u.input);
    if (u.output) m.llmOutputTokens.inc(ident, u.output);
    if (total > 0) {
      m.llmTotalTokens.inc(ident, total);
      m.tokensConsumed.inc([provider, model], total);
    }
    const spend = spendMicroUsd(up?.model.cost, u);
    if (spend > 0) m.llmSpend.inc(ident, spend);
  }
}

/** micro-USD for `usage` at the model's `cost` (USD per 1K input / output tokens); 0 without a cost. */
export function spendMicroUsd(cost: Record<string, number> | undefined, u: Usage): number {
  if (!cost) return 0;
  const input = (u.input ?? 0) * (cost.input_per_1k ?? 0);
  const output = (u.output ?? 0) * (cost.output_per_1k ?? 0);
  return Math.round(((input + output) / 1000) * 1_000_000);
}

function validateBody(endpoint: Endpoint, body: Record<string, unknown>): string | undefined {
  if (typeof body.model !== 'string' || body.model === '') return '`model` is required and must be a string';
  if (endpoint === 'chat') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return '`messages` is required and must be a non-empty array';
    }
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return '`stream` must be a boolean';
  }
  if (endpoint === 'completions') {
    if (body.prompt === undefined) return '`prompt` is required';
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
