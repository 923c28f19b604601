// Credentials on the wire: the bearer token of a request and a comparison whose time does not depend on
// where two secrets differ. Used by the proxy (callers), the admin API (admin keys) and the Workers status
// routes. Hono's `bearerAuth` middleware is not used: its 401 is not our envelope and it does not read
// `x-api-key`, which the proxy and the admin API accept as well.
import { timingSafeEqual as honoTimingSafeEqual } from 'hono/utils/buffer';

/** `Bearer <token>` (scheme case-insensitive, one token, surrounding blanks allowed); undefined otherwise. */
export function parseBearer(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization);
  return m ? m[1] : undefined;
}

/** The caller's key: `Authorization: Bearer <key>`, else `x-api-key` (Anthropic's header). */
export function bearerToken(headers: Headers): string | undefined {
  const auth = headers.get('authorization');
  if (auth !== null) return parseBearer(auth);
  const x = headers.get('x-api-key');
  return x && x.trim() ? x.trim() : undefined;
}

/**
 * Whether two secrets are equal, in time independent of where they differ (Hono's `timingSafeEqual`: both
 * sides hashed with SHA-256 through Web Crypto, so it runs on every runtime, Workers included).
 */
export function timingSafeEqual(a: string, b: string): Promise<boolean> {
  return honoTimingSafeEqual(a, b);
}
