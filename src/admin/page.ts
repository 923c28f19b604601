// `/admin/page`: the admin page on the admin listener (docs/admin.md "The admin page"). A person signs in with
// an admin key; the page then reads and writes through the admin API itself, in-process, with that key, so
// scopes, validation, redaction and the audit line are the API's own. Writes are forms POSTed with the
// session's CSRF token, from this origin only.
import { type Context, Hono } from 'hono';
import { timingSafeEqual } from '../http/auth.ts';
import {
  type Dashboard,
  dashboardBody,
  errorBody,
  issuedBody,
  type KeyEntry,
  layout,
  type ModelEntry,
  signInBody,
  type SpendView,
} from './page-html.ts';
import {
  csrfMatches,
  type PageSession,
  PageSessions,
  randomToken,
  SESSION_TTL_SECS,
  sessionCookie,
  sessionIdOf,
} from './page-session.ts';
import { createStatusApp, type StatusView } from '../status/app.ts';
import { type Html, html, statusPageHtml, type StatusPagePlace } from '../status/page.ts';

export const PAGE_PATH = '/admin/page';

export interface AdminPageDeps {
  readKeys: readonly string[];
  writeKeys: readonly string[];
  /** Whether the write API is mounted (etcd source and write keys). */
  writesEnabled: boolean;
  /** The admin listener is TLS: the cookie is `Secure`. */
  secure: boolean;
  /** The admin app itself: the page's every read and write is one of its API requests. */
  api(req: Request): Promise<Response>;
  now(): number;
  /** What the status listener shows (the gateway): its live page and JSON reads, behind the session. */
  status?: StatusView;
}

/** The status listener's JSON reads the status view links to, served here behind the session. */
const STATUS_READS = new Set(['config', 'models', 'drain', 'ready']);

const STATUS_PLACE: StatusPagePlace = {
  json: `${PAGE_PATH}/status`,
  nav: html`<nav class="muted"><a href="${PAGE_PATH}">Admin page</a> · <strong>Status</strong></nav>`,
};

type Env = { Variables: { session: PageSession; nonce: string } };

function headers(nonce: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-${nonce}'; ` +
      "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    'x-content-type-options': 'nosniff',
    // `no-referrer` would make the browser send `Origin: null` on the page's own form posts.
    'referrer-policy': 'same-origin',
  };
}

/**
 * A cross-site POST is refused: when the browser names the origin it must be this listener's own. (A browser
 * that sends no Origin still needs the session's CSRF token, and SameSite=Strict keeps the cookie off.)
 */
function sameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === (c.req.header('host') ?? new URL(c.req.url).host);
  } catch {
    return false;
  }
}

export function createAdminPage(deps: AdminPageDeps): Hono<Env> {
  const sessions = new PageSessions(deps.now);
  const app = new Hono<Env>();
  const page = (c: Context<Env>, title: string, body: Html, status = 200, s?: PageSession) =>
    c.body(layout(title, body, c.get('nonce'), s?.csrf, s?.scope), status as 200, headers(c.get('nonce')));

  const call = async (s: PageSession, method: string, path: string, body?: unknown) => {
    const res = await deps.api(
      new Request(`http://admin${path}`, {
        method,
        headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      }),
    );
    const json = await res.json().catch(() => undefined) as Record<string, unknown> | undefined;
    return { status: res.status, json };
  };
  const message = (json: Record<string, unknown> | undefined) =>
    String((json?.error as { message?: string } | undefined)?.message ?? 'the admin API refused the write');

  app.use('*', async function pageSession(c, next) {
    c.set('nonce', randomToken());
    const s = sessions.get(sessionIdOf(c.req.header('cookie') ?? null));
    if (s) c.set('session', s);
    if (c.req.method === 'POST') {
      if (!sameOrigin(c)) return page(c, 'refused', errorBody(403, 'cross-origin form posts are refused'), 403);
      if (c.req.path !== `${PAGE_PATH}/sign-in`) {
        if (!s) return page(c, 'sign in', signInBody('Your session ended: sign in again.'), 401);
        const form = await c.req.parseBody();
        if (!await csrfMatches(s, form.csrf)) {
          return page(
            c,
            'refused',
            errorBody(403, 'the form is stale or not from this page: reload and retry'),
            403,
            s,
          );
        }
      }
    }
    await next();
  });

  app.get('/', async (c) => {
    const s = c.get('session');
    if (!s) return page(c, 'sign in', signInBody());
    const [keys, models, modelRows, byKey, byTeam] = await Promise.all([
      call(s, 'GET', '/admin/v1/api_keys'),
      call(s, 'GET', '/admin/v1/models/status'),
      call(s, 'GET', '/admin/v1/models'),
      spend(s, 'key'),
      spend(s, 'team'),
    ]);
    const notice = c.req.query('revoked') ? `Revoked ${c.req.query('revoked')}.` : undefined;
    const d: Dashboard = {
      scope: s.scope,
      csrf: s.csrf,
      writesEnabled: deps.writesEnabled,
      keys: (keys.json as unknown as KeyEntry[] | undefined) ?? [],
      models: (models.json as unknown as ModelEntry[] | undefined) ?? [],
      modelBudgets: new Map(
        ((modelRows.json as unknown as KeyEntry[] | undefined) ?? []).map((m) => [m.id, m.value.budgets]),
      ),
      spendByKey: byKey,
      spendByTeam: byTeam,
      ...(notice ? { notice } : {}),
    };
    return page(c, 'keys', dashboardBody(d), 200, s);
  });

  async function spend(s: PageSession, by: 'key' | 'team'): Promise<SpendView> {
    const r = await call(s, 'GET', `/admin/v1/spend?by=${by}&since=30d`);
    if (r.status === 200 && Array.isArray(r.json?.rows)) return { rows: r.json.rows as [] };
    return { unavailable: r.status === 501 ? 'No spend report: it reads budgets.backend: redis.' : message(r.json) };
  }

  // The status page's live view (it refreshes itself), for whoever may read the admin API: the status listener
  // is often reachable only inside the cluster, the admin listener from an operator's browser.
  const statusApp = deps.status ? createStatusApp(deps.status) : undefined;
  app.get('/status', (c) => {
    const s = c.get('session');
    if (!s) return page(c, 'sign in', signInBody('Sign in to see the status page.'), 401);
    if (!deps.status) return page(c, 'no status', errorBody(404, 'this gateway has no status view'), 404, s);
    return c.body(statusPageHtml(deps.status, undefined, STATUS_PLACE), 200, headers(c.get('nonce')));
  });
  app.get('/status/:read', async (c) => {
    const read = c.req.param('read');
    if (!c.get('session')) {
      return c.json({ error: { message: `sign in at ${PAGE_PATH} first`, type: 'authentication_error' } }, 401);
    }
    if (!statusApp || !STATUS_READS.has(read)) {
      return c.json({ error: { message: `no status read "${read}"`, type: 'not_found' } }, 404);
    }
    const res = await statusApp.request(`/status/${read}`);
    const out = new Response(res.body, res);
    out.headers.set('cache-control', 'no-store');
    return out;
  });

  app.post('/sign-in', async (c) => {
    const form = await c.req.parseBody();
    const key = typeof form.key === 'string' ? form.key : '';
    // Every key is compared (no early exit), each in time independent of where it differs.
    const w = await Promise.all(deps.writeKeys.map((k) => timingSafeEqual(k, key)));
    const r = await Promise.all(deps.readKeys.map((k) => timingSafeEqual(k, key)));
    const scope = key === '' ? undefined : w.includes(true) ? 'write' : r.includes(true) ? 'read' : undefined;
    if (!scope) return page(c, 'sign in', signInBody("That is not one of this gateway's admin keys."), 401);
    const old = c.get('session');
    if (old) sessions.close(old.id);
    const s = sessions.open(key, scope);
    return c.body(null, 303, {
      location: PAGE_PATH,
      'set-cookie': sessionCookie(s.id, SESSION_TTL_SECS, deps.secure),
      'cache-control': 'no-store',
    });
  });

  app.post('/sign-out', (c) => {
    sessions.close(c.get('session').id);
    return c.body(null, 303, { location: PAGE_PATH, 'set-cookie': sessionCookie('', 0, deps.secure) });
  });

  app.post('/keys', async (c) => {
    const s = c.get('session');
    const form = await c.req.parseBody();
    const body: Record<string, unknown> = {};
    for (const k of ['id', 'display_name', 'team_id', 'expires_at']) {
      const v = form[k];
      if (typeof v === 'string' && v.trim() !== '') body[k] = v.trim();
    }
    if (typeof form.allowed_models === 'string') {
      body.allowed_models = form.allowed_models.split(',').map((m) => m.trim()).filter(Boolean);
    }
    const r = await call(s, 'POST', '/admin/v1/api_keys', body);
    if (r.status !== 201) return page(c, 'not issued', errorBody(r.status, message(r.json)), r.status, s);
    return page(c, 'issued', issuedBody('issued', String(r.json!.id), String(r.json!.key)), 201, s);
  });

  app.post('/keys/:id/rotate', async (c) => {
    const s = c.get('session');
    const form = await c.req.parseBody();
    const raw = typeof form.grace_seconds === 'string' && form.grace_seconds !== '' ? form.grace_seconds : '3600';
    const grace = Number(raw);
    const id = c.req.param('id');
    const r = await call(s, 'POST', `/admin/v1/api_keys/${encodeURIComponent(id)}/rotate`, { grace_seconds: grace });
    if (r.status !== 200) return page(c, 'not rotated', errorBody(r.status, message(r.json)), r.status, s);
    const until = grace > 0 ? new Date(deps.now() + grace * 1000).toISOString() : undefined;
    return page(c, 'rotated', issuedBody('rotated', id, String(r.json!.key), until), 200, s);
  });

  app.post('/keys/:id/revoke', async (c) => {
    const s = c.get('session');
    const id = c.req.param('id');
    const r = await call(s, 'POST', `/admin/v1/api_keys/${encodeURIComponent(id)}/revoke`);
    if (r.status !== 200) return page(c, 'not revoked', errorBody(r.status, message(r.json)), r.status, s);
    return c.body(null, 303, { location: `${PAGE_PATH}?revoked=${encodeURIComponent(id)}` });
  });

  return app;
}
