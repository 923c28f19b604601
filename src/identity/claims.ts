// A verified token's claims against a provider's requirements and the claim mappings (docs/identity.md "Claim
// mapping"). Default deny throughout: a missing claim, or one whose JSON type does not fit, never matches.
import type { ClaimMapping, ClaimMatch, OidcProvider } from '../resources/identity-schema.ts';

export type Claims = Record<string, unknown>;

/** A claim by path, dots traversing nested objects (`realm_access.roles`). */
export function nestedClaim(claims: Claims, path: string): unknown {
  let cur: unknown = claims;
  for (const seg of path.split('.')) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur) || !Object.hasOwn(cur, seg)) return undefined;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

/** The granted scopes: `scope` as OAuth's space-separated string, or an array of strings. */
function tokenScopes(claims: Claims): string[] {
  const s = claims.scope;
  if (typeof s === 'string') return s.split(/\s+/).filter((x) => x !== '');
  if (Array.isArray(s)) return s.filter((x): x is string => typeof x === 'string');
  return [];
}

/** The first provider requirement the token fails: its scopes first, then its bound claims in key order. */
export function providerRequirementFailed(claims: Claims, p: OidcProvider): 'scope' | 'bound_claim' | undefined {
  if (p.required_scopes.length > 0) {
    const granted = tokenScopes(claims);
    if (!p.required_scopes.every((r) => granted.includes(r))) return 'scope';
  }
  if (p.bound_claims !== undefined) {
    for (const path of Object.keys(p.bound_claims).sort()) {
      const expect = p.bound_claims[path]!;
      if (!boundClaimHolds(nestedClaim(claims, path), typeof expect === 'string' ? [expect] : expect)) {
        return 'bound_claim';
      }
    }
  }
  return undefined;
}

/** A string claim equal to one value, or an array claim containing one among its strings. */
function boundClaimHolds(actual: unknown, accepted: readonly string[]): boolean {
  if (typeof actual === 'string') return accepted.includes(actual);
  if (Array.isArray(actual)) return actual.some((v) => typeof v === 'string' && accepted.includes(v));
  return false;
}

/** `exact`: a string claim equal to a value (an array never matches); `contains`: an array holding one. */
export function claimMatchHolds(claims: Claims, m: ClaimMatch): boolean {
  const actual = nestedClaim(claims, m.claim);
  if (m.op === 'exact') return typeof actual === 'string' && m.values.includes(actual);
  return Array.isArray(actual) && actual.some((v) => typeof v === 'string' && m.values.includes(v));
}

/**
 * The provider's enabled mappings in evaluation order: `priority` ascending, then `name`, then id (a total
 * order, so every replica picks the same mapping for the same token).
 */
export function mappingsInOrder(all: readonly ClaimMapping[], provider: string): ClaimMapping[] {
  return all.filter((m) => m.enabled && m.jwt_provider === provider).sort((a, b) =>
    a.priority !== b.priority ? a.priority - b.priority : cmp(a.name, b.name) || cmp(a.id, b.id)
  );
}

/** The first of `ordered` whose every condition holds. */
export function matchingMapping(ordered: readonly ClaimMapping[], claims: Claims): ClaimMapping | undefined {
  return ordered.find((m) => m.match.every((c) => claimMatchHolds(claims, c)));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
