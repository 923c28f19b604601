// The gateway as an MCP client of its upstreams (docs/mcp.md "Upstreams"): Streamable HTTP through the platform's
// upstream client (no redirect followed), one fresh session per operation as AISIX's ephemeral bridge — connect
// (`initialize` + `notifications/initialized`, or `server/discover` for a 2026-07-28 upstream), one request, done,
// and a session the upstream named (`Mcp-Session-Id`) ended with a DELETE — so no state outlives a request and any
// replica serves any call. Only the gateway-held credential is sent. A `type: openapi` server is no MCP server:
// its tools and calls are openapi-call.ts's.
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import type { McpServer } from '../resources/mcp-schema.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';
import { VERSION } from '../version.ts';
import { CODE, FALLBACK_VERSION, META_CLIENT_CAPABILITIES, META_VERSION, MODERN_VERSION } from './protocol.ts';
import { MalformedContent, UpstreamFailure } from './failures.ts';
import { credentialHeaders, OAuthTokens } from './oauth.ts';
import { OpenApiServers } from './openapi-call.ts';

/** A tool as the gateway relays it: AISIX's bridge keeps only these three members. */
export interface McpTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** The biggest upstream answer read: a tool result or a tool list, never a stream. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
const CLIENT_INFO = { name: 'sluice', version: VERSION };

export interface UpstreamDeps {
  readonly upstream: UpstreamFetch;
  readonly log: Logger;
  /** Where work that outlives its request goes (Workers: `ctx.waitUntil`); absent, it just runs. */
  readonly keepAlive?: (work: Promise<unknown>) => void;
}

/** One session with one upstream, for one operation. */
class Session {
  private nextId = 0;
  private sessionId: string | undefined;
  private version: string | undefined;

  constructor(
    private readonly server: McpServer,
    private readonly fetch: UpstreamFetch,
    private readonly auth: Record<string, string>,
  ) {}

  private get modern(): boolean {
    return this.server.protocol_version === MODERN_VERSION;
  }

  /** The handshake: `initialize` for a legacy upstream, `server/discover` (no fallback) for a 2026 one. */
  async open(signal: CancelSignal): Promise<void> {
    if (this.modern) {
      this.version = MODERN_VERSION;
      await this.request('server/discover', {}, signal);
      return;
    }
    const init = await this.request('initialize', {
      protocolVersion: FALLBACK_VERSION,
      capabilities: {},
      clientInfo: CLIENT_INFO,
    }, signal);
    const v = (init as { protocolVersion?: unknown }).protocolVersion;
    this.version = typeof v === 'string' ? v : FALLBACK_VERSION;
    await this.send({ jsonrpc: '2.0', method: 'notifications/initialized' }, 'notifications/initialized', signal);
  }

  /**
   * Ends the session the upstream named, as the transport asks of a client done with one: a DELETE carrying its
   * `Mcp-Session-Id`. A 405 (the upstream keeps sessions to itself) or any failure changes nothing for the caller.
   */
  async close(signal: CancelSignal): Promise<void> {
    if (this.sessionId === undefined) return;
    const headers: Record<string, string> = { ...this.auth, 'mcp-session-id': this.sessionId };
    if (this.version !== undefined) headers['mcp-protocol-version'] = this.version;
    this.sessionId = undefined;
    const res = await this.fetch({ url: this.server.url, method: 'DELETE', headers, signal });
    await res.discard().catch(() => {});
  }

  /** One request; its `result`, or an `UpstreamFailure` for anything else. */
  async request(method: string, params: Record<string, unknown>, signal: CancelSignal, name?: string) {
    const id = ++this.nextId;
    const p = this.modern
      ? {
        ...params,
        _meta: {
          [META_VERSION]: MODERN_VERSION,
          [META_CLIENT_CAPABILITIES]: {},
          'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
        },
      }
      : params;
    const msg = await this.send({ jsonrpc: '2.0', id, method, params: p }, method, signal, id, name);
    if (msg === undefined) throw new UpstreamFailure(`${method}: the upstream answered no JSON-RPC response`);
    const err = msg.error as { code?: unknown; message?: unknown } | undefined;
    if (err !== undefined) {
      throw new UpstreamFailure(`${method}: JSON-RPC error ${String(err.code)}: ${String(err.message).slice(0, 200)}`);
    }
    const result = msg.result;
    if (typeof result !== 'object' || result === null) throw new UpstreamFailure(`${method}: no result object`);
    return result as Record<string, unknown>;
  }

  private async send(
    body: Record<string, unknown>,
    method: string,
    signal: CancelSignal,
    id?: number,
    name?: string,
  ): Promise<Record<string, unknown> | undefined> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...this.auth,
    };
    if (this.version !== undefined) headers['mcp-protocol-version'] = this.version;
    if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId;
    if (this.modern) {
      headers['mcp-method'] = method;
      if (name !== undefined) headers['mcp-name'] = headerSafe(name);
    }
    let res: UpstreamResponse;
    try {
      res = await this.fetch({ url: this.server.url, method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (e) {
      throw new UpstreamFailure(`${method}: ${e instanceof Error ? e.message : String(e)}`);
    }
    const sid = res.header('mcp-session-id');
    if (sid) this.sessionId = sid;
    if (res.status === 401) {
      await res.discard().catch(() => {});
      throw new UpstreamFailure(`${method}: HTTP 401`, true);
    }
    if (res.status < 200 || res.status >= 300) {
      await res.discard().catch(() => {});
      throw new UpstreamFailure(`${method}: HTTP ${res.status}`);
    }
    if (id === undefined || res.status === 202) {
      await res.discard().catch(() => {});
      return undefined;
    }
    const type = (res.header('content-type') ?? '').toLowerCase();
    return type.startsWith('text/event-stream') ? await answerInStream(res, id) : parseAnswer(await readCapped(res));
  }
}

/** `Mcp-Name` as HTTP can carry it: the value, or its Base64 sentinel when it is not visible ASCII. */
function headerSafe(v: string): string {
  if (/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v)) return v;
  const bytes = new TextEncoder().encode(v);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return `=?base64?${btoa(bin)}?=`;
}

async function readCapped(res: UpstreamResponse): Promise<string> {
  const decoder = new TextDecoder();
  let out = '';
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) throw new UpstreamFailure(`answer over ${MAX_ANSWER_BYTES} bytes`);
    out += decoder.decode(chunk, { stream: true });
  }
  return out + decoder.decode();
}

function parseAnswer(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new UpstreamFailure('the answer is not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new UpstreamFailure('the answer is no object');
  return v as Record<string, unknown>;
}

/** The response to request `id` among the SSE events of the answer; the stream is let go once it came. */
async function answerInStream(res: UpstreamResponse, id: number): Promise<Record<string, unknown> | undefined> {
  const decoder = new TextDecoder();
  let buf = '';
  let size = 0;
  let data: string[] = [];
  const iter = res.body[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await iter.next();
      if (next.done) break;
      size += next.value.byteLength;
      if (size > MAX_ANSWER_BYTES) throw new UpstreamFailure(`answer over ${MAX_ANSWER_BYTES} bytes`);
      buf += decoder.decode(next.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
        else if (line === '' && data.length > 0) {
          const text = data.join('\n');
          data = [];
          let msg: unknown;
          try {
            msg = JSON.parse(text);
          } catch {
            continue;
          }
          // Server requests and notifications ride the same stream; only the answer is read.
          if (typeof msg === 'object' && msg !== null && (msg as { id?: unknown }).id === id) {
            return msg as Record<string, unknown>;
          }
        }
      }
    }
  } finally {
    await iter.return?.();
  }
  return undefined;
}

/** Runs `fn` under a deadline of `ms`, a Cancel the fetches see; the caller leaving cancels it too. */
async function within<T>(
  ms: number,
  what: string,
  caller: CancelSignal | undefined,
  fn: (signal: CancelSignal) => Promise<T>,
): Promise<T> {
  const cancel = new Cancel();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let left: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    const stop = (e: UpstreamFailure) => {
      cancel.abort(e);
      reject(e);
    };
    timer = setTimeout(() => stop(new UpstreamFailure(`${what}: timed out after ${ms} ms`)), ms);
    left = () => stop(new UpstreamFailure(`${what}: the caller left`));
    if (caller?.aborted) left();
    else caller?.addEventListener('abort', left, { once: true });
  });
  try {
    return await Promise.race([fn(cancel), deadline]);
  } finally {
    clearTimeout(timer);
    if (left) caller?.removeEventListener('abort', left);
  }
}

/**
 * The upstreams of one gateway: lists and calls tools on a server, each in its own session. OAuth tokens are
 * cached per client and scope for the process (oauth.ts); a cleartext upstream holding a credential is warned
 * about once.
 */
export class McpUpstreams {
  private readonly warned = new Set<string>();
  /** Session DELETEs still on their way (a test, or a drain, can wait for them). */
  private readonly closing = new Set<Promise<void>>();
  readonly tokens: OAuthTokens;
  private readonly openapi: OpenApiServers;

  constructor(private readonly d: UpstreamDeps) {
    this.tokens = new OAuthTokens(d.upstream);
    this.openapi = new OpenApiServers(d.upstream, this.tokens, MAX_ANSWER_BYTES);
  }

  /** The server's tools (the first page), or an `UpstreamFailure`. */
  async listTools(server: McpServer, caller?: CancelSignal): Promise<McpTool[]> {
    if (server.type === 'openapi') {
      this.warnCleartext(server);
      return this.openapi.tools(server).map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
      }));
    }
    const result = await this.operation(server, caller, (s, signal) => s.request('tools/list', {}, signal));
    const tools = Array.isArray(result.tools) ? result.tools : [];
    const out: McpTool[] = [];
    for (const t of tools) {
      if (typeof t !== 'object' || t === null || typeof (t as { name?: unknown }).name !== 'string') continue;
      const { name, description, inputSchema } = t as { name: string; description?: unknown; inputSchema?: unknown };
      const tool: McpTool = {
        name,
        inputSchema: typeof inputSchema === 'object' && inputSchema !== null && !Array.isArray(inputSchema)
          ? inputSchema as Record<string, unknown>
          : {},
      };
      if (typeof description === 'string') tool.description = description;
      out.push(tool);
    }
    return out;
  }

  /**
   * One tool call: the upstream's `content`, `structuredContent` and `isError` (its result `_meta` is not
   * carried). An interactive (MRTR) or deferred (task) answer is a failure: the gateway relays neither.
   */
  async callTool(
    server: McpServer,
    tool: string,
    args: Record<string, unknown>,
    caller?: CancelSignal,
  ): Promise<Record<string, unknown>> {
    if (server.type === 'openapi') {
      this.warnCleartext(server);
      return await within(server.timeout_ms, 'operation', caller, (s) => this.openapi.call(server, tool, args, s));
    }
    const result = await this.operation(
      server,
      caller,
      (s, signal) => s.request('tools/call', { name: tool, arguments: args }, signal, tool),
    );
    if (result.resultType === 'input_required') {
      throw new UpstreamFailure(
        'upstream tool requires additional interactive input (MRTR), which the gateway does not relay',
      );
    }
    if (result.resultType === 'task' || result.task !== undefined) {
      throw new UpstreamFailure('upstream tool deferred to an asynchronous task, which the gateway does not support');
    }
    if (!Array.isArray(result.content)) {
      throw new MalformedContent('malformed tool content from upstream: missing field `content`');
    }
    for (const c of result.content) {
      if (typeof c !== 'object' || c === null || typeof (c as { type?: unknown }).type !== 'string') {
        throw new MalformedContent('malformed tool content from upstream: a content block without a `type`');
      }
    }
    const out: Record<string, unknown> = { content: result.content };
    if (result.structuredContent !== undefined) out.structuredContent = result.structuredContent;
    if (result.isError !== undefined) out.isError = result.isError === true;
    return out;
  }

  /** Connect under the server's deadline, then one operation under a deadline of its own. */
  private async operation<T>(
    server: McpServer,
    caller: CancelSignal | undefined,
    op: (s: Session, signal: CancelSignal) => Promise<T>,
  ): Promise<T> {
    this.warnCleartext(server);
    let session: Session | undefined;
    try {
      await within(server.timeout_ms, 'connect', caller, async (signal) => {
        session = new Session(
          server,
          this.d.upstream,
          await credentialHeaders(server, this.tokens, signal, 'x-api-key'),
        );
        try {
          await session.open(signal);
        } catch (e) {
          if (e instanceof UpstreamFailure && e.unauthorized) this.tokens.drop(server);
          throw e;
        }
      });
      return await within(server.timeout_ms, 'operation', caller, (signal) => op(session!, signal));
    } finally {
      if (session) this.end(server, session);
    }
  }

  /** Ends `session` after its caller has its answer, under the server's deadline; never fails the call. */
  private end(server: McpServer, session: Session): void {
    const work = within(server.timeout_ms, 'close', undefined, (signal) => session.close(signal)).catch((e) => {
      this.d.log.debug('upstream MCP session DELETE failed', {
        upstream: server.name,
        error: e instanceof Error ? e.message : String(e),
      });
    });
    this.closing.add(work);
    void work.finally(() => this.closing.delete(work));
    this.d.keepAlive?.(work);
  }

  /** Resolves once every session DELETE begun so far has settled. */
  async sessionsClosed(): Promise<void> {
    await Promise.all([...this.closing]);
  }

  /** AISIX's cleartext findings, each WARNed once per process (server, finding, URL). */
  private warnCleartext(server: McpServer): void {
    if (server.auth_type === 'none') return;
    const findings: [string, string][] = [];
    if (isCleartext(server.url)) findings.push(['the gateway-held upstream credential', server.url]);
    if (server.auth_type === 'oauth2' && server.token_url && isCleartext(server.token_url)) {
      findings.push(['the OAuth client secret', server.token_url]);
    }
    for (const [finding, url] of findings) {
      const key = `${server.name}\u0000${finding}\u0000${url}`;
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      this.d.log.warn(
        `${finding} is sent over cleartext http; anyone on the network path can read it — serve this upstream over https`,
        { server: server.name, url },
      );
    }
  }
}

function isCleartext(url: string): boolean {
  return url.trimStart().toLowerCase().startsWith('http://');
}

/** The JSON-RPC error a failed call is to the caller, whatever the cause (the detail goes to the WARN line). */
export function callFailure(server: string): { code: number; message: string } {
  return { code: CODE.internal, message: `upstream MCP server '${server}' failed to call tool` };
}
