// Resource schemas (AISIX `resources.yaml` format "1" and the etcd row values). One zod shape per kind;
// types come from the schemas (z.infer), never from hand-written twins.
//
// The canonical form is what etcd stores and what the snapshot holds: `provider_key_id`, `key_hash`.
// File sugar (`provider_key` by name, `key_env`) is desugared into it by the file pipeline first.
import { z } from 'zod';

export const RESOURCE_KINDS = ['provider_keys', 'models', 'api_keys'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

const ADAPTERS = ['openai', 'anthropic', 'echo'] as const;
export type AdapterName = (typeof ADAPTERS)[number];

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const httpStatus = z.number().int().min(100).max(599);

/** Per-caller / per-model limits (SPEC §4 `rate_limit`). */
export const RateLimitSchema = z.strictObject({
  rps: positiveInt.optional(),
  rpm: positiveInt.optional(),
  tpm: positiveInt.optional(),
  concurrency: positiveInt.optional(),
});
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** SPEC §7.3: cooldown is on for every direct model unless this block turns it off. */
export const CooldownSchema = z.strictObject({
  enabled: z.boolean().default(true),
  default_seconds: nonNegInt.default(30),
  max_seconds: nonNegInt.default(600),
  honor_retry_after: z.boolean().default(true),
  trigger_statuses: z.array(httpStatus).default([401, 408, 429, 500, 502, 503, 504]),
  trigger_on_timeout: z.boolean().default(true),
  trigger_on_transport: z.boolean().default(true),
});
export type Cooldown = z.infer<typeof CooldownSchema>;

export const BackgroundCheckSchema = z.strictObject({
  enabled: z.boolean().default(true),
  interval_seconds: z.number().int().min(5, 'must be at least 5').default(60),
  timeout_seconds: z.number().int().min(1, 'must be at least 1').default(10),
  prompt: z.string().default('ping'),
  max_tokens: positiveInt.default(1),
  ignore_statuses: z.array(httpStatus).default([]),
  stale_after_seconds: positiveInt.optional(),
});
export type BackgroundCheck = z.infer<typeof BackgroundCheckSchema>;

const idField = z.string().min(1).optional();
const displayName = z.string().min(1, 'must not be empty');

export const providerKeyShape = {
  id: idField,
  display_name: displayName,
  provider: z.string().min(1),
  adapter: z.enum(ADAPTERS).optional(),
  api_key: z.string().optional(),
  api_base: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
};
export const ProviderKeySchema = z.object(providerKeyShape);
export type ProviderKey = z.infer<typeof ProviderKeySchema> & { id: string; adapter: AdapterName };

export const STRATEGIES = ['failover', 'round_robin', 'consistent_hash', 'least_latency', 'least_busy'] as const;
export type Strategy = (typeof STRATEGIES)[number];

export const RoutingTargetSchema = z.strictObject({
  model: z.string().min(1),
  weight: z.number().nonnegative().default(1),
  priority: z.number().int().default(0),
  retries: nonNegInt.optional(),
});
export type RoutingTarget = z.infer<typeof RoutingTargetSchema>;

export const RoutingSchema = z.strictObject({
  strategy: z.enum(STRATEGIES).default('failover'),
  targets: z.array(RoutingTargetSchema).min(1, 'needs at least one target'),
  retries: nonNegInt.optional(),
  max_fallbacks: nonNegInt.optional(),
  retry_on_429: z.boolean().default(false),
  fallback_on_statuses: z.array(httpStatus).optional(),
  when_all_unavailable: z.enum(['fail', 'try_anyway']).default('fail'),
  /** consistent_hash: hash this request header; absent → the caller's API key. */
  hash_header: z.string().min(1).optional(),
});
export type Routing = z.infer<typeof RoutingSchema>;

/** Fields only a direct model may carry (a routing model forbids them). */
export const DIRECT_ONLY_FIELDS = [
  'provider',
  'model_name',
  'provider_key_id',
  'timeout',
  'stream_timeout',
  'retries',
  'cooldown',
  'background_model_check',
  'cost',
] as const;

export const modelShape = {
  id: idField,
  display_name: displayName,
  provider: z.string().min(1).optional(),
  model_name: z.string().min(1).optional(),
  provider_key_id: z.string().min(1).optional(),
  timeout: positiveInt.optional(),
  stream_timeout: positiveInt.optional(),
  retries: nonNegInt.optional(),
  cooldown: CooldownSchema.optional(),
  background_model_check: BackgroundCheckSchema.optional(),
  cost: z.record(z.string(), z.number()).optional(),
  rate_limit: RateLimitSchema.optional(),
  routing: RoutingSchema.optional(),
  /** AISIX: the client-IP allowlist (CIDR blocks); absent = every client. Enforced in src/proxy. */
  allowed_cidrs: z.array(z.string().min(1)).optional(),
};

function checkModelForm(m: { routing?: unknown } & Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (m.routing !== undefined) {
    for (const f of DIRECT_ONLY_FIELDS) {
      if (m[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: 'not allowed on a routing model' });
    }
    return;
  }
  if (m.model_name === undefined) {
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

export const ModelSchema = z.object(modelShape).superRefine(checkModelForm);
type ModelRow = z.infer<typeof ModelSchema>;
export type DirectModel = ModelRow & {
  id: string;
  kind: 'direct';
  model_name: string;
  provider_key_id: string;
  routing?: undefined;
};
export type RoutingModel = ModelRow & { id: string; kind: 'routing'; routing: Routing };
export type Model = DirectModel | RoutingModel;

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex SHA-256 (64 characters)');

export const apiKeyShape = {
  id: idField,
  display_name: displayName,
  key_hash: sha256Hex,
  allowed_models: z.array(z.string().min(1)).default([]),
  expires_at: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }).optional(),
  disabled: z.boolean().default(false),
  rate_limit: RateLimitSchema.optional(),
};
export const ApiKeySchema = z.object(apiKeyShape);
export type ApiKey = z.infer<typeof ApiKeySchema> & { id: string };

export const SHAPES = { provider_keys: providerKeyShape, models: modelShape, api_keys: apiKeyShape } as const;
export const ROW_SCHEMAS = { provider_keys: ProviderKeySchema, models: ModelSchema, api_keys: ApiKeySchema } as const;

/** The default adapter of a vendor id, when `adapter` is not given. */
export function defaultAdapter(provider: string): AdapterName {
  if (provider === 'anthropic') return 'anthropic';
  if (provider === 'echo') return 'echo';
  return 'openai';
}

export const DEFAULT_API_BASE: Record<AdapterName, string | undefined> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  echo: undefined,
};
