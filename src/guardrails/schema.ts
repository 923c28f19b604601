// The `guardrails` and `guardrail_attachments` resources (docs/guardrails.md "Resources"): AISIX's members,
// defaults, ranges and closed enums. Each kind is a closed object (strict in files; on etcd unknown members
// are dropped and reported, src/resources/documents.ts).
import { z } from 'zod';

const INT32 = z.number().int().min(-(2 ** 31)).max(2 ** 31 - 1);
const action = z.enum(['mask', 'block']);
const bufferCap = z.number().int().min(1).default(262_144);
const onBufferExceeded = z.enum(['fail_closed', 'fail_open']).default('fail_closed');
const timeoutMs = z.number().int().nonnegative().default(5000);
const url = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
/**
 * Values that become part of a remote service's URL: the region is a host label, the Bedrock guardrail's id
 * and version are path segments. Each is held to its service's grammar here, so `..`, `/`, `#` or a dot
 * never reach a URL the signed request goes to (docs/security.md "Upstream URLs and credentials").
 */
const regionName = z.string().regex(
  /^[a-z0-9]+(?:-[a-z0-9]+)*$/,
  'must be a region name such as us-east-1 or cn-shanghai (lowercase letters, digits and single "-")',
);
const bedrockGuardrailId = z.string().max(64).regex(
  /^(?:[A-Za-z0-9_-]+|arn:aws(?:-[a-z]+)*:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail\/[a-z0-9]+)$/,
  'must be a Bedrock guardrail id (letters, digits, "-" and "_") or its ARN',
);
const bedrockGuardrailVersion = z.string().regex(
  /^(?:[1-9][0-9]{0,7}|DRAFT)$/,
  'must be a version number (1-99999999) or DRAFT',
);

const common = {
  /** AISIX ignores an `id` member (the id is the row's key). */
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty'),
  enabled: z.boolean().default(true),
  hook_point: z.enum(['input', 'output', 'both']).default('both'),
  /** `block` enforces, `monitor` observes; any other value enforces (with a WARN at build). */
  enforcement_mode: z.string().default('block'),
  /** Read by remote kinds only (their default is `false`, below); local kinds never fail. */
  fail_open: z.boolean().default(true),
  mandatory: z.boolean().default(false),
  /** A hint only; never read at run time. */
  direction: z.string().default('both'),
  created_at: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }).optional(),
};
/**
 * Remote kinds fail closed on input by default (AISIX: `fail_open: true`): a service that a flood has
 * throttled must not let every caller's input through unscreened (docs/security.md "Limits before paid work").
 */
const remoteFailOpen = z.boolean().default(false);
const remote = {
  ...common,
  fail_open: remoteFailOpen,
  output_fail_open: z.boolean().default(false),
  timeout_ms: timeoutMs,
};

const KeywordPattern = z.strictObject({ kind: z.enum(['literal', 'regex']), value: z.string().min(1) });

export const PII_DETECTORS = [
  'email',
  'china_mobile',
  'china_id_card',
  'bank_card',
  'us_ssn',
  'ip_address',
  'api_key',
  'jwt',
  'private_key',
] as const;
export type PiiDetectorType = (typeof PII_DETECTORS)[number];

const Keyword = z.strictObject({ ...common, kind: z.literal('keyword'), patterns: z.array(KeywordPattern) });

const Pii = z.strictObject({
  ...common,
  kind: z.literal('pii'),
  detectors: z.array(z.strictObject({ type: z.enum(PII_DETECTORS), action: action.optional() })).default([]),
  custom_patterns: z.array(z.strictObject({
    name: z.string().min(1).max(64),
    regex: z.string().min(1),
    action: action.optional(),
    replacement: z.string().max(256).optional(),
  })).default([]),
  default_action: action.default('mask'),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

const OpenAiModeration = z.strictObject({
  ...remote,
  kind: z.literal('openai_moderation'),
  api_key: z.string().min(1),
  endpoint: url.default('https://api.openai.com/v1'),
  model: z.string().min(1).default('omni-moderation-latest'),
  /** A threshold outside 0…1 makes the row unbuildable (AISIX skips it; Sluice rejects it). */
  category_thresholds: z.record(z.string(), z.number()).default({}),
});

const Presidio = z.strictObject({
  ...remote,
  kind: z.literal('presidio'),
  analyzer_url: url,
  anonymizer_url: url,
  entities: z.array(z.strictObject({ type: z.string().min(1), action: action.optional() })).default([]),
  default_action: action.default('mask'),
  operator: z.enum(['replace', 'mask', 'hash', 'redact']).default('replace'),
  language: z.string().min(1).default('en'),
  score_threshold: z.number().min(0).max(1).optional(),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

const Lakera = z.strictObject({
  ...remote,
  kind: z.literal('lakera'),
  api_key: z.string().min(1),
  endpoint: url.default('https://api.lakera.ai'),
  project_id: z.string().min(1).optional(),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

const AzurePromptShield = z.strictObject({
  ...remote,
  kind: z.literal('azure_content_safety'),
  endpoint: url,
  api_key: z.string().min(1),
});

const AZURE_CATEGORIES = ['Hate', 'Sexual', 'SelfHarm', 'Violence'] as const;
const AzureTextModeration = z.strictObject({
  ...remote,
  kind: z.literal('azure_content_safety_text_moderation'),
  endpoint: url,
  api_key: z.string().min(1),
  categories: z.array(z.enum(AZURE_CATEGORIES)).default([...AZURE_CATEGORIES]),
  severity_threshold: z.number().int().min(0).max(7).default(2),
  severity_threshold_by_category: z.partialRecord(z.enum(AZURE_CATEGORIES), z.number().int().min(0).max(7)).default({}),
  blocklist_names: z.array(z.string().min(1)).default([]),
  halt_on_blocklist_hit: z.boolean().default(false),
  output_type: z.enum(['FourSeverityLevels', 'EightSeverityLevels']).default('FourSeverityLevels'),
  text_source: z.enum(['concatenate_user_content', 'concatenate_all_content']).default('concatenate_user_content'),
  stream_processing_mode: z.enum(['window', 'buffer_full']).default('window'),
  window_size: z.number().int().min(1).max(10_000).default(10_000),
  window_overlap_size: z.number().int().nonnegative().default(256),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

const AliyunTextModeration = z.strictObject({
  ...remote,
  kind: z.literal('aliyun_text_moderation'),
  region: regionName,
  access_key_id: z.string().min(1),
  access_key_secret: z.string().min(1),
  endpoint: url.optional(),
  risk_level_threshold: z.enum(['low', 'medium', 'high']).default('high'),
  stream_processing_mode: z.enum(['window', 'buffer_full']).default('window'),
  window_size: z.number().int().min(1).max(2000).default(2000),
  window_overlap_size: z.number().int().nonnegative().default(128),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

const Bedrock = z.strictObject({
  ...common,
  fail_open: remoteFailOpen,
  kind: z.literal('bedrock'),
  aws_credentials: z.strictObject({
    kind: z.literal('static'),
    access_key_id: z.string().min(1),
    secret_access_key: z.string().min(1),
  }),
  guardrail_id: bedrockGuardrailId,
  guardrail_version: bedrockGuardrailVersion,
  region: regionName,
  /** `serial` waits for the answer (no timeout of its own); `timed` gives up after `timeout_ms`. */
  latency_mode: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('serial') }),
    z.strictObject({ kind: z.literal('timed'), timeout_ms: z.number().int().min(100).max(5000) }),
  ]),
  output_fail_open: z.boolean().default(false),
});

const AliyunAiGuardrail = z.strictObject({
  ...remote,
  kind: z.literal('aliyun_ai_guardrail'),
  region: regionName,
  access_key_id: z.string().min(1),
  access_key_secret: z.string().min(1),
  endpoint: url.optional(),
  /** `pro` asks the `*_security_check_pro` services, `basic` the plain ones. */
  service_level: z.enum(['pro', 'basic']).default('pro'),
  stream_processing_mode: z.enum(['window', 'buffer_full']).default('window'),
  window_size: z.number().int().min(1).max(2000).default(2000),
  window_overlap_size: z.number().int().nonnegative().default(128),
  max_buffer_bytes: bufferCap,
  on_buffer_exceeded: onBufferExceeded,
});

/**
 * `semantic` (AISIX's local-model kind): categories of spans found by patterns and scored by hotwords and
 * negative patterns. `description` and `threshold` are the embedding model's; Sluice loads no model
 * (docs/guardrails.md "semantic").
 */
const SemanticCategory = z.strictObject({
  name: z.string().min(1).max(64),
  description: z.string().min(1).max(1000),
  candidate_patterns: z.array(z.string().min(1)).min(1).max(10),
  negative_patterns: z.array(z.string().min(1)).max(20).default([]),
  hotword_groups: z.array(z.strictObject({ terms: z.array(z.string()).min(1).max(50) })).max(10).default([]),
  action: z.literal('mask').default('mask'),
  replacement: z.string().max(256).optional(),
  threshold: z.number().min(-1).max(1).optional(),
});
const Semantic = z.strictObject({
  ...common,
  kind: z.literal('semantic'),
  categories: z.array(SemanticCategory).min(1).max(30),
});

export const GuardrailSchema = z.discriminatedUnion('kind', [
  Keyword,
  Pii,
  OpenAiModeration,
  Presidio,
  Lakera,
  AzurePromptShield,
  AzureTextModeration,
  AliyunTextModeration,
  Bedrock,
  AliyunAiGuardrail,
  Semantic,
]);
export type GuardrailRow = z.infer<typeof GuardrailSchema>;
export type KeywordRow = z.infer<typeof Keyword>;
export type PiiRow = z.infer<typeof Pii>;
export type OpenAiModerationRow = z.infer<typeof OpenAiModeration>;
export type PresidioRow = z.infer<typeof Presidio>;
export type LakeraRow = z.infer<typeof Lakera>;
export type AzurePromptShieldRow = z.infer<typeof AzurePromptShield>;
export type AzureTextModerationRow = z.infer<typeof AzureTextModeration>;
export type AliyunTextModerationRow = z.infer<typeof AliyunTextModeration>;
export type BedrockRow = z.infer<typeof Bedrock>;
export type AliyunAiGuardrailRow = z.infer<typeof AliyunAiGuardrail>;
export type SemanticRow = z.infer<typeof Semantic>;
export type RemoteRow =
  | OpenAiModerationRow
  | PresidioRow
  | LakeraRow
  | AzurePromptShieldRow
  | AzureTextModerationRow
  | AliyunTextModerationRow
  | AliyunAiGuardrailRow
  | BedrockRow;

export const SCOPE_TYPES = ['env', 'model', 'mcp_server', 'api_key', 'team', 'passthrough_route'] as const;
export type ScopeType = (typeof SCOPE_TYPES)[number];

export const GuardrailAttachmentSchema = z.strictObject({
  id: z.unknown().optional(),
  guardrail_id: z.string().min(1, 'must not be empty'),
  scope_type: z.enum(SCOPE_TYPES),
  scope_id: z.string().nullable().optional(),
  priority: INT32,
  enabled: z.boolean().default(true),
  /** Written by AISIX's managed control plane; never read. */
  env_id: z.string().nullable().optional(),
});
export type GuardrailAttachmentRow = z.infer<typeof GuardrailAttachmentSchema>;
export type GuardrailAttachment = Omit<GuardrailAttachmentRow, 'id'> & { id: string };
