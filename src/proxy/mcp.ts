// The `mcp` route kind's handler (docs/mcp.md): `POST /mcp` and `/mcp/{server}` served statelessly, one JSON
// answer per request, by any replica. The order is AISIX's where a client can observe it: the path, the caller
// (a key as for model calls, or the anonymous entry of `mcp_auth_settings`), the scoped server (404 only after
// authentication), the transport checks, the body, the version gate, then the method (src/mcp/gateway.ts).
// Sluice's own: `Origin` is validated first, and a tool call's ACL is checked before its rate limits.
import type { Context } from 'hono';
import { errors, ProxyError } from '../http/errors.ts';
import { resolveAcl } from '../mcp/acl.ts';
import { type McpAnswer, McpGateway, resolveTarget, type ToolGuard, type ToolTarget } from '../mcp/gateway.ts';
import { guardArguments, guardResult } from '../mcp/guard.ts';
import { challengeFor, discoveryOf } from '../mcp/discovery.ts';
import { ScopeRefusal } from '../identity/scope-refusal.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Config } from '../config/schema.ts';
import { AttachmentIndex } from '../guardrails/attachments.ts';
import type { ChainDeps } from '../guardrails/chain.ts';
import { scrubberFor } from '../http/scrub.ts';
import { decodePathParam } from '../http/path-param.ts';
import { guardrailMetricsFor } from '../observability/guardrail-metrics.ts';
import type { Registry } from '../observability/metrics.ts';
import { idOf, rpcError, versionGate } from '../mcp/protocol.ts';
import { McpUpstreams } from '../mcp/upstream.ts';
import type { Logger } from '../observability/logger.ts';
import type { Platform, UpstreamFetch } from '../platform.ts';
import type { McpServer } from '../resources/mcp-schema.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import {
  bucketSpec,
  type Permit,
  type RateLimitDecision,
  type RateLimiter,
  type RateLimitSubject,
} from '../routing/rate-limit.ts';
import { limiterMessage } from '../policies/target-gate.ts';
import { ipAllowed } from '../util/cidr.ts';
import type { Clock } from '../util/clock.ts';
import { type CallUsage, USAGE_PART } from '../usage/facts.ts';
import { fail } from './answer.ts';
import { readLimited } from './body.ts';
import { holdModellessQuota } from './call-quota.ts';
import { CALL_SPAN, type CallSpan, cutBytes } from './call-span.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestStep } from './pipeline.ts';
import { ProxyRequest } from './request.ts';
import type { McpRoute } from './routes.ts';

/** What the MCP handler reads; `snapshot` is read per request (the Gateway's getter). */
export interface McpDeps {
  readonly snapshot: Snapshot | undefined;
  readonly clock: Clock;
  readonly log: Logger;
  readonly upstream: UpstreamFetch;
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly config: Pick<Config, 'bedrock_endpoint_url'>;
  readonly metrics: { readonly registry: Registry };
  /** Spend budgets: a tool call by a key whose budget has no room left is refused (docs/budgets.md). */
  readonly budgets?: { readonly budgets: Budgets };
  /**
   * Workers' `waitUntil`: an upstream session's DELETE outlives the request that opened it. (`connectWebSocket`
   * is named only so the proxy's narrower view of the platform fits; both members are optional.)
   */
  readonly platform?: Pick<Platform, 'waitUntil' | 'connectWebSocket'>;
}

/** How the proxy reads a request: its body limit and the client address (`proxy.real_ip`). */
export interface McpRequestRules {
  readonly bodyLimit: number;
  readonly clientIpOf: (peer: string | undefined, headers: Headers) => string | undefined;
  /** config.yaml's secrets, scrubbed from what a guardrail service answers. */
  readonly configSecrets: readonly string[];
}

/** The handler maker of the `mcp` route kind: one gateway (its OAuth tokens, its warnings) for every route. */
export function mcpHandlers(
  d: McpDeps,
  rules: McpRequestRules,
  identify: RequestStep,
): (route: McpRoute) => McpHandler {
  const waitUntil = d.platform?.waitUntil?.bind(d.platform);
  const upstreams = new McpUpstreams({
    upstream: d.upstream,
    log: d.log.withTarget('aisix_mcp'),
    ...(waitUntil ? { keepAlive: waitUntil } : {}),
  });
  const gateway = new McpGateway(upstreams, d.log.withTarget('aisix_mcp'));
  const servers = new ServerIndex(d.log.withTarget('aisix_mcp'));
  const guards = new ToolGuards(d, rules.configSecrets);
  return (route) => mcpEndpoint(d, rules, identify, gateway, { servers, guards }, route);
}

type McpHandler = (c: Context<ProxyEnv>) => Promise<Response>;

function text(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=utf-8', ...headers } });
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

function mcpEndpoint(
  d: McpDeps,
  rules: McpRequestRules,
  identify: RequestStep,
  gateway: McpGateway,
  per: { servers: ServerIndex; guards: ToolGuards },
  route: McpRoute,
): McpHandler {
  return async function handleMcp(c) {
    const req = new ProxyRequest(c, c.get('rec'), c.get('state'));
    // The server's name, decoded from the raw segment; one that does not decode is the 400 after authentication.
    let named: string | undefined;
    let badName: ProxyError | undefined;
    if (route.scoped) {
      const raw = new URL(c.req.url).pathname.split('/')[2] ?? '';
      const decoded = decodePathParam(raw);
      if (decoded instanceof ProxyError) badName = decoded;
      else named = decoded;
    }
    if (!originAllowed(req.headers, c.req.url)) {
      return json(403, rpcError(null, -32600, 'Forbidden: the Origin header does not match this endpoint'));
    }
    // A name that does not decode names no server, so it admits no anonymous caller.
    const anonymous = badName ? await identify.run(req) : await admitCaller(d, rules, identify, req, named);
    if (anonymous instanceof ProxyError) return challenged(d, fail(c, anonymous), anonymous);
    if (anonymous instanceof Response) return anonymous;
    if (badName) return fail(c, badName);
    const all = per.servers.of(req.caller.snapshot);
    let scoped: McpServer | undefined;
    if (named !== undefined) {
      scoped = all.find((s) => s.name === named && s.enabled);
      if (!scoped) return text(404, `unknown MCP server: ${named}`);
    }
    const refused = transportRefusal(c.req.method, req.headers);
    if (refused) return refused;
    const read = await readMessage(c, req.headers, rules.bodyLimit);
    if (read instanceof Response) return read;
    return answerMessage(d, rules, gateway, per.guards, req, { all, scoped, anonymous, ...read });
  };
}

/** The transport's checks (Streamable HTTP): POST, both answer types accepted, a JSON body. */
function transportRefusal(method: string, headers: Headers): Response | undefined {
  if (method !== 'POST') return text(405, 'Method Not Allowed', { allow: 'POST' });
  const accept = headers.get('accept') ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
    return text(406, 'Not Acceptable: Client must accept both application/json and text/event-stream');
  }
  if (!(headers.get('content-type') ?? '').toLowerCase().startsWith('application/json')) {
    return text(415, 'Unsupported Media Type: Content-Type must be application/json');
  }
  return undefined;
}

/** The body within the limit, parsed, past the version gate: the message and the version it names. */
async function readMessage(
  c: Context<ProxyEnv>,
  headers: Headers,
  limit: number,
): Promise<{ msg: unknown; version: string | null } | Response> {
  let bytes: Uint8Array | ProxyError;
  try {
    bytes = await readLimited(c.req.raw, limit);
  } catch {
    return text(400, 'invalid request body');
  }
  if (bytes instanceof ProxyError) return fail(c, bytes);
  let msg: unknown;
  try {
    msg = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    msg = undefined;
  }
  const version = headers.get('mcp-protocol-version');
  const gate = versionGate(version, idOf(msg));
  if (gate) return json(400, gate);
  if (msg === undefined) return json(400, rpcError(null, -32700, 'Parse error: the body is not JSON'));
  return { msg, version };
}

/** One admitted message answered by the gateway: the caller's ACL, a tool call's usage, trace and quota. */
async function answerMessage(
  d: McpDeps,
  rules: McpRequestRules,
  gateway: McpGateway,
  guards: ToolGuards,
  req: ProxyRequest,
  m: {
    all: readonly McpServer[];
    scoped: McpServer | undefined;
    anonymous: readonly string[] | undefined;
    msg: unknown;
    version: string | null;
  },
): Promise<Response> {
  const { c } = req;
  const { key, snapshot } = req.caller;
  const { all, scoped, anonymous } = m;
  const acl = resolveAcl(snapshot.of('mcp_policies'), {
    ...(key.team_id !== undefined ? { team_id: key.team_id } : {}),
    ...(key.mcp_access ? { mcp_access: key.mcp_access } : {}),
    ...(anonymous ? { anonymousServers: anonymous } : {}),
  });
  const usage = toolCallUsage(m.msg, { servers: all, scoped }, anonymous !== undefined);
  if (usage) req.rec.facet(USAGE_PART).call = usage;
  // A tool call's trace: AISIX's `execute_tool <tool>` spans, named by the same (server, tool) as its usage.
  const span = usage && req.rec.facet(CALL_SPAN);
  traceToolCall(span, usage);
  const quota = toolQuota(d, req, usage, span);
  let answer: McpAnswer | Response;
  try {
    const guard = guards.of(snapshot, key);
    answer = await gateway.handle(
      {
        servers: all,
        scoped,
        acl,
        version: m.version,
        headers: req.headers,
        signal: c.env?.closed ?? c.req.raw.signal,
        scrub: scrubberFor(snapshot, rules.configSecrets, undefined),
        ...(guard ? { guard } : {}),
        ...(span ? { onUpstream: (phase: 'start' | 'end') => span.upstreamAt(phase, d.clock() - req.rec.start) } : {}),
      },
      m.msg,
      quota.govern,
    );
  } finally {
    await quota.end();
  }
  if (answer instanceof Response) return answer;
  if (answer.body === undefined) return new Response(null, { status: answer.status });
  return json(answer.status, answer.body);
}

/** Names the call's span after the (server, tool) its usage names; nothing for a call that is no tool call. */
function traceToolCall(span: CallSpan | undefined, usage: CallUsage | undefined): void {
  if (!span || !usage) return;
  const tool = String(usage.fields.mcp_tool_name ?? '');
  const server = usage.fields.mcp_server_name;
  span.operation = 'execute_tool';
  span.target = tool;
  span.attributes = { 'gen_ai.tool.name': cutBytes(tool) };
  if (typeof server === 'string' && server !== '') span.attributes['aisix.mcp.server_name'] = server;
}

/**
 * A tool call's quota, held from the gateway's `govern` (the target resolved, its ACL passed) to the answer:
 * the caller's budgets, then the key's, its server bucket's and the modelless policies' rate limits. `end`
 * releases the permit and records the upstream time.
 */
function toolQuota(
  d: McpDeps,
  req: ProxyRequest,
  usage: CallUsage | undefined,
  span: CallSpan | undefined,
): { govern: (t: ToolTarget) => Promise<Response | undefined>; end: () => Promise<void> } {
  let permit: Permit | undefined;
  let began: number | undefined;
  const govern = async (t: ToolTarget): Promise<Response | undefined> => {
    if (usage) usage.fields = { ...usage.fields, mcp_server_name: t.server.name, mcp_tool_name: t.tool };
    traceToolCall(span, usage);
    const held = await holdModellessQuota(d, req.caller, serverBucket(req.caller.key, t.server.name), rateLimited);
    if (held instanceof ProxyError) return fail(req.c, held);
    permit = held;
    began = d.clock();
    return undefined;
  };
  const end = async () => {
    await permit?.end();
    if (usage && began !== undefined) usage.upstreamMs = d.clock() - began;
  };
  return { govern, end };
}

/**
 * The usage record of a `tools/call` (AISIX's, docs/usage-events.md "Tool and agent calls"): one for every outcome,
 * with the server and the tool (without its prefix) as the message names them; undefined for other methods.
 */
function toolCallUsage(
  msg: unknown,
  servers: Parameters<typeof resolveTarget>[0],
  anonymous: boolean,
): CallUsage | undefined {
  const m = msg as { method?: unknown; params?: { name?: unknown } } | null;
  if (typeof m !== 'object' || m === null || m.method !== 'tools/call') return undefined;
  const name = typeof m.params?.name === 'string' ? m.params.name : '';
  const target = resolveTarget(servers, name);
  const [server, tool] = 'message' in target ? [servers.scoped?.name, name] : [target.server, target.tool];
  return {
    handler: 'mcp',
    protocol: 'mcp',
    fields: { auth_type: anonymous ? 'anonymous' : undefined, mcp_server_name: server, mcp_tool_name: tool },
    upstreamMs: 0,
  };
}

/**
 * Who is calling (docs/mcp.md "Inbound authentication"): a request that offers a credential is authenticated
 * as for a model call, and a failure is final, never downgraded to anonymous; one that offers none may be the
 * anonymous principal of the environment's `mcp_auth_settings`. Resolves to the anonymous entry's servers
 * (the caller's ceiling), undefined for a key, or the refusal.
 */
async function admitCaller(
  d: McpDeps,
  rules: McpRequestRules,
  identify: RequestStep,
  req: ProxyRequest,
  scoped: string | undefined,
): Promise<readonly string[] | undefined | ProxyError | Response> {
  const offered = (req.headers.get('authorization') ?? '').trim() !== '' ||
    (req.headers.get('x-api-key') ?? '').trim() !== '';
  const snapshot = d.snapshot;
  if (!offered && snapshot) {
    const entry = anonymousEntry(d, rules, snapshot, req, scoped);
    if (entry) {
      req.caller = { key: entry.key, snapshot };
      req.rec.identified(entry.key);
      return entry.servers;
    }
  }
  const refused = await identify.run(req);
  if (refused instanceof ProxyError || refused instanceof Response) return refused;
  return undefined;
}

/**
 * The anonymous principal, when every condition holds: exactly one `mcp_auth_settings` row, its `anonymous`
 * block enabled, this entry allowed (the scoped server among `servers`, or `aggregate_entry` on `/mcp`), the
 * client address in `source_cidrs`, the principal key present, enabled and unexpired. Otherwise undefined:
 * the caller gets the ordinary 401, so a probe learns nothing.
 */
function anonymousEntry(
  d: McpDeps,
  rules: McpRequestRules,
  snapshot: Snapshot,
  req: ProxyRequest,
  scoped: string | undefined,
): { key: ApiKey; servers: readonly string[] } | undefined {
  const settings = snapshot.of('mcp_auth_settings');
  // More than one row: every setting stays dormant (AISIX's), WARNed about by `ServerIndex`.
  const anon = settings.length === 1 ? settings[0]!.anonymous : undefined;
  if (!anon || !anon.enabled) return undefined;
  if (scoped === undefined ? !anon.aggregate_entry : !anon.servers.includes(scoped)) return undefined;
  const ip = rules.clientIpOf(req.c.env?.peer, req.headers);
  if (ip === undefined || !ipAllowed(anon.source_cidrs, ip)) return undefined;
  const key = snapshot.apiKeys.get(anon.api_key_id);
  if (!key || key.disabled) return undefined;
  if (key.expires_at !== undefined && Date.parse(key.expires_at) <= d.clock()) return undefined;
  return { key, servers: anon.servers };
}

/**
 * `Origin` as the MCP transport requires (a DNS-rebinding defence): absent passes (not a browser); present, it
 * must be the endpoint's own origin as the request reached it.
 */
function originAllowed(headers: Headers, url: string): boolean {
  const origin = headers.get('origin');
  if (origin === null) return true;
  const host = headers.get('host') ?? new URL(url).host;
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/** A tool call's own bucket after the key's: the key's limits on that server (`mcp:<key>:<server>`). */
function serverBucket(key: ApiKey, server: string): RateLimitSubject[] {
  const limits = key.mcp_rate_limits?.[server];
  const bucket = `mcp:${key.id}:${server}`;
  const spec = bucketSpec(bucket, limits);
  return spec ? [{ scope: 'mcp', id: bucket, spec }] : [];
}

/**
 * AISIX's 429 on a tool call: its OpenAI envelope, `Retry-After` except for concurrency, no `x-ratelimit-*`; a
 * policy's names the policy (` (policy '<name>')` and `error.policy`).
 */
function rateLimited(r: Extract<RateLimitDecision, { allowed: false }>): ProxyError {
  const headers = r.kind === 'concurrency' ? undefined : { 'retry-after': String(r.retryAfterSecs) };
  if (r.scope !== 'policy') {
    return new ProxyError(429, 'rate_limit_exceeded', limiterMessage(r.kind), undefined, headers);
  }
  const name = r.name ?? r.id;
  return new ProxyError(
    429,
    'rate_limit_exceeded',
    `${limiterMessage(r.kind)} (policy '${name}')`,
    undefined,
    headers,
    {
      policy: { id: r.id, name },
    },
  );
}

/**
 * The registered servers of each snapshot, deduplicated by name: the first registration wins, the others are
 * WARNed about once per snapshot, as are `mcp_auth_settings` that cannot take effect. Kept per snapshot
 * object, so a new configuration is read afresh.
 */
class ServerIndex {
  private readonly bySnapshot = new WeakMap<Snapshot, readonly McpServer[]>();
  /** The settings lines already written: once per process, as AISIX's. */
  private readonly warned = new Set<keyof typeof MCP_AUTH_MSG>();

  constructor(private readonly log: Logger) {}

  of(snapshot: Snapshot): readonly McpServer[] {
    let list = this.bySnapshot.get(snapshot);
    if (list) return list;
    const seen = new Set<string>();
    const kept: McpServer[] = [];
    for (const s of snapshot.of('mcp_servers')) {
      if (seen.has(s.name)) {
        this.log.warn('duplicate MCP upstream name; keeping the first registration, dropping this one', {
          upstream: s.name,
          id: s.id,
        });
        continue;
      }
      seen.add(s.name);
      kept.push(s);
    }
    this.bySnapshot.set(snapshot, list = kept);
    this.checkSettings(snapshot);
    return list;
  }

  private checkSettings(snapshot: Snapshot): void {
    const settings = snapshot.of('mcp_auth_settings');
    const once = (line: keyof typeof MCP_AUTH_MSG, fields: Record<string, unknown>) => {
      if (this.warned.has(line)) return;
      this.warned.add(line);
      this.log.warn(MCP_AUTH_MSG[line], fields);
    };
    if (settings.length > 1) once('multipleRows', { count: settings.length });
    else {
      const surface = discoveryOf(snapshot);
      if (surface === 'invalid_resource_url') once('invalidResourceUrl', { resource_url: settings[0]!.resource_url });
      if (surface === 'no_oidc_provider') once('discoveryDormant', { resource_url: settings[0]!.resource_url });
    }
  }
}

/** The `aisix::mcp_auth` lines, in one place. */
export const MCP_AUTH_MSG = {
  multipleRows: 'multiple mcp_auth_settings rows in snapshot; both the OAuth discovery surface and anonymous MCP ' +
    'access stay dormant until exactly one remains',
  discoveryDormant: 'mcp_auth_settings.resource_url is set, but the OAuth discovery surface needs an enabled ' +
    'oidc_providers row: it stays dormant (no metadata document, no challenge)',
  invalidResourceUrl: 'mcp_auth_settings.resource_url is not an absolute http(s) URL with path exactly /mcp and no ' +
    'query or fragment; the OAuth discovery surface stays dormant',
} as const;

/**
 * The RFC 9728 metadata paths (docs/mcp.md "Inbound authentication"), unauthenticated. Active (src/mcp/discovery.ts):
 * GET and HEAD answer the document, other methods 405; dormant: a bare 404, every method, as AISIX's.
 */
export const PROTECTED_RESOURCE_PATHS = [
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-protected-resource/mcp',
];

export function protectedResource(d: Pick<McpDeps, 'snapshot'>) {
  return function serveProtectedResource(c: Context<ProxyEnv>): Response {
    const surface = d.snapshot ? discoveryOf(d.snapshot) : undefined;
    if (typeof surface !== 'object') return new Response(null, { status: 404 });
    const method = c.req.method;
    if (method !== 'GET' && method !== 'HEAD') {
      return new Response(null, { status: 405, headers: { allow: 'GET, HEAD' } });
    }
    const body = new TextEncoder().encode(surface.document);
    const headers = { 'content-type': 'application/json', 'content-length': String(body.byteLength) };
    return new Response(method === 'HEAD' ? null : body, { status: 200, headers });
  };
}

/** A refused `/mcp` caller's answer with the active surface's `WWW-Authenticate` challenge. */
function challenged(d: McpDeps, res: Response, e: ProxyError): Response {
  const surface = d.snapshot ? discoveryOf(d.snapshot) : undefined;
  if (typeof surface !== 'object') return res;
  const scopes = e instanceof ScopeRefusal ? e.requiredScopes : undefined;
  const challenge = challengeFor(surface, e.status, e.message === errors.missingAuth().message, scopes);
  if (challenge !== undefined) res.headers.set('www-authenticate', challenge);
  return res;
}

/**
 * The guardrails of each snapshot's tool calls: its attachment index (environment, `mcp_server`, key and team
 * scopes; a model's never) and the chain's dependencies, built on the snapshot's first tool call. A snapshot
 * whose guardrails can run nowhere has none, and its calls skip the checks entirely.
 */
class ToolGuards {
  private readonly bySnapshot = new WeakMap<Snapshot, { index: AttachmentIndex; deps: ChainDeps } | null>();
  private readonly base: ChainDeps;

  constructor(d: McpDeps, private readonly configSecrets: readonly string[]) {
    const log = d.log.withTarget('aisix_mcp');
    this.base = {
      ctx: { fetch: d.upstream, bedrockEndpointUrl: d.config.bedrock_endpoint_url || undefined },
      metrics: guardrailMetricsFor(d.metrics.registry),
      log: (level, msg, fields) => log[level](msg, fields),
      now: () => performance.now() / 1000,
    };
  }

  of(snapshot: Snapshot, key: ApiKey): ToolGuard | undefined {
    let g = this.bySnapshot.get(snapshot);
    if (g === undefined) {
      const index = snapshot.guardrails.length === 0
        ? undefined
        : new AttachmentIndex(snapshot.guardrails, snapshot.guardrailAttachments);
      const scrub = (text: string, max?: number) => scrubberFor(snapshot, this.configSecrets, undefined)(text, max);
      g = index && !index.empty ? { index, deps: { ...this.base, ctx: { ...this.base.ctx, scrub } } } : null;
      this.bySnapshot.set(snapshot, g);
    }
    if (g === null) return undefined;
    const { index, deps } = g;
    const chainOf = (t: ToolTarget) =>
      index.resolve({ modelId: '', apiKeyId: key.id, teamId: key.team_id, mcpServerId: t.server.id });
    return {
      input: (t) => guardArguments(chainOf(t), deps, t.tool, t.args),
      output: (t, result) => guardResult(chainOf(t), deps, t.tool, result),
    };
  }
}
