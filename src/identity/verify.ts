// One token's signature and registered claims against a provider's keys (docs/identity.md "Verification"):
// which keys are candidates, jose for the signature over one imported key, and the claim checks in Sluice's own
// code, because the contract's edges are not jose's defaults (a token whose `exp` is now is valid; skew is the
// provider's `leeway_secs`, 0 by default; a `kid`-less token is tried against up to 8 keys in order).
import { compactVerify, importJWK } from 'jose';
import type { OidcProvider } from '../resources/identity-schema.ts';
import type { Claims } from './claims.ts';
import type { Jwk } from './keys.ts';

/** A `kid`-less token is tried against at most this many usable keys. */
const MAX_KIDLESS_CANDIDATES = 8;

/** Why verification refused a token: the reason label of `aisix_auth_decisions_total`. */
export type VerifyFailure =
  | 'jwt_expired'
  | 'jwt_not_yet_valid'
  | 'jwt_audience_mismatch'
  | 'jwt_issuer_mismatch'
  | 'jwt_missing_claim'
  | 'jwt_bad_signature'
  | 'jwt_invalid';

/** A key may verify at `alg`: `use` absent or `sig`, and `alg` absent or the token's. */
function usable(k: Jwk, alg: string): boolean {
  return (k.use === undefined || k.use === 'sig') && (k.alg === undefined || k.alg === alg);
}

/** The keys to try: the first with the token's `kid` (if usable), else every usable key, at most 8. */
export function candidateKeys(keys: readonly Jwk[], kid: string | undefined, alg: string): Jwk[] {
  if (kid !== undefined) {
    const k = keys.find((j) => j.kid === kid);
    return k !== undefined && usable(k, alg) ? [k] : [];
  }
  return keys.filter((k) => usable(k, alg)).slice(0, MAX_KIDLESS_CANDIDATES);
}

/** Imported keys, per published JWK object and algorithm: a refetched set brings new objects. */
const imported = new WeakMap<Jwk, Map<string, Promise<CryptoKey | Uint8Array | undefined>>>();

function importOnce(k: Jwk, alg: string): Promise<CryptoKey | Uint8Array | undefined> {
  let byAlg = imported.get(k);
  if (!byAlg) {
    byAlg = new Map();
    imported.set(k, byAlg);
  }
  let key = byAlg.get(alg);
  if (!key) {
    // A key of another family than `alg` (an RSA key for an ES256 token) does not import: not this key.
    key = importJWK(k as Parameters<typeof importJWK>[0], alg).catch(() => undefined);
    byAlg.set(alg, key);
  }
  return key;
}

/**
 * The token's claims once one candidate's signature holds and the registered claims pass; otherwise why not.
 * Only a signature or algorithm mismatch moves on to the next key: a claim failure reads the same for every key.
 */
export async function verifyWithKeys(
  token: string,
  alg: string,
  p: OidcProvider,
  keys: readonly Jwk[],
  nowSecs: number,
): Promise<Claims | VerifyFailure> {
  let last: VerifyFailure = 'jwt_invalid';
  for (const k of keys) {
    const key = await importOnce(k, alg);
    if (key === undefined) {
      last = 'jwt_invalid';
      continue;
    }
    let payload: Uint8Array;
    try {
      ({ payload } = await compactVerify(token, key, { algorithms: [alg] }));
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') {
        last = 'jwt_bad_signature';
        continue;
      }
      if (err instanceof TypeError || code === 'ERR_JOSE_ALG_NOT_ALLOWED' || code === 'ERR_JOSE_NOT_SUPPORTED') {
        last = 'jwt_invalid';
        continue;
      }
      return 'jwt_invalid';
    }
    return payloadClaims(payload, p, nowSecs);
  }
  return last;
}

/**
 * `exp` always required, `iss` and `aud` wherever the provider pins them (a key-set provider always does; a
 * shared-secret one may not, and then neither claim is consulted); `exp + leeway < now` is expired (so
 * `exp == now` is valid), `nbf > now + leeway` not yet valid; `iss` is the provider's; `aud` (string or array)
 * names one of its audiences.
 */
export function registeredClaims(c: Claims, p: OidcProvider, now: number): VerifyFailure | undefined {
  const pinsIssuer = p.issuer !== undefined;
  const pinsAudience = p.audiences.length > 0;
  if (!('exp' in c) || (pinsIssuer && !('iss' in c)) || (pinsAudience && !('aud' in c))) return 'jwt_missing_claim';
  const exp = numericDate(c.exp);
  if (exp === undefined) return 'jwt_invalid';
  if (exp + p.leeway_secs < now) return 'jwt_expired';
  if (c.nbf !== undefined) {
    const nbf = numericDate(c.nbf);
    if (nbf === undefined) return 'jwt_invalid';
    if (nbf > now + p.leeway_secs) return 'jwt_not_yet_valid';
  }
  if (pinsIssuer) {
    if (typeof c.iss !== 'string') return 'jwt_invalid';
    if (c.iss !== p.issuer) return 'jwt_issuer_mismatch';
  }
  if (pinsAudience) {
    const aud = typeof c.aud === 'string' ? [c.aud] : c.aud;
    if (!Array.isArray(aud) || !aud.every((a) => typeof a === 'string')) return 'jwt_invalid';
    if (!aud.some((a) => p.audiences.includes(a))) return 'jwt_audience_mismatch';
  }
  return undefined;
}

const encoder = new TextEncoder();

/**
 * A token against a shared-secret provider's one key: `alg` must be HS256/384/512 (checked by the caller), no
 * `kid` is consulted (the provider has one key), and the claims are checked as for a key set.
 */
export async function verifyWithSecret(
  token: string,
  alg: string,
  p: OidcProvider & { hmac_secret: string },
  nowSecs: number,
): Promise<Claims | VerifyFailure> {
  const key = encoder.encode(p.hmac_secret);
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(token, key, { algorithms: [alg] }));
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' ? 'jwt_bad_signature' : 'jwt_invalid';
  }
  return payloadClaims(payload, p, nowSecs);
}

/** A verified payload's claims, if it is a JSON object whose registered claims hold for the provider. */
function payloadClaims(payload: Uint8Array, p: OidcProvider, nowSecs: number): Claims | VerifyFailure {
  let claims: unknown;
  try {
    claims = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return 'jwt_invalid';
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return 'jwt_invalid';
  return registeredClaims(claims as Claims, p, nowSecs) ?? (claims as Claims);
}

/** A NumericDate: a non-negative number of seconds, a fraction rounded. */
function numericDate(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : undefined;
}
