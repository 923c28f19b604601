// The admin listener: its own probes (live from process start, ready once a configuration is applied)
// and read-only resources behind an admin key, secrets redacted.
import { type Context, Hono, type Next } from 'hono';
import type { Gateway } from '../gateway.ts';
import { drainReportBody } from '../lifecycle/drain-report.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { bearerToken } from '../proxy/auth.ts';
import { errorResponse, errors, ProxyError } from '../proxy/errors.ts';
import type { ApiKey, ProviderKey } from '../resources/schema.ts';
import { configStatusBody } from '../status/config-status.ts';
import { modelsStatus } from '../status/app.ts';

const REDACTED = '[redacted]';

export function redactProviderKey(k: ProviderKey): Record<string, unknown> {
  return { ...k, ...(k.api_key !== undefined ? { api_key: REDACTED } : {}) };
}

export function redactApiKey(k: ApiKey): Record<string, unknown> {
  return { ...k, key_hash: REDACTED };
}

/** Compare without an early exit, so timing does not reveal how much of a key matched. */
function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

export function createAdminApp(gw: Gateway): Hono {
  const app = new Hono();
  const keys = gw.config.admin.admin_keys;
  app.get('/livez', livez);
  app.get('/readyz', (c) => readyz(c, { checks: () => [['config', gw.snapshot ? undefined : 'not ready']] }));
  app.all('/livez', methodNotAllowed);
  app.all('/readyz', methodNotAllowed);

  app.use('/admin/*', async function requireAdminKey(c: Context, next: Next) {
    const token = bearerToken(c.req.raw.headers);
    if (token === undefined) return errorResponse(errors.missingAuth());
    if (!keys.some((k) => constantTimeEqual(k, token))) return errorResponse(errors.unknownKey());
    await next();
  });
  const list = <T>(rows: (s: NonNullable<Gateway['snapshot']>) => T[]) => (c: Context) =>
    c.json({ list: gw.snapshot ? rows(gw.snapshot) : [], total: gw.snapshot ? rows(gw.snapshot).length : 0 });
  app.get('/admin/v1/models', list((s) => s.resources.models));
  app.get('/admin/v1/provider_keys', list((s) => s.resources.provider_keys.map(redactProviderKey)));
  app.get('/admin/v1/api_keys', list((s) => s.resources.api_keys.map(redactApiKey)));
  app.get('/admin/v1/models/status', () => modelsStatus(gw));
  app.get('/admin/v1/health', (c) =>
    c.json({
      phase: gw.lifecycle.phase,
      ready: gw.snapshot !== undefined && !gw.lifecycle.draining,
      in_flight: gw.lifecycle.inFlight,
      open_connections: gw.proxyListener?.openConnections() ?? null,
      config: configStatusBody(gw.facts, gw.now()),
      drain: drainReportBody(gw),
    }));
  app.all('/admin/*', (c) => {
    const e = c.req.method === 'GET'
      ? errors.notFound(c.req.path)
      : new ProxyError(405, 'method_not_allowed', 'the admin API is read-only in this version');
    return errorResponse(e);
  });
  return app;
}
