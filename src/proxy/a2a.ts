// The A2A routes' handlers (docs/a2a.md): `POST /a2a/{agent}` relays one JSON-RPC call to the agent, and
// `GET /a2a/{agent}/.well-known/agent-card.json` serves its card pointing at the gateway. Both run `identify`
// first, as every route does; then the agent (404), the key's `allowed_agents` (403), and for a call the body,
// the caller's budget and rate limits (its key's and the policies that need no model; a permit held to the
// answer's last byte), the input guardrails, the relay and its telemetry. The agent-side pieces are src/a2a/.
import type { Context } from 'hono';
import { agentAllowed, servedAgent } from '../a2a/agents.ts';
import { fetchCard, rewriteCard } from '../a2a/card.ts';
import { AnswerFacts, observed } from '../a2a/facts.ts';
import { AgentGuards, guardMessage } from '../a2a/guard.ts';
import { requestText, ResultText } from '../a2a/text.ts';
import { operationOf, streams } from '../a2a/operations.ts';
import {
  A2A_LOG,
  A2A_REFUSAL,
  AgentFailure,
  describe,
  FAILED,
  rpcFailure,
  type TimedCall,
  timedCall,
} from '../a2a/upstream.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { Config } from '../config/schema.ts';
import type { ChainDeps } from '../guardrails/chain.ts';
import { ProxyError } from '../http/errors.ts';
import { configSecrets, scrubberFor } from '../http/scrub.ts';
import { decodePathParam } from '../http/path-param.ts';
import { guardrailMetricsFor } from '../observability/guardrail-metrics.ts';
import { countTokensNow } from '../providers/estimate.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { A2aAgent } from '../resources/a2a-agent.ts';
import type { Permit, RateLimiter } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import { cidrContains, parseCidr, parseIp, stripPort } from '../util/cidr.ts';
import { fail } from './answer.ts';
import { readLimited } from './body.ts';
import { holdModellessQuota } from './call-quota.ts';
import { CALL_SPAN, cutBytes } from './call-span.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import type { RequestRecord } from './record.ts';
import { GUARDRAIL_RECORD } from './guardrail-record.ts';
import type { RequestStep } from './pipeline.ts';
import { identified } from './identified.ts';
import { ProxyRequest } from './request.ts';
import { pumpSse, type StreamEnd } from './stream.ts';
import { type CallUsage, USAGE_PART } from '../usage/facts.ts';

/** What the A2A handlers read. */
export interface A2aDeps {
  readonly config: Config;
  readonly upstream: UpstreamFetch;
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  /** Spend budgets: a call by a key whose budget has no room left is refused (docs/budgets.md). */
  readonly budgets?: { readonly budgets: Budgets };
}

type Handler = (c: Context<ProxyEnv>) => Promise<Response>;

const decoder = new TextDecoder();

/** A text/plain answer, AISIX's form for the A2A refusals. */
function text(c: Context<ProxyEnv>, status: number, body: string, kind: string): Response {
  c.get('rec').failed(kind, body);
  return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=utf-8' } });
}

/**
 * identify → the agent named by the path's second segment (`/a2a/{agent}…`; 400 when its percent-encoding does not
 * decode, 404 unknown or disabled) → the key's `allowed_agents` (403).
 */
async function admit(
  c: Context<ProxyEnv>,
  identify: RequestStep,
): Promise<{ req: ProxyRequest; agent: A2aAgent } | Response> {
  const req = await identified(c, identify);
  if (req instanceof Response) return req;
  // The raw segment, not `c.req.param`: Hono hands a malformed escape over undecoded.
  const name = decodePathParam(new URL(c.req.url).pathname.split('/')[2] ?? '');
  if (name instanceof ProxyError) return fail(c, name);
  const agent = servedAgent(req.caller.snapshot.of('a2a_agents'), name);
  if (!agent) return text(c, 404, A2A_REFUSAL.unknownAgent(name), 'not_found');
  if (!agentAllowed(req.caller.key.allowed_agents, agent.name)) {
    return text(c, 403, A2A_REFUSAL.notAllowed(name), 'permission_denied');
  }
  return { req, agent };
}

/** Once per (agent, url) per process: the agent's credential travels in clear. */
function cleartextWarner(log: Logger): (agent: A2aAgent) => void {
  const warned = new Set<string>();
  return (agent) => {
    if (agent.auth_type === 'none' || !/^\s*http:\/\//i.test(agent.url)) return;
    const key = `${agent.name}\n${agent.url}`;
    if (warned.has(key)) return;
    warned.add(key);
    log.warn(A2A_LOG.cleartext, { agent: agent.name, url: agent.url });
  };
}

/** What a snapshot's guardrail chains call with on A2A calls: the snapshot's secrets are scrubbed from services' words. */
function chainDeps(d: A2aDeps, log: Logger): (snapshot: Snapshot) => ChainDeps {
  const secrets = configSecrets(d.config);
  const metrics = guardrailMetricsFor(d.metrics.registry);
  return (snapshot) => ({
    ctx: {
      fetch: d.upstream,
      bedrockEndpointUrl: d.config.bedrock_endpoint_url || undefined,
      scrub: (text, max) => scrubberFor(snapshot, secrets, undefined)(text, max),
    },
    metrics,
    log: (level, msg, fields) => log[level](msg, fields),
    now: () => performance.now() / 1000,
  });
}

/** AISIX meters the calls that make an agent produce; reads of a task (`tasks/get`, a resubscribe) are not. */
function metered(operation: string): boolean {
  return operation === 'message/send' || operation === 'message/stream';
}

/** What serving A2A calls reads, made once per handler. */
interface Serving {
  readonly d: A2aDeps;
  readonly log: Logger;
  readonly warnCleartext: (agent: A2aAgent) => void;
  readonly guards: AgentGuards;
  readonly limit: number;
  readonly keepaliveMs: number;
}

export function a2aCall(d: A2aDeps, identify: RequestStep): Handler {
  const log = d.log.withTarget('aisix_proxy::a2a');
  const s: Serving = {
    d,
    log,
    warnCleartext: cleartextWarner(log),
    guards: new AgentGuards(chainDeps(d, log)),
    limit: d.config.proxy.request_body_limit_bytes,
    keepaliveMs: d.config.downstream.sse_keepalive_interval_secs * 1000,
  };
  return async function handleA2aCall(c) {
    const admitted = await admit(c, identify);
    if (admitted instanceof Response) return admitted;
    return serveCall(s, c, admitted.req, admitted.agent);
  };
}

/** One admitted call: its body, its quota, its input guardrails, then the forward to the agent. */
async function serveCall(s: Serving, c: Context<ProxyEnv>, req: ProxyRequest, agent: A2aAgent): Promise<Response> {
  const read = await readCall(c, s.limit);
  if (read instanceof Response) return read;
  const call = beginCall(s, req.rec, agent, read.rpc);
  // The caller's budgets, then its rate limits: the key's own and every policy that needs no model, held for
  // a stream's whole life.
  const permit = await holdModellessQuota(s.d, req.caller, []);
  if (permit instanceof ProxyError) {
    call.count(permit.status);
    return fail(c, permit);
  }
  const body = await checkInput(s, req, call, permit, read.raw);
  if (body instanceof Response) return body;
  return forward(s, c, req.rec, call, permit, body);
}

/** One call as its record, its metrics and its answer see it. */
interface AgentCall {
  readonly agent: A2aAgent;
  readonly rpc: Record<string, unknown>;
  readonly operation: string;
  readonly stream: boolean;
  readonly usage: CallUsage;
  readonly facts: AnswerFacts;
  readonly about: CallFacts;
  /** Describes the call on its record at `status` and counts it in the A2A family. */
  readonly count: (status: number) => void;
}

/** The call's operation, its usage record and the facts its answer will add to. */
function beginCall(s: Serving, rec: RequestRecord, agent: A2aAgent, rpc: Record<string, unknown>): AgentCall {
  const operation = operationOf(rpc.method);
  const stream = streams(operation);
  rec.dispatching(stream, undefined);
  // AISIX's usage record of a call that reached its quota: refused there, or forwarded.
  const usage: CallUsage = {
    handler: 'a2a',
    protocol: 'a2a',
    protocolLabel: 'other', // AISIX's counters have no `a2a` protocol label
    fields: {
      a2a_agent_name: agent.name,
      a2a_method: typeof rpc.method === 'string' ? rpc.method : undefined,
      a2a_operation: operation,
      a2a_protocol_version: agent.protocol_version,
    },
    upstreamMs: 0,
  };
  rec.facet(USAGE_PART).call = usage;
  // The words the estimate counts: the caller's message now, the agent's as its answer goes by.
  const prompt = metered(operation) ? requestText(rpc) : '';
  const facts = new AnswerFacts(s.d.clock, metered(operation) ? new ResultText() : undefined);
  facts.request(rpc);
  const about: CallFacts = { agent, operation, stream, method: rpc.method, facts, prompt, began: undefined };
  const count = (status: number) => {
    described(rec, about, usage, status);
    s.d.metrics.a2aRequests.inc([agent.name, operation, `${Math.floor(status / 100)}xx`]);
  };
  return { agent, rpc, operation, stream, usage, facts, about, count };
}

/**
 * The input guardrails, after the reservation as on every endpoint: a refused message counts against the
 * request limits and reaches no agent. The body to forward (masked, or as the caller sent it), or the 422.
 */
async function checkInput(
  s: Serving,
  req: ProxyRequest,
  call: AgentCall,
  permit: Permit,
  raw: string,
): Promise<string | Response> {
  const rec = req.rec;
  const guard = s.guards.of(req.caller.snapshot, req.caller.key);
  const checked = guard && await guardMessage(guard.chain, guard.deps, call.agent.name, call.rpc);
  if (!checked) return raw;
  rec.facet(GUARDRAIL_RECORD).ran(checked.verdict);
  if (checked.kind === 'blocked') {
    void permit.end();
    rec.failed('content_filter', checked.message);
    call.count(422);
    return new Response(rpcFailure(call.rpc.id, checked.message), {
      status: 422,
      headers: { 'content-type': 'application/json' },
    });
  }
  return checked.kind === 'masked' ? checked.body : raw;
}

/** The forward to the agent and its answer relayed; the permit ends, and the call is counted, at its end. */
async function forward(
  s: Serving,
  c: Context<ProxyEnv>,
  rec: RequestRecord,
  call: AgentCall,
  permit: Permit,
  body: string,
): Promise<Response> {
  const { d, log } = s;
  const { agent, stream, rpc } = call;
  s.warnCleartext(agent);
  const started = call.about.began = d.clock();
  const finish = (status: number) => settleCall(s, rec, call, permit, started, status);
  const failed = (message: string, logMsg: string): Response => {
    log.warn(logMsg, { agent: agent.name, error: message, request_id: rec.requestId });
    rec.failed('upstream_error', message);
    finish(502);
    return new Response(rpcFailure(rpc.id, message), {
      status: 502,
      headers: { 'content-type': 'application/json' },
    });
  };

  let sent: TimedCall;
  try {
    sent = await timedCall(d.upstream, agent, {
      url: agent.url,
      method: 'POST',
      accept: stream ? 'text/event-stream' : 'application/json',
      body,
    }, c.env?.closed ?? c.req.raw.signal);
  } catch (e) {
    return failed(describe(e), stream ? A2A_LOG.streamOpenFailed : A2A_LOG.callFailed);
  }
  const r = sent.response;
  if (r.status < 200 || r.status > 299) {
    sent.done();
    await r.discard().catch(() => {});
    return failed(
      `${FAILED}: upstream returned HTTP ${r.status}`,
      stream ? A2A_LOG.streamOpenFailed : A2A_LOG.callFailed,
    );
  }
  const eventStream = (r.header('content-type') ?? '').toLowerCase().startsWith('text/event-stream');
  if (!stream || !eventStream) return relayWhole(s, rec, call, sent, finish, failed);
  // A live stream: no deadline from here on; the permit and the in-flight slot are held to its end.
  sent.done();
  return relayStream(s, c, rec, call, sent, finish);
}

/** A whole answer: read under the deadline, relayed as it came (one SSE event when a stream was asked for). */
async function relayWhole(
  s: Serving,
  rec: RequestRecord,
  call: AgentCall,
  sent: TimedCall,
  finish: (status: number) => void,
  failed: (message: string, logMsg: string) => Response,
): Promise<Response> {
  const { stream, facts } = call;
  const answer = await wholeAnswer(sent);
  if (answer.failed !== undefined) return failed(answer.failed, A2A_LOG.callFailed);
  facts.answer(answer.json);
  if (stream) facts.events = facts.firstResultAt !== undefined ? 1 : 0;
  rec.firstByte(s.d.clock());
  finish(200);
  return stream
    ? new Response(`data: ${answer.text.replaceAll('\n', '')}\n\n`, { status: 200, headers: SSE_HEADERS })
    : new Response(answer.text, { status: 200, headers: { 'content-type': 'application/json' } });
}

/** A live stream relayed to its end, which settles the call (a caller gone before the task ended: 499). */
function relayStream(
  s: Serving,
  c: Context<ProxyEnv>,
  rec: RequestRecord,
  call: AgentCall,
  sent: TimedCall,
  finish: (status: number) => void,
): Response {
  const { agent, facts } = call;
  return relay(c, sent.response.body, sent, facts, {
    keepaliveMs: s.keepaliveMs,
    clock: s.d.clock,
    rpcId: call.rpc.id,
    onEnd: (end, detail) => {
      if (end !== 'complete') {
        rec.streamFailed(end, detail);
        if (end !== 'client_closed') s.log.warn(A2A_LOG.streamFailed, { agent: agent.name, error: detail ?? end });
      }
      // AISIX: a caller that left before the task's end event is a 499 in the A2A family.
      const settled = facts.state !== undefined && facts.state !== 'submitted' && facts.state !== 'working';
      finish(end === 'client_closed' && !settled ? 499 : 200);
    },
  });
}

/** A forwarded call's end at `status`: the permit ended, the call counted, its times and the agent's metrics. */
function settleCall(
  s: Serving,
  rec: RequestRecord,
  call: AgentCall,
  permit: Permit,
  started: number,
  status: number,
): void {
  const { d } = s;
  const { agent, operation, facts, usage } = call;
  void permit.end();
  call.count(status);
  usage.upstreamMs = d.clock() - started;
  rec.facet(CALL_SPAN).upstream = { start: started - rec.start, end: d.clock() - rec.start };
  usage.downstreamMs = d.clock() - rec.start;
  const labels = [agent.name, operation] as const;
  if (facts.events > 0) d.metrics.a2aStreamEvents.inc(labels, facts.events);
  if (facts.firstResultAt !== undefined) {
    d.metrics.a2aTtfb.observe(labels, (facts.firstResultAt - rec.start) / 1000);
  }
  if (facts.state !== undefined) d.metrics.a2aTaskStates.inc([agent.name, facts.state]);
}

/** What one call's record is made of, whatever its outcome. */
interface CallFacts {
  readonly agent: A2aAgent;
  readonly operation: string;
  readonly stream: boolean;
  readonly method: unknown;
  readonly facts: AnswerFacts;
  /** The caller's message text (empty for a call that is not metered). */
  readonly prompt: string;
  /** When the forward to the agent began (clock ms); undefined while it has not. */
  began: number | undefined;
}

/**
 * The call's usage record and span as its outcome stands (`status`): AISIX's task and context ids, task state,
 * event count, a stream's time to its first result, the estimated tokens; the `invoke_agent <agent>` span's
 * attributes, caller-chosen values cut.
 */
function described(rec: ProxyRequest['rec'], c: CallFacts, usage: CallUsage, status: number): void {
  const { facts, stream } = c;
  usage.status = status;
  const ttft = stream && c.began !== undefined && facts.firstResultAt !== undefined
    ? Math.round(facts.firstResultAt - c.began)
    : undefined;
  usage.fields = {
    ...usage.fields,
    a2a_task_id: facts.taskId,
    a2a_context_id: facts.contextId,
    a2a_task_state: facts.state,
    a2a_stream_event_count: stream ? facts.events : undefined,
    upstream_ttft_ms: ttft !== undefined && ttft > 0 ? ttft : undefined,
  };
  // Estimated, never charged: an agent reports no usage of its own.
  usage.tokens = {
    input: countTokensNow(c.prompt),
    output: countTokensNow(facts.text?.joined() ?? ''),
    estimated: true,
  };
  const span = rec.facet(CALL_SPAN);
  span.operation = 'invoke_agent';
  span.target = c.agent.name;
  const a: Record<string, string | number> = { 'gen_ai.agent.name': c.agent.name };
  if (facts.contextId) a['gen_ai.conversation.id'] = cutBytes(facts.contextId);
  if (typeof c.method === 'string' && c.method !== '') a['aisix.a2a.method'] = cutBytes(c.method);
  a['aisix.a2a.operation'] = c.operation;
  a['aisix.a2a.protocol_version'] = c.agent.protocol_version;
  if (facts.taskId) a['aisix.a2a.task_id'] = cutBytes(facts.taskId);
  if (facts.state) a['aisix.a2a.task_state'] = facts.state;
  if (stream) a['aisix.a2a.stream_event_count'] = facts.events;
  span.attributes = a;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/** The caller's body: its text (forwarded as it is) and, when it is a JSON object, its members; or the refusal. */
async function readCall(
  c: Context<ProxyEnv>,
  limit: number,
): Promise<{ raw: string; rpc: Record<string, unknown> } | Response> {
  let bytes: Uint8Array | ProxyError;
  try {
    bytes = await readLimited(c.req.raw, limit);
  } catch {
    return text(c, 400, A2A_REFUSAL.badBody, 'invalid_request_error');
  }
  if (bytes instanceof ProxyError) return fail(c, bytes);
  let body: unknown;
  let raw: string;
  try {
    raw = decoder.decode(bytes);
    body = JSON.parse(raw);
  } catch {
    return text(c, 400, A2A_REFUSAL.notJson, 'invalid_request_error');
  }
  const rpc = typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Record<string, unknown> : {};
  return { raw, rpc };
}

/** A unary answer read whole under the call's deadline: its text and JSON, or why it cannot be relayed. */
async function wholeAnswer(
  call: TimedCall,
): Promise<{ text: string; json: unknown; failed?: undefined } | { failed: string }> {
  try {
    const text = await call.response.text();
    return { text, json: JSON.parse(text) };
  } catch (e) {
    const why = call.cancel.aborted && call.cancel.reason instanceof AgentFailure
      ? call.cancel.reason.message
      : e instanceof SyntaxError
      ? "the agent's answer is not JSON"
      : describe(e);
    return { failed: `${FAILED}: ${why}` };
  } finally {
    call.done();
  }
}

/** The upstream's SSE bytes as they arrive, with keep-alives; a failure after the 200 is one -32000 event. */
function relay(
  c: Context<ProxyEnv>,
  chunks: AsyncIterable<Uint8Array>,
  call: TimedCall,
  facts: AnswerFacts,
  o: {
    keepaliveMs: number;
    clock: Clock;
    rpcId: unknown;
    onEnd: (end: StreamEnd, detail?: string) => void;
  },
): Response {
  const rec = c.get('rec');
  const tracker: StreamTracker = { onEnd: undefined };
  c.set('stream', tracker);
  const encoder = new TextEncoder();
  const body = pumpSse({
    chunks: observed(chunks, facts),
    keepaliveMs: o.keepaliveMs,
    onFirstByte: () => rec.firstByte(o.clock()),
    abortUpstream: () => call.cancel.abort(),
    errorEvent: (_kind, message) => encoder.encode(`data: ${rpcFailure(o.rpcId, `${FAILED}: ${message}`)}\n\n`),
    onEnd: (end, detail) => {
      o.onEnd(end, detail);
      tracker.onEnd?.(end);
    },
  });
  return new Response(body, { status: 200, headers: SSE_HEADERS });
}

export function a2aCard(d: A2aDeps, identify: RequestStep): Handler {
  const log = d.log.withTarget('aisix_proxy::a2a');
  const trusted = d.config.proxy.real_ip.trusted_proxies.map((t) => parseCidr(t)).filter((x) => x !== undefined);
  return async function handleA2aCard(c) {
    const admitted = await admit(c, identify);
    if (admitted instanceof Response) return admitted;
    const { agent } = admitted;
    let card: Record<string, unknown>;
    try {
      card = await fetchCard(d.upstream, agent);
    } catch (e) {
      const message = describe(e);
      log.warn(A2A_LOG.cardFailed, { agent: agent.name, error: message });
      return text(c, 502, message, 'upstream_error');
    }
    const url = new URL(c.req.url);
    const fromProxy = trusted.length > 0 && peerTrusted(c.env?.peer, trusted);
    const forwarded = fromProxy ? c.req.header('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase() : undefined;
    const scheme = forwarded === 'http' || forwarded === 'https' ? forwarded : url.protocol.replace(':', '');
    const host = c.req.header('host') ?? url.host;
    return c.json(rewriteCard(card, `${scheme}://${host}/a2a/${agent.name}`));
  };
}

function peerTrusted(peer: string | undefined, trusted: readonly NonNullable<ReturnType<typeof parseCidr>>[]): boolean {
  const ip = peer ? parseIp(stripPort(peer)) : undefined;
  return ip !== undefined && trusted.some((t) => cidrContains(t, ip));
}
