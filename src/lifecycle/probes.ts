// `/livez` and `/readyz` (docs/operations.md "The four questions, four endpoints"), Kubernetes-style bodies.
// Liveness checks nothing outside the process; readiness fails while draining and until a configuration is applied.
import type { Context } from 'hono';

export interface ReadinessChecks {
  /** Name → failure reason, or undefined when the check passes. Order is the order printed. */
  checks(): [name: string, failure: string | undefined][];
}

const HEALTH_HEADERS = { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' };

// HEAD is answered by Hono from the GET route with the body dropped.
function plain(c: Context, status: 200 | 503, body: string): Response {
  return c.body(body, status, HEALTH_HEADERS);
}

export function livez(c: Context): Response {
  return plain(c, 200, c.req.query('verbose') !== undefined ? '[+]ping ok\nlivez check passed\n' : 'ok');
}

export function readyz(c: Context, r: ReadinessChecks): Response {
  const verbose = c.req.query('verbose') !== undefined;
  const excluded = new Set(c.req.queries('exclude') ?? []);
  const lines: string[] = [];
  let failed = false;
  for (const [name, failure] of r.checks()) {
    if (excluded.delete(name)) lines.push(`[+]${name} excluded: ok`);
    else if (failure === undefined) lines.push(`[+]${name} ok`);
    else {
      failed = true;
      lines.push(`[-]${name} failed: ${failure}`);
    }
  }
  if (excluded.size > 0) {
    lines.push(
      `warn: some health checks cannot be excluded: no matches for ${[...excluded].map((n) => `"${n}"`).join(',')}`,
    );
  }
  if (failed) return plain(c, 503, `${lines.join('\n')}\nreadyz check failed`);
  // Detailed on request, and whenever an exclusion was asked for (so the caller sees it took effect).
  if (verbose || c.req.queries('exclude')) return plain(c, 200, `${lines.join('\n')}\nreadyz check passed\n`);
  return plain(c, 200, 'ok');
}

/** GET and HEAD only; anything else is 405 with an Allow header. */
export function methodNotAllowed(c: Context): Response {
  return c.body('method not allowed', 405, { ...HEALTH_HEADERS, allow: 'GET, HEAD' });
}
