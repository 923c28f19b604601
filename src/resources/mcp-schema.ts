// AISIX's MCP resource kinds (docs/mcp.md "Resources"): `mcp_servers`, `mcp_policies`, `mcp_auth_settings`, and
// the api key's `mcp_access` and `mcp_rate_limits` members. Strict for files, lenient for etcd (documents.ts);
// the readers and the differences between the two paths (an absent `allow` is `[]` on etcd) are mcp-document.ts.
import { z } from 'zod';

/** An optional member AISIX also accepts as JSON `null`, which means absent. */
function nullOk<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema.optional());
}

/** No `__` anywhere and no trailing `_`: `<server>__<tool>` must split back at its first `__`. */
const SERVER_NAME = /^(?:[^_]|_[^_])*$/;
const serverName = z.string().min(1, 'must not be empty').regex(
  SERVER_NAME,
  'must not contain `__` or end with `_` (it prefixes tool names as `<server>__<tool>`)',
);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const text = z.string().min(1, 'must not be empty');

export const MCP_AUTH_TYPES = ['none', 'bearer', 'api_key', 'oauth2'] as const;

export const McpServerSchema = z.strictObject({
  id: z.unknown().optional(),
  name: serverName.optional(),
  /** The former name of `name` (AISIX's serde alias). */
  display_name: serverName.optional(),
  type: z.enum(['mcp', 'openapi']).default('mcp'),
  url: text,
  spec: nullOk(z.record(z.string(), z.unknown())),
  api_key_header: nullOk(z.string().regex(HEADER_NAME, 'must be an HTTP header name')),
  transport: z.literal('streamable_http').default('streamable_http'),
  auth_type: z.enum(MCP_AUTH_TYPES).default('none'),
  secret: nullOk(z.string()),
  client_id: nullOk(z.string()),
  token_url: nullOk(z.string()),
  scopes: nullOk(z.array(z.string())),
  protocol_version: nullOk(z.literal('2026-07-28')),
  timeout_ms: nullOk(z.number().int().min(1)),
  enabled: z.boolean().default(true),
}).superRefine((s, ctx) => {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (s.name === undefined && s.display_name === undefined) issue('name', 'required (or its former name display_name)');
  const given = (v: string | undefined) => v !== undefined && v !== '';
  if ((s.auth_type === 'bearer' || s.auth_type === 'api_key' || s.auth_type === 'oauth2') && !given(s.secret)) {
    issue('secret', `required with auth_type ${s.auth_type}`);
  }
  if (s.auth_type === 'oauth2') {
    if (!given(s.client_id)) issue('client_id', 'required with auth_type oauth2');
    if (!given(s.token_url)) issue('token_url', 'required with auth_type oauth2');
  }
  if (s.type === 'openapi') {
    if (s.spec === undefined) issue('spec', 'required with type openapi (an OpenAPI 3 document)');
    else if ('swagger' in s.spec) issue('spec', 'Swagger 2.0 is not supported: give an OpenAPI 3 document');
    if (s.api_key_header !== undefined && s.auth_type !== 'api_key') {
      issue('api_key_header', 'only with auth_type api_key');
    }
  } else {
    if (s.spec !== undefined) issue('spec', 'only with type openapi');
    if (s.api_key_header !== undefined) issue('api_key_header', 'only with type openapi');
  }
});

/** The default deadline of one upstream operation (connect and handshake, list, call). */
export const MCP_TIMEOUT_MS = 30_000;

type McpServerRow = z.infer<typeof McpServerSchema>;
/** A registered MCP server, its name resolved from `name` or `display_name`. */
export type McpServer = Omit<McpServerRow, 'id' | 'name' | 'display_name' | 'timeout_ms'> & {
  id: string;
  name: string;
  timeout_ms: number;
};

/** The key's own tool ACL layer (docs/mcp.md "Access control"). */
export const McpAccessSchema = z.strictObject({
  allow: z.array(z.string()),
  deny: nullOk(z.array(z.string())),
});
export type McpAccess = z.infer<typeof McpAccessSchema>;

/** Per key × server limits: request dimensions and concurrency only (a tool call has no tokens). */
export const McpRateLimitSchema = z.strictObject({
  rps: z.number().int().nonnegative().nullable().optional(),
  rpm: z.number().int().nonnegative().nullable().optional(),
  rph: z.number().int().nonnegative().nullable().optional(),
  rpd: z.number().int().nonnegative().nullable().optional(),
  concurrency: z.number().int().nonnegative().nullable().optional(),
});
export const McpRateLimitsSchema = z.record(z.string(), McpRateLimitSchema);

/**
 * etcd's reading of an api key's `mcp_access`: an absent `allow` is `[]` (allows nothing, so an old row never
 * grants by omission), and the legacy `mode` member is dropped without a report (AISIX's).
 */
export function lenientMcpAccess(doc: Record<string, unknown>, mode: 'strict' | 'lenient'): undefined {
  const a = doc.mcp_access;
  if (mode !== 'lenient' || typeof a !== 'object' || a === null || Array.isArray(a)) return undefined;
  const access = a as Record<string, unknown>;
  delete access.mode;
  if (access.allow === undefined || access.allow === null) access.allow = [];
  return undefined;
}

export const McpPolicySchema = z.strictObject({
  id: z.unknown().optional(),
  scope: z.enum(['env', 'team']),
  scope_ref: nullOk(text),
  allow: z.array(z.string()),
  deny: z.array(z.string()).default([]),
  enabled: z.boolean().default(true),
}).superRefine((p, ctx) => {
  if (p.scope === 'team' && p.scope_ref === undefined) {
    ctx.addIssue({ code: 'custom', path: ['scope_ref'], message: 'required with scope team (the team id)' });
  }
});
export type McpPolicy = Omit<z.infer<typeof McpPolicySchema>, 'id'> & { id: string };

export const McpAuthSettingsSchema = z.strictObject({
  id: z.unknown().optional(),
  resource_url: text.optional(),
  anonymous: z.strictObject({
    enabled: z.boolean().default(true),
    api_key_id: text,
    servers: z.array(z.string()).min(1, 'needs at least one MCP server name'),
    source_cidrs: z.array(z.string()).min(1, 'needs at least one CIDR'),
    aggregate_entry: z.boolean().default(false),
  }).optional(),
});
export type McpAuthSettings = Omit<z.infer<typeof McpAuthSettingsSchema>, 'id'> & { id: string };
