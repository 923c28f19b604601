// The OAuth protected-resource surface of `/mcp` (RFC 9728; docs/mcp.md "Inbound authentication"): active only
// while exactly one `mcp_auth_settings` row has a usable `resource_url` and an `oidc_providers` row is enabled,
// as AISIX's. Its metadata document and the `WWW-Authenticate` challenge of a refused caller are derived from the
// configuration alone, never from the request's Host.
import type { Snapshot } from '../resources/snapshot.ts';

export interface Discovery {
  /** The metadata document's body. */
  readonly document: string;
  /** `<resource origin>/.well-known/oauth-protected-resource/mcp`. */
  readonly metadataUrl: string;
}

/** Why the surface is dormant although a `resource_url` is set (WARNed about once). */
export type DormantReason = 'invalid_resource_url' | 'no_oidc_provider';

/** The surface of `snapshot`, or why it is dormant (`undefined`: nothing asked for it). */
export function discoveryOf(snapshot: Snapshot): Discovery | DormantReason | undefined {
  const settings = snapshot.of('mcp_auth_settings');
  const resource = settings.length === 1 ? settings[0]!.resource_url : undefined;
  if (resource === undefined) return undefined;
  const url = usableResource(resource);
  if (!url) return 'invalid_resource_url';
  // A shared-secret provider names no authorization server a client could get a token from: not advertised.
  const providers = snapshot.of('oidc_providers').filter((p) => p.enabled && p.hmac_secret === undefined);
  if (providers.length === 0) return 'no_oidc_provider';
  const issuers = [...new Set(providers.flatMap((p) => p.issuer ?? []))].sort();
  const scopes = [...new Set(providers.flatMap((p) => p.required_scopes))].sort();
  const document = JSON.stringify({
    resource,
    authorization_servers: issuers,
    bearer_methods_supported: ['header'],
    ...(scopes.length > 0 ? { scopes_supported: scopes } : {}),
  });
  return { document, metadataUrl: `${url.origin}/.well-known/oauth-protected-resource/mcp` };
}

/** AISIX's runtime check: absolute http(s), no user info, query or fragment, path exactly `/mcp`. */
function usableResource(resource: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(resource);
  } catch {
    return undefined;
  }
  const ok = (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' &&
    url.password === '' && !resource.includes('?') && !resource.includes('#') && url.pathname === '/mcp';
  return ok ? url : undefined;
}

/** RFC 6750's NQCHAR: visible ASCII without `"` and `\`. */
const nqchar = (s: string) => s.replace(/[^\x21\x23-\x5b\x5d-\x7e]/g, '');

/**
 * The challenge of a refused caller: a missing credential names only the metadata; an unusable one adds
 * `error="invalid_token"`; a token without its provider's required scopes (`scopes`, a 403) is
 * `error="insufficient_scope"` naming them, so the client can ask for them. Any other refusal (bound claims, an
 * identity provider's outage) carries none: signing in again cannot cure it.
 */
export function challengeFor(
  d: Discovery,
  status: number,
  missing: boolean,
  scopes?: readonly string[],
): string | undefined {
  const meta = `resource_metadata="${nqchar(d.metadataUrl)}"`;
  if (status === 403 && scopes) {
    return `Bearer error="insufficient_scope", scope="${scopes.map(nqchar).join(' ')}", ${meta}`;
  }
  if (status !== 401) return undefined;
  return missing ? `Bearer ${meta}` : `Bearer error="invalid_token", ${meta}`;
}
