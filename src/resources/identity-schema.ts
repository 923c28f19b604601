// The `oidc_providers` and `claim_mappings` resources (docs/identity.md; AISIX's oidc_provider and
// claim_mapping schemas): who may assert a caller's identity with a JWT, and which api key a token's claims
// select when no key binds its subject directly. Read by src/identity/ only.
import { z } from 'zod';
import { schemaReader } from './documents.ts';
import type { FileIds } from './policy-document.ts';

const nonEmpty = z.string().min(1, 'must not be empty');

/** A bound claim's expected value: one string, or a non-empty list matched as any-of. */
const BoundClaimExpectSchema = z.union([z.string(), z.array(z.string()).min(1, 'needs at least one value')]);

/** An HMAC key shorter than its smallest hash (HS256: 32 bytes) is brute-forceable (RFC 7518 §3.2). */
export const MIN_HMAC_SECRET_BYTES = 32;

/**
 * A provider verifies in one of two modes, set by the row: with `hmac_secret` it checks HS256/384/512 against
 * that shared secret and fetches nothing (`issuer` and `audiences` optional); without, the key-set mode, where
 * `issuer` and `audiences` are required.
 */
export const OidcProviderSchema = z.strictObject({
  id: z.unknown().optional(),
  name: nonEmpty,
  /** Compared byte for byte with the token's `iss`; optional only beside `hmac_secret`. */
  issuer: nonEmpty.optional(),
  /** Optional (empty: `aud` not consulted) only beside `hmac_secret`. */
  audiences: z.array(z.string()).default([]),
  /** Absent: resolved through the issuer's discovery document. */
  jwks_uri: nonEmpty.optional(),
  /** The shared secret of the HMAC mode (its UTF-8 bytes are the key). */
  hmac_secret: z.string().refine(
    (s) => new TextEncoder().encode(s).length >= MIN_HMAC_SECRET_BYTES,
    `must be at least ${MIN_HMAC_SECRET_BYTES} bytes (an HS256 key shorter than its hash can be brute-forced)`,
  ).optional(),
  identity_claim: nonEmpty.default('sub'),
  required_scopes: z.array(z.string()).default([]),
  bound_claims: z.record(z.string(), BoundClaimExpectSchema).optional(),
  leeway_secs: z.number().int().min(0).max(300).default(0),
  enabled: z.boolean().default(true),
}).superRefine((p, ctx) => {
  if (p.hmac_secret !== undefined) {
    if (p.jwks_uri !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['jwks_uri'],
        message: 'not allowed beside hmac_secret: a shared-secret provider fetches no key set — set one of them',
      });
    }
    return;
  }
  if (p.issuer === undefined) {
    ctx.addIssue({ code: 'custom', path: ['issuer'], message: 'required (optional only beside hmac_secret)' });
  }
  if (p.audiences.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['audiences'],
      message: 'needs at least one audience (optional only beside hmac_secret)',
    });
  }
});
export type OidcProvider = Omit<z.infer<typeof OidcProviderSchema>, 'id'> & { id: string };

export const ClaimMatchSchema = z.strictObject({
  claim: nonEmpty,
  op: z.enum(['exact', 'contains']),
  values: z.array(z.string()).min(1, 'needs at least one value'),
});
export type ClaimMatch = z.infer<typeof ClaimMatchSchema>;

export const ClaimMappingSchema = z.strictObject({
  id: z.unknown().optional(),
  name: nonEmpty,
  jwt_provider: nonEmpty,
  match: z.array(ClaimMatchSchema).min(1, 'needs at least one condition'),
  resolve: z.strictObject({ api_key_id: nonEmpty }),
  priority: z.number().int().min(0).max(0xffff_ffff).default(0),
  enabled: z.boolean().default(true),
});
export type ClaimMapping = Omit<z.infer<typeof ClaimMappingSchema>, 'id'> & { id: string };

/** Query members that carry a credential: a public JWKS endpoint never needs one (AISIX's list). */
const CREDENTIAL_QUERY_KEYS = new Set(['access_token', 'token', 'client_secret', 'password', 'api_key', 'apikey']);

/** Whether a URL embeds a credential: user info, or a credential query member (case-insensitive). */
export function urlHasCredentials(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false; // an unparsable URL fails at its fetch instead
  }
  if (u.username !== '' || u.password !== '') return true;
  for (const k of u.searchParams.keys()) if (CREDENTIAL_QUERY_KEYS.has(k.toLowerCase())) return true;
  return false;
}

export const readOidcProvider = schemaReader(OidcProviderSchema, (id, data): { ok: true; resource: OidcProvider } => {
  const { id: _id, ...rest } = data;
  return { ok: true, resource: { ...rest, id } };
});

export const readClaimMapping = schemaReader(ClaimMappingSchema, (id, data): { ok: true; resource: ClaimMapping } => {
  const { id: _id, ...rest } = data;
  return { ok: true, resource: { ...rest, id } };
});

/**
 * A file's claim mapping names its key by `resolve.api_key` (the key's display name), rewritten here into
 * `resolve.api_key_id`; an id given directly must be one of the file's keys. Returns the entry's error.
 */
export function desugarClaimMapping(doc: Record<string, unknown>, ids: FileIds): string | undefined {
  const resolve = doc.resolve;
  if (typeof resolve !== 'object' || resolve === null || Array.isArray(resolve)) return undefined; // the schema says
  const r = resolve as Record<string, unknown>;
  if (r.api_key !== undefined && r.api_key_id !== undefined) {
    return '`resolve.api_key` and `resolve.api_key_id` are mutually exclusive — name the key once';
  }
  if (r.api_key !== undefined) {
    if (typeof r.api_key !== 'string') return '`resolve.api_key` must be the display_name of an api key';
    const id = ids.api_keys.get(r.api_key);
    if (id === undefined) {
      const names = [...ids.api_keys.keys()].sort();
      return `resolve.api_key references unknown api key ${JSON.stringify(r.api_key)} (${
        names.length === 0 ? 'no api_keys are defined in this file' : `defined api_keys: ${names.join(', ')}`
      })`;
    }
    delete r.api_key;
    r.api_key_id = id;
    return undefined;
  }
  if (typeof r.api_key_id === 'string' && !ids.api_keys.hasId(r.api_key_id)) {
    return `resolve.api_key_id ${
      JSON.stringify(r.api_key_id)
    } does not match any api key defined in this file — reference the key by name via \`resolve.api_key\` instead`;
  }
  return undefined;
}
