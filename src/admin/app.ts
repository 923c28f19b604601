// The admin listener: its own probes and read-only resources behind an admin key, secrets redacted, in
// AISIX's shapes with Sluice's lifecycle fields beside them (docs/aisix-compatibility.md "Endpoints").
import { type Context, Hono, type Next } from 'hono';
import type { Config } from '../config/schema.ts';
import { drainReportBody } from '../lifecycle/drain-report.ts';
import { livez, methodNotAllowed, readyz } from '../lifecycle/probes.ts';
import { bearerToken, timingSafeEqual } from '../http/auth.ts';
import { errorResponse, errors, ProxyError } from '../http/errors.ts';
import type { Lifecycle } from '../lifecycle/state.ts';
import type { ConnInfo, Listener } from '../platform.ts';
import type { ResourceKind } from '../resources/kinds.ts';
import type { ApiKey, ProviderKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ModelHealth } from '../routing/health.ts';
import { type ConfigFactsView as ConfigFacts, configStatusBody } from '../config-facts.ts';
import { modelsStatus, type StatusView } from '../status/app.ts';
import type { AdminExtension } from './extension.ts';
import { createAdminPage, PAGE_PATH } from './page.ts';

/** What the admin listener reads; the Gateway is one. */
export interface AdminView {
  readonly config: {
    readonly admin: Pick<Config['admin'], 'admin_keys'> & Partial<Pick<Config['admin'], 'write_keys' | 'tls'>>;
  };
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
  const previous = k.previous_key_hashes?.map((p) => ({ ...p, key_hash: REDACTED }));
  return { ...k, key_hash: REDACTED, ...(previous ? { previous_key_hashes: previous } : {}) };
}

/**
 * One entry of an admin list or get, AISIX's shape: the id, the document as served (secrets already
 * redacted) and its revision: the etcd `mod_revision` of its row, 0 in file mode (and for rows restored from
 * the snapshot cache, until etcd is read again).
 */
function listEntry(
  row: { id: string; value: Record<string, unknown> },
  revision: number,
): { id: string; value: Record<string, unknown>; revision: number } {
  return { id: row.id, value: row.value, revision };
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

/** Where the playground forwards: the proxy app, run in-process with the admin connection's facts. */
export interface PlaygroundTarget {
  fetch(req: Request, conn: ConnInfo): Response | Promise<Response>;
}

type AdminEnv = { Bindings: ConnInfo };

/** One resource kind the admin API reads: its rows in a snapshot, each as served (secrets redacted). */
interface AdminKind {
  /** The etcd kind (`<kind>/<id>` in `Snapshot.revisions`). */
  kind: ResourceKind;
  rows(s: Snapshot): readonly { id: string; value: Record<string, unknown> }[];
}

/** A row as its document: everything but the id (and Sluice's derived `kind` of a model). */
function documentOf<T extends { id: string }>(row: T, drop?: 'kind'): { id: string; value: Record<string, unknown> } {
  const { id, ...value } = row as T & Record<string, unknown>;
  if (drop) delete value[drop];
  return { id, value };
}

/** Guardrail members that hold a credential, at any depth (`aws_credentials.secret_access_key`). */
const GUARDRAIL_SECRETS = new Set(['api_key', 'access_key_secret', 'secret_access_key']);

function redactDeep(v: unknown, secrets: ReadonlySet<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => redactDeep(x, secrets));
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [k, secrets.has(k) && x !== undefined ? REDACTED : redactDeep(x, secrets)]),
  );
}

/** A row whose one credential is its `secret` (an MCP server's, an A2A agent's), as served. */
function withSecretRedacted<T extends { id: string; secret?: string }>(
  row: T,
): { id: string; value: Record<string, unknown> } {
  return documentOf(row.secret !== undefined ? { ...row, secret: REDACTED } : row);
}

/**
 * The kinds AISIX's read-only admin router serves, by its path segment (`apikeys` is AISIX's former spelling of
 * `api_keys`). The kinds it has no route for (`oidc_providers`, `claim_mappings`, `mcp_policies`, …) are not
 * routes here either (docs/aisix-compatibility.md "Endpoints").
 */
const API_KEYS: AdminKind = {
  kind: 'api_keys',
  rows: (s) => s.resources.api_keys.map((k) => documentOf(redactApiKey(k) as { id: string })),
};
const ADMIN_KINDS: Readonly<Record<string, AdminKind>> = {
  models: { kind: 'models', rows: (s) => s.resources.models.map((m) => documentOf(m, 'kind')) },
  api_keys: API_KEYS,
  apikeys: API_KEYS,
  provider_keys: {
    kind: 'provider_keys',
    rows: (s) => s.resources.provider_keys.map((k) => documentOf(redactProviderKey(k) as { id: string })),
  },
  guardrails: {
    kind: 'guardrails',
    rows: (s) =>
      (s.resources.guardrails ?? []).map((g) => {
        const { id: _id, ...row } = (g.row ?? { name: g.name }) as Record<string, unknown>;
        return { id: g.id, value: redactDeep(row, GUARDRAIL_SECRETS) as Record<string, unknown> };
      }),
  },
  cache_policies: { kind: 'cache_policies', rows: (s) => (s.resources.cache_policies ?? []).map((p) => documentOf(p)) },
  observability_exporters: {
    kind: 'observability_exporters',
    rows: (s) =>
      (s.resources.observability_exporters ?? []).map((e) =>
        'headers' in e
          ? documentOf({ ...e, headers: Object.fromEntries(Object.keys(e.headers).map((h) => [h, REDACTED])) })
          : documentOf(e) // a datadog row holds no secret: only the name of the environment variable that does
      ),
  },
  passthrough_routes: { kind: 'passthrough_routes', rows: (s) => s.of('passthrough_routes').map((r) => documentOf(r)) },
  mcp_servers: { kind: 'mcp_servers', rows: (s) => s.of('mcp_servers').map(withSecretRedacted) },
  a2a_agents: { kind: 'a2a_agents', rows: (s) => s.of('a2a_agents').map(withSecretRedacted) },
};

/** The paths AISIX's admin router serves besides the kinds' `/admin/v1/<kind>[/<id>]`; all are reads. */
const FIXED_ROUTES = new Set(['/admin/v1/models/status', '/admin/v1/health']);
/** AISIX's router (axum) answers a method no route takes with 405 and this `Allow`. */
const ADMIN_ALLOW = 'GET,HEAD';

/** Whether AISIX's admin router has `path`: a fixed read, or a kind's list or one of its rows. */
export function isAdminRoute(path: string): boolean {
  if (FIXED_ROUTES.has(path)) return true;
  const m = /^\/admin\/v1\/([^/]+)(?:\/([^/]+))?$/.exec(path);
  return m !== null && Object.hasOwn(ADMIN_KINDS, m[1]!);
}

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
 * AISIX's order, where its router answers before its per-handler auth: an unknown route is 404 (the
 * api-key rotation path among them: AISIX removed it) and any method but GET/HEAD is 405 (AISIX's admin API
 * is read-only: the writes were removed), both without a key; a read needs the admin key.
 */
function adminRouting(refusal: (c: Context) => Promise<Response | undefined>, extensions: readonly AdminExtension[]) {
  return async function adminRoute(c: Context<AdminEnv>, next: Next): Promise<Response | void> {
    const ext = extensions.find((e) => e.handles(c.req.method, c.req.path));
    if (ext) return await ext.fetch(c.req.raw, c.env ?? {});
    if (!isAdminRoute(c.req.path)) return errorResponse(errors.notFound(c.req.path));
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      const res = errorResponse(errors.readOnlyAdmin());
      res.headers.set('allow', ADMIN_ALLOW);
      return res;
    }
    return (await refusal(c)) ?? await next();
  };
}

/**
 * `POST /playground/chat/completions`, AISIX's: the request as sent, re-addressed to the proxy's
 * `/v1/chat/completions` and run through the proxy app in-process, so the whole pipeline applies (the
 * caller's proxy API key, limits, guardrails, cache). No admin key: AISIX's playground takes a proxy key.
 */
function playground(target: PlaygroundTarget | undefined) {
  return function forwardToProxy(c: Context<AdminEnv>): Response | Promise<Response> {
    if (!target) return errorResponse(new ProxyError(501, 'not_found', 'the playground is not wired to a proxy app'));
    const url = new URL(c.req.url);
    url.pathname = '/v1/chat/completions';
    url.search = '';
    const raw = c.req.raw;
    // `duplex` is required by fetch's Request for a stream body; the DOM types do not list it.
    const init: RequestInit & { duplex: 'half' } = {
      method: 'POST',
      headers: raw.headers,
      body: raw.body,
      duplex: 'half',
    };
    return target.fetch(new Request(url, init), c.env ?? {});
  };
}

/**
 * `extensions`: the write API (writes.ts; etcd mode with `admin.write_keys`, else the API is read-only) and
 * the spend report (spend-route.ts). `status`: what the status page shows, served on the admin page too.
 */
export function createAdminApp(
  gw: AdminView,
  proxy?: PlaygroundTarget,
  extensions: readonly (AdminExtension | undefined)[] = [],
  status?: StatusView,
): Hono<AdminEnv> {
  const app = new Hono<AdminEnv>();
  app.get('/livez', livez);
  app.get('/readyz', (c) => readyz(c, { checks: () => [['config', gw.snapshot ? undefined : 'not ready']] }));
  app.all('/livez', methodNotAllowed);
  app.all('/readyz', methodNotAllowed);
  app.post('/playground/chat/completions', playground(proxy));
  app.all('/playground/chat/completions', (c) => {
    const res = errorResponse(errors.methodNotAllowed(c.req.method, c.req.path));
    res.headers.set('allow', 'POST');
    return res;
  });

  const readKeys = [...gw.config.admin.admin_keys, ...(gw.config.admin.write_keys ?? [])];
  const mounted = extensions.filter((e): e is AdminExtension => e !== undefined);
  // The HTML page reads and writes through this app's own API, with the signed-in admin key.
  app.route(
    PAGE_PATH,
    createAdminPage({
      readKeys: gw.config.admin.admin_keys,
      writeKeys: gw.config.admin.write_keys ?? [],
      writesEnabled: gw.facts?.sourceType === 'etcd' && (gw.config.admin.write_keys ?? []).length > 0,
      secure: gw.config.admin.tls !== undefined,
      api: async (req) => await app.fetch(req, {}),
      now: () => gw.now?.().getTime() ?? Date.now(),
      ...(status ? { status } : {}),
    }),
  );
  app.use('/admin/*', adminRouting(adminKeyCheck(readKeys), mounted));
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
  const entries = (segment: string) => {
    const k = ADMIN_KINDS[segment]!;
    const s = gw.snapshot;
    return (s ? k.rows(s) : []).map((r) => listEntry(r, s?.revisions.get(`${k.kind}/${r.id}`) ?? 0));
  };
  app.get('/admin/v1/:kind', (c) => c.json(entries(c.req.param('kind'))));
  app.get('/admin/v1/:kind/:id', (c) => {
    const id = c.req.param('id');
    const found = entries(c.req.param('kind')).find((e) => e.id === id);
    return found
      ? c.json(found)
      : errorResponse(new ProxyError(404, 'not_found', `no ${c.req.param('kind')} row "${id}"`));
  });
  return app;
}
