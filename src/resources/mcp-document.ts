// How an MCP resource document is read (docs/mcp.md "Resources"): the schemas of mcp-schema.ts, then what differs
// between the paths — an absent `allow` is `[]` on etcd (allows nothing), the legacy `mode` of `mcp_access` is dropped
// there, and a file's `resource_url` must not embed a credential.
import { type Precheck, schemaReader, withId } from './documents.ts';
import {
  MCP_TIMEOUT_MS,
  type McpAuthSettings,
  McpAuthSettingsSchema,
  type McpPolicy,
  McpPolicySchema,
  type McpServer,
  McpServerSchema,
} from './mcp-schema.ts';

/** Both `name` and its alias given is AISIX's serde error (the schema passes, the row does not parse). */
const nameAlias: Precheck = (doc) =>
  doc.name !== undefined && doc.display_name !== undefined
    ? { ok: false, errorKind: 'parse_failed', error: 'duplicate field `name`: `display_name` is its former name' }
    : undefined;

export const readMcpServer = schemaReader(McpServerSchema, (id, data) => {
  const { id: _id, name, display_name, timeout_ms, ...rest } = data;
  const resource: McpServer = { ...rest, id, name: (name ?? display_name)!, timeout_ms: timeout_ms ?? MCP_TIMEOUT_MS };
  return { ok: true, resource };
}, nameAlias);

export const readMcpPolicy = schemaReader(
  McpPolicySchema,
  (id, data): { ok: true; resource: McpPolicy } => withId(id, data),
  (doc, mode) => {
    if (mode === 'lenient' && (doc.allow === undefined || doc.allow === null)) doc.allow = [];
    return undefined;
  },
);

const CREDENTIAL_PARAMS = new Set(['access_token', 'token', 'client_secret', 'password', 'api_key', 'apikey']);

/** A file's `resource_url` must not carry a credential: the metadata document that repeats it is public. */
const noEmbeddedCredential: Precheck = (doc, mode) => {
  if (mode !== 'strict' || typeof doc.resource_url !== 'string') return undefined;
  let url: URL;
  try {
    url = new URL(doc.resource_url);
  } catch {
    return undefined;
  }
  const credentialed = url.username !== '' || url.password !== '' ||
    [...url.searchParams.keys()].some((k) => CREDENTIAL_PARAMS.has(k.toLowerCase()));
  return credentialed
    ? {
      ok: false,
      errorKind: 'schema_failed',
      error: 'mcp_auth_settings resource_url must not embed credentials (user info or a token query parameter) — ' +
        'protected resource metadata is public',
    }
    : undefined;
};

export const readMcpAuthSettings = schemaReader(
  McpAuthSettingsSchema,
  (id, data): { ok: true; resource: McpAuthSettings } => withId(id, data),
  noEmbeddedCredential,
);
