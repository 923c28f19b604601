// The pipeline's admission steps (pipeline.ts; docs/routing.md "Caller rate limits"): identify the caller
// (before the body is read), admit the call once the body named a model — the key's permission for it, its
// existence, its `allowed_cidrs` — and reserve the caller's rate limits. Each refuses with the caller's error;
// nothing is dispatched before all of them passed.
import { errors, ProxyError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { limiterMessage } from '../policies/target-gate.ts';
import {
  NO_OP_PERMIT,
  type RateLimitDecision,
  type RateLimiter,
  type RateLimitSubject,
} from '../routing/rate-limit.ts';
import { isSemantic, type SemanticRouter } from '../routing/semantic.ts';
import { anyTagged, noTagMatch, requestTags, tagEligible } from '../routing/strategy-tag.ts';
import { ipAllowed } from '../util/cidr.ts';
import type { Clock } from '../util/clock.ts';
import { bearerToken } from '../http/auth.ts';
import { isJwtCaller, JwtAuthenticator } from '../identity/authenticate.ts';
import { type AuthDecisions, authDecisionsFor } from '../identity/decisions.ts';
import { logKeyRefusal } from '../identity/key-refusals.ts';
import type { Registry } from '../observability/metrics.ts';
import type { UpstreamFetch } from '../platform.ts';
import { authenticate, authenticateKey, judgedKey, modelAllowed } from './auth.ts';
import { slotKey } from './call-state.ts';
import type { RequestStep, Step, StepResult } from './pipeline.ts';
import type { RequestRecord } from './record.ts';
import { admitSemantic } from './semantic-route.ts';
import type { Caller, ProxyRequest } from './request.ts';

/**
 * What identifying a caller reads: the snapshot being served (read per request). A key's expiry is judged at the
 * request's arrival (its record's start).
 */
export interface IdentifyDeps {
  readonly snapshot: Snapshot | undefined;
}

/** What identifying a JWT caller adds (docs/identity.md); absent, every bearer is an api key. */
export interface IdentityAuth {
  readonly jwt: JwtAuthenticator;
  readonly decisions: AuthDecisions;
  /** The client's address for a refused JWT's log line (`proxy.real_ip`). */
  readonly clientIp?: (peer: string | undefined, headers: Headers) => string | undefined;
  /** Where a refused api key's line goes (target `aisix::auth`). */
  readonly log?: Logger;
}

/** The JWT authenticator (its key cache lives as long as the proxy app) and the auth-decision family. */
export function identityAuth(d: {
  upstream: UpstreamFetch;
  clock: Clock;
  log: Logger;
  metrics: { registry: Registry };
}, clientIp?: IdentityAuth['clientIp']): IdentityAuth {
  const decisions = authDecisionsFor(d.metrics.registry);
  const jwt = new JwtAuthenticator({ upstream: d.upstream, clock: d.clock, log: d.log, decisions });
  const log = d.log.withTarget('aisix::auth');
  return clientIp ? { jwt, decisions, clientIp, log } : { jwt, decisions, log };
}

/**
 * Authentication (before the body is read), against the snapshot this request is served from. Synchronous
 * for a caller whose token was seen before (auth.ts). A JWT goes to src/identity only where the snapshot
 * has an enabled OIDC provider; a plain key pays one length check for it.
 */
export function authenticateCaller(
  d: IdentifyDeps,
  headers: Headers,
  rec: RequestRecord,
  auth?: IdentityAuth,
  peer?: string,
): Caller | ProxyError | Promise<Caller | ProxyError> {
  const snapshot = d.snapshot;
  if (!snapshot) return errors.internal();
  const identified = (key: ApiKey | ProxyError): Caller | ProxyError => {
    if (key instanceof ProxyError) return key;
    rec.identified(key);
    return { key, snapshot };
  };
  if (auth === undefined) {
    const key = authenticate(headers, snapshot, rec.start);
    return key instanceof Promise ? key.then(identified) : identified(key);
  }
  const token = bearerToken(headers);
  if (token === undefined) {
    auth.decisions.denied('none', 'missing_credentials');
    if (auth.log) logKeyRefusal(auth.log, 'missing_credentials', requestContext(rec, auth, peer, headers));
    return errors.missingAuth();
  }
  if (isJwtCaller(snapshot, token)) {
    return auth.jwt.authenticate(token, snapshot, requestContext(rec, auth, peer, headers)).then((who) => {
      if (who instanceof ProxyError) return who;
      rec.identified(who.key, who.jwt);
      return { key: who.key, snapshot, jwt: who.jwt };
    });
  }
  const key = authenticateKey(token, snapshot, rec.start, auth.decisions);
  if (key instanceof Promise) {
    return key.then((k) => {
      if (k instanceof ProxyError) logRefusedKey(k, token, snapshot, rec, auth, peer, headers);
      return identified(k);
    });
  }
  // The refusal's line is built only on the refused path: an accepted key pays nothing for it.
  if (key instanceof ProxyError) logRefusedKey(key, token, snapshot, rec, auth, peer, headers);
  return identified(key);
}

/** What a refusal's log line says about the request. */
function requestContext(rec: RequestRecord, auth: IdentityAuth, peer: string | undefined, headers: Headers) {
  return {
    method: rec.method,
    path: rec.path,
    requestId: rec.requestId,
    sourceIp: () => auth.clientIp?.(peer, headers),
  };
}

function logRefusedKey(
  e: ProxyError,
  token: string,
  snapshot: Snapshot,
  rec: RequestRecord,
  auth: IdentityAuth,
  peer: string | undefined,
  headers: Headers,
): void {
  if (!auth.log) return;
  const reason = e.code === 'api_key_disabled'
    ? 'key_disabled'
    : e.code === 'api_key_expired'
    ? 'key_expired'
    : 'unknown_key';
  const keyId = reason === 'unknown_key' ? undefined : judgedKey(token, snapshot)?.id;
  logKeyRefusal(auth.log, reason, requestContext(rec, auth, peer, headers), keyId);
}

export function identifyStep(d: IdentifyDeps, auth?: IdentityAuth): RequestStep {
  return {
    name: 'identify',
    run(call) {
      const who = authenticateCaller(d, call.headers, call.rec, auth, call.c.env?.peer);
      return who instanceof Promise ? who.then((w) => identified(call, w)) : identified(call, who);
    },
  };
}

function identified(call: ProxyRequest, who: Caller | ProxyError): StepResult {
  if (who instanceof ProxyError) return who;
  call.caller = who;
  return undefined;
}

/** Model permission → existence → `allowed_cidrs` (a semantic router's: its own, then its pick's). */
export function admitStep(
  log: Logger,
  clientIpOf: (peer: string | undefined, headers: Headers) => string | undefined,
  semantic?: SemanticRouter,
): Step {
  const dispatchLog = log.withTarget('aisix_proxy::dispatch');
  return {
    name: 'admit',
    run(call) {
      const { key, snapshot } = call.caller;
      const name = call.body.model as string;
      // Permission first: a key must not learn which model names exist beyond the ones it may use. count_tokens
      // answers AISIX's 404 for both, which Anthropic clients take as "count locally" rather than a failure.
      if (!modelAllowed(key, name)) {
        return call.route.call === 'count_tokens' ? errors.unknownModel(name) : errors.modelNotAllowed(name);
      }
      const resolved = snapshot.resolveModel(name);
      if (!resolved) return errors.unknownModel(name);
      call.rec.resolved(resolved.model, name);
      if (semantic && isSemantic(resolved.model)) {
        const ip = clientIpOf(call.c.env?.peer, call.headers);
        return admitSemantic(call, { ...resolved, model: resolved.model }, ip, semantic, dispatchLog);
      }
      // Tags narrow a routing model's targets before allowed_cidrs looks at them (docs/routing.md "Tag routing").
      const routing = resolved.model.kind === 'routing' ? resolved.model.routing.targets : undefined;
      const targets = routing === undefined
        ? []
        : anyTagged(routing)
        ? tagEligible(routing, requestTags(call.headers))
        : routing;
      if (routing !== undefined && targets.length === 0) {
        return errors.badRequest(noTagMatch(requestTags(call.headers)));
      }
      const clientIp = clientIpOf(call.c.env?.peer, call.headers);
      // allowed_cidrs: the requested model's own list, and for a routing model at least one eligible target the
      // caller may reach; before any upstream is contacted.
      if (!reachable(snapshot, resolved.model, targets, clientIp)) {
        dispatchLog.warn('request rejected: client IP not in model allowed_cidrs', {
          model: resolved.model.display_name,
          source_ip: clientIp,
          request_id: call.rec.requestId,
        });
        return errors.ipRestricted();
      }
      call.resolved = resolved;
      call.clientIp = clientIp;
      return undefined;
    },
  };
}

/**
 * The buckets a step before `reserve` asks it to take with the key's and the model's (the rate-limit policies
 * the `policies` step found): the call's slot.
 */
export const EXTRA_SUBJECTS = slotKey<readonly RateLimitSubject[]>('extra rate-limit subjects');

/**
 * The caller's rate limits (api key, then model, then the `EXTRA_SUBJECTS`), all or nothing: a permit held
 * until the answer's last byte.
 */
export function reserveStep(limiter: Pick<RateLimiter, 'acquire'>): Step {
  return {
    name: 'reserve',
    run(call) {
      const { key } = call.caller;
      const { model } = call.resolved;
      const extra = call.state.get(EXTRA_SUBJECTS);
      // Nothing limits the call (the common case): no subjects to build, no promise to wait for.
      if (!key.rate_limit && !model.rate_limit && extra === undefined) {
        call.permit = NO_OP_PERMIT;
        call.limitHeaders = undefined;
        return undefined;
      }
      const own: RateLimitSubject[] = [
        { scope: 'api_key', id: key.id, limits: key.rate_limit },
        { scope: 'model', id: model.id, name: model.display_name, limits: model.rate_limit },
      ];
      return limiter.acquire(extra === undefined ? own : [...own, ...extra]).then((admitted) => {
        if (!admitted.allowed) return rateLimitRefusal(admitted);
        call.permit = admitted.permit;
        call.limitHeaders = admitted.headers;
        return undefined;
      });
    },
  };
}

/** A limiter's refusal as the caller's 429; a policy's in AISIX's words, naming the policy. */
export function rateLimitRefusal(r: Extract<RateLimitDecision, { allowed: false }>): ProxyError {
  if (r.scope === 'policy') {
    const name = r.name ?? r.id;
    return new ProxyError(
      429,
      'rate_limit_exceeded',
      `${limiterMessage(r.kind)} (policy '${name}')`,
      undefined,
      { ...(r.kind === 'concurrency' ? {} : { 'retry-after': String(r.retryAfterSecs) }), ...r.headers },
      { policy: { id: r.id, name } },
    );
  }
  const what = `${r.scope === 'api_key' ? 'API key' : 'model'} ${r.dimension}`;
  const e = errors.rateLimited(r.retryAfterSecs, what);
  return new ProxyError(e.status, e.type, e.message, e.code, { ...e.headers, ...r.headers });
}

/**
 * Whether the caller at `ip` may use `model` (`allowed_cidrs`): its own list, and for a routing model at least
 * one target's list (AISIX filters targets the caller may not reach before the strategy picks; when none is
 * left the request is refused with the routing model's name).
 */
function reachable(
  snapshot: Snapshot,
  model: Model,
  targets: readonly { model: string }[],
  ip: string | undefined,
): boolean {
  if (!ipAllowed(model.allowed_cidrs, ip)) return false;
  if (model.kind !== 'routing') return true;
  return targets.some((t) => {
    const tm = snapshot.modelByName(t.model);
    return tm === undefined || ipAllowed(tm.allowed_cidrs, ip);
  });
}
