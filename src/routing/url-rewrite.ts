// URL rewrites (docs/routing.md "URL rewrites"): on the proxy listener, before a route is matched, the first rule
// whose regex matches the raw path replaces its first match, once; the query string is kept. The rules were
// checked at boot (src/config/url-rewrites.ts).
import { type CompiledRewrite, compileRewrite, type UrlRewriteRule } from '../config/url-rewrites.ts';
import type { Logger } from '../observability/logger.ts';

/** The exact log lines (AISIX's). */
export const REWRITE_LOG = {
  applied: 'url rewrite applied',
  invalid: 'url rewrite produced an invalid path; leaving the request unrewritten',
} as const;

/** Characters a request path may hold as sent (RFC 3986 `pchar`, `/` and `%`): anything else is not a path. */
const PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;

/** What rewriting did to one path. */
export type Rewritten = { kind: 'none' } | { kind: 'rewritten'; rule: string; to: string } | {
  kind: 'invalid';
  rule: string;
  to: string;
};

/** The rules, compiled once; a list already checked at boot compiles without error. */
export function compileRewrites(rules: readonly UrlRewriteRule[]): CompiledRewrite[] {
  return rules.map((r, i) => {
    const c = compileRewrite(r, i);
    if (typeof c === 'string') throw new Error(c);
    return c;
  });
}

/** The first matching rule's rewrite of `path` (the raw, percent-encoded path, without the query). */
export function rewritePath(rules: readonly CompiledRewrite[], path: string): Rewritten {
  for (const rule of rules) {
    const m = rule.regex.matcher(path);
    if (!m.find()) continue;
    let middle = '';
    for (const part of rule.template) {
      if ('text' in part) middle += part.text;
      else middle += m.group(part.group) ?? '';
    }
    const to = path.slice(0, m.start()) + middle + path.slice(m.end());
    return PATH.test(to) ? { kind: 'rewritten', rule: rule.label, to } : { kind: 'invalid', rule: rule.label, to };
  }
  return { kind: 'none' };
}

/**
 * A fetch handler that rewrites each request's path before `next` sees it; `next` itself when there are no
 * rules, so a gateway without them pays nothing.
 */
export function withUrlRewrites<A extends unknown[]>(
  rules: readonly UrlRewriteRule[],
  log: Logger,
  next: (req: Request, ...rest: A) => Response | Promise<Response>,
): (req: Request, ...rest: A) => Response | Promise<Response> {
  if (rules.length === 0) return next;
  const compiled = compileRewrites(rules);
  return function rewriteUrl(req, ...rest) {
    const { path, query } = splitUrl(req.url);
    const r = rewritePath(compiled, path);
    if (r.kind === 'none') return next(req, ...rest);
    if (r.kind === 'invalid') {
      log.warn(REWRITE_LOG.invalid, { rule: r.rule, from: path, rewritten: r.to });
      return next(req, ...rest);
    }
    log.debug(REWRITE_LOG.applied, { rule: r.rule, from: path, to: r.to });
    const url = originOf(req.url) + r.to + query;
    // `duplex` lets a streamed body through the copy (fetch's Request needs it for a ReadableStream body).
    const init = { method: req.method, headers: req.headers, body: req.body, signal: req.signal, duplex: 'half' };
    return next(new Request(url, init as RequestInit), ...rest);
  };
}

/** The path as the client sent it (no decoding) and the query with its `?` (or nothing). */
function splitUrl(url: string): { path: string; query: string } {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  if (start < 0) return { path: '/', query: '' };
  const q = url.indexOf('?', start);
  return q < 0 ? { path: url.slice(start), query: '' } : { path: url.slice(start, q), query: url.slice(q) };
}

function originOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  return start < 0 ? url : url.slice(0, start);
}
