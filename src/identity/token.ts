// What a bearer token says before anything is verified (docs/identity.md "When a token is a JWT"): whether it
// has a JWT's shape, its JOSE header and the issuer that selects the provider. Nothing here is trusted: the
// header picks the key and the issuer picks the provider, then the signature and the claims are checked.

/** A real IdP token is a few KB: a bigger bearer is never decoded, it is looked up as an api key. */
const MAX_JWT_BYTES = 16 * 1024;

/** The algorithm names a JOSE header may carry at all; any other (`none` among them) is a malformed token. */
const KNOWN_ALGS = new Set([
  'HS256',
  'HS384',
  'HS512',
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'EdDSA',
]);

/** The asymmetric algorithms a key-set provider may verify; HMAC never (a public key is no shared secret). */
export const ALLOWED_ALGS: ReadonlySet<string> = new Set([
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'EdDSA',
]);

/** What a shared-secret provider verifies: HMAC only, disjoint from `ALLOWED_ALGS`, so neither mode's key can act as the other's. */
export const HMAC_ALGS: ReadonlySet<string> = new Set(['HS256', 'HS384', 'HS512']);

export interface JoseHeader {
  alg: string;
  kid?: string;
}

const B64URL = /^[A-Za-z0-9_-]*$/;
const decoder = new TextDecoder('utf-8', { fatal: true });

/** base64url without padding → the JSON value it holds; undefined for anything else. */
export function segmentJson(segment: string): unknown {
  if (!B64URL.test(segment) || segment.length % 4 === 1) return undefined;
  try {
    const b64 = segment.replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return JSON.parse(decoder.decode(bytes));
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Whether a bearer is a JWT rather than an api key: within the size cap, three non-empty segments, the first a
 * JSON object with `alg`. An api key that merely contains dots stays an api key.
 */
export function looksLikeJwt(token: string): boolean {
  if (token.length > MAX_JWT_BYTES) return false;
  const a = token.indexOf('.');
  if (a <= 0) return false;
  const b = token.indexOf('.', a + 1);
  if (b < 0 || b === a + 1 || b === token.length - 1 || token.indexOf('.', b + 1) >= 0) return false;
  const header = segmentJson(token.slice(0, a));
  return isObject(header) && 'alg' in header;
}

/** The JOSE header, or undefined when it is not one a verifier would accept (unknown `alg`, non-string `kid`). */
export function joseHeader(token: string): JoseHeader | undefined {
  const h = segmentJson(token.slice(0, token.indexOf('.')));
  if (!isObject(h) || typeof h.alg !== 'string' || !KNOWN_ALGS.has(h.alg)) return undefined;
  if (h.kid !== undefined && typeof h.kid !== 'string') return undefined;
  return h.kid === undefined ? { alg: h.alg } : { alg: h.alg, kid: h.kid };
}

/** The payload's `iss` when it is a string, read unverified to choose the provider that then pins it. */
export function unverifiedIssuer(token: string): string | undefined {
  const parts = token.split('.');
  const payload = segmentJson(parts[1] ?? '');
  return isObject(payload) && typeof payload.iss === 'string' ? payload.iss : undefined;
}
