// The MCP methods /mcp answers (docs/mcp.md "The endpoint"), for one parsed JSON-RPC message: the protocol
// checks a modern (2026-07-28) request must pass, `initialize`, `server/discover`, `ping`, `tools/list` (every
// server's tools, namespaced on the aggregated endpoint, filtered by the caller's ACL, sorted by server name),
// `tools/call` (ACL, then the caller's governance, then the upstream), empty resource and prompt lists, and
// -32601 for the rest. Pure of HTTP: the proxy's handler (src/proxy/mcp.ts) reads the request and writes the
// answer.
import type { Logger } from '../observability/logger.ts';
import type { McpServer } from '../resources/mcp-schema.ts';
import type { CancelSignal } from '../util/cancel.ts';
import { VERSION } from '../version.ts';
import type { ToolAcl } from './acl.ts';
import { MalformedContent, UpstreamFailure } from './failures.ts';
import {
  CODE,
  CONTROL,
  errorStatus,
  idOf,
  instructions,
  isSupported,
  META_CLIENT_CAPABILITIES,
  META_SERVER_INFO,
  META_VERSION,
  metaOf,
  metaVersion,
  MODERN_VERSION,
  negotiate,
  rpcError,
  rpcResult,
  splitToolName,
  SUPPORTED_VERSIONS,
  TOOL_SEPARATOR,
} from './protocol.ts';
import { callFailure, type McpTool, type McpUpstreams } from './upstream.ts';

/** What one request is answered with: `body` undefined is a 202 with no body. */
export interface McpAnswer {
  status: number;
  body?: Record<string, unknown>;
}

/** A tool call the ACL let through: where it goes. */
export interface ToolTarget {
  server: McpServer;
  /** The upstream's own name of the tool. */
  tool: string;
  args: Record<string, unknown>;
}

/**
 * The content checks of a permitted tool call (guardrails): the arguments to send, or the tool result that
 * answers instead; then the upstream's result as the caller may see it.
 */
export interface ToolGuard {
  input(target: ToolTarget): Promise<{ args: Record<string, unknown> } | { blocked: Record<string, unknown> }>;
  output(
    target: ToolTarget,
    result: Record<string, unknown>,
  ): Promise<{ result: Record<string, unknown> } | { blocked: Record<string, unknown> }>;
}

/** Runs before a permitted tool call reaches its upstream (rate limits): an answer ends the call there. */
export type Govern<R> = (target: ToolTarget) => Promise<R | undefined>;

/** One request, as the gateway sees it. */
export interface McpContext {
  /** Every registered server (enabled or not), deduplicated by name. */
  readonly servers: readonly McpServer[];
  /** `/mcp/{server}`: the enabled server the path names. */
  readonly scoped?: McpServer;
  readonly acl: ToolAcl;
  /** The `MCP-Protocol-Version` header (null: absent). */
  readonly version: string | null;
  readonly headers: Headers;
  /** The call's guardrails, when any can run for this caller. */
  readonly guard?: ToolGuard;
  /** The caller hung up: upstream work on its behalf stops. */
  readonly signal?: CancelSignal;
  /** Redacts the configured secrets from what an upstream's failure says before it is logged. */
  readonly scrub?: (text: string, maxChars?: number) => string;
  /** A permitted tool call's upstream request begins (`start`) and settles (`end`): its trace's CLIENT span. */
  readonly onUpstream?: (phase: 'start' | 'end') => void;
}

const LIST_ERROR_MAX = 256;

function cut(text: string, maxChars?: number): string {
  return maxChars === undefined ? text : text.slice(0, maxChars);
}

export class McpGateway {
  constructor(private readonly upstreams: McpUpstreams, private readonly log: Logger) {}

  /** Answers `msg`; `govern` may end a permitted tool call with its own answer (`R`: an HTTP response). */
  async handle<R>(ctx: McpContext, msg: unknown, govern: Govern<R>): Promise<McpAnswer | R> {
    const id = idOf(msg);
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
      return {
        status: 400,
        body: rpcError(null, CODE.invalidRequest, 'Invalid Request: expected one JSON-RPC message'),
      };
    }
    const m = msg as Record<string, unknown>;
    const method = m.method;
    // A notification, or a response to a request the gateway never sent: accepted and ignored.
    if (typeof method === 'string' && !('id' in m)) return { status: 202 };
    if (typeof method !== 'string') {
      if ('result' in m || 'error' in m) return { status: 202 };
      return { status: 400, body: rpcError(id, CODE.invalidRequest, 'Invalid Request: no method') };
    }
    const refused = checkHeaders(ctx, m, method, id);
    if (refused) return refused;
    const modern = metaVersion(m.params) !== undefined;
    const answer = (result: Record<string, unknown>): McpAnswer => ({
      status: 200,
      body: rpcResult(id, modern ? { ...result, resultType: 'complete' } : result),
    });
    // A guardrail's block is a plain tool result: no `resultType`, whatever the caller's era.
    const blocked = (result: Record<string, unknown>): McpAnswer => ({ status: 200, body: rpcResult(id, result) });
    const error = (code: number, message: string): McpAnswer => ({
      status: errorStatus(code, modern),
      body: rpcError(id, code, message),
    });
    const params = (typeof m.params === 'object' && m.params !== null ? m.params : {}) as Record<string, unknown>;
    switch (method) {
      case 'initialize':
        return answer({
          protocolVersion: negotiate(params.protocolVersion),
          capabilities: { tools: {} },
          serverInfo: this.serverInfo(ctx),
          instructions: instructions(ctx.scoped?.name),
        });
      case 'server/discover':
        if (!modern) return error(CODE.invalidParams, metaError(missingMeta(params)));
        return answer({
          supportedVersions: [...SUPPORTED_VERSIONS],
          capabilities: { tools: {} },
          instructions: instructions(ctx.scoped?.name),
          ttlMs: 0,
          cacheScope: 'private',
          _meta: { [META_SERVER_INFO]: this.serverInfo(ctx) },
        });
      case 'ping':
        return modern ? error(CODE.methodNotFound, method) : answer({});
      case 'tools/list': {
        const tools = await this.listTools(ctx);
        return answer(modern ? { tools, ttlMs: 0, cacheScope: 'private' } : { tools });
      }
      case 'tools/call':
        return await this.callTool(ctx, params, error, answer, blocked, govern);
      case 'resources/list':
        return answer({ resources: [] });
      case 'resources/templates/list':
        return answer({ resourceTemplates: [] });
      case 'prompts/list':
        return answer({ prompts: [] });
      case 'completion/complete':
        return answer({ completion: { values: [] } });
      default:
        return error(CODE.methodNotFound, method);
    }
  }

  private serverInfo(ctx: McpContext): { name: string; version: string } {
    return { name: ctx.scoped?.name ?? 'sluice', version: VERSION };
  }

  /**
   * Every enabled server's tools (or the scoped one's), asked concurrently, in server-name order and each
   * server's own order; a server that fails to list is skipped with a WARN.
   */
  private async listTools(ctx: McpContext): Promise<McpTool[]> {
    const servers = ctx.scoped ? [ctx.scoped] : ctx.servers.filter((s) => s.enabled);
    const lists = await Promise.all(servers.map(async (s) => {
      try {
        return await this.upstreams.listTools(s, ctx.signal);
      } catch (e) {
        this.log.warn('skipping upstream in tools/list: list_tools failed', {
          upstream: s.name,
          error: (ctx.scrub ?? cut)(String(e instanceof Error ? e.message : e).replace(CONTROL, ''), LIST_ERROR_MAX),
        });
        return [];
      }
    }));
    const out: McpTool[] = [];
    const order = servers.map((s, i) => [s, lists[i]!] as const).sort(([a], [b]) => (a.name < b.name ? -1 : 1));
    for (const [server, tools] of order) {
      for (const t of tools) {
        const full = `${server.name}${TOOL_SEPARATOR}${t.name}`;
        if (!ctx.acl.permits(full)) continue;
        // The scoped endpoint strips the prefix, unless the bare name would read as prefixed itself.
        const shown = ctx.scoped && !t.name.startsWith(`${server.name}${TOOL_SEPARATOR}`) ? t.name : full;
        out.push({ ...t, name: shown });
      }
    }
    return out;
  }

  private async callTool<R>(
    ctx: McpContext,
    params: Record<string, unknown>,
    error: (code: number, message: string) => McpAnswer,
    answer: (result: Record<string, unknown>) => McpAnswer,
    blocked: (result: Record<string, unknown>) => McpAnswer,
    govern: Govern<R>,
  ): Promise<McpAnswer | R> {
    const name = params.name;
    if (typeof name !== 'string') return error(CODE.invalidParams, 'Invalid params: `name` must be a string');
    const args = params.arguments ?? {};
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      return error(CODE.invalidParams, 'Invalid params: `arguments` must be an object');
    }
    const target = resolveTarget(ctx, name);
    if ('message' in target) return error(CODE.invalidParams, target.message);
    if (!ctx.acl.permits(`${target.server}${TOOL_SEPARATOR}${target.tool}`)) {
      return error(CODE.invalidParams, `tool '${name}' is not available`);
    }
    const server = ctx.scoped ?? ctx.servers.find((s) => s.enabled && s.name === target.server);
    if (!server) return error(CODE.invalidParams, `unknown MCP server '${target.server}'`);
    const call: ToolTarget = { server, tool: target.tool, args: args as Record<string, unknown> };
    const governed = await govern(call);
    if (governed !== undefined) return governed;
    if (ctx.guard) {
      const checked = await ctx.guard.input(call);
      if ('blocked' in checked) return blocked(checked.blocked);
      call.args = checked.args;
    }
    let result: Record<string, unknown>;
    ctx.onUpstream?.('start');
    try {
      result = await this.upstreams.callTool(server, target.tool, call.args, ctx.signal);
      ctx.onUpstream?.('end');
    } catch (e) {
      ctx.onUpstream?.('end');
      if (e instanceof MalformedContent) return error(CODE.internal, e.message);
      this.log.warn('upstream tools/call failed', {
        upstream: server.name,
        tool: target.tool,
        error: (ctx.scrub ?? cut)(e instanceof UpstreamFailure ? e.message : String(e), LIST_ERROR_MAX),
      });
      const f = callFailure(server.name);
      return error(f.code, f.message);
    }
    if (!ctx.guard) return answer(result);
    const seen = await ctx.guard.output(call, result);
    return 'blocked' in seen ? blocked(seen.blocked) : answer(seen.result);
  }
}

/**
 * `(server, tool)` of a call's name. Aggregated: split at the first `__`. Scoped: the bare name, or the
 * server's own prefix stripped; another registered server's prefix is refused like a tool the caller may not
 * call (an unregistered one is part of the bare name).
 */
export function resolveTarget(ctx: Pick<McpContext, 'servers' | 'scoped'>, name: string): {
  server: string;
  tool: string;
} | { message: string } {
  const split = splitToolName(name);
  if (!ctx.scoped) {
    return split ?? { message: `tool name '${name}' is missing a 'server__tool' prefix` };
  }
  const server = ctx.scoped.name;
  if (!split) return { server, tool: name };
  if (split.server === server) return { server, tool: split.tool };
  if (ctx.servers.some((s) => s.name === split.server)) return { message: `tool '${name}' is not available` };
  return { server, tool: name };
}

/** The `_meta` keys a 2026-07-28 request must carry and lacks (or carries malformed). */
function missingMeta(params: Record<string, unknown>): string[] {
  const meta = metaOf(params) ?? {};
  return [META_VERSION, META_CLIENT_CAPABILITIES].filter((k) =>
    k === META_VERSION ? typeof meta[k] !== 'string' : typeof meta[k] !== 'object' || meta[k] === null
  );
}

function metaError(missing: string[]): string {
  return `Invalid params: request _meta is missing or has malformed required fields: ${missing.join(', ')}`;
}

/**
 * The checks rmcp makes after AISIX's version gate (docs/mcp.md "Protocol versions"): `initialize`'s header
 * against its body, the header against a modern request's `_meta`, and a 2026-07-28 request's `_meta` keys and
 * `Mcp-Method` / `Mcp-Name` headers. Each refusal is a 400 with a JSON-RPC error.
 */
function checkHeaders(ctx: McpContext, m: Record<string, unknown>, method: string, id: ReturnType<typeof idOf>) {
  const refuse = (code: number, message: string): McpAnswer => ({ status: 400, body: rpcError(id, code, message) });
  const header = ctx.version;
  const params = (typeof m.params === 'object' && m.params !== null ? m.params : {}) as Record<string, unknown>;
  if (method === 'initialize' && header !== null && typeof params.protocolVersion === 'string') {
    if (header !== params.protocolVersion) {
      return refuse(
        CODE.invalidRequest,
        `Invalid Request: MCP-Protocol-Version header (${header}) does not match initialize params.protocolVersion (${params.protocolVersion})`,
      );
    }
  }
  const meta = metaVersion(params);
  if (meta !== undefined) {
    if (header === null) {
      return refuse(CODE.headerMismatch, 'request _meta protocolVersion requires MCP-Protocol-Version header');
    }
    if (header !== meta) {
      return refuse(
        CODE.headerMismatch,
        `MCP-Protocol-Version header (${header}) does not match request _meta protocolVersion (${meta})`,
      );
    }
    if (!isSupported(meta)) {
      return {
        status: 400,
        body: rpcError(id, CODE.unsupportedVersion, 'Unsupported protocol version', {
          requested: meta,
          supported: [...SUPPORTED_VERSIONS],
        }),
      };
    }
  }
  if (header === MODERN_VERSION && method !== 'initialize') {
    const missing = missingMeta(params);
    if (missing.length > 0) return refuse(CODE.invalidParams, metaError(missing));
    const sentMethod = ctx.headers.get('mcp-method');
    if (sentMethod !== method) {
      return refuse(
        CODE.headerMismatch,
        sentMethod === null
          ? 'missing required Mcp-Method header'
          : `Mcp-Method header (${sentMethod}) does not match request method (${method})`,
      );
    }
    if (method === 'tools/call') {
      const sentName = ctx.headers.get('mcp-name');
      const name = decodeSentinel(sentName);
      if (name !== params.name) {
        return refuse(
          CODE.headerMismatch,
          sentName === null ? 'missing required Mcp-Name header' : 'Mcp-Name header does not match params.name',
        );
      }
    }
  }
  return undefined;
}

/** An `Mcp-Name` value: plain, or its `=?base64?…?=` sentinel decoded. */
function decodeSentinel(v: string | null): string | null {
  if (v === null) return null;
  const m = /^=\?base64\?([A-Za-z0-9+/=]*)\?=$/.exec(v);
  if (!m) return v;
  try {
    const bin = atob(m[1]!);
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    return v;
  }
}
