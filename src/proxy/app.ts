// The caller-facing app on the proxy listener: probes, `/v1/models`, and the model calls (chat completions,
// legacy completions, embeddings, Anthropic messages — errors in Anthropic's envelope there). Assembled
// from: the tracking middleware (track.ts: in-flight slot, request id, access log and metrics when the last
// byte is out), the model-call handler (model-call.ts: admission, dispatch, the answer), body validation
// (validate.ts) and the HTTP errors (src/http).
import { type Context, Hono } from 'hono';
import type { Gateway } from '../gateway.ts';
import { envelopeFor, errorResponse, errors, ProxyError } from '../http/errors.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { Dispatcher } from '../routing/dispatch.ts';
import { authenticateCaller } from './admission.ts';
import { modelAllowed } from './auth.ts';
import { clientIpResolver } from './client-ip.ts';
import type { ProxyEnv } from './env.ts';
import { fail, modelCall } from './model-call.ts';
import { ENDPOINTS, SERVER } from './record.ts';
import { requestIdFrom } from './request-id.ts';
import { trackRequests } from './track.ts';

export { ACCESS_LOG_TARGET, type RequestRecord, spendMicroUsd } from './record.ts';

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

  // Hono's compose hands a handler's throw to onError (its default answers a plain-text 500 and writes to
  // console.error), so the middleware below never sees it: answer with the JSON envelope and log it here.
  app.onError((e, c) => {
    const rec = c.get('rec');
    gw.log.error('unhandled error while serving a request', { request_id: rec?.requestId, error: String(e) });
    if (rec) {
      rec.errorKind = 'internal_error';
      rec.error = String(e);
    }
    c.set('stamped', false);
    c.set('stream', undefined);
    return errorResponse(errors.internal(), envelopeFor(c.req.path === '/v1/messages' ? 'anthropic' : 'openai'));
  });

  app.use('*', async function servedBySluice(c, next) {
    await next();
    if (c.get('stamped')) return;
    c.res.headers.set('server', SERVER);
    // Every proxy response has a request id; `/v1/*` set theirs already (track.ts).
    if (!c.res.headers.has('x-aisix-request-id')) {
      c.res.headers.set('x-aisix-request-id', requestIdFrom(c.req.raw.headers, cfg.proxy.request_id.accept_headers));
    }
  });

  const counted = (c: Context) => gw.lifecycle.recordReadyz(readyz(c, gw)); // a 503 while draining counts
  for (const [path, handler] of [['/livez', livez], ['/readyz', counted]] as const) {
    app.get(path, handler);
    app.all(path, methodNotAllowed);
  }

  app.use('/v1/*', trackRequests(gw));

  app.get('/v1/models', async (c) => {
    const who = await authenticateCaller(gw, c.req.raw.headers, c.get('rec'));
    if (who instanceof ProxyError) return fail(c, who);
    // AISIX: `created` is the time of the answer; `owned_by` the model row's provider, else the gateway's name.
    const created = Math.floor(gw.now().getTime() / 1000);
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

  const deps = { gw, dispatcher, clientIpOf: clientIpResolver(cfg.proxy.real_ip) };
  app.post('/v1/chat/completions', modelCall(deps, 'chat'));
  app.post('/v1/completions', modelCall(deps, 'completions'));
  app.post('/v1/embeddings', modelCall(deps, 'embeddings'));
  app.post('/v1/messages', modelCall(deps, 'messages'));
  app.all('/v1/*', (c) => {
    const known = ENDPOINTS[c.req.path];
    return fail(c, known ? errors.methodNotAllowed(c.req.method, c.req.path) : errors.notFound(c.req.path));
  });
  app.notFound((c) => errorResponse(errors.notFound(c.req.path)));
  return app;
}
