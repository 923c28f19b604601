// The admin listener: its own probes and read-only resources behind an admin key, secrets redacted, in
// AISIX's shapes with Sluice's lifecycle fields beside them (docs/aisix-compatibility.md "Endpoints").
import { type Context, Hono, type Next } from 'hono';
import type { Config } from '../config/schema.ts';
import { drainReportBody } from '../lifecycle/drain-report.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { bearerToken, timingSafeEqual } from '../http/auth.ts';
import { errorResponse, errors } from '../http/errors.ts';
import type { Lifecycle } from '../lifecycle/state.ts';
import type { Listener } from '../platform.ts';
import type { ApiKey, ProviderKey, ResourceKind } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ModelHealth } from '../routing/health.ts';
import { type ConfigFactsView as ConfigFacts, configStatusBody } from '../config-facts.ts';
import { modelsStatus } from '../status/app.ts';

/** What the admin listener reads; the Gateway is one. */
export interface AdminView {
  readonly config: { readonly admin: Pick<Config['admin'], 'admin_keys'> };
  readonly lifecycle: Lifecycle;
  readonly facts: ConfigFacts;
  readonly snapshot: Snapshot | undefined;
  readonly health: Pick<ModelHealth, 'statusRow' | 'consecutiveFailures'>;
  readonly proxyListener: Pick<Listener, 'openConnections'> | undefined;
  now(): Date;
}

const REDACTED = '[redacted]';

export function redactProviderKey(k: ProviderKey): Record<string, unknown> {
  return { ...k, ...(k.api_key !== undefined ? { api_key: REDACTED } : {}) };
}

export function redactApiKey(k: ApiKey): Record<string, unknown> {
  return { ...k, key_hash: REDACTED };
}

/**
 * One entry of an admin list, AISIX's shape: the id, the document as served (without the id and Sluice's
 * derived `kind`; secrets already redacted) and its revision: the etcd `mod_revision` of its row, 0 in file
 * mode (and for rows restored from the snapshot cache, until etcd is read again).
 */
function listEntry(
  row: { id: string },
  revision: number,
): { id: string; value: Record<string, unknown>; revision: number } {
  const { id, kind: _kind, ...value } = row as { id: string; kind?: unknown } & Record<string, unknown>;
  return { id, value, revision };
}

/** AISIX's model health level from consecutive upstream failures: 0 healthy, 1 degraded (4–7), 2 down (≥ 8). */
export function healthLevel(consecutiveFailures: number): 0 | 1 | 2 {
  return consecutiveFailures >= 8 ? 2 : consecutiveFailures >= 4 ? 1 : 0;
}

/** A snapshot older than this (or never applied) means the watch is not delivering: `degraded`. */
const SNAPSHOT_STALE_SECS = 300;

interface Freshness {
  snapshot_revision: number;
  snapshot_age_seconds: number | null;
}

/**
 * The etcd `config` block: the highest applied revision (0 before the first apply) and whole seconds since
 * the source last applied anything (`null` before the first apply). A fetch failure is not an apply.
 */
export function snapshotFreshness(facts: ConfigFacts, now: Date): Freshness {
  const times: number[] = [];
  if (facts.applied) times.push(Date.parse(facts.applied.applied_at));
  const lr = facts.lastReload;
  const fetchFailure = facts.lastFailure?.last_error_kind === 'fetch' && facts.lastFailure.at === lr?.at;
  if (lr && !fetchFailure && facts.applied) times.push(Date.parse(lr.at));
  const last = times.length ? Math.max(...times) : undefined;
  return {
    snapshot_revision: facts.applied?.applied_revision ?? 0,
    snapshot_age_seconds: last === undefined ? null : Math.max(0, Math.floor((now.getTime() - last) / 1000)),
  };
}

/** `unhealthy` if a model is down; `degraded` if one is degraded or the etcd snapshot is stale; else `ok`. */
export function aggregateStatus(models: { health: number }[], config: Freshness | undefined): string {
  if (models.some((m) => m.health >= 2)) return 'unhealthy';
  const stale = config !== undefined &&
    (config.snapshot_age_seconds === null || config.snapshot_age_seconds > SNAPSHOT_STALE_SECS);
  return models.some((m) => m.health === 1) || stale ? 'degraded' : 'ok';
}

/** The admin routes Sluice serves (read-only), and the writes AISIX's router also takes on each. */
const ADMIN_ROUTES: Record<string, readonly string[]> = {
  '/admin/v1/models': ['POST'],
  '/admin/v1/provider_keys': ['POST'],
  '/admin/v1/api_keys': ['POST'],
  '/admin/v1/models/status': [],
  '/admin/v1/health': [],
};
const ADMIN_ALLOW = 'GET, HEAD';

/** The admin key check: undefined when the request carries one of `keys`, else the 401 to answer. */
function adminKeyCheck(keys: readonly string[]): (c: Context) => Promise<Response | undefined> {
  return async function adminKeyRefusal(c: Context) {
    const token = bearerToken(c.req.raw.headers);
    if (token === undefined) return errorResponse(errors.missingAuth());
    // Every key is compared (no early exit), each in time independent of where it differs.
    const matches = await Promise.all(keys.map((k) => timingSafeEqual(k, token)));
    return matches.includes(true) ? undefined : errorResponse(errors.unknownKey());
  };
}

/**
 * AISIX's order, where its router answers before its per-handler auth: an unknown route is 404 and a method
 * no handler takes is 405 without a key; a write AISIX would accept needs the admin key first (401), then
 * gets Sluice's 405 (read-only); a read needs the key. Every 405 names what is allowed.
 */
function adminRouting(refusal: (c: Context) => Promise<Response | undefined>) {
  return async function adminRoute(c: Context, next: Next): Promise<Response | void> {
    const writes = ADMIN_ROUTES[c.req.path];
    if (writes === undefined) return errorResponse(errors.notFound(c.req.path));
    const method = c.req.method;
    const read = method === 'GET' || method === 'HEAD';
    if (read || writes.includes(method)) {
      const refused = await refusal(c);
      if (refused) return refused;
    }
    if (read) return await next();
    const res = errorResponse(errors.readOnlyAdmin());
    res.headers.set('allow', ADMIN_ALLOW);
    return res;
  };
}

export function createAdminApp(gw: AdminView): Hono {
  const app = new Hono();
  app.get('/livez', livez);
  app.get('/readyz', (c) => readyz(c, { checks: () => [['config', gw.snapshot ? undefined : 'not ready']] }));
  app.all('/livez', methodNotAllowed);
  app.all('/readyz', methodNotAllowed);

  app.use('/admin/*', adminRouting(adminKeyCheck(gw.config.admin.admin_keys)));
  const list = (kind: ResourceKind, rows: (s: Snapshot) => { id: string }[]) => (c: Context) => {
    const s = gw.snapshot;
    return c.json(s ? rows(s).map((r) => listEntry(r, s.revisions.get(`${kind}/${r.id}`) ?? 0)) : []);
  };
  app.get('/admin/v1/models', list('models', (s) => s.resources.models));
  app.get(
    '/admin/v1/provider_keys',
    list('provider_keys', (s) => s.resources.provider_keys.map(redactProviderKey) as { id: string }[]),
  );
  app.get('/admin/v1/api_keys', list('api_keys', (s) => s.resources.api_keys.map(redactApiKey) as { id: string }[]));
  app.get('/admin/v1/models/status', () => modelsStatus(gw));
  app.get('/admin/v1/health', (c) => {
    const models = (gw.snapshot?.resources.models ?? []).map((m) => ({
      id: m.id,
      name: m.display_name,
      health: healthLevel(gw.health.consecutiveFailures(m.id)),
    }));
    const config = gw.facts.sourceType === 'etcd' ? snapshotFreshness(gw.facts, gw.now()) : undefined;
    return c.json({
      status: aggregateStatus(models, config),
      models,
      ...(config ? { config } : {}),
      phase: gw.lifecycle.phase,
      ready: gw.snapshot !== undefined && !gw.lifecycle.draining,
      in_flight: gw.lifecycle.inFlight,
      open_connections: gw.proxyListener?.openConnections() ?? null,
      config_status: configStatusBody(gw.facts, gw.now()),
      drain: drainReportBody(gw),
    });
  });
  return app;
}
