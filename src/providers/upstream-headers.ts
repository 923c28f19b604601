// A provider key's `request.default_headers` and `request.forward_client_headers`: the headers an upstream call
// carries beyond the ones its adapter owns (docs/configuration.md "Provider keys", AISIX's rules:
// docs/aisix-compatibility.md "Upstream headers"). Gateway-owned headers are set first and never replaced, an
// operator's header beats a forwarded one, and no caller credential or trace context ever reaches an upstream.
import type { ProviderCall } from './types.ts';

/** Never set from `default_headers` nor forwarded: the credential slots and the request's routing (AISIX's list). */
const RESERVED = new Set([
  'authorization',
  'x-api-key',
  'x-goog-api-key',
  'api-key',
  'x-amz-security-token',
  'x-amz-date',
  'x-amz-content-sha256',
  'proxy-authorization',
  'cookie',
  'host',
]);

/**
 * Never forwarded from a caller, whatever the patterns: hop-by-hop headers and those describing a body or an
 * answer the gateway re-serialises or parses (AISIX's list), and the caller's trace context, which belongs to
 * the caller's own traces (`baggage` too, where AISIX names only the first two).
 */
const NEVER_FORWARD = new Set([
  'accept',
  'accept-encoding',
  'connection',
  'content-encoding',
  'content-length',
  'content-type',
  'expect',
  'keep-alive',
  'proxy-authenticate',
  'set-cookie',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'traceparent',
  'tracestate',
  'baggage',
]);
const NEVER_FORWARD_PREFIXES = ['x-aisix-', 'x-stainless-'];

/** Names AWS SigV4 owns on a Bedrock call: neither an operator's nor a caller's value would authenticate. */
export const SIGV4_OWNED = new Set(['x-amz-target', 'x-amzn-bedrock-accept']);

/** An HTTP header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
/** What a header value may hold (src/upstream-fetch.ts refuses anything else). */
const SENDABLE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The call's value of a template variable (AISIX's closed list, the cases below); undefined for an unknown name
 * or one with no value here.
 */
function variable(c: ProviderCall, name: string): string | undefined {
  switch (name) {
    case 'request.id':
      return c.requestId;
    case 'request.api_key.id':
      return c.apiKey?.id;
    case 'request.api_key.name':
      return c.apiKey?.display_name;
    case 'request.api_key.team_id':
      return c.apiKey?.team_id;
    case 'request.api_key.user_id':
      return c.apiKey?.user_id;
    case 'model.id':
      return c.model?.id;
    case 'model.name':
      return c.model?.display_name;
    case 'provider_key.id':
      return c.key.id;
    case 'provider_key.name':
      return c.key.display_name;
  }
  return undefined;
}

/**
 * `value` with every `${name}` replaced by the call's value; undefined (the header is dropped whole, never sent
 * blank or half-rendered) when a name is unknown or has no value, a `${` is not closed, or the result holds a
 * byte a header cannot carry.
 */
export function renderHeaderValue(value: string, lookup: (name: string) => string | undefined): string | undefined {
  let start = value.indexOf('${');
  if (start < 0) return SENDABLE.test(value) ? value : undefined;
  let out = '';
  let rest = value;
  while (start >= 0) {
    const end = rest.indexOf('}', start + 2);
    if (end < 0) return undefined;
    const v = lookup(rest.slice(start + 2, end).trim());
    if (!v) return undefined;
    out += rest.slice(0, start) + v;
    rest = rest.slice(end + 1);
    start = rest.indexOf('${');
  }
  out += rest;
  return SENDABLE.test(out) ? out : undefined;
}

/** Whether an allowlist pattern admits a lowercase header name: one `*` matches any run; two never match. */
export function patternAdmits(pattern: string, name: string): boolean {
  const p = pattern.toLowerCase();
  const star = p.indexOf('*');
  if (star < 0) return p === name;
  if (p.indexOf('*', star + 1) >= 0) return false;
  const head = p.slice(0, star);
  const tail = p.slice(star + 1);
  return name.length >= head.length + tail.length && name.startsWith(head) && name.endsWith(tail);
}

function forwardable(name: string): boolean {
  return !RESERVED.has(name) && !NEVER_FORWARD.has(name) && !NEVER_FORWARD_PREFIXES.some((p) => name.startsWith(p));
}

/**
 * Add the key's operator headers, then the caller's allowlisted ones, to `headers` (the adapter's own,
 * lowercase names), skipping every name already there and every name in `owned` (a wire's own, e.g. SigV4's).
 * A no-op for a key without a `request` block.
 */
export function addKeyHeaders(headers: Record<string, string>, c: ProviderCall, owned?: ReadonlySet<string>): void {
  const r = c.key.request;
  if (!r) return;
  const free = (name: string) => !Object.hasOwn(headers, name) && !owned?.has(name);
  for (const [rawName, value] of Object.entries(r.default_headers)) {
    const name = rawName.trim().toLowerCase();
    if (!TOKEN.test(name) || RESERVED.has(name) || !free(name)) continue;
    const rendered = renderHeaderValue(value, (v) => variable(c, v));
    if (rendered !== undefined) headers[name] = rendered;
  }
  const patterns = r.forward_client_headers;
  if (patterns.length === 0 || !c.callerHeaders?.forEach) return;
  c.callerHeaders.forEach((value, rawName) => {
    const name = rawName.toLowerCase();
    if (!forwardable(name) || !free(name) || !patterns.some((p) => patternAdmits(p, name))) return;
    headers[name] = value;
  });
}
