// A JWT caller's api key (docs/identity.md): the provider its issuer selects (else the issuer-less
// shared-secret providers, tried in turn), the signature and registered claims against that provider's keys
// or secret, its required scopes and bound claims, then the key its identity claim is bound to directly, else
// the first claim mapping that matches. Every failure is final (never retried as an api key), counted on
// `aisix_auth_decisions_total` and logged without the token.
import { errors, type ProxyError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { ClaimMapping, OidcProvider } from '../resources/identity-schema.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { Clock } from '../util/clock.ts';
import { type Claims, mappingsInOrder, matchingMapping, nestedClaim, providerRequirementFailed } from './claims.ts';
import type { AuthDecisions } from './decisions.ts';
import { clip, KeySource } from './keys.ts';
import { ALLOWED_ALGS, HMAC_ALGS, joseHeader, looksLikeJwt, unverifiedIssuer } from './token.ts';
import { candidateKeys, verifyWithKeys, verifyWithSecret } from './verify.ts';
import { ScopeRefusal } from './scope-refusal.ts';

/** Who a JWT named, for the request's records (never a metric label). */
export interface JwtIdentity {
  /** The identity claim's value. */
  subject: string;
  /** The provider's `name`. */
  provider: string;
  /** The mapping's `name`; absent for a key bound directly. */
  claimMapping?: string;
}

export interface JwtCaller {
  key: ApiKey;
  jwt: JwtIdentity;
}

/** What a denial's log line says about the request. */
export interface RequestContext {
  method: string;
  path: string;
  requestId: string;
  /** Resolved only when a line is written. */
  sourceIp?: () => string | undefined;
}

export interface JwtAuthDeps {
  upstream: UpstreamFetch;
  clock: Clock;
  log: Logger;
  decisions: AuthDecisions;
}

/** The reasons a token is refused before a provider vouched for anything: logged at DEBUG, not WARN. */
const PRE_VERIFICATION = new Set([
  'jwt_malformed',
  'jwt_missing_issuer',
  'jwt_untrusted_issuer',
  'jwt_alg_not_allowed',
]);

const ERROR_OF: Record<string, () => ProxyError> = {
  jwt_expired: errors.jwtExpired,
  jwks_unavailable: errors.jwksUnavailable,
  jwt_scope_missing: errors.jwtClaimsRejected,
  jwt_bound_claim_mismatch: errors.jwtClaimsRejected,
  jwt_identity_claim_missing: errors.jwtIdentityUnmapped,
  jwt_binding_ambiguous: errors.jwtIdentityUnmapped,
  jwt_identity_unmapped: errors.jwtIdentityUnmapped,
  claim_mapping_target_missing: errors.jwtIdentityUnmapped,
  key_disabled: errors.disabledKey,
  key_expired: errors.expiredKey,
};

/** Each snapshot's mappings per provider in evaluation order, sorted once. */
const mappingsOf = new WeakMap<Snapshot, Map<string, ClaimMapping[]>>();

function orderedMappings(snapshot: Snapshot, provider: string): ClaimMapping[] {
  let byProvider = mappingsOf.get(snapshot);
  if (!byProvider) {
    byProvider = new Map();
    mappingsOf.set(snapshot, byProvider);
  }
  let list = byProvider.get(provider);
  if (!list) {
    list = mappingsInOrder(snapshot.of('claim_mappings'), provider);
    byProvider.set(provider, list);
  }
  return list;
}

/**
 * Whether `token` goes the JWT way: some enabled provider exists and the token has a JWT's shape. A snapshot
 * without providers answers at its first check, so plain keys pay nothing more.
 */
export function isJwtCaller(snapshot: Snapshot, token: string): boolean {
  const providers = snapshot.of('oidc_providers');
  return providers.length > 0 && providers.some((p) => p.enabled) && looksLikeJwt(token);
}

interface Denial {
  reason: string;
  issuer?: string;
  kid?: string;
  subject?: string;
  claimMapping?: string;
  /** `jwt_scope_missing`: the provider's required scopes (the `/mcp` challenge names them). */
  requiredScopes?: readonly string[];
  /** The token named no configured issuer (the shared-secret trial): any bearer gets here, so DEBUG only. */
  unmatched?: boolean;
}

/** The reasons a trial candidate refuses a token it does not hold the key for, whatever the token says. */
const SIGNATURE_CLASS = new Set(['jwt_bad_signature', 'jwt_alg_not_allowed']);

/** Every enabled shared-secret provider that pins no issuer, ordered by name then id (the same on every node). */
function issuerlessSecretProviders(snapshot: Snapshot): (OidcProvider & { hmac_secret: string })[] {
  return snapshot.of('oidc_providers')
    .filter((p): p is OidcProvider & { hmac_secret: string } =>
      p.enabled && p.issuer === undefined && p.hmac_secret !== undefined
    )
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export class JwtAuthenticator {
  private readonly keys: KeySource;
  private readonly log: Logger;

  constructor(private readonly d: JwtAuthDeps) {
    this.log = d.log.withTarget('aisix::auth');
    this.keys = new KeySource(d.upstream, d.clock, this.log);
  }

  async authenticate(token: string, snapshot: Snapshot, ctx: RequestContext): Promise<JwtCaller | ProxyError> {
    const r = await this.judge(token, snapshot);
    if ('key' in r) {
      this.d.decisions.allowed('jwt');
      this.log.debug('jwt authentication succeeded', {
        method: 'jwt',
        provider: r.jwt.provider,
        issuer: clip(unverifiedIssuer(token) ?? ''),
        subject: clip(r.jwt.subject),
        api_key_id: r.key.id,
        claim_mapping: r.jwt.claimMapping,
      });
      return r;
    }
    return this.deny(r, ctx);
  }

  private async judge(token: string, snapshot: Snapshot): Promise<JwtCaller | Denial> {
    const header = joseHeader(token);
    if (!header) return { reason: 'jwt_malformed' };
    const { alg, kid } = header;
    const issuer = unverifiedIssuer(token);
    const at = { issuer, kid };
    const matches = issuer === undefined
      ? []
      : snapshot.of('oidc_providers').filter((p) => p.enabled && p.issuer === issuer);
    if (matches.length > 1) {
      this.log.warn(
        'two enabled OIDC providers claim this issuer; failing closed — their policies differ and neither can be chosen unambiguously',
        { issuer: clip(issuer!) },
      );
      return { reason: 'jwt_untrusted_issuer', ...at };
    }
    let p: OidcProvider;
    let claims: Claims;
    if (matches.length === 1) {
      // An issuer a provider claims binds the token to it alone, whichever mode it is in: never a fallback.
      p = matches[0]!;
      const verified = await this.verified(token, p, alg, kid);
      if (typeof verified === 'string') return { reason: verified, ...at };
      claims = verified;
    } else {
      const trial = await this.trial(token, snapshot, alg);
      if ('reason' in trial) {
        return {
          reason: trial.reason ?? (issuer === undefined ? 'jwt_missing_issuer' : 'jwt_untrusted_issuer'),
          ...at,
          unmatched: true,
        };
      }
      ({ p, claims } = trial);
    }
    const unmet = providerRequirementFailed(claims, p);
    if (unmet === 'scope') return { reason: 'jwt_scope_missing', ...at, requiredScopes: p.required_scopes };
    if (unmet) return { reason: 'jwt_bound_claim_mismatch', ...at };
    const subject = nestedClaim(claims, p.identity_claim);
    if (typeof subject !== 'string') return { reason: 'jwt_identity_claim_missing', ...at };
    return this.keyFor(snapshot, p, claims, subject, at);
  }

  /**
   * A token whose issuer no provider claims: each issuer-less shared-secret provider in turn, the first that
   * verifies it wins. Refused by all, the reason is the first one that speaks about the token (a claim failure
   * after a good signature), not a candidate's that merely lacks its key; none configured: no reason.
   */
  private async trial(
    token: string,
    snapshot: Snapshot,
    alg: string,
  ): Promise<{ p: OidcProvider; claims: Claims } | { reason: string | undefined }> {
    let claimFailure: string | undefined;
    let anyFailure: string | undefined;
    for (const p of issuerlessSecretProviders(snapshot)) {
      const r = await this.verified(token, p, alg, undefined);
      if (typeof r !== 'string') return { p, claims: r };
      if (!SIGNATURE_CLASS.has(r)) claimFailure ??= r;
      else anyFailure ??= r;
    }
    return { reason: claimFailure ?? anyFailure };
  }

  /** The claims once the signature and the registered claims hold, or the reason they do not. */
  private async verified(
    token: string,
    p: OidcProvider,
    alg: string,
    kid: string | undefined,
  ): Promise<Claims | string> {
    // The algorithm family is the provider's, checked before any key exists: a public key never acts as a secret.
    if (p.hmac_secret !== undefined) {
      if (!HMAC_ALGS.has(alg)) return 'jwt_alg_not_allowed';
      return verifyWithSecret(token, alg, { ...p, hmac_secret: p.hmac_secret }, Math.floor(this.d.clock() / 1000));
    }
    if (!ALLOWED_ALGS.has(alg)) return 'jwt_alg_not_allowed';
    let url: string;
    let set;
    try {
      url = await this.keys.jwksUrl(p);
    } catch (err) {
      this.log.warn("cannot resolve the trust provider's JWKS endpoint", {
        provider: p.name,
        issuer: clip(p.issuer ?? ''),
        error: err instanceof Error ? err.message : String(err),
      });
      return 'jwks_unavailable';
    }
    try {
      set = await this.keys.keys(url);
    } catch (err) {
      this.log.warn("cannot fetch the trust provider's JWKS", {
        provider: p.name,
        error: err instanceof Error ? err.message : String(err),
      });
      return 'jwks_unavailable';
    }
    let candidates = candidateKeys(set, kid, alg);
    if (candidates.length === 0) {
      // The provider may just have rotated its keys: one refetch, at most one a second per URL.
      const fresh = await this.keys.refetch(url).catch(() => undefined);
      if (fresh) candidates = candidateKeys(fresh, kid, alg);
    }
    if (candidates.length === 0) return 'jwt_unknown_kid';
    return verifyWithKeys(token, alg, p, candidates, Math.floor(this.d.clock() / 1000));
  }

  /** A direct binding wins over every mapping, even for a refused key; else the first mapping that matches. */
  private keyFor(
    snapshot: Snapshot,
    p: OidcProvider,
    claims: Claims,
    subject: string,
    at: { issuer?: string | undefined; kid?: string | undefined },
  ): JwtCaller | Denial {
    // Kept by the key index as keys change (src/resources/api-key-index.ts): no pass over every key here.
    const bound = snapshot.apiKeys.boundTo(p.name, subject);
    if (bound && bound.length > 1) return { reason: 'jwt_binding_ambiguous', ...at, subject };
    let key = bound?.[0];
    let claimMapping: string | undefined;
    if (!key) {
      const m = matchingMapping(orderedMappings(snapshot, p.name), claims);
      if (!m) return { reason: 'jwt_identity_unmapped', ...at, subject };
      key = snapshot.apiKeys.get(m.resolve.api_key_id);
      if (!key) return { reason: 'claim_mapping_target_missing', ...at, subject, claimMapping: m.name };
      claimMapping = m.name;
    }
    if (key.disabled) return { reason: 'key_disabled', ...at };
    // Valid at the instant itself: expired only once `expires_at` is past.
    if (key.expires_at !== undefined && Date.parse(key.expires_at) < this.d.clock()) {
      return { reason: 'key_expired', ...at };
    }
    const jwt: JwtIdentity = { subject, provider: p.name };
    if (claimMapping !== undefined) jwt.claimMapping = claimMapping;
    return { key, jwt };
  }

  private deny(d: Denial, ctx: RequestContext): ProxyError {
    this.d.decisions.denied('jwt', d.reason);
    const fields = {
      method: 'jwt',
      reason: d.reason,
      issuer: clip(d.issuer ?? ''),
      kid: clip(d.kid ?? ''),
      http_method: ctx.method,
      path: ctx.path,
      request_id: ctx.requestId,
      source_ip: ctx.sourceIp?.(),
    };
    if (d.unmatched || PRE_VERIFICATION.has(d.reason)) {
      this.log.debug('rejected inbound JWT (pre-verification)', fields);
    } else {
      this.log.warn('rejected inbound JWT', {
        ...fields,
        subject: d.subject === undefined ? undefined : clip(d.subject),
        claim_mapping: d.claimMapping,
      });
    }
    if (d.requiredScopes) return new ScopeRefusal(d.requiredScopes);
    return (ERROR_OF[d.reason] ?? errors.jwtInvalid)();
  }
}
