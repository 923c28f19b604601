// Admission of a model call, in this order: authentication (before the body is read), then — once the body
// named a model — the key's permission for it, its existence, its `allowed_cidrs`, and the caller's rate
// limits. Each step answers either the next step's input or the caller's error; nothing is dispatched
// before all of them passed.
import type { Gateway } from '../gateway.ts';
import { errors, ProxyError } from '../http/errors.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Permit } from '../routing/rate-limit.ts';
import { ipAllowed } from '../util/cidr.ts';
import { authenticate, modelAllowed } from './auth.ts';
import type { RequestRecord } from './record.ts';

/** An authenticated caller and the snapshot its request is served from. */
export interface Caller {
  key: ApiKey;
  snapshot: Snapshot;
}

/** Authentication (before the body is read), against the snapshot this request is served from. */
export async function authenticateCaller(
  gw: Gateway,
  headers: Headers,
  rec: RequestRecord,
): Promise<Caller | ProxyError> {
  const snapshot = gw.snapshot;
  if (!snapshot) return errors.internal();
  const key = await authenticate(headers, snapshot, gw.now().getTime());
  if (key instanceof ProxyError) return key;
  rec.key = key;
  rec.apiKeyId = key.id;
  return { key, snapshot };
}

type ResolvedModel = NonNullable<ReturnType<Snapshot['resolveModel']>>;

/** What an admitted call carries into dispatch. */
export interface Admitted {
  resolved: ResolvedModel;
  permit: Permit;
  /** The caller-facing `x-ratelimit-*` headers of the limits that apply. */
  limitHeaders: Record<string, string> | undefined;
}

/** Model permission → existence → `allowed_cidrs` → rate limits. */
export async function admitModelCall(
  gw: Gateway,
  who: Caller,
  name: string,
  clientIp: string | undefined,
  rec: RequestRecord,
): Promise<Admitted | ProxyError> {
  // Permission first: a key must not learn which model names exist beyond the ones it may use.
  if (!modelAllowed(who.key, name)) return errors.modelNotAllowed(name);
  const resolved = who.snapshot.resolveModel(name);
  if (!resolved) return errors.unknownModel(name);
  rec.model = resolved.model.display_name;
  rec.routing = resolved.model.kind === 'routing';
  // allowed_cidrs (AISIX #557): the requested model's own list, and for a routing model at least one
  // target the caller may reach; before any upstream is contacted.
  if (!reachable(who.snapshot, resolved.model, clientIp)) {
    gw.log.withTarget('aisix_proxy::dispatch').warn('request rejected: client IP not in model allowed_cidrs', {
      model: resolved.model.display_name,
      source_ip: clientIp,
      request_id: rec.requestId,
    });
    return errors.ipRestricted();
  }
  const admitted = await gw.rateLimiter.acquire([
    { scope: 'api_key', id: who.key.id, limits: who.key.rate_limit },
    { scope: 'model', id: resolved.model.id, name: resolved.model.display_name, limits: resolved.model.rate_limit },
  ]);
  if (!admitted.allowed) {
    const what = `${admitted.scope === 'api_key' ? 'API key' : 'model'} ${admitted.dimension}`;
    const e = errors.rateLimited(admitted.retryAfterSecs, what);
    return new ProxyError(e.status, e.type, e.message, e.code, { ...e.headers, ...admitted.headers });
  }
  return { resolved, permit: admitted.permit, limitHeaders: admitted.headers };
}

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
