// The headers of a passthrough exchange (docs/endpoints.md "Passthrough routes"), AISIX's rules: the caller's
// headers go upstream except the hop-by-hop ones, its trace context, the gateway's credential slot and (when
// the route injects one) every credential header; the injected credential follows the provider key's wire.
// The answer's headers come back except the hop-by-hop ones. Pure.
import type { ProviderKey } from '../resources/schema.ts';
import type { PassthroughRoute } from '../resources/passthrough-route-schema.ts';
import { globMatch } from '../resources/snapshot.ts';

/** Never forwarded: what the client recomputes, hop-by-hop headers, the caller's trace, the gateway's id. */
const ALWAYS_STRIP = new Set([
  'host',
  'content-length',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'traceparent',
  'tracestate',
  'transfer-encoding',
  'upgrade',
  'x-aisix-request-id',
  // The client answers `100-continue` itself (undici refuses to send the header at all).
  'expect',
]);
/** Forwarded only when `forward_client_headers` names them exactly (a glob is no consent to graft a trace). */
const TRACE = new Set(['traceparent', 'tracestate']);
/** A provider key's `strip_headers` default (AISIX's): what an injected credential replaces. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'set-cookie', 'x-api-key'];
/** The Messages API version sent with an injected Anthropic key when the caller names none. */
export const ANTHROPIC_VERSION = '2023-06-01';

/** The caller headers this route removes (beyond `ALWAYS_STRIP`), by its modes. */
function routeStrips(route: PassthroughRoute): Set<string> {
  const out = new Set<string>();
  if (route.identity_header) out.add(route.identity_header);
  const slot = route.auth_mode === 'gateway_key'
    ? ['authorization', 'x-api-key']
    : route.auth_mode === 'header_key'
    ? [route.auth_header_name!]
    : [];
  for (const h of slot) out.add(h);
  if (route.credential_mode === 'inject') {
    for (const h of [...CREDENTIAL_HEADERS, 'authorization', 'x-api-key']) out.add(h);
  }
  return out;
}

function forcedForward(route: PassthroughRoute, name: string): boolean {
  const patterns = route.forward_client_headers;
  if (!patterns?.length) return false;
  if (TRACE.has(name)) return patterns.some((p) => p.toLowerCase() === name);
  return patterns.some((p) => globMatch(p.toLowerCase(), name));
}

/** The credential a provider key sends on its wire: `x-api-key` for Anthropic's, `api-key` for Azure's, else Bearer. */
function credentialHeaders(key: ProviderKey, secret: string, caller: Headers): Record<string, string> {
  const provider = key.provider.trim().toLowerCase();
  if (provider === 'anthropic' || key.adapter === 'anthropic') {
    return { 'x-api-key': secret, 'anthropic-version': caller.get('anthropic-version') ?? ANTHROPIC_VERSION };
  }
  if (key.adapter === 'azure-openai') return { 'api-key': secret };
  return { authorization: `Bearer ${secret}` };
}

/**
 * The upstream request's headers: the caller's, stripped by the route's rules, plus the injected credential
 * (`inject`: `key` and its secret) and the gateway's request id.
 */
export function outboundHeaders(
  route: PassthroughRoute,
  caller: Headers,
  requestId: string,
  inject: { key: ProviderKey; secret: string } | undefined,
): Record<string, string> {
  const strips = routeStrips(route);
  const out: Record<string, string> = {};
  caller.forEach((value, name) => {
    if (ALWAYS_STRIP.has(name) && !(TRACE.has(name) && forcedForward(route, name))) return;
    if (strips.has(name) && !forcedForward(route, name)) return;
    out[name] = value;
  });
  // An injected credential replaces whatever of the caller's stayed (never both).
  if (inject) {
    const cred = credentialHeaders(inject.key, inject.secret, caller);
    if (!forcedForward(route, 'authorization') || !('authorization' in out)) Object.assign(out, cred);
  }
  out['x-aisix-request-id'] = requestId;
  return out;
}

/** Not passed back: hop-by-hop headers, and what the gateway sets itself (`server`, the request id). */
const ANSWER_STRIP = new Set([
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'trailers',
  'upgrade',
  'server',
  'x-aisix-request-id',
]);

/** The caller's answer headers from the upstream's (repeated ones kept); an event stream loses its length. */
export function answerHeaders(upstream: readonly [string, string][], eventStream: boolean): Headers {
  const out = new Headers();
  for (const [name, value] of upstream) {
    const n = name.toLowerCase();
    if (ANSWER_STRIP.has(n) || (eventStream && n === 'content-length')) continue;
    out.append(n, value);
  }
  return out;
}

/** `text/event-stream`, parameters aside, case-insensitive. */
export function isEventStream(contentType: string | null): boolean {
  return contentType !== null && contentType.trim().toLowerCase().startsWith('text/event-stream');
}
