// The resource kinds, one entry each (docs/architecture.md "Adding a resource kind"): whether Sluice serves the
// kind, how its file entries are named, its schema and how a document of it is read on both paths, whether the
// resources file has a collection for it, how a served resource is counted in `/status/config` and written by
// `sluice export`. The document parser, the etcd row parser, the
// file pipeline, the snapshot and export all read this table; none of them lists kinds of its own.
//
// The entries' order is the order `resource_counts` lists the served kinds in. AISIX's two orders (the etcd
// kinds an `unknown_kind` error names, the collections of its resources file) are facts of its format, kept
// as lists below that name every kind of this table.
import {
  type Mode,
  parseExporterDocument,
  type Read,
  readApiKey,
  readCachePolicy,
  readGuardrail,
  readGuardrailAttachment,
  readModel,
  readProviderKey,
} from './documents.ts';
import type { z } from 'zod';
import { GuardrailAttachmentSchema, GuardrailSchema } from '../guardrails/schema.ts';
import { desugarApiKey, desugarModel } from './desugar.ts';
import type { Env } from './interpolate.ts';
import { desugarPolicy, type FileIds, parsePolicyDocument } from './policy-document.ts';
import { readMcpAuthSettings, readMcpPolicy, readMcpServer } from './mcp-document.ts';
import { McpAuthSettingsSchema, McpPolicySchema, McpServerSchema } from './mcp-schema.ts';
import { RateLimitPolicySchema } from './policy-schema.ts';
import {
  ClaimMappingSchema,
  desugarClaimMapping,
  OidcProviderSchema,
  readClaimMapping,
  readOidcProvider,
} from './identity-schema.ts';
import { A2aAgentSchema, readA2aAgent } from './a2a-agent.ts';
import { desugarPassthroughRoute, PassthroughRouteSchema, readPassthroughRoute } from './passthrough-route-schema.ts';
import { ApiKeySchema, CachePolicySchema, ModelSchema, OtlpExporterSchema, ProviderKeySchema } from './schema.ts';

/** What a file entry's desugar stage is given (src/resources/pipeline.ts). */
export interface DesugarContext {
  env: Env;
  /** Provider key name → its derived id. */
  providerKeyIds: ReadonlyMap<string, string>;
  fileIds: FileIds;
}

/**
 * The member naming a file entry of the kind, unique within it (AISIX's `IdentityField`): `name_or_display_name`
 * takes `name`, else `display_name`; a `singleton` has one entry at most, named after its kind.
 */
export type Identity = 'display_name' | 'name' | 'name_or_display_name' | 'singleton';

/** A kind Sluice serves: its documents become resources in the snapshot. */
export interface ServedKind<R> {
  role: 'served';
  identity: Identity;
  /** The document's schema (its `read` applies it); the resources file's JSON Schema is made from it. */
  schema: z.ZodType;
  /** What the kind is, in a few words (the file's JSON Schema). */
  description: string;
  /** Reads one document (`doc` is consumed); `id` is the etcd key's id or the file entry's derived id. */
  read(id: string, doc: Record<string, unknown>, mode: Mode): Read<R>;
  /** The resources file has a collection of this kind. */
  file: boolean;
  /** Rewrites a file entry's conveniences into the canonical document in place; returns the entry's error. */
  desugar?(doc: Record<string, unknown>, ctx: DesugarContext): string | undefined | Promise<string | undefined>;
  /** Listed in `/status/config` `resource_counts`. */
  counted: boolean;
  /**
   * A rejected etcd update stops the row serving instead of keeping its last good value: the update may be a
   * revocation (docs/etcd.md), and a revoked key must not stay alive.
   */
  failsClosed?: true;
  /**
   * How `sluice export` writes a served row: `entries` normalised with references by name, `policies` with the
   * policy's references by name, `as_stored` the row as etcd holds it (its secrets redacted).
   */
  export: 'entries' | 'policies' | 'as_stored';
}

/**
 * An AISIX kind Sluice does not implement. `gating`: its rows gate traffic (access, safety, limits), so an
 * etcd row is rejected as `unsupported` and a file entry is an error, never ignored
 * (docs/aisix-compatibility.md "Never fail open"). `not_served`: its absence only loses observability or
 * configures a surface Sluice does not serve: accepted, not served, listed in `partially_compatible` (`*`).
 */
export interface UnservedKind<Role extends 'gating' | 'not_served' = 'gating' | 'not_served'> {
  role: Role;
  identity: Identity;
  file: boolean;
}

function served<R>(kind: Omit<ServedKind<R>, 'role'>): ServedKind<R> {
  return { role: 'served', ...kind };
}

export const KINDS = {
  provider_keys: served({
    identity: 'display_name',
    schema: ProviderKeySchema,
    description: 'upstream credentials',
    read: readProviderKey,
    file: true,
    counted: true,
    export: 'entries',
  }),
  models: served({
    identity: 'display_name',
    schema: ModelSchema,
    description: 'direct and routing models',
    read: readModel,
    file: true,
    desugar: (doc, c) => desugarModel(doc, c.providerKeyIds),
    counted: true,
    export: 'entries',
  }),
  api_keys: served({
    identity: 'display_name',
    schema: ApiKeySchema,
    description: 'caller keys',
    read: readApiKey,
    file: true,
    desugar: (doc, c) => desugarApiKey(doc, c.env),
    counted: true,
    failsClosed: true,
    export: 'entries',
  }),
  rate_limit_policies: served({
    identity: 'name',
    schema: RateLimitPolicySchema,
    description: 'rate-limit policies',
    read: parsePolicyDocument,
    file: true,
    desugar: (doc, c) => desugarPolicy(doc, c.fileIds),
    counted: true,
    export: 'policies',
  }),
  guardrails: served({
    identity: 'name',
    schema: GuardrailSchema,
    description: 'content policies (docs/guardrails.md)',
    read: readGuardrail,
    file: true,
    counted: true,
    export: 'as_stored',
  }),
  // A file has no attachments: every guardrail of a file applies environment-wide (AISIX's fallback).
  guardrail_attachments: served({
    identity: 'name',
    schema: GuardrailAttachmentSchema,
    description: 'where guardrails apply (etcd only)',
    read: readGuardrailAttachment,
    file: false,
    counted: true,
    export: 'as_stored',
  }),
  cache_policies: served({
    identity: 'name',
    schema: CachePolicySchema,
    description: 'response cache policies (docs/cache.md)',
    read: readCachePolicy,
    file: true,
    counted: true,
    export: 'entries',
  }),
  /** Trace exporters, read by src/telemetry only; AISIX's exporter kinds other than `otlp_http` are not served. */
  observability_exporters: served({
    identity: 'name',
    schema: OtlpExporterSchema,
    description:
      'exporters: otlp_http (traces), datadog and aliyun_sls (usage events) are served; object_store is accepted, not served',
    read: parseExporterDocument,
    file: true,
    counted: false,
    export: 'as_stored',
  }),
  // No file collection (AISIX's file has none): in a file, MCP access comes from `api_keys[].mcp_access` only.
  mcp_policies: served({
    identity: 'name',
    schema: McpPolicySchema,
    description: 'MCP tool access policies (etcd only; docs/mcp.md)',
    read: readMcpPolicy,
    file: false,
    counted: true,
    export: 'as_stored',
  }),
  /** Who may assert a caller's identity with a JWT (docs/identity.md), read by src/identity only. */
  oidc_providers: served({
    identity: 'name',
    schema: OidcProviderSchema,
    description: 'JWT issuers trusted to name callers (docs/identity.md)',
    read: readOidcProvider,
    file: true,
    counted: true,
    failsClosed: true,
    export: 'entries',
  }),
  claim_mappings: served({
    identity: 'name',
    schema: ClaimMappingSchema,
    description: "which api key a JWT's claims select (docs/identity.md)",
    read: readClaimMapping,
    file: true,
    desugar: (doc, c) => desugarClaimMapping(doc, c.fileIds),
    counted: true,
    failsClosed: true,
    export: 'entries',
  }),
  mcp_servers: served({
    identity: 'name_or_display_name',
    schema: McpServerSchema,
    description: 'upstream MCP servers behind /mcp (docs/mcp.md)',
    read: readMcpServer,
    file: true,
    counted: true,
    export: 'as_stored',
  }),
  mcp_auth_settings: served({
    identity: 'singleton',
    schema: McpAuthSettingsSchema,
    description: "/mcp's OAuth metadata and anonymous access (docs/mcp.md)",
    read: readMcpAuthSettings,
    file: true,
    counted: true,
    export: 'as_stored',
  }),
  /** Upstream A2A agents the gateway fronts at `/a2a/<name>` (src/a2a, docs/a2a.md). */
  a2a_agents: served({
    identity: 'name_or_display_name',
    schema: A2aAgentSchema,
    description: 'A2A agents (docs/a2a.md)',
    read: readA2aAgent,
    file: true,
    counted: true,
    export: 'as_stored',
  }),
  /** Served by src/passthrough/ (docs/endpoints.md "Passthrough routes"). */
  passthrough_routes: served({
    identity: 'name_or_display_name',
    schema: PassthroughRouteSchema,
    description: 'passthrough routes: a path prefix or hosts relayed to one upstream (docs/endpoints.md)',
    read: readPassthroughRoute,
    file: true,
    desugar: (doc, c) => desugarPassthroughRoute(doc, c.providerKeyIds, c.fileIds.api_keys),
    counted: true,
    export: 'entries',
  }),
} as const;

export type KindName = keyof typeof KINDS;
type Kinds = typeof KINDS;
/** The kinds Sluice serves. */
export type ResourceKind = { [K in KindName]: Kinds[K] extends ServedKind<unknown> ? K : never }[KindName];
/** What reading a document of a served kind yields (undefined: accepted, not served). */
export type ReadOf<K extends ResourceKind> = Kinds[K] extends ServedKind<infer R> ? R : never;
/** The resource a served kind's document becomes. */
export type ResourceOf<K extends ResourceKind> = NonNullable<ReadOf<K>>;
export type GatingKind = { [K in KindName]: Kinds[K] extends { role: 'gating' } ? K : never }[KindName];
export type NotServedKind = { [K in KindName]: Kinds[K] extends { role: 'not_served' } ? K : never }[KindName];

const NAMES = Object.keys(KINDS) as KindName[];

/** The served kinds, in `resource_counts` order. */
export const RESOURCE_KINDS = NAMES.filter((k): k is ResourceKind => KINDS[k].role === 'served');

/** AISIX's 15 kinds (the etcd key segment), in the order its `unknown_kind` message lists them. */
export const AISIX_KINDS = [
  'provider_keys',
  'models',
  'api_keys',
  'guardrails',
  'guardrail_attachments',
  'cache_policies',
  'observability_exporters',
  'rate_limit_policies',
  'mcp_policies',
  'oidc_providers',
  'claim_mappings',
  'mcp_servers',
  'mcp_auth_settings',
  'a2a_agents',
  'passthrough_routes',
] as const satisfies readonly KindName[];

/** The collections of AISIX's resources file (13: no `guardrail_attachments`, no `mcp_policies`), in its order. */
export const FILE_COLLECTIONS = [
  'provider_keys',
  'models',
  'api_keys',
  'guardrails',
  'mcp_servers',
  'a2a_agents',
  'cache_policies',
  'observability_exporters',
  'rate_limit_policies',
  'oidc_providers',
  'claim_mappings',
  'passthrough_routes',
  'mcp_auth_settings',
] as const satisfies readonly KindName[];

export function isKind(kind: string): kind is KindName {
  return Object.hasOwn(KINDS, kind);
}
export function isResourceKind(kind: string): kind is ResourceKind {
  return isKind(kind) && KINDS[kind].role === 'served';
}
export function isGatingKind(kind: string): kind is GatingKind {
  return isKind(kind) && roleOf(kind) === 'gating';
}
/**
 * A kind's role, as the type every entry may have: every kind AISIX defines today is served, and the paths
 * that refuse or set aside a kind stay for one AISIX adds.
 */
export function roleOf(kind: KindName): 'served' | 'gating' | 'not_served' {
  return KINDS[kind].role;
}

/** The entry of a served kind. */
export function servedKind<K extends ResourceKind>(kind: K): ServedKind<ReadOf<K>> {
  return KINDS[kind] as unknown as ServedKind<ReadOf<K>>;
}

/**
 * Judges one document of a served kind, by its entry. `doc` is consumed (lenient mode removes members from it).
 * `id` is the resource id (the etcd key's id, or the file's derived id).
 */
export function parseDocument<K extends ResourceKind>(
  kind: K,
  id: string,
  doc: Record<string, unknown>,
  mode: Mode,
): Read<ReadOf<K>> {
  return servedKind(kind).read(id, doc, mode);
}
