// What a caller sending a body far over `proxy.request_body_limit_bytes` may see (docs/security.md "Safe defaults:
// bodies and connections"): the 413, or, having gone on sending past what the gateway reads of the body, a reset
// that discarded the 413 it had not read yet. Shared by the tests that upload such bodies.
import { DRAIN_CAP_BYTES } from '../../src/proxy/body-limit.ts';

/** What the caller saw: the answer's status (0 without one), how many body bytes it sent, its write error. */
export interface RefusedUpload {
  status: number;
  sent: number;
  error?: string;
}

/**
 * The caller read the 413, or kept sending past the most the gateway reads of a refused body (the drain's cap, or
 * `limit` for a chunked one) and found the connection reset: the close does not linger, and a reset that arrives as
 * the caller writes again loses the answer with the connection.
 */
export function answeredOrReset(p: RefusedUpload, limit: number): boolean {
  if (p.status === 413) return true;
  const read = Math.max(DRAIN_CAP_BYTES, limit);
  return p.status === 0 && (p.error === 'EPIPE' || p.error === 'ECONNRESET') && p.sent > read;
}
