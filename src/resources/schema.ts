// Resource schemas (AISIX `resources.yaml` format "1" and the etcd row values). One zod shape per kind;
// types come from the schemas (z.infer), never from hand-written twins. The facts are AISIX's
// (docs/aisix-compatibility.md "Resources"): required members, defaults, ranges, closed enums, and `null` = absent for
// every member AISIX marks nullable.
//
// The schemas are strict (an unknown member is an `unrecognized_keys` issue at any depth): the file
// pipeline reports those as errors, the etcd reader (`parseDocument`) drops and reports them.
//
// The canonical form is what etcd stores and what the snapshot holds: `provider_key_id`, `key_hash`.
// File sugar (`provider_key` by name, `key_env`) is desugared into it by the file pipeline first;
// `secret` is AISIX's alias of a provider key's `api_key` on every path.
import { z } from 'zod';
import { CapabilitiesSchema } from './capabilities.ts';
import { BudgetListSchema } from './budget-schema.ts';
import { McpAccessSchema, McpRateLimitsSchema } from './mcp-schema.ts';
import { isWildcardName } from './wildcard.ts';
import { SemanticSchema } from './semantic-schema.ts';

const ADAPTERS = ['openai', 'anthropic', 'bedrock', 'vertex', 'azure-openai', 'echo'] as const;
export type AdapterName = (typeof ADAPTERS)[number];

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const httpStatus = z.number().int().min(100).max(599);
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** An optional member AISIX also accepts as JSON `null`, which means absent. */
function nullOk<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema.optional());
}

/** Per-caller / per-model limits (docs/configuration.md `rate_limit`). */
export const RateLimitSchema = z.strictObject({
  // AISIX's members (docs/aisix-compatibility.md "Resources"): unsigned integers; `null` is the same as absent (no limit); `0` is a
  // real limit (src/routing/rate-limit.ts says what each admits).
  rps: z.number().int().nonnegative().nullable().optional(),
  rpm: z.number().int().nonnegative().nullable().optional(),
  rph: z.number().int().nonnegative().nullable().optional(),
  rpd: z.number().int().nonnegative().nullable().optional(),
  tpm: z.number().int().nonnegative().nullable().optional(),
  tpd: z.number().int().nonnegative().nullable().optional(),
  concurrency: z.number().int().nonnegative().nullable().optional(),
});
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** docs/routing.md: cooldown is on for every direct model unless this block turns it off. */
export const CooldownSchema = z.strictObject({
  enabled: z.boolean().default(true),
  default_seconds: nonNegInt.default(30),
  max_seconds: positiveInt.default(600),
  honor_retry_after: z.boolean().default(true),
  trigger_statuses: z.array(httpStatus).default([401, 408, 429, 500, 502, 503, 504]),
  trigger_on_timeout: z.boolean().default(true),
  trigger_on_transport: z.boolean().default(true),
});
export type Cooldown = z.infer<typeof CooldownSchema>;

/** AISIX: every member required except `ignore_statuses`. */
export const BackgroundCheckSchema = z.strictObject({
  enabled: z.boolean(),
  interval_seconds: z.number().int().min(5, 'must be at least 5'),
  timeout_seconds: z.number().int().min(1, 'must be at least 1'),
  prompt: z.string().min(1, 'must not be empty'),
  max_tokens: positiveInt,
  stale_after_seconds: positiveInt,
  ignore_statuses: z.array(httpStatus).optional(),
});
export type BackgroundCheck = z.infer<typeof BackgroundCheckSchema>;

/** USD per 1K tokens; both members required. */
export const CostSchema = z.strictObject({
  input_per_1k: z.number().nonnegative(),
  output_per_1k: z.number().nonnegative(),
});
export type Cost = z.infer<typeof CostSchema>;

const displayName = z.string().min(1, 'must not be empty');

/** `a.b.c.d/len` (len 0–32) or an IPv6 address `/len` (0–128). */
export function isCidr(s: string): boolean {
  const slash = s.lastIndexOf('/');
  if (slash < 0) return false;
  const addr = s.slice(0, slash);
  const lenText = s.slice(slash + 1);
  if (!/^\d{1,3}$/.test(lenText)) return false;
  const len = Number(lenText);
  if (addr.includes(':')) return len <= 128 && z.ipv6().safeParse(addr).success;
  return len <= 32 && z.ipv4().safeParse(addr).success;
}
const cidrList = z.array(z.string().refine(isCidr, 'must be a CIDR (`addr/len`, IPv4 or IPv6)'));

export const providerKeyShape = {
  /** AISIX ignores an `id` member (the id is the key's); kept as a known member so it is not reported. */
  id: z.unknown().optional(),
  display_name: displayName,
  provider: z.string().default(''),
  adapter: nullOk(z.enum(ADAPTERS)),
  api_key: z.string().min(1, 'must not be empty').optional(),
  /** AISIX's alias of `api_key` (serde alias): moved onto `api_key` by `desugarSecret`. */
  secret: z.string().min(1, 'must not be empty').optional(),
  /** An http(s) URL, or (Azure only) a bare resource name; blank = absent. Each family's finer rules: its adapter. */
  api_base: nullOk(z.string().refine((s) => isHttpUrl(s) || isBareName(s), 'must be an http(s) URL')),
  /**
   * Sluice-only: top-level members of the caller's body never sent under this key (a vendor's routing or
   * stateful fields, e.g. OpenRouter's `models`, `route`, `provider`): docs/routing.md "Fields a key drops".
   */
  drop_body_fields: z.array(
    z.string().min(1, 'must not be empty').refine((f) => f !== 'model', 'the upstream model name is always sent'),
  ).optional(),
  /** TLS to this key's upstream, on top of `upstream.tls` (docs/configuration.md "Provider keys"). */
  tls: nullOk(z.strictObject({
    /** PEM CA certificates trusted for this key's upstream, added to the gateway's; blank = none. */
    ca_cert: nullOk(z.string().refine((s) => s.trim() === '' || PEM_CERTIFICATE.test(s), 'holds no CERTIFICATE block')),
    verify: z.boolean().default(true),
  })),
  /** Headers added to this key's upstream calls (src/providers/upstream-headers.ts). */
  request: nullOk(z.strictObject({
    default_headers: z.record(z.string(), z.string()).default({}),
    forward_client_headers: z.array(z.string()).default([]),
  })), /** Attribution copied onto the usage events of this key's calls (docs/usage-events.md "Fields"). */
  telemetry_tags: nullOk(z.strictObject({
    kind: nullOk(z.enum(['catalog', 'byo'])),
    featured: z.boolean().default(false),
    branded_provider: nullOk(z.string()),
    pk_label: nullOk(z.string()),
    byo_label: nullOk(z.string()),
  })),
};

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;

function isHttpUrl(s: string): boolean {
  return s.trim() === '' || z.url({ protocol: /^https?$/ }).safeParse(s.trim()).success;
}
function isBareName(s: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(s.trim());
}
/**
 * A provider key needs a credential (`api_key` or its alias `secret`), except on Sluice's own `echo`
 * adapter, which calls no upstream.
 */
export const ProviderKeySchema = z.strictObject(providerKeyShape).superRefine((k, ctx) => {
  const adapter = k.adapter ?? defaultAdapter(k.provider);
  if (k.api_key === undefined && k.secret === undefined && adapter !== 'echo') {
    ctx.addIssue({ code: 'custom', path: ['api_key'], message: 'required (or its alias `secret`)' });
  }
  if (k.api_base !== undefined && adapter !== 'azure-openai' && !isHttpUrl(k.api_base)) {
    ctx.addIssue({ code: 'custom', path: ['api_base'], message: 'must be an http(s) URL' });
  }
});
type ProviderKeyRow = z.infer<typeof ProviderKeySchema>;
/** `adapter` is undefined for a key of another vendor that names none: it is refused at dispatch, never guessed. */
export type ProviderKey = Omit<ProviderKeyRow, 'id' | 'secret' | 'adapter'> & { id: string; adapter?: AdapterName };

export const STRATEGIES = [
  'failover',
  'round_robin',
  'consistent_hash',
  'least_cost',
  'least_latency',
  'least_busy',
] as const;
export type Strategy = (typeof STRATEGIES)[number];

export const RoutingTargetSchema = z.strictObject({
  model: z.string().min(1),
  weight: nonNegInt.default(1),
  priority: z.number().int().min(INT32_MIN).max(INT32_MAX).default(0),
  /** Tag routing (docs/routing.md "Tag routing"): `default` marks the target chosen when no tag matches. */
  tags: z.array(z.string().min(1, 'a tag must not be empty')).optional(),
});
export type RoutingTarget = z.infer<typeof RoutingTargetSchema>;

export const HASH_SOURCES = ['header', 'cookie', 'api_key', 'client_ip'] as const;
export const HashOnSchema = z.strictObject({
  type: z.enum(HASH_SOURCES),
  /** Header or cookie name; AISIX's schema leaves it optional, and a source without one yields no key. */
  name: z.string().min(1).optional(),
});
export type HashOn = z.infer<typeof HashOnSchema>;

export const RoutingSchema = z.strictObject({
  strategy: z.enum(STRATEGIES).default('failover'),
  targets: z.array(RoutingTargetSchema).min(1, 'needs at least one target'),
  retries: nonNegInt.optional(),
  max_fallbacks: nonNegInt.optional(),
  retry_on_429: z.boolean().default(false),
  fallback_on_statuses: z.array(httpStatus).optional(),
  when_all_unavailable: z.enum(['fail', 'try_anyway']).default('fail'),
  /** consistent_hash key sources, first present wins; absent → header `x-aisix-routing-key`, then the api key. */
  hash_on: z.array(HashOnSchema).min(1, 'needs at least one source').optional(),
});
export type Routing = z.infer<typeof RoutingSchema>;

/** Fields only a direct model may carry: on a routing model they reject the row. */
export const DIRECT_ONLY_FIELDS = [
  'provider',
  'model_name',
  'provider_key_id',
  'cooldown',
  'background_model_check',
  'capabilities',
] as const;
/**
 * Kind-inapplicable members AISIX strips from a routing model read from etcd (reported as
 * `inapplicable:<field>`); in a file they are errors like the direct-only ones.
 */
export const INAPPLICABLE_ON_ROUTING = ['cost', 'retries', 'auto_prompt_caching'] as const;

export const modelShape = {
  id: z.unknown().optional(),
  display_name: displayName,
  provider: z.string().min(1).max(64).regex(/^[a-z0-9][a-z0-9._-]*$/, 'must match ^[a-z0-9][a-z0-9._-]*$')
    .optional(),
  model_name: z.string().min(1).optional(),
  provider_key_id: z.string().min(1).optional(),
  /** ms; 0 = no deadline. Direct and routing (group-level) models. */
  timeout: nonNegInt.optional(),
  /** ms; 0 = fall back (model/group `timeout`, then the deployment's). Direct and routing models. */
  stream_timeout: nonNegInt.optional(),
  retries: nonNegInt.optional(),
  cooldown: CooldownSchema.optional(),
  background_model_check: BackgroundCheckSchema.optional(),
  cost: CostSchema.optional(),
  rate_limit: RateLimitSchema.optional(),
  /** An embedding model's vector size (the response cache's semantic layer reads it: docs/cache.md). */
  embedding: z.strictObject({ dimensions: positiveInt, normalize: z.boolean().default(true) }).optional(),
  /** Client IP allowlist (CIDRs); absent = every client. */
  allowed_cidrs: cidrList.optional(),
  /** What the upstream model accepts, over its family's defaults (docs/translation.md). Sluice's own. */
  capabilities: CapabilitiesSchema.optional(),
  /**
   * Prompt-cache breakpoints added to chat requests translated to Anthropic that carry none of their own
   * (docs/routing.md "Anthropic Messages"). `ttl` absent = `5m`.
   */
  auto_prompt_caching: z.strictObject({ enabled: z.boolean(), ttl: z.enum(['5m', '1h']).optional() }).optional(),
  routing: RoutingSchema.optional(),
  /** A semantic router (docs/routing.md "Semantic routing"): exclusive with `routing` and the direct fields. */
  semantic: SemanticSchema.optional(),
  /** Sluice's: spend budgets of every call to this model (docs/budgets.md). */
  budgets: BudgetListSchema.optional(),
};

function checkModelForm(m: { routing?: unknown } & Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (m.semantic !== undefined) {
    for (const f of ['routing', ...DIRECT_ONLY_FIELDS, ...INAPPLICABLE_ON_ROUTING]) {
      if (m[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: 'not allowed on a semantic model' });
    }
    return;
  }
  if (m.routing !== undefined) {
    for (const f of [...DIRECT_ONLY_FIELDS, ...INAPPLICABLE_ON_ROUTING]) {
      if (m[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: 'not allowed on a routing model' });
    }
    return;
  }
  // A wildcard row without model_name sends what its `*` bound (docs/routing.md "Wildcard models").
  if (m.model_name === undefined && !isWildcardName(String(m.display_name))) {
    ctx.addIssue({ code: 'custom', path: ['model_name'], message: 'required for a direct model (or give `routing`)' });
  }
  if (m.provider_key_id === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['provider_key_id'],
      message: 'required for a direct model (`provider_key` by name in a file)',
    });
  }
}

export const ModelSchema = z.strictObject(modelShape).superRefine(checkModelForm);
type ModelRow = Omit<z.infer<typeof ModelSchema>, 'id'>;
export type DirectModel = ModelRow & {
  id: string;
  kind: 'direct';
  model_name: string;
  provider_key_id: string;
  routing?: undefined;
};
export type RoutingModel = ModelRow & { id: string; kind: 'routing'; routing: Routing };
export type Model = DirectModel | RoutingModel;

export const apiKeyShape = {
  id: z.unknown().optional(),
  /** A dashboard label only: optional, never an identity on the etcd path. */
  display_name: nullOk(z.string()),
  key_hash: z.string().min(1, 'must not be empty'),
  allowed_models: z.array(z.string().min(1)),
  expires_at: nullOk(z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' })),
  disabled: z.boolean().default(false),
  rate_limit: nullOk(RateLimitSchema),
  team_id: nullOk(z.string().min(1)),
  user_id: nullOk(z.string().min(1)),
  user_name: nullOk(z.string()),
  /** The identity claim value a JWT of `jwt_provider` names this key by (docs/identity.md). */
  jwt_subject: nullOk(z.string().min(1, 'must not be empty')),
  /** The `oidc_providers` name allowed to assert `jwt_subject`. */
  jwt_provider: nullOk(z.string().min(1, 'must not be empty')),
  /** Sluice's: spend budgets of this key (docs/budgets.md). */
  budgets: nullOk(BudgetListSchema),
  /** The A2A agents the key may reach (single-`*` globs over agent names); absent or empty: none (docs/a2a.md). */
  allowed_agents: nullOk(z.array(z.string())),
  /** The passthrough routes the key may use, by name, single-`*` globs; absent, `null` or `[]`: none. */
  allowed_routes: nullOk(z.array(z.string())),
  /** The key's own MCP tool ACL layer (docs/mcp.md "Access control"). */
  mcp_access: nullOk(McpAccessSchema),
  /** Per MCP server name: the key's limits on that server's tool calls (docs/mcp.md "Governance"). */
  mcp_rate_limits: nullOk(McpRateLimitsSchema),
  /** Sluice's: hashes a rotation replaced, each valid until its `expires_at` (docs/admin.md "Rotation"). */
  previous_key_hashes: nullOk(z.array(z.strictObject({
    key_hash: z.string().min(1, 'must not be empty'),
    expires_at: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }),
  }))),
};
export const ApiKeySchema = z.strictObject(apiKeyShape);
export type ApiKey = Omit<z.infer<typeof ApiKeySchema>, 'id'> & { id: string };

/**
 * The adapter of a vendor id when `adapter` is not given: `openai` (and `""`), `anthropic`, `echo` name
 * their own; any other vendor has none, so its key is never sent down a wire it was not meant for.
 */
export function defaultAdapter(provider: string): AdapterName | undefined {
  const vendor = provider.trim().toLowerCase();
  if (vendor === '' || vendor === 'openai') return 'openai';
  if (vendor === 'anthropic' || vendor === 'echo') return vendor;
  return undefined;
}

/** AISIX's `endpoint` pattern: https anywhere, plain http only to a local collector. */
const OTLP_ENDPOINT = /^(https:\/\/.+|http:\/\/(mock-otlp|otel-collector|127\.0\.0\.1|localhost)(:[0-9]+)?(\/.*)?)$/;

/** `observability_exporters` of `kind: otlp_http` (docs/operations.md "Tracing"). */
export const OtlpExporterSchema = z.strictObject({
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty').max(120),
  kind: z.literal('otlp_http'),
  enabled: z.boolean().default(true),
  endpoint: z.string().regex(
    OTLP_ENDPOINT,
    'must be an https:// URL (http:// only to localhost, 127.0.0.1, otel-collector or mock-otlp)',
  ),
  headers: z.record(z.string(), z.string()).default({}),
  sample_rate: nullOk(z.number().min(0).max(1)),
  content_mode: z.enum(['metadata_only', 'full']).default('metadata_only'),
  content_max_bytes: z.number().int().min(1).max(1_048_576).default(131_072),
});
/** AISIX's `site` pattern: a Datadog site, or a local intake over plain http. */
const DATADOG_SITE =
  /^(datadoghq\.com|us3\.datadoghq\.com|us5\.datadoghq\.com|datadoghq\.eu|ap1\.datadoghq\.com|ap2\.datadoghq\.com|ddog-gov\.com|(mock-datadog|127\.0\.0\.1|localhost)(:[0-9]+)?)$/;

/** `observability_exporters` of `kind: datadog`: usage events to Datadog's logs intake (docs/usage-events.md). */
export const DatadogExporterSchema = z.strictObject({
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty').max(120),
  kind: z.literal('datadog'),
  enabled: z.boolean().default(true),
  site: z.string().regex(
    DATADOG_SITE,
    'must be a Datadog site (datadoghq.com, us3.datadoghq.com, us5.datadoghq.com, datadoghq.eu, ap1.datadoghq.com, ap2.datadoghq.com, ddog-gov.com) or mock-datadog, 127.0.0.1 or localhost with an optional :port',
  ),
  credential_ref: z.string().min(1, 'must not be empty'),
  service: z.string().min(1, 'must not be empty'),
  ddsource: z.string().default('aisix-ai-gateway'),
  tags: z.array(z.string()).default([]),
  content_mode: z.enum(['metadata_only', 'full']).default('metadata_only'),
  content_max_bytes: z.number().int().min(1).max(1_048_576).default(131_072),
});
export type DatadogExporterResource = Omit<z.infer<typeof DatadogExporterSchema>, 'id'> & { id: string };

/** AISIX's `endpoint` pattern: an Aliyun SLS endpoint, or a local intake over plain http. */
const SLS_ENDPOINT = /^([a-z0-9][a-z0-9.-]*\.aliyuncs\.com|http:\/\/(mock-sls|127\.0\.0\.1|localhost)(:[0-9]+)?)$/;

/** `observability_exporters` of `kind: aliyun_sls`: usage events to an SLS logstore (docs/usage-events.md). */
export const SlsExporterSchema = z.strictObject({
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty').max(120),
  kind: z.literal('aliyun_sls'),
  enabled: z.boolean().default(true),
  endpoint: z.string().regex(
    SLS_ENDPOINT,
    'must be an SLS endpoint (<region>.log.aliyuncs.com) or http://mock-sls, http://127.0.0.1 or http://localhost with an optional :port',
  ),
  project: z.string().min(1, 'must not be empty'),
  logstore: z.string().min(1, 'must not be empty'),
  credential_ref: z.string().min(1, 'must not be empty'),
  content_mode: z.enum(['metadata_only', 'full']).default('metadata_only'),
  content_max_bytes: z.number().int().min(1).max(1_048_576).default(131_072),
});
export type SlsExporterResource = Omit<z.infer<typeof SlsExporterSchema>, 'id'> & { id: string };
/** The exporters usage events go to. */
export type UsageExporterResource = DatadogExporterResource | SlsExporterResource;

/** AISIX's other exporter kinds: accepted with any members, not served. */
export const OTHER_EXPORTER_KINDS = ['object_store'] as const;
export const OtherExporterSchema = z.looseObject({
  name: z.string().min(1, 'must not be empty').max(120),
  kind: z.enum(OTHER_EXPORTER_KINDS),
  enabled: z.boolean().default(true),
});
export type OtlpExporterResource = Omit<z.infer<typeof OtlpExporterSchema>, 'id' | 'sample_rate'> & {
  id: string;
  /** Absent in the document = 1.0. */
  sample_rate: number;
};
/** AISIX's `cache_policies` (docs/cache.md): which requests the response cache answers, and for how long. */
export const cachePolicyShape = {
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty').max(120),
  enabled: z.boolean().default(true),
  backend: z.enum(['memory', 'redis']).default('memory'),
  ttl_seconds: z.number().int().min(1).max(604_800).default(3600),
  /** `all`, `model:<name>`, `api_key:<id>`; anything else matches like `all` (AISIX's parse). */
  applies_to: z.string().min(1).max(255).default('all'),
  scope: z.enum(['api_key', 'env']).default('api_key'),
  purge_generation: z.number().int().min(0).max(0xffff_ffff).default(0),
  semantic: nullOk(z.strictObject({
    embedding_model: z.string().min(1, 'must not be empty'),
    threshold: z.number().min(0).max(1),
    max_entries: z.number().int().min(1).max(10_000).default(1000),
    embedding_timeout_ms: nonNegInt.optional(),
  })),
};
export const CachePolicySchema = z.strictObject(cachePolicyShape);
export type CachePolicy = Omit<z.infer<typeof CachePolicySchema>, 'id'> & { id: string };
