// The admin write API (docs/admin.md): api keys issued, changed, rotated, revoked and deleted through etcd,
// behind the admin keys allowed to write (`admin.write_keys`). Each write is one audit line naming the action,
// the row, the revision and which write key made it — never a key or a hash. Served only in etcd mode with
// write keys configured; otherwise the admin API stays AISIX's read-only one (app.ts).
import { type Context, Hono } from 'hono';
import { bearerToken, timingSafeEqual } from '../http/auth.ts';
import { errorResponse, errors, ProxyError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { ConnInfo } from '../platform.ts';
import { KeyWrites } from './key-writes.ts';
import { updateModel } from './model-writes.ts';
import type { RowStore } from './etcd-rows.ts';
import type { AdminExtension } from './extension.ts';

/** The audit line's message (one per write that changed etcd). */
export const AUDIT_MSG = 'admin write';

export interface AdminWritesDeps {
  rows: RowStore;
  /** `admin.write_keys`: the keys that may write. */
  writeKeys: readonly string[];
  /** `admin.admin_keys`: keys that may only read (a write with one is 403, not 401). */
  readKeys: readonly string[];
  log: Pick<Logger, 'info'>;
  now(): number;
}

type Env = { Bindings: ConnInfo };

/** `<path pattern, methods>` of the write routes (with AISIX's reads of the same path), for each route's 405. */
const WRITE_ROUTES: readonly [RegExp, string][] = [
  [/^\/admin\/v1\/api_keys$/, 'GET,HEAD,POST'],
  [/^\/admin\/v1\/api_keys\/[^/]+$/, 'GET,HEAD,PATCH,DELETE'],
  [/^\/admin\/v1\/api_keys\/[^/]+\/(rotate|revoke)$/, 'POST'],
  [/^\/admin\/v1\/models\/[^/]+$/, 'GET,HEAD,PATCH'],
];

/** The methods a write route takes, or undefined when `path` is no write route. */
function writeMethods(path: string): string | undefined {
  return WRITE_ROUTES.find(([re]) => re.test(path))?.[1];
}

/** Which write key `token` is (`write_keys[i]`), 'read' for a read-only admin key, undefined for neither. */
async function scopeOf(deps: AdminWritesDeps, token: string): Promise<string | undefined> {
  // Every key is compared (no early exit), each in time independent of where it differs.
  const w = await Promise.all(deps.writeKeys.map((k) => timingSafeEqual(k, token)));
  const r = await Promise.all(deps.readKeys.map((k) => timingSafeEqual(k, token)));
  const i = w.indexOf(true);
  if (i >= 0) return `write_keys[${i}]`;
  return r.includes(true) ? 'read' : undefined;
}

export function createAdminWrites(deps: AdminWritesDeps): AdminExtension {
  const keys = new KeyWrites(deps.rows, deps.now);
  const app = new Hono<Env & { Variables: { actor: string } }>();

  app.use('*', async function writeKeyCheck(c, next) {
    const allow = writeMethods(c.req.path)!;
    if (!allow.split(',').includes(c.req.method)) {
      const res = errorResponse(errors.methodNotAllowed(c.req.method, c.req.path));
      res.headers.set('allow', allow);
      return res;
    }
    const token = bearerToken(c.req.raw.headers);
    if (token === undefined) return errorResponse(errors.missingAuth());
    const scope = await scopeOf(deps, token);
    if (scope === undefined) return errorResponse(errors.unknownKey());
    if (scope === 'read') {
      return errorResponse(
        new ProxyError(403, 'permission_denied', 'this admin key may only read: writes need one of admin.write_keys'),
      );
    }
    c.set('actor', scope);
    await next();
  });

  // etcd unreachable or refusing: nothing was written, or (a lost answer) the caller cannot know; say which.
  app.onError((e) =>
    errorResponse(
      new ProxyError(
        503,
        'service_unavailable',
        `etcd did not complete the write (${
          (e as { kind?: string }).kind ?? 'error'
        }): check etcd, then read the row before retrying`,
      ),
    )
  );

  const audit = (c: Context, action: string, id: string, revision: number, changed?: string[], kind = 'api_keys') =>
    deps.log.info(AUDIT_MSG, {
      action,
      kind,
      id,
      revision,
      admin_key: c.get('actor') as string,
      ...(changed ? { changed: changed.join(',') } : {}),
    });

  app.post('/admin/v1/api_keys', async (c) => {
    const body = await jsonBody(c);
    if (body instanceof ProxyError) return errorResponse(body);
    const w = await keys.issue(body);
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'issue', w.id, w.revision, Object.keys(body as object).filter((k) => k !== 'id'));
    return c.json({ id: w.id, key: w.key, value: redacted(w.value), revision: w.revision }, 201);
  });
  app.patch('/admin/v1/api_keys/:id', async (c) => {
    const body = await jsonBody(c);
    if (body instanceof ProxyError) return errorResponse(body);
    const w = await keys.update(c.req.param('id'), body);
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'update', w.id, w.revision, Object.keys(body as object));
    return c.json({ id: w.id, value: redacted(w.value), revision: w.revision });
  });
  app.delete('/admin/v1/api_keys/:id', async (c) => {
    const w = await keys.remove(c.req.param('id'));
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'delete', w.id, w.revision);
    return c.json(w);
  });
  app.post('/admin/v1/api_keys/:id/rotate', async (c) => {
    const body = await jsonBody(c, true);
    if (body instanceof ProxyError) return errorResponse(body);
    const w = await keys.rotate(c.req.param('id'), body);
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'rotate', w.id, w.revision);
    return c.json({ id: w.id, key: w.key, value: redacted(w.value), revision: w.revision });
  });
  app.post('/admin/v1/api_keys/:id/revoke', async (c) => {
    const w = await keys.revoke(c.req.param('id'));
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'revoke', w.id, w.revision);
    return c.json({ id: w.id, value: redacted(w.value), revision: w.revision });
  });

  app.patch('/admin/v1/models/:id', async (c) => {
    const body = await jsonBody(c);
    if (body instanceof ProxyError) return errorResponse(body);
    const w = await updateModel(deps.rows, c.req.param('id'), body);
    if (w instanceof ProxyError) return errorResponse(w);
    audit(c, 'update', w.id, w.revision, Object.keys(body as object), 'models');
    return c.json({ id: w.id, value: w.value, revision: w.revision });
  });

  return {
    handles: (method, path) => {
      if (writeMethods(path) === undefined) return false;
      // A read of a row or the list stays AISIX's; rotate and revoke answer every method (405 but POST).
      return /\/(rotate|revoke)$/.test(path) || (method !== 'GET' && method !== 'HEAD');
    },
    fetch: (req, conn) => app.fetch(req, conn),
  };
}

/** The request's JSON object; an empty body is `{}` where `emptyOk`. */
async function jsonBody(c: Context, emptyOk = false): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '' && emptyOk) return {};
  try {
    return JSON.parse(text);
  } catch {
    return new ProxyError(400, 'invalid_request_error', 'the body must be JSON (content-type: application/json)');
  }
}

/** A row as the API answers it: AISIX's admin redaction of the hashes. */
function redacted(doc: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...doc, key_hash: '[redacted]' };
  if (Array.isArray(doc.previous_key_hashes)) {
    out.previous_key_hashes = (doc.previous_key_hashes as { expires_at?: unknown }[]).map((p) => ({
      key_hash: '[redacted]',
      expires_at: p.expires_at,
    }));
  }
  return out;
}
