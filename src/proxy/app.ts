// The caller-facing app on the proxy listener (docs/architecture.md "A request"): probes, then every route of
// the route table (routes.ts), each served by the handler of its kind — `/v1/models`, and the model calls, each
// a run of the request pipeline (pipeline.ts) — inside its frame (frame.ts: the tracking, track.ts). Errors come
// from src/http.
import { type Context, Hono } from 'hono';
import type { Config } from '../config/schema.ts';
import { envelopeFor, errorResponse, errors } from '../http/errors.ts';
import { configSecrets } from '../http/scrub.ts';
import { livez, methodNotAllowed, type ReadinessChecks, readyz } from '../lifecycle/probes.ts';
import type { Lifecycle } from '../lifecycle/state.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { Platform, UpstreamFetch } from '../platform.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { Dispatcher } from '../routing/dispatch.ts';
import type { ModelHealth } from '../routing/health.ts';
import type { RateLimiter } from '../routing/rate-limit.ts';
import type { RoutingState } from '../routing/strategies.ts';
import type { Clock } from '../util/clock.ts';
import { withUrlRewrites } from '../routing/url-rewrite.ts';
import { admitStep, identifyStep, identityAuth, reserveStep } from './admission.ts';
import { semanticRouter } from './semantic-route.ts';
import { budgetStep } from './budgets.ts';
import type { BudgetsSetup } from '../budgets/setup.ts';
import { a2aCall, a2aCard } from './a2a.ts';
import { jobsCall } from './jobs.ts';
import { videosCall } from './videos.ts';
import { Answerer, fail } from './answer.ts';
import { cacheSteps, embedThrough } from './cache-steps.ts';
import type { CacheSetup } from '../cache/setup.ts';
import type { ResponsesStoreSetup } from '../responses/store.ts';
import { modelAllowed } from './auth.ts';
import { readBodyStep } from './body.ts';
import { clientIpResolver } from './client-ip.ts';
import type { ProxyEnv } from './env.ts';
import { guardrails } from './guardrails.ts';
import { mediaBodyStep, relayAnswer } from './media.ts';
import { ModelCall, type RequestStep, type SnapshotFeature, SnapshotPipelines } from './pipeline.ts';
import { identified } from './identified.ts';
import { mcpHandlers, PROTECTED_RESOURCE_PATHS, protectedResource } from './mcp.ts';
import { policiesStep } from './policies.ts';
import { serverHeader } from './identity.ts';
import { type AnyHandler, Framing, type Handler, type ThrowAnswer, under } from './frame.ts';
import { responsesStateSteps } from './responses-state.ts';
import {
  type ModelCallRoute,
  PASSTHROUGH_ROUTE,
  type Route,
  type RouteKind,
  routeOf,
  ROUTES,
  wireOf,
} from './routes.ts';
import { passthroughHandler } from './passthrough.ts';
import { REALTIME_NOT_SERVED, realtimeHandler } from './realtime.ts';
import { type RequestHooks, trackRequests } from './track.ts';
import { traceHooks } from '../telemetry/request-hooks.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { usageHooks } from '../usage/hooks.ts';
import { usageMetricsFor } from '../usage/metrics.ts';
import type { UsageSinks } from '../usage/sinks.ts';

/** What the proxy app reads; the Gateway is one. `snapshot` is read on every request (it is swapped on reload). */
export interface ProxyDeps extends ReadinessChecks {
  readonly config: Config;
  readonly snapshot: Snapshot | undefined;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  readonly lifecycle: Pick<Lifecycle, 'draining' | 'acquire' | 'recordArrival' | 'recordReadyz'>;
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly upstream: UpstreamFetch;
  readonly health: ModelHealth;
  readonly routingState: RoutingState;
  /** Trace export (src/telemetry); inactive while no exporter is configured. */
  readonly telemetry?: Telemetry;
  /** The response cache (docs/cache.md); its steps join the pipeline when it is given. */
  readonly cache?: Pick<CacheSetup, 'engine'>;
  /** Translated Responses answers kept for `previous_response_id` and `item_reference` (docs/routing.md). */
  readonly responses?: Pick<ResponsesStoreSetup, 'store'>;
  /** Spend budgets (docs/budgets.md); their step joins the pipeline of a snapshot that configures one. */
  readonly budgets?: Pick<BudgetsSetup, 'budgets'>;
  /** The usage-event exporters (src/usage); absent or inactive: events are counted, never built. */
  readonly usage?: Pick<UsageSinks, 'active' | 'offer' | 'captureBytes'>;
  /** The runtime's WebSocket client, for the Realtime relay (docs/realtime.md); absent: realtime is not served. */
  readonly platform?: Pick<Platform, 'connectWebSocket'>;
}

/**
 * What every answer of the proxy listener gets (frame.ts): a handler's throw answered with the JSON envelope
 * (and logged), the `server` header and a request id; then the probes.
 */
function answerEveryRequest(app: Hono<ProxyEnv>, d: ProxyDeps): Framing {
  const cfg = d.config;
  const thrown: ThrowAnswer = (e, c) => {
    const rec = c.get('rec');
    d.log.error('unhandled error while serving a request', { request_id: rec?.requestId, error: String(e) });
    rec?.failed('internal_error', String(e));
    // A feature's slot that others wait on (a cache miss) is let go.
    c.get('state')?.thrown();
    c.set('stamped', false);
    c.set('stream', undefined);
    return errorResponse(errors.internal(), envelopeFor(wireOf(c.req.path)));
  };
  // Hono's own handler answers a plain-text 500 and writes to console.error: a throw outside a route's frame.
  app.onError(thrown);
  const framing = new Framing({
    server: serverHeader(cfg.proxy.identity),
    acceptHeaders: cfg.proxy.request_id.accept_headers,
    thrown,
  });
  const counted = (c: Context) => d.lifecycle.recordReadyz(readyz(c, d)); // a 503 while draining counts
  for (const [path, probe] of [['/livez', livez], ['/readyz', counted]] as const) {
    // HEAD is served as GET (Hono); one handler per path, so a request matches one.
    app.all(
      path,
      framing.untracked((c) => c.req.method === 'GET' || c.req.method === 'HEAD' ? probe(c) : methodNotAllowed(c)),
    );
  }
  return framing;
}

/** The hooks every tracked request runs: the usage events', and the traces' when telemetry is configured. */
function requestHooks(d: ProxyDeps, clientIpOf: ReturnType<typeof clientIpResolver>): RequestHooks[] {
  const cfg = d.config;
  const usage = usageHooks({
    metrics: usageMetricsFor(d.metrics.registry),
    emitted: d.metrics.usageEvents,
    sinks: d.usage,
    clientTypeRules: cfg.observability.metrics.client_type_rules,
    clientIp: clientIpOf,
    clock: d.clock,
  });
  const hooks = d.telemetry ? [usage, traceHooks(d.telemetry)] : [usage];
  return hooks;
}

/**
 * The model calls' pipelines (one per snapshot) and the `identify` step every route runs: built once, with the
 * features this configuration has.
 */
function modelPipelines(
  d: ProxyDeps,
  o: {
    guards: ReturnType<typeof guardrails>;
    configSecrets: string[];
    clientIpOf: ReturnType<typeof clientIpResolver>;
  },
): { pipelines: SnapshotPipelines; identify: RequestStep } {
  const cfg = d.config;
  const { guards, clientIpOf } = o;
  const dispatcher = new Dispatcher({
    config: cfg,
    upstream: d.upstream,
    health: d.health,
    routing: d.routingState,
    metrics: d.metrics,
    clock: d.clock,
  });
  const answerer = new Answerer({
    dispatcher,
    configSecrets: o.configSecrets,
    keepaliveMs: cfg.downstream.sse_keepalive_interval_secs * 1000,
    limiter: d.rateLimiter,
    clock: d.clock,
    maxSseEventBytes: cfg.upstream.max_sse_event_bytes,
    servedByHeader: cfg.proxy.served_by_header,
    relay: relayAnswer,
  });
  // Built once: the features join here. Policies, guardrails and cache policies come from the snapshot, so their
  // steps are in the pipeline of a snapshot that has them, and in no other (SnapshotPipelines).
  const cache = d.cache?.engine(embedThrough(dispatcher));
  const features: SnapshotFeature[] = [policiesStep(d.clock), guards.steps];
  if (cache) features.push(cacheSteps(cache, guards.checkCached));
  if (d.responses) {
    const steps = responsesStateSteps(d.responses.store);
    features.push(() => steps);
  }
  const identify = identifyStep(d, identityAuth(d, clientIpOf));
  if (d.budgets) features.push(budgetStep(d.budgets.budgets, d.clock));
  const pipelines = new SnapshotPipelines({
    identify,
    readBody: mediaBodyStep(cfg.proxy.request_body_limit_bytes, readBodyStep(cfg.proxy.request_body_limit_bytes)),
    admit: admitStep(
      d.log,
      clientIpOf,
      semanticRouter(
        { log: d.log, health: d.health, upstreamTimeoutMs: cfg.upstream.timeout_ms, upstream: d.upstream },
        dispatcher,
      ),
    ),
    reserve: reserveStep(d.rateLimiter),
    answer: answerer,
  }, features);
  return { pipelines, identify };
}

export function createProxyApp(d: ProxyDeps): Hono<ProxyEnv> {
  const app = new Hono<ProxyEnv>();
  const cfg = d.config;
  const framing = answerEveryRequest(app, d);

  const clientIpOf = clientIpResolver(cfg.proxy.real_ip);
  const hooks = requestHooks(d, clientIpOf);
  // One list for every scrubber: their cache of compiled patterns is keyed by it.
  const secrets = configSecrets(cfg);
  const guards = guardrails({ ...d, configSecrets: secrets });
  // Passthrough routes (src/passthrough/): a request whose host a route claims is relayed before any typed
  // route sees it; a path a route's prefix claims is the app's fallback, after them.
  const passthrough = passthroughHandler(d, PASSTHROUGH_ROUTE, hooks, framing.thrown, guards);
  const claim = passthrough.claimHost;
  const track = trackRequests(d, hooks, framing.thrown);
  // `/v1`, `/a2a` and `/mcp` requests are tracked, `/mcp` itself too, whatever route answers them.
  const tracks = (path: string) => under('/v1', path) || under('/a2a', path) || under('/mcp', path);
  const framed = (path: string, h: AnyHandler) =>
    tracks(path) ? framing.tracked(h, track, claim) : framing.untracked(h, claim);
  const { pipelines, identify } = modelPipelines(d, { guards, configSecrets: secrets, clientIpOf });
  // How each kind of route is served (routes.ts `Route`): a new kind of call adds its entry here.
  const handlers: HandlerTable = {
    'model-call': (route) => modelCall(pipelines, route),
    'models-list': () => listModels(d, identify),
    'a2a-call': () => a2aCall(d, identify),
    'a2a-card': () => a2aCard(d, identify),
    passthrough: () => passthrough.fallback,
    realtime: () => realtimeHandler({ ...d, configSecrets: secrets }, identify, clientIpOf, guards),
    mcp: mcpHandlers(
      d,
      { bodyLimit: cfg.proxy.request_body_limit_bytes, clientIpOf, configSecrets: secrets },
      identify,
    ),
    'jobs': (route) => jobsCall({ ...d, clientIpOf, configSecrets: secrets }, identify, route),
    'videos': (route) => videosCall({ ...d, clientIpOf, configSecrets: secrets }, identify, route),
  };
  // Said once at boot, so an operator knows before a caller finds out (docs/realtime.md "Runtimes").
  if (!d.platform?.connectWebSocket) d.log.info(REALTIME_NOT_SERVED);
  for (const route of ROUTES) {
    app.on([route.method].flat(), route.path, framed(route.path, handlerOf(handlers, route)));
  }
  for (const path of PROTECTED_RESOURCE_PATHS) app.all(path, framed(path, protectedResource(d)));
  // What no route matched, in `notFound` rather than as catch-all routes that every request would match too.
  const unrouted = framing.tracked(notRouted, track, claim);
  const passthroughFallback = handlerOf(handlers, PASSTHROUGH_ROUTE);
  const passedTracked = framing.tracked(passthroughFallback, track, claim);
  const passed = framing.untracked(passthroughFallback, claim);
  app.notFound((c) => {
    const path = c.req.path;
    if (under('/v1', path) || under('/a2a', path)) return unrouted(c);
    return under('/mcp', path) ? passedTracked(c) : passed(c);
  });
  // Rewrites run before Hono matches a route, so the rewritten path is served as if the client had sent it.
  app.fetch = withUrlRewrites(cfg.proxy.url_rewrites, d.log.withTarget('aisix_proxy::rewrite'), app.fetch);
  return app;
}

/** A `/v1` or `/a2a` path no route serves: a 405 for a known path, else a 404. */
function notRouted(c: Context<ProxyEnv>): Response {
  const known = routeOf(c.req.path);
  return fail(c, known ? errors.methodNotAllowed(c.req.method, c.req.path) : errors.notFound(c.req.path));
}

/** One handler maker per kind of route, each given the routes of its kind. */
type HandlerTable = { readonly [K in RouteKind]: (route: Extract<Route, { kind: K }>) => Handler };

function handlerOf(table: HandlerTable, route: Route): Handler {
  // The table's entry for `route.kind` takes routes of that kind; TypeScript does not correlate the two.
  return (table[route.kind] as (route: Route) => Handler)(route);
}

/** A model call on `route`: one run of its snapshot's pipeline. */
function modelCall(p: SnapshotPipelines, route: ModelCallRoute) {
  return function handleModelCall(c: Context<ProxyEnv>): Promise<Response> {
    return p.run(new ModelCall(c, c.get('rec'), route, c.get('state')));
  };
}

/** `GET /v1/models`: the models the caller's key may use; the request's `identify` first, as a model call's. */
function listModels(d: ProxyDeps, identify: RequestStep) {
  return async function handleListModels(c: Context<ProxyEnv>): Promise<Response> {
    const req = await identified(c, identify);
    if (req instanceof Response) return req;
    const who = req.caller;
    // AISIX: `created` is the time of the answer; `owned_by` the model row's provider, else the gateway's name.
    const created = Math.floor(d.clock() / 1000);
    const gateway = d.config.proxy.identity; // `sluice` or `aisix`: the product's own name
    const data = who.snapshot.listableModels()
      .filter((m) => modelAllowed(who.key, m.display_name))
      .map((m) => ({
        id: m.display_name,
        object: 'model',
        created,
        owned_by: m.kind === 'direct'
          ? (m.provider ?? who.snapshot.providerKeys.get(m.provider_key_id)?.provider ?? gateway)
          : gateway,
      }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return c.json({ object: 'list', data });
  };
}
