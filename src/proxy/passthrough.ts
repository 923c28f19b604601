// Serving passthrough routes (docs/endpoints.md "Passthrough routes"; the pure parts in src/passthrough/): the route a request's host or path
// claims, its caller (source_cidrs, auth mode, `allowed_routes`), its credential, the body read within the
// body limit and relayed as sent, the caller's rate limits (the tokens the upstream reports charged when the
// answer ends), one upstream attempt, and the answer relayed as it arrives. Errors are OpenAI's envelope
// whatever the upstream speaks; the upstream's own statuses and bodies pass through unchanged.
import type { Context } from 'hono';
import type { Budgets } from '../budgets/budgets.ts';
import type { Logger } from '../observability/logger.ts';
import { reserveSpend } from '../budgets/spend.ts';
import { errorResponse, errors, ProxyError } from '../http/errors.ts';
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import { acquirePermit, keyAndModelSubjects } from './call-quota.ts';
import { readLimited } from './body.ts';
import { clientIpResolver } from './client-ip.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import type { Handler, HostClaim, ThrowAnswer } from './frame.ts';
import type { RelayLabels, RequestRecord } from './record.ts';
import type { PassthroughRouteKind } from './routes.ts';
import { type RequestHooks, type TrackDeps, trackRequests } from './track.ts';
import { spendMicroUsd } from './record.ts';
import { type CallUsage, USAGE_PART } from '../usage/facts.ts';
import { totalOf, type Usage } from './usage.ts';
import type { PassthroughRoute } from '../resources/passthrough-route-schema.ts';
import type { ProviderKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { RateLimiter } from '../routing/rate-limit.ts';
import { RefusedAnswer } from '../upstream-fetch.ts';
import { Cancel } from '../util/cancel.ts';
import { ipAllowed } from '../util/cidr.ts';
import { redactSecrets } from '../util/redact.ts';
import { routeAllowed, routeNotAllowed, sourceRefused } from '../passthrough/auth.ts';
import { answerHeaders, isEventStream, outboundHeaders } from '../passthrough/headers.ts';
import { claimsHost, inboundHost, type MatchedRoute, matchRoute } from '../passthrough/match.ts';
import { relayBody } from '../passthrough/relay.ts';
import { targetUrl } from '../passthrough/target.ts';
import { detectEnvelope, UsageReader } from '../passthrough/usage.ts';
import type { ApiKey } from '../resources/schema.ts';
import { callerGateSubjects } from '../policies/reserve.ts';
import { authenticate } from './auth.ts';
import type { Guardrails } from './guardrails.ts';
import { clientIdentity, PASSTHROUGH_RECORD } from './passthrough-record.ts';
import { joinBytes } from '../util/bytes.ts';
import {
  checkRelayedRequest,
  checksAnswer,
  checkWholeAnswer,
  guardRelayedStream,
  relayGuard,
} from './passthrough-guard.ts';

/** The exact log lines of this family (AISIX's words). */
export const PASSTHROUGH_MSG = {
  legacyTunnel: 'removed /passthrough tunnel hit with no matching passthrough_route (410)',
  sourceRefused: 'request rejected: client IP not in passthrough route source_cidrs',
  streamFailed: 'passthrough-route upstream stream failed mid-relay',
} as const;

/** AISIX's answer on a `/passthrough/…` path no route claims (its removed tunnel's migration notice). */
export const legacyTunnelGone = () =>
  new ProxyError(
    410,
    'invalid_request_error',
    'the implicit /passthrough/:provider tunnel has been removed; configure an explicit passthrough_route resource for this path (see the provider passthrough documentation for the migration)',
    'endpoint_removed',
  );

/** What serving passthrough routes reads; the Gateway satisfies it. */
export interface PassthroughDeps extends TrackDeps {
  readonly snapshot: Snapshot | undefined;
  readonly upstream: UpstreamFetch;
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  /** Spend budgets (docs/budgets.md "Joining budgets"): reserved after the rate limits, charged at the end. */
  readonly budgets?: { readonly budgets: Budgets };
}

/** The two mounts of the passthrough handler: before the typed routes (a claimed host) and after them. */
export interface PassthroughMounts {
  /** A request whose host an enabled route lists is relayed, whatever its path: its answer, else undefined. */
  claimHost: HostClaim;
  /** The app's fallback: a path a route's prefix claims, the legacy tunnel's 410, else the JSON 404. */
  fallback: Handler;
}

export function passthroughHandler(
  d: PassthroughDeps,
  route: PassthroughRouteKind,
  hooks: readonly RequestHooks[],
  thrown: ThrowAnswer,
  guards?: Pick<Guardrails, 'chainFor'>,
): PassthroughMounts {
  const track = trackRequests(d, hooks, thrown, route);
  const serve = servePassthrough(d, guards);
  const log = d.log.withTarget('aisix_proxy::passthrough_route');
  const relay = (c: Context<ProxyEnv>, host: string | undefined): Promise<Response> => {
    const url = c.req.url;
    const path = rawPath(url);
    const matched = matchRoute(d.snapshot?.of('passthrough_routes') ?? [], host, path);
    if (matched) return track(c, () => serve(c, matched));
    if (!path.startsWith('/passthrough/')) return Promise.resolve(errorResponse(errors.notFound(c.req.path)));
    return track(c, () => {
      log.warn(PASSTHROUGH_MSG.legacyTunnel, { path });
      const rec = c.get('rec');
      rec.relayed({ logProvider: 'unresolved', provider: 'unresolved', model: 'passthrough' });
      const e = legacyTunnelGone();
      rec.failed(e.type, e.message);
      return Promise.resolve(errorResponse(e));
    });
  };
  const hostOf = (c: Context<ProxyEnv>) => inboundHost(c.req.header('host') ?? null, c.req.url);
  return {
    claimHost(c) {
      // On every request: nothing but a lookup when no route lists a host.
      const routes = d.snapshot?.of('passthrough_routes');
      if (!routes?.length) return undefined;
      const host = hostOf(c);
      if (!claimsHost(routes, host)) return undefined;
      return relay(c, host);
    },
    fallback: (c) => relay(c, hostOf(c)),
  };
}

/** The path as the caller wrote it (percent-encoding kept). */
function rawPath(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  if (start < 0) return '/';
  const end = url.indexOf('?', start);
  return end < 0 ? url.slice(start) : url.slice(start, end);
}

function rawQuery(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q + 1);
}

/** The labels of a route's request: `byo` until the upstream answered a route that injects a key. */
function labelsOf(route: PassthroughRoute, key: ProviderKey | undefined, answered: boolean): RelayLabels {
  const provider = answered && key ? (key.provider.trim().toLowerCase() || 'unknown') : 'byo';
  return {
    logProvider: route.name,
    provider,
    model: 'passthrough',
    ...(answered && key ? { providerKeyId: key.id, providerKeyName: key.display_name } : {}),
  };
}

/**
 * The route's caller by its `auth_mode` (`gateway_key`: `Authorization: Bearer` or `x-api-key`, as on the typed
 * routes; `header_key`: the route's own header; `anonymous`: the configured key), or the refusal (401, or 400
 * for a route whose anonymous key is missing).
 */
function authenticateRoute(
  route: PassthroughRoute,
  headers: Headers,
  snapshot: Snapshot,
  now: number,
): ApiKey | ProxyError | Promise<ApiKey | ProxyError> {
  if (route.auth_mode === 'gateway_key') return authenticate(headers, snapshot, now);
  if (route.auth_mode === 'header_key') {
    const name = route.auth_header_name!; // the schema requires it in this mode
    const token = headers.get(name)?.trim().replace(/^Bearer\s+/i, '').trim();
    if (!token) {
      return new ProxyError(
        401,
        'invalid_api_key',
        `missing or malformed ${name} header (this route's gateway API key header)`,
      );
    }
    return authenticate(new Headers({ 'x-api-key': token }), snapshot, now);
  }
  const key = snapshot.apiKeys.get(route.anonymous_key_id!); // the schema requires it in this mode
  if (!key) {
    return errors.badRequest(
      `request payload is invalid: passthrough route "${route.name}" anonymous key is not configured`,
    );
  }
  if (key.disabled) return errors.disabledKey();
  if (key.expires_at !== undefined && Date.parse(key.expires_at) <= now) return errors.expiredKey();
  return key;
}

const NOTHING = { microUsd: 0, tokens: 0 };

/** Statuses whose answer has no body. */
const NO_BODY = new Set([101, 204, 205, 304]);

/** An admitted caller of a route: its key, its usage record, the credential to inject and the target URL. */
interface Admitted {
  key: ApiKey;
  callUsage: CallUsage;
  inject: { key: ProviderKey; secret: string } | undefined;
  url: string;
}

/** What one request to a route shares across its steps. */
interface RouteCall {
  c: Context<ProxyEnv>;
  m: MatchedRoute;
  rec: RequestRecord;
  snapshot: Snapshot;
  providerKey: ProviderKey | undefined;
}

/** What serving a route's requests reads, made once per handler. */
interface Serving {
  d: PassthroughDeps;
  guards: Pick<Guardrails, 'chainFor'> | undefined;
  log: Logger;
  clientIpOf: (peer: string | undefined, headers: Headers) => string | undefined;
  limit: number;
  keepaliveMs: number;
}

function servePassthrough(d: PassthroughDeps, guards: Pick<Guardrails, 'chainFor'> | undefined) {
  const s: Serving = {
    d,
    guards,
    log: d.log.withTarget('aisix_proxy::passthrough_route'),
    clientIpOf: clientIpResolver(d.config.proxy.real_ip),
    limit: d.config.proxy.request_body_limit_bytes,
    keepaliveMs: d.config.downstream.sse_keepalive_interval_secs * 1000,
  };
  return (c: Context<ProxyEnv>, m: MatchedRoute): Promise<Response> => serveRoute(s, c, m);
}

/** One request a route claims, from its admission to its answer. */
async function serveRoute(s: Serving, c: Context<ProxyEnv>, m: MatchedRoute): Promise<Response> {
  const rec = c.get('rec');
  const route = m.route;
  const snapshot = s.d.snapshot!; // a route matched, so there is one
  const refuse = (e: ProxyError): Response => {
    rec.failed(e.type, e.message);
    return errorResponse(e);
  };
  const providerKey = route.provider_key_id !== undefined
    ? snapshot.providerKeys.get(route.provider_key_id)
    : undefined;
  rec.relayed(labelsOf(route, providerKey, false));
  const call: RouteCall = { c, m, rec, snapshot, providerKey };

  const a = await admitRoute(s, call);
  if (a instanceof ProxyError) return refuse(a);
  const body = await readRouteBody(c.req.raw, s.limit);
  if (body instanceof ProxyError) return refuse(body);
  const parsed = parseJson(body);
  const envelope = detectEnvelope(parsed);
  const quota = await holdQuota(s, call, a, parsed, envelope);
  if (quota instanceof ProxyError) return refuse(quota);
  const found = s.guards?.chainFor(snapshot, a.key, route.id);
  const guard = found ? relayGuard(found, envelope, m.remainder, route.name) : undefined;
  if (guard) {
    const refused = await checkRelayedRequest(guard, parsed, body, rec);
    if (refused) {
      quota.end();
      return refuse(refused);
    }
  }

  const ex = new Exchange(c, route.timeout_ms ?? s.d.config.upstream.timeout_ms, quota.end);
  let res: UpstreamResponse;
  quota.began(s.d.clock());
  try {
    res = await s.d.upstream({
      url: a.url,
      method: c.req.method,
      headers: outboundHeaders(route, c.req.raw.headers, rec.requestId, a.inject),
      ...(body ? { body } : {}),
      signal: ex.cancel,
      ...(a.inject?.key.tls ? { tls: a.inject.key.tls } : {}),
    });
  } catch (e) {
    ex.settle();
    const failure = refuse(ex.failure(e));
    // The runtime's words go to the access log only.
    if (!ex.timedOut && !(e instanceof RefusedAnswer)) rec.failed('transport_error', `transport error: ${String(e)}`);
    return failure;
  }
  return relayAnswer(s, call, res, ex, { guard, envelope, inject: a.inject, callUsage: a.callUsage });
}

/** Source addresses, the caller's key, `allowed_routes`, the credential and the target; or the refusal. */
async function admitRoute(s: Serving, call: RouteCall): Promise<Admitted | ProxyError> {
  const { c, m: { route }, rec, snapshot, providerKey } = call;
  const headers = c.req.raw.headers;
  if (route.source_cidrs?.length) {
    const ip = s.clientIpOf(c.env?.peer, headers);
    if (!ipAllowed(route.source_cidrs, ip)) {
      s.log.warn(PASSTHROUGH_MSG.sourceRefused, { route: route.name, source_ip: ip, request_id: rec.requestId });
      return sourceRefused();
    }
  }
  const key = await authenticateRoute(route, headers, snapshot, s.d.clock());
  if (key instanceof ProxyError) return key;
  rec.identified(key);
  const callUsage = routeUsage(route);
  rec.facet(USAGE_PART).call = callUsage;
  if (route.identity_header) {
    const who = clientIdentity(headers.get(route.identity_header));
    if (who !== undefined) rec.facet(PASSTHROUGH_RECORD).clientIdentity = who;
    if (who !== undefined) callUsage.fields = { ...callUsage.fields, client_identity: who };
  }
  if (!routeAllowed(key, route.name)) return routeNotAllowed(route.name);
  let inject: Admitted['inject'];
  if (route.credential_mode === 'inject') {
    const invalid = (what: string) =>
      errors.badRequest(`request payload is invalid: passthrough route "${route.name}" ${what}`);
    if (!providerKey) return invalid('references an unknown provider key');
    if (!providerKey.api_key) return invalid('provider_key has empty api_key');
    inject = { key: providerKey, secret: providerKey.api_key };
  }
  const target = targetUrl(call.m, rawQuery(c.req.url));
  if ('refused' in target) return errors.badRequest(`request payload is invalid: ${target.refused}`);
  return { key, callUsage, inject, url: target.url };
}

/**
 * The caller's rate limits (its key's, the body's model's, the policies') and its budgets; what ends them at
 * the answer's tokens (nothing for no answer), or the refusal.
 */
async function holdQuota(
  s: Serving,
  call: RouteCall,
  a: Admitted,
  parsed: unknown,
  envelope: ReturnType<typeof detectEnvelope>,
): Promise<{ end: (used?: Usage) => void; began: (at: number) => void } | ProxyError> {
  const { rec, snapshot } = call;
  const { key, callUsage } = a;
  const model = a.inject ? bodyModel(snapshot, a.inject.key, parsed) : undefined;
  const permit = await acquirePermit(s.d.rateLimiter, [
    ...keyAndModelSubjects(key, model),
    ...callerGateSubjects(snapshot, key, model, s.d.clock()),
  ]);
  if (permit instanceof ProxyError) return permit;
  // Priced at the model the body names, when it is one of the injected key's; else its tokens only.
  const hold = s.d.budgets
    ? await reserveSpend(s.d.budgets.budgets, s.d.clock, {
      key,
      snapshot,
      ...(model ? { model } : {}),
      call: envelope,
      body: (parsed ?? {}) as Record<string, unknown>,
    })
    : undefined;
  if (hold instanceof ProxyError) {
    void permit.end().catch(() => {});
    return hold;
  }
  /** When the upstream call began (its time is the event's upstream latency). */
  let began: number | undefined;
  const end = (used?: Usage) => {
    void permit.end(totalOf(used)).catch(() => {});
    if (began !== undefined) callUsage.upstreamMs = s.d.clock() - began;
    callUsage.downstreamMs = s.d.clock() - rec.start;
    if (used) callUsage.tokens = { input: used.input ?? 0, output: used.output ?? 0, estimated: false };
    const spent = used ? { microUsd: spendMicroUsd(model?.cost, used), tokens: totalOf(used) ?? 0 } : NOTHING;
    void hold?.commit(spent).catch(() => {});
  };
  return { end, began: (at) => (began = at) };
}

/** The upstream's answer to the caller: headers filtered, an error scrubbed, guarded, its tokens read. */
async function relayAnswer(
  s: Serving,
  call: RouteCall,
  res: UpstreamResponse,
  ex: Exchange,
  o: {
    guard: ReturnType<typeof relayGuard> | undefined;
    envelope: ReturnType<typeof detectEnvelope>;
    inject: Admitted['inject'];
    callUsage: CallUsage;
  },
): Promise<Response> {
  const { c, rec, m: { route } } = call;
  const eventStream = isEventStream(res.header('content-type'));
  // A healthy event stream is bounded by its upstream or its caller, never by the exchange's time.
  if (eventStream) ex.untimed();
  rec.relayed(labelsOf(route, call.providerKey, true));
  rec.dispatching(eventStream, undefined);
  const answered = answerHeaders(res.headerList?.() ?? contentTypeOnly(res), eventStream);
  if (NO_BODY.has(res.status) || c.req.method === 'HEAD') {
    await res.discard().catch(() => {});
    ex.settle();
    return new Response(null, { status: res.status, headers: answered });
  }
  let chunks = res.body;
  if (o.inject && res.status >= 400 && !eventStream && answered.get('content-encoding') === null) {
    const scrubbed = await scrubbedError(res, o.inject.secret);
    if ('text' in scrubbed) {
      ex.settle();
      rec.failed('upstream_error', `upstream answered ${res.status}`);
      answered.delete('content-length');
      return new Response(scrubbed.text, { status: res.status, headers: answered });
    }
    chunks = scrubbed.chunks;
  }
  const guard = o.guard;
  if (checksAnswer(guard)) {
    if (eventStream) chunks = guardRelayedStream(guard, chunks, rec, () => ex.cancel.abort(new Error('blocked')));
    else if (res.status < 300) return guardedWholeAnswer(guard, chunks, ex, rec, o.envelope, res.status, answered);
  }
  const reader = new UsageReader(o.envelope, eventStream);
  const tracker: StreamTracker = { onEnd: undefined };
  const stream = relayBody({
    chunks,
    eventStream,
    keepaliveMs: s.keepaliveMs,
    onChunk: (chunk) => reader.push(chunk),
    onFirstByte: () => rec.firstByte(s.d.clock()),
    abortUpstream: () => ex.cancel.abort(new Error('the caller went away')),
    onEnd(end, detail) {
      const usage = reader.finish();
      rec.read(usage, undefined);
      ex.settle(usage);
      if (end !== 'complete') {
        if (end === 'client_closed') o.callUsage.status = 499;
        rec.streamFailed(end, detail);
        if (end !== 'client_closed') s.log.warn(PASSTHROUGH_MSG.streamFailed, { route: route.name, error: detail });
      }
      tracker.onEnd?.(end);
    },
  });
  c.set('stream', tracker);
  return new Response(stream, { status: res.status, headers: answered });
}

/** A whole 2xx answer a guardrail checks: held, its tokens read and charged, then checked before it is sent. */
async function guardedWholeAnswer(
  guard: NonNullable<ReturnType<typeof relayGuard>>,
  chunks: AsyncIterable<Uint8Array>,
  ex: Exchange,
  rec: RequestRecord,
  envelope: ReturnType<typeof detectEnvelope>,
  status: number,
  answered: Headers,
): Promise<Response> {
  const held: Uint8Array[] = [];
  try {
    for await (const chunk of chunks) held.push(chunk);
  } catch (e) {
    ex.settle();
    const failure = ex.failure(e);
    rec.failed(failure.type, failure.message);
    return errorResponse(failure);
  }
  const reader = new UsageReader(envelope, false);
  for (const chunk of held) reader.push(chunk);
  const usage = reader.finish();
  rec.read(usage, undefined);
  ex.settle(usage);
  const refused = await checkWholeAnswer(guard, held, rec);
  if (refused) {
    rec.failed(refused.type, refused.message);
    return errorResponse(refused);
  }
  return new Response(new Blob(held as Uint8Array<ArrayBuffer>[]), { status, headers: answered });
}

/**
 * One upstream exchange's bounds: `timeoutMs` (0: none) until an event stream's headers arrive, and the
 * caller's hang-up; `settle` ends them and hands the answer's tokens to the quota's end.
 */
class Exchange {
  readonly cancel = new Cancel();
  timedOut = false;
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private readonly callerLeft = () => this.cancel.abort(new Error('the caller went away'));

  constructor(
    private readonly c: Context<ProxyEnv>,
    private readonly timeoutMs: number,
    private readonly end: (used?: Usage) => void,
  ) {
    this.timer = timeoutMs > 0
      ? setTimeout(() => {
        this.timedOut = true;
        this.cancel.abort(new Error('timed out'));
      }, timeoutMs)
      : undefined;
    c.env?.closed?.addEventListener('abort', this.callerLeft, { once: true });
  }

  untimed(): void {
    clearTimeout(this.timer);
  }

  settle(usage?: Usage): void {
    clearTimeout(this.timer);
    this.c.env?.closed?.removeEventListener('abort', this.callerLeft);
    this.end(usage);
  }

  /** The caller's error for an exchange that got no answer. */
  failure(e: unknown): ProxyError {
    return exchangeFailure(e, this.timedOut, this.timeoutMs);
  }
}

/** The caller's body within the limit; undefined when it sent none. */
async function readRouteBody(
  raw: Request,
  limit: number,
): Promise<Uint8Array<ArrayBuffer> | undefined | ProxyError> {
  if (!raw.body) return undefined;
  let read: Uint8Array<ArrayBuffer> | ProxyError;
  try {
    read = await readLimited(raw, limit);
  } catch {
    return errors.badRequest('request payload is invalid: failed to read request body');
  }
  if (read instanceof ProxyError) return read;
  return read.byteLength > 0 ? read : undefined;
}

/** AISIX's usage record of an authenticated route request (docs/usage-events.md "Tool and agent calls"). */
function routeUsage(route: PassthroughRoute): CallUsage {
  return {
    handler: 'passthrough_route',
    protocol: 'passthrough',
    protocolLabel: 'other',
    fields: {
      auth_type: route.auth_mode === 'anonymous' ? 'anonymous' : undefined,
      passthrough_route_name: route.name,
    },
    upstreamMs: 0,
  };
}

/** An error answer past this many bytes is relayed as it is. */
const MAX_SCRUBBED_BYTES = 64 * 1024;

/**
 * An upstream error answer with the injected credential redacted (an upstream that echoes the key it was
 * sent must not hand the gateway's secret to the caller); one past `MAX_SCRUBBED_BYTES` is given back as
 * chunks, those read first included.
 */
async function scrubbedError(
  res: UpstreamResponse,
  secret: string,
): Promise<{ text: string } | { chunks: AsyncIterable<Uint8Array> }> {
  const it = res.body[Symbol.asyncIterator]();
  const read: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let r: IteratorResult<Uint8Array>;
    try {
      r = await it.next();
    } catch {
      return { text: '' };
    }
    if (r.done) break;
    read.push(r.value);
    size += r.value.byteLength;
    if (size > MAX_SCRUBBED_BYTES) return { chunks: rest(read, it) };
  }
  return { text: redactSecrets(new TextDecoder().decode(joinBytes(read, size)), [secret]) };
}

async function* rest(read: Uint8Array[], it: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  yield* read;
  for (;;) {
    const r = await it.next();
    if (r.done) return;
    yield r.value;
  }
}

function contentTypeOnly(res: UpstreamResponse): [string, string][] {
  const t = res.header('content-type');
  return t === null ? [] : [['content-type', t]];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The body as JSON when it is an object (its envelope and `model` are read); undefined otherwise. */
function parseJson(body: Uint8Array | undefined): unknown {
  if (!body || body[0] !== 0x7b /* { */ && !/^\s*\{/.test(utf8.decode(body.subarray(0, 64)).trimStart())) {
    return undefined;
  }
  try {
    return JSON.parse(utf8.decode(body));
  } catch {
    return undefined;
  }
}

/**
 * The configured model a JSON body's `model` names under the injected key's vendor (display name, else an
 * exact `model_name`, smallest id): its own rate limits apply too, in the bucket typed calls to it share.
 */
function bodyModel(snapshot: Snapshot, key: ProviderKey, parsed: unknown) {
  const name = (parsed as Record<string, unknown> | undefined)?.model;
  if (typeof name !== 'string' || name === '') return undefined;
  const vendor = key.provider.trim().toLowerCase();
  const sameVendor = (m: { kind: string; provider?: string; provider_key_id?: string }) => {
    if (m.kind !== 'direct') return false;
    const p = m.provider ?? snapshot.providerKeys.get(m.provider_key_id!)?.provider ?? '';
    return p.trim().toLowerCase() === vendor;
  };
  const byName = snapshot.modelByName(name);
  if (byName && sameVendor(byName)) return byName;
  let best;
  for (const m of snapshot.models.values()) {
    if (m.kind !== 'direct' || m.model_name !== name || m.model_name.includes('*') || !sameVendor(m)) continue;
    if (!best || m.id < best.id) best = m;
  }
  return best;
}

/** The caller's error for an exchange that got no answer. */
function exchangeFailure(e: unknown, timedOut: boolean, timeoutMs: number): ProxyError {
  if (timedOut) return new ProxyError(504, 'timeout', `upstream request timed out after ${timeoutMs}ms`);
  if (e instanceof RefusedAnswer) return new ProxyError(e.caller.status, 'upstream_error', e.caller.message);
  return new ProxyError(502, 'transport_error', 'transport error: the upstream connection failed');
}
