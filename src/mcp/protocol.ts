// The MCP wire as /mcp speaks it (docs/mcp.md "The endpoint"): one list of protocol revisions driving
// `initialize`, `server/discover` and the `MCP-Protocol-Version` gate, the JSON-RPC shapes, and AISIX's exact
// error strings. Stateless: nothing here outlives a request.

/** Every revision served, oldest first. 2024-11-05 (HTTP+SSE) is deliberately absent. */
export const SUPPORTED_VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'] as const;
export type ProtocolVersion = (typeof SUPPORTED_VERSIONS)[number];
/** The revision without `initialize`: each request carries its version in `_meta`. */
export const MODERN_VERSION = '2026-07-28';
/** What `initialize` answers a version it does not serve. */
export const FALLBACK_VERSION = '2025-11-25';
/** A request without the header is taken as this revision (the spec's MAY). */
export const ASSUMED_VERSION = '2025-03-26';

export const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

export function isSupported(v: string): v is ProtocolVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** `initialize`: the requested revision when served, else the pinned fallback. */
export function negotiate(requested: unknown): ProtocolVersion {
  return typeof requested === 'string' && isSupported(requested) ? requested : FALLBACK_VERSION;
}

/** JSON-RPC error codes used on /mcp. */
export const CODE = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  headerMismatch: -32020,
  unsupportedVersion: -32022,
} as const;

export type JsonRpcId = string | number | null;

/** A request's id as an answer may echo it: a string or a number, else null. */
export function idOf(msg: unknown): JsonRpcId {
  if (typeof msg !== 'object' || msg === null) return null;
  const id = (msg as { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

export function rpcError(id: JsonRpcId, code: number, message: string, data?: unknown): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

export function rpcResult(id: JsonRpcId, result: unknown): Record<string, unknown> {
  return { jsonrpc: '2.0', id, result };
}

/**
 * AISIX's header gate: absent passes; a served revision passes; anything else is the -32600 error below with
 * the served list (deliberately not 2026's -32022, in every era). `undefined`: the request passes.
 */
/** Control characters, removed from what an error or a log line repeats. */
// deno-lint-ignore no-control-regex
export const CONTROL = /[\x00-\x1f\x7f]/g;

export function versionGate(header: string | null, id: JsonRpcId): Record<string, unknown> | undefined {
  if (header === null || isSupported(header)) return undefined;
  const visible = /^[\x20-\x7e]*$/.test(header);
  const message = visible
    ? `unsupported MCP-Protocol-Version: ${[...header.replace(CONTROL, '')].slice(0, 64).join('')}`
    : 'invalid MCP-Protocol-Version header';
  return rpcError(id, CODE.invalidRequest, message, { supported: [...SUPPORTED_VERSIONS] });
}

/**
 * The HTTP status of an error a method's handler produced: a legacy request's is always 200; a modern
 * (2026-07-28) request's follows the code (rmcp's `jsonrpc_http_status`).
 */
export function errorStatus(code: number, modern: boolean): number {
  if (!modern) return 200;
  if (code === CODE.methodNotFound) return 404;
  if (
    code === CODE.invalidParams || code === CODE.headerMismatch || code === CODE.unsupportedVersion || code === -32021
  ) {
    return 400;
  }
  return 200;
}

/** The revision a modern request names in its `_meta`, or undefined for a legacy one. */
export function metaVersion(params: unknown): string | undefined {
  const meta = metaOf(params);
  const v = meta?.[META_VERSION];
  return typeof v === 'string' ? v : undefined;
}

export function metaOf(params: unknown): Record<string, unknown> | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const meta = (params as { _meta?: unknown })._meta;
  return typeof meta === 'object' && meta !== null && !Array.isArray(meta)
    ? meta as Record<string, unknown>
    : undefined;
}

/** Tool names on the aggregated endpoint: `<server>__<tool>`, split at the first separator. */
export const TOOL_SEPARATOR = '__';

export function splitToolName(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf(TOOL_SEPARATOR);
  return at < 0 ? undefined : { server: name.slice(0, at), tool: name.slice(at + TOOL_SEPARATOR.length) };
}

/** What `initialize` and `server/discover` announce as the gateway's instructions. */
export function instructions(scoped: string | undefined): string {
  return scoped === undefined
    ? 'AISIX MCP gateway: aggregates tools from registered upstream MCP servers, namespaced as `server__tool`.'
    : `AISIX MCP gateway: serves the tools of MCP server \`${scoped}\` under their original names.`;
}
