// AISIX's `passthrough_routes` resource (docs/endpoints.md "Passthrough routes"): a gateway entry (a path
// prefix and/or inbound hosts) bound to one upstream target, with its caller authentication and upstream
// credential. The schema and its couplings are AISIX's, enforced on the strict file path and the lenient etcd
// path alike; src/passthrough/ serves the routes.
import { z } from 'zod';
import { schemaReader } from './documents.ts';

/** An optional member AISIX also accepts as JSON `null`, which means absent. */
function nullOk<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema.optional());
}

/** A lowercase RFC 9110 token: a header name the forbidden credential slots below can be compared with. */
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
/** Headers that hold credentials: never the gateway's key slot, never a recorded identity. */
export const CREDENTIAL_SLOTS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'];
/** A host name, or `*.` and one that has at least two labels (`*.com` and `*` are refused). */
const HOST = /^(\*\.)?([A-Za-z0-9-]+\.)+[A-Za-z0-9-]+$|^[A-Za-z0-9-]+$/;
/** The gateway's own namespaces, which a route without `hosts` cannot claim (the typed routes answer there). */
export const RESERVED_PREFIX = /^\/(v1|mcp|a2a|admin|livez|readyz|metrics)(\/|$)/;

const headerName = z.string().min(1, 'must not be empty').regex(HEADER_TOKEN, 'must be a lowercase header name')
  .refine((h) => !CREDENTIAL_SLOTS.includes(h), `must not be one of ${CREDENTIAL_SLOTS.join(', ')}`);

export const passthroughRouteShape = {
  id: z.unknown().optional(),
  name: z.string().min(1, 'must not be empty').optional(),
  /** AISIX's alternative spelling of `name`: exactly one of the two. */
  display_name: z.string().min(1, 'must not be empty').optional(),
  path_prefix: nullOk(z.string().min(1, 'must not be empty').regex(/^\//, 'must start with "/"')),
  hosts: nullOk(
    z.array(z.string().regex(HOST, 'must be a host name or `*.` and a name of two labels or more'))
      .min(1, 'needs at least one host'),
  ),
  target_url: nullOk(z.string().min(1, 'must not be empty').regex(/^https?:\/\//, 'must be an http(s) URL')),
  preserve_host: z.boolean().optional(),
  auth_mode: z.enum(['gateway_key', 'header_key', 'anonymous']).default('gateway_key'),
  auth_header_name: nullOk(headerName),
  anonymous_key_id: nullOk(z.string().min(1, 'must not be empty')),
  source_cidrs: nullOk(z.array(z.string().min(1, 'must not be empty'))),
  credential_mode: z.enum(['inject', 'forward_client']).default('inject'),
  provider_key_id: nullOk(z.string().min(1, 'must not be empty')),
  identity_header: nullOk(headerName),
  /** Single-`*` globs of stripped caller headers forwarded anyway (`traceparent`/`tracestate` only by exact name). */
  forward_client_headers: z.array(z.string()).optional(),
  /** ms; bounds the header phase and a non-SSE body read. Absent: `upstream.timeout_ms`. */
  timeout_ms: nullOk(z.number().int().min(1, 'must be at least 1')),
  enabled: z.boolean().default(true),
};

type Row = z.infer<z.ZodObject<typeof passthroughRouteShape>>;

/** AISIX's couplings (its schema's `allOf`), each reported on the member to change. */
function checkCouplings(r: Row, ctx: z.RefinementCtx): void {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if ((r.name === undefined) === (r.display_name === undefined)) {
    issue('name', 'set exactly one of `name` and `display_name`');
  }
  if (r.path_prefix === undefined && r.hosts === undefined) issue('path_prefix', 'set `path_prefix`, `hosts` or both');
  if (r.hosts === undefined && r.path_prefix !== undefined && RESERVED_PREFIX.test(r.path_prefix)) {
    issue('path_prefix', 'a route without `hosts` cannot claim /v1, /mcp, /a2a, /admin, /livez, /readyz or /metrics');
  }
  const preserve = r.preserve_host === true;
  if (preserve === (r.target_url !== undefined)) {
    issue('target_url', 'set exactly one of `target_url` and `preserve_host: true`');
  }
  if (preserve && r.hosts === undefined) issue('preserve_host', 'needs `hosts` (the target is the matched host)');
  if (r.auth_mode === 'header_key' && r.auth_header_name === undefined) {
    issue('auth_header_name', 'required when auth_mode is header_key');
  }
  if (r.auth_mode !== 'header_key' && r.auth_header_name !== undefined) {
    issue('auth_header_name', 'only allowed when auth_mode is header_key');
  }
  if (r.auth_mode === 'anonymous') {
    if (r.anonymous_key_id === undefined) issue('anonymous_key_id', 'required when auth_mode is anonymous');
    if (!r.source_cidrs?.length) issue('source_cidrs', 'required (not empty) when auth_mode is anonymous');
  } else if (r.anonymous_key_id !== undefined) {
    issue('anonymous_key_id', 'only allowed when auth_mode is anonymous');
  }
  if (r.credential_mode === 'inject' && r.provider_key_id === undefined) {
    issue('provider_key_id', 'required when credential_mode is inject (`provider_key` by name in a file)');
  }
  if (r.credential_mode === 'forward_client' && r.provider_key_id !== undefined) {
    issue('provider_key_id', 'not allowed when credential_mode is forward_client');
  }
}

export const PassthroughRouteSchema = z.strictObject(passthroughRouteShape).superRefine(checkCouplings);

/** A served route: its one name, its hosts lower-cased. */
export type PassthroughRoute = Omit<Row, 'id' | 'name' | 'display_name'> & { id: string; name: string };

export const readPassthroughRoute = schemaReader(PassthroughRouteSchema, (id, data) => {
  const { id: _id, name, display_name, hosts, ...rest } = data;
  const resource: PassthroughRoute = { ...rest, id, name: (name ?? display_name)! };
  if (hosts !== undefined) resource.hosts = hosts.map((h) => h.toLowerCase());
  return { ok: true, resource };
});

/**
 * The file's sugar: `provider_key` and `anonymous_key` by display name → `provider_key_id` and
 * `anonymous_key_id`. Returns the entry's error, if any.
 */
export function desugarPassthroughRoute(
  doc: Record<string, unknown>,
  providerKeyIds: ReadonlyMap<string, string>,
  apiKeyIds: ReadonlyMap<string, string>,
): string | undefined {
  const pairs = [
    ['provider_key', 'provider_key_id', providerKeyIds, 'provider key', 'provider_keys'],
    ['anonymous_key', 'anonymous_key_id', apiKeyIds, 'api key', 'api_keys'],
  ] as const;
  for (const [sugar, canonical, ids, what, kind] of pairs) {
    if (!(sugar in doc)) continue;
    const name = doc[sugar];
    if (typeof name !== 'string') return `\`${sugar}\` must be a string (a ${what} display_name)`;
    if (canonical in doc) return `\`${sugar}\` (a name reference) and \`${canonical}\` are mutually exclusive`;
    const id = ids.get(name);
    if (id === undefined) {
      const names = [...ids.keys()].sort();
      const known = names.length === 0 ? `no ${kind} are defined in this file` : `defined ${kind}: ${names.join(', ')}`;
      return `\`${sugar}\` references unknown ${what} ${JSON.stringify(name)} (${known})`;
    }
    delete doc[sugar];
    doc[canonical] = id;
  }
  return undefined;
}
