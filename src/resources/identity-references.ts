// The resources file's checks between identity entries (docs/identity.md "Configuration"): a JWT binding names
// one key, an enabled issuer one provider, a claim mapping a provider of the file; no URL embeds a credential.
// The etcd path runs none of them (AISIX's): the authenticator fails closed on what they would have refused.
import { type AcceptedRow, type EntryRef, type Problems, scopeOf } from './entries.ts';
import { type ClaimMapping, type OidcProvider, urlHasCredentials } from './identity-schema.ts';
import type { ApiKey } from './schema.ts';

export interface IdentityEntries {
  api_keys: readonly AcceptedRow<ApiKey>[];
  oidc_providers: readonly AcceptedRow<OidcProvider>[];
  claim_mappings: readonly AcceptedRow<ClaimMapping>[];
}

export function checkIdentityReferences(e: IdentityEntries, problems: Problems): void {
  const bindings = new Map<string, EntryRef>();
  for (const at of e.api_keys) {
    const { r } = at;
    if (r.jwt_subject === undefined) continue;
    if (r.jwt_provider === undefined) {
      problems.entry(
        at,
        `jwt_subject ${
          JSON.stringify(r.jwt_subject)
        } is set without jwt_provider — name the OIDC provider allowed to assert this subject`,
      );
      continue;
    }
    const pair = `${r.jwt_provider}\u0000${r.jwt_subject}`;
    const first = bindings.get(pair);
    if (first !== undefined) {
      problems.entry(
        at,
        `duplicate jwt binding ${JSON.stringify(r.jwt_provider)}/${JSON.stringify(r.jwt_subject)}: already used by ${
          scopeOf(first)
        } — every (jwt_provider, jwt_subject) pair must be distinct`,
      );
    } else bindings.set(pair, at);
  }
  const issuers = new Map<string, EntryRef>();
  for (const at of e.oidc_providers) {
    const { r } = at;
    for (const field of ['issuer', 'jwks_uri'] as const) {
      const url = r[field];
      if (url !== undefined && urlHasCredentials(url)) {
        problems.entry(
          at,
          `OIDC provider ${field} must not embed credentials (user info or a token query parameter) — JWKS endpoints are public`,
        );
      }
    }
    // An issuer-less (shared-secret) provider selects nothing by issuer: it cannot collide.
    if (!r.enabled || r.issuer === undefined) continue;
    const first = issuers.get(r.issuer);
    if (first !== undefined) {
      problems.entry(
        at,
        `duplicate enabled OIDC issuer ${JSON.stringify(r.issuer)}: already used by ${
          scopeOf(first)
        } — a token's issuer must select one provider; disable or remove one`,
      );
    } else issuers.set(r.issuer, at);
  }
  const providers = e.oidc_providers.map((p) => p.r.name);
  for (const at of e.claim_mappings) {
    const { r } = at;
    if (providers.includes(r.jwt_provider)) continue;
    const defined = providers.length === 0 ? 'none' : [...new Set(providers)].sort().join(', ');
    problems.entry(
      at,
      `jwt_provider references unknown OIDC provider ${JSON.stringify(r.jwt_provider)} (defined providers: ${defined})`,
    );
  }
}
