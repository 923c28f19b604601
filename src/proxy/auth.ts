// Caller authentication: `Authorization: Bearer <key>` or `x-api-key`, matched by SHA-256 against the
// snapshot's api_keys. Checked before the body is parsed. A JWT, where an OIDC provider is enabled, is judged by
// src/identity instead (admission.ts `authenticateCaller`; docs/identity.md).
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { globMatch } from '../resources/snapshot.ts';
import { sha256Hex } from '../util/crypto.ts';
import { hashOf } from '../util/sharded-map.ts';
import { bearerToken } from '../http/auth.ts';
import { errors, type ProxyError } from '../http/errors.ts';
import type { AuthDecisions } from '../identity/decisions.ts';

/** A token's SHA-256 hex, and that text's number in the key index (`hashOf`), both made once per token. */
interface TokenHash {
  hex: string;
  n: number;
}

/**
 * token → its hash. A hash is a pure function of the token, so caching it is safe across reloads; the
 * cache is bounded and simply cleared when full (a caller population larger than this just re-hashes).
 */
const hashCache = new Map<string, TokenHash>();
const HASH_CACHE_MAX = 10_000;

async function hashToken(token: string): Promise<TokenHash> {
  const hex = await sha256Hex(token);
  const h = { hex, n: hashOf(hex) };
  if (hashCache.size >= HASH_CACHE_MAX) hashCache.clear();
  hashCache.set(token, h);
  return h;
}

/** How an api-key judgement is counted (`aisix_auth_decisions_total`, src/identity/decisions.ts). */
export type KeyDecisions = Pick<AuthDecisions, 'allowed' | 'denied'>;

/**
 * The caller's key, or why there is none. Synchronous when the token's hash is cached (every request of a
 * known caller after its first): no promise turn on the hot path.
 */
export function authenticate(
  headers: Headers,
  snapshot: Snapshot,
  now: number,
  decisions?: KeyDecisions,
): ApiKey | ProxyError | Promise<ApiKey | ProxyError> {
  const token = bearerToken(headers);
  if (token === undefined) {
    decisions?.denied('none', 'missing_credentials');
    return errors.missingAuth();
  }
  return authenticateKey(token, snapshot, now, decisions);
}

/** The api key whose hash is the token's. */
export function authenticateKey(
  token: string,
  snapshot: Snapshot,
  now: number,
  decisions?: KeyDecisions,
): ApiKey | ProxyError | Promise<ApiKey | ProxyError> {
  const cached = hashCache.get(token);
  if (cached !== undefined) return keyOf(snapshot, cached, now, decisions);
  return hashToken(token).then((h) => keyOf(snapshot, h, now, decisions));
}

/** The key a token judged just now names, if any (its hash is cached by then): for a refusal's log line. */
export function judgedKey(token: string, snapshot: Snapshot): ApiKey | undefined {
  const h = hashCache.get(token);
  return h === undefined ? undefined : snapshot.apiKeyByHash(h.hex, h.n);
}

function keyOf(snapshot: Snapshot, hash: TokenHash, now: number, decisions?: KeyDecisions): ApiKey | ProxyError {
  const key = snapshot.apiKeyByHash(hash.hex, hash.n);
  if (!key) return denied(decisions, 'unknown_key', errors.unknownKey());
  if (key.disabled) return denied(decisions, 'key_disabled', errors.disabledKey());
  if (key.expires_at !== undefined && Date.parse(key.expires_at) <= now) {
    return denied(decisions, 'key_expired', errors.expiredKey());
  }
  decisions?.allowed('api_key');
  return key;
}

function denied(decisions: KeyDecisions | undefined, reason: string, e: ProxyError): ProxyError {
  decisions?.denied('api_key', reason);
  return e;
}

export function modelAllowed(key: ApiKey, model: string): boolean {
  for (const p of key.allowed_models) if (globMatch(p, model)) return true;
  return false;
}
