// `GET /v1/realtime?model=…` (docs/realtime.md): the upgrade checked, the caller identified (its key from
// `Authorization`, `x-api-key` or the `openai-insecure-api-key.<key>` subprotocol), the model admitted, the
// rate limits (the key's, the model's, the policies') reserved for the session; then the 101, the upstream socket
// opened with the provider key's credential, and the relay (src/realtime/relay.ts) with the session's guardrails
// until either side closes, a guardrail, the idle cap or the drain ends it; one usage event at its end.
import type { BudgetsSetup } from '../budgets/setup.ts';
import { reserveSession, type SpendHold } from '../budgets/spend.ts';
import type { Amount } from '../budgets/store.ts';
import type { Context } from 'hono';
import { errors, ProxyError } from '../http/errors.ts';
import { bearerToken } from '../http/auth.ts';
import { type Scrub, scrubberFor } from '../http/scrub.ts';
import type { Logger } from '../observability/logger.ts';
import type { Platform, RelaySocket } from '../platform.ts';
import type { ApiKey, DirectModel, ProviderKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Permit, RateLimiter } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import { ipAllowed } from '../util/cidr.ts';
import { requestGateSubjects } from '../policies/reserve.ts';
import { type CallUsage, USAGE_PART } from '../usage/facts.ts';
import type { Guardrails } from './guardrails.ts';
import { frameChecks } from './realtime-guard.ts';
import { modelAllowed } from './auth.ts';
import { fail } from './answer.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';
import type { RequestRecord } from './record.ts';
import type { RequestStep } from './pipeline.ts';
import { acquirePermit, keyAndModelSubjects } from './call-quota.ts';
import { ProxyRequest } from './request.ts';
import { MAX_MODEL_NAME } from './validate.ts';
import { type RelayOptions, type SessionEnd, startRelay } from '../realtime/relay.ts';
import { callerWantsBeta, upstreamTarget } from '../realtime/upstream.ts';

/** The boot line of a runtime without WebSockets, and the 501's message. */
export const REALTIME_NOT_SERVED = 'realtime is not served on this runtime (GET /v1/realtime answers 501)';

/** The subprotocol OpenAI's Realtime clients offer, selected in the 101 when offered. */
export const REALTIME_PROTOCOL = 'realtime';
/** The browser form of the caller's key: a subprotocol `openai-insecure-api-key.<key>`. */
const KEY_PROTOCOL = 'openai-insecure-api-key.';
/** A session that ended before it spent anything. */
const NOTHING: Amount = { microUsd: 0, tokens: 0 };

export interface RealtimeDeps {
  readonly config: {
    readonly upstream: { readonly timeout_ms: number; readonly stream_timeout_ms: number; connect_timeout_ms: number };
    readonly shutdown: { readonly min_drain_secs: number };
  };
  readonly clock: Clock;
  readonly log: Logger;
  readonly lifecycle: { readonly draining: boolean; readonly drain?: { signalAt: number } | undefined };
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly platform?: Pick<Platform, 'connectWebSocket'>;
  /** Spend budgets (docs/budgets.md): a session is admitted while its budgets have room, charged at its end. */
  readonly budgets?: Pick<BudgetsSetup, 'budgets'>;
  /** The secrets of config.yaml (`configSecrets`), scrubbed from the upstream's words with the resources'. */
  readonly configSecrets?: readonly string[];
}

/** A request whose headers carry the key a subprotocol gave, so `identify` reads it as a bearer. */
class RealtimeRequest extends ProxyRequest {
  constructor(c: Context<ProxyEnv>, private readonly withKey: Headers) {
    super(c, c.get('rec'), c.get('state'));
  }
  override get headers(): Headers {
    return this.withKey;
  }
}

export function realtimeHandler(
  d: RealtimeDeps,
  identify: RequestStep,
  clientIpOf: ClientIpOf,
  guards?: Pick<Guardrails, 'modelChain'>,
) {
  return async function handleRealtime(c: Context<ProxyEnv>): Promise<Response> {
    const raw = c.req.raw.headers;
    // AISIX checks the upgrade before the caller (an unauthenticated plain GET is a 400).
    const notUpgrade = upgradeProblem(raw);
    if (notUpgrade) return fail(c, notUpgrade);
    const upgrade = c.env?.upgradeWebSocket;
    const connect = d.platform?.connectWebSocket;
    if (!upgrade || !connect) {
      return fail(
        c,
        new ProxyError(501, 'invalid_request_error', 'realtime is not served on this runtime'),
      );
    }
    const offered = protocolsOf(raw);
    const s = await admitSession(d, identify, clientIpOf, c, offered);
    if (s instanceof Response) return s;
    const { rec, model, apiKey, snapshot } = s;
    const found = guards?.modelChain(snapshot, apiKey, model.id);
    const checks = found && frameChecks(found.chain, found.deps, model.display_name, rec);
    const scrub = scrubberFor(snapshot, d.configSecrets ?? [], bearerToken(s.headers));
    // The session holds the request's in-flight slot and its record until it ends (track.ts).
    const tracker: StreamTracker = { onEnd: undefined };
    c.set('stream', tracker);
    const accepted = upgrade(offered.includes(REALTIME_PROTOCOL) ? REALTIME_PROTOCOL : undefined);
    void accepted.socket.then(
      async (client) => {
        const ended = await runSession(
          d,
          client,
          () => connect({ ...s.target, timeoutMs: connectMs(d) }),
          { idleMs: idleMs(d, model), scrub, ...(checks ? { checks } : {}) },
        );
        await settleSession(d, s, ended, tracker);
      },
      async () => {
        // The caller left during the handshake.
        await s.permit.end(0);
        await s.hold?.commit(NOTHING);
        tracker.onEnd?.('client_closed');
      },
    );
    return accepted.response;
  };
}

/** An admitted session: its caller, model and upstream target, and the quota it holds until it ends. */
interface AdmittedSession {
  rec: RequestRecord;
  headers: Headers;
  session: CallUsage;
  model: DirectModel;
  apiKey: ApiKey;
  snapshot: Snapshot;
  target: Exclude<ReturnType<typeof upstreamTarget>, ProxyError>;
  permit: Permit;
  hold: SpendHold | undefined;
}

/** The caller (a subprotocol's key read as a bearer), the model and target, the limits and budgets; or the refusal. */
async function admitSession(
  d: RealtimeDeps,
  identify: RequestStep,
  clientIpOf: ClientIpOf,
  c: Context<ProxyEnv>,
  offered: readonly string[],
): Promise<AdmittedSession | Response> {
  const raw = c.req.raw.headers;
  const req = new RealtimeRequest(c, withSubprotocolKey(raw, offered));
  const refused = await identify.run(req);
  if (refused instanceof ProxyError) return fail(c, refused);
  if (refused) return refused;
  const rec = c.get('rec');
  // AISIX's one event per session, and a zero-token one for a refusal past authentication.
  const session: CallUsage = {
    handler: 'realtime',
    protocol: 'realtime',
    protocolLabel: 'other',
    fields: {},
    upstreamMs: 0,
  };
  rec.facet(USAGE_PART).call = session;
  const asked = c.req.query('model');
  const admitted = admit(req, asked, clientIpOf(c.env?.peer, raw));
  if (admitted instanceof ProxyError) {
    // AISIX's event names the model the caller asked for even when it was refused (the admission cap bounds it).
    if (asked && asked.length <= MAX_MODEL_NAME) session.fields = { ...session.fields, requested_model: asked };
    return fail(c, admitted);
  }
  const { model, key, name, upstreamModel } = admitted;
  rec.resolved(model, name);
  const target = upstreamTarget(key, model, upstreamModel, callerWantsBeta(raw, offered));
  if (target instanceof ProxyError) return fail(c, target);
  const { key: apiKey, snapshot } = req.caller;
  const permit = await acquirePermit(d.rateLimiter, [
    ...keyAndModelSubjects(apiKey, model),
    ...requestGateSubjects(snapshot, apiKey, model, d.clock()),
  ]);
  if (permit instanceof ProxyError) return fail(c, permit);
  const hold = d.budgets && await reserveSession(d.budgets.budgets, d.clock, { key: apiKey, snapshot, model });
  if (hold instanceof ProxyError) {
    await permit.end(0);
    return fail(c, hold);
  }
  rec.dispatching(true, { model, key, upstreamModel });
  return { rec, headers: req.headers, session, model, apiKey, snapshot, target, permit, hold: hold || undefined };
}

/** The ended session on its record, its usage event, its limits and its budget; then its end to tracking. */
async function settleSession(
  d: RealtimeDeps,
  s: AdmittedSession,
  ended: SessionEnd,
  tracker: StreamTracker,
): Promise<void> {
  const { rec, session } = s;
  const u = ended.usage;
  rec.read({ input: u.input, output: u.output, total: u.input + u.output, cachedPrompt: u.cached }, undefined);
  // A guardrail's block named itself on the record already.
  if (ended.status !== 200 && ended.by !== 'policy') {
    rec.failed(ended.by === 'idle' ? 'timeout' : 'upstream_error', closeMessage(ended));
  }
  const elapsed = d.clock() - rec.start;
  session.upstreamMs = elapsed;
  session.downstreamMs = elapsed;
  session.tokens = { input: u.input, output: u.output, estimated: false, cached: u.cached };
  await s.permit.end(u.input + u.output);
  await s.hold?.commit(rec.spent() ?? NOTHING);
  // The access log, the metrics and the event state how the session ended (AISIX's), not the 101.
  tracker.status = ended.status;
  tracker.onEnd?.(ended.status === 200 ? 'complete' : 'upstream_error');
}

type ClientIpOf = (peer: string | undefined, headers: Headers) => string | undefined;

/** Open the upstream, then relay until the session ends; a failed connect closes the caller with 1011. */
async function runSession(
  d: RealtimeDeps,
  client: RelaySocket,
  open: () => Promise<RelaySocket>,
  opts: RelayOptions & { scrub: Scrub },
): Promise<SessionEnd> {
  let upstream: RelaySocket;
  try {
    upstream = await open();
  } catch (e) {
    // A refused handshake's error may quote what the upstream answered.
    d.log.warn('realtime upstream connect failed', { error: opts.scrub(String(e), MAX_LOGGED_ERROR) });
    client.send(CONNECT_FAILED_FRAME);
    client.close(1011, 'upstream connect failed');
    return { usage: { input: 0, output: 0, cached: 0 }, status: 502, by: 'upstream' };
  }
  const relay = startRelay(client, upstream, opts);
  const stopWatch = watchDrain(d, relay.goAway);
  const ended = await relay.end;
  stopWatch();
  return ended;
}

/** The longest connect error logged, in characters (cut after it is scrubbed). */
const MAX_LOGGED_ERROR = 600;

const CONNECT_FAILED_FRAME = JSON.stringify({
  type: 'error',
  error: { type: 'upstream_error', message: 'failed to connect to the upstream realtime endpoint' },
});

/** How often an open session looks whether a drain began (the lifecycle has no event for it). */
const DRAIN_POLL_MS = 500;

/**
 * Close the session with 1001 when the drain window (`shutdown.min_drain_secs` from the signal) has passed:
 * an open session may finish within it, and the drain waits for it, never past it.
 */
function watchDrain(d: RealtimeDeps, goAway: () => void): () => void {
  let closeTimer: ReturnType<typeof setTimeout> | undefined;
  const poll = setInterval(() => {
    if (!d.lifecycle.draining || closeTimer !== undefined) return;
    clearInterval(poll);
    const since = d.lifecycle.drain?.signalAt ?? d.clock();
    const left = Math.max(0, since + d.config.shutdown.min_drain_secs * 1000 - d.clock());
    closeTimer = setTimeout(goAway, left);
  }, DRAIN_POLL_MS);
  return () => {
    clearInterval(poll);
    if (closeTimer !== undefined) clearTimeout(closeTimer);
  };
}

/** The idle cap: the model's `stream_timeout`, its `timeout`, then the deployment's (AISIX's order); 0 = none. */
function idleMs(d: RealtimeDeps, model: DirectModel): number {
  if (model.stream_timeout) return model.stream_timeout;
  if (model.timeout !== undefined) return model.timeout;
  return d.config.upstream.stream_timeout_ms || d.config.upstream.timeout_ms;
}

function connectMs(d: RealtimeDeps): number {
  return d.config.upstream.connect_timeout_ms || 10_000;
}

function closeMessage(ended: SessionEnd): string {
  if (ended.by === 'idle') return 'idle timeout';
  if (ended.by === 'drain') return 'closed by the drain';
  return 'upstream error';
}

/** Model permission, existence, a direct model, the caller's address (AISIX's order). */
function admit(
  req: ProxyRequest,
  asked: string | undefined,
  clientIp: string | undefined,
): { model: DirectModel; key: ProviderKey; name: string; upstreamModel: string } | ProxyError {
  const name = asked?.trim();
  if (!name) {
    return errors.badRequest('request payload is invalid: `model` query parameter is required on /v1/realtime');
  }
  const { key, snapshot } = req.caller;
  if (!modelAllowed(key, name)) return errors.modelNotAllowed(name);
  const resolved = snapshot.resolveModel(name);
  if (!resolved) return errors.unknownModel(name);
  const model = resolved.model;
  if (model.kind !== 'direct') {
    return errors.badRequest(
      `request payload is invalid: model "${name}" is a virtual router; /v1/realtime requires a direct model`,
    );
  }
  if (!ipAllowed(model.allowed_cidrs, clientIp)) return errors.ipRestricted();
  const pk = snapshot.providerKeys.get(model.provider_key_id);
  if (!pk) return errors.unknownModel(name);
  // Through a wildcard alias the upstream model is the caller's capture, as on every other endpoint.
  return { model, key: pk, name, upstreamModel: resolved.upstreamModel ?? model.model_name };
}

/** AISIX's `websocket_upgrade_required` refusal of a request that is no WebSocket upgrade, or undefined. */
export function upgradeProblem(h: Headers): ProxyError | undefined {
  const tokens = (name: string) => (h.get(name) ?? '').toLowerCase().split(',').map((s) => s.trim());
  let detail: string | undefined;
  if (!tokens('connection').includes('upgrade')) detail = "Connection header did not include 'upgrade'";
  else if (!tokens('upgrade').includes('websocket')) detail = "`Upgrade` header did not include 'websocket'";
  else if (h.get('sec-websocket-version')?.trim() !== '13') {
    detail = "`Sec-WebSocket-Version` header did not include '13'";
  } else if (!h.get('sec-websocket-key')) detail = '`Sec-WebSocket-Key` header missing';
  if (detail === undefined) return undefined;
  return new ProxyError(400, 'websocket_upgrade_required', `this endpoint requires a WebSocket upgrade: ${detail}`);
}

function protocolsOf(h: Headers): string[] {
  return (h.get('sec-websocket-protocol') ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/** The headers `identify` reads: as sent, or with the subprotocol's key as a bearer when no header has one. */
function withSubprotocolKey(h: Headers, offered: readonly string[]): Headers {
  if (h.has('authorization') || h.has('x-api-key')) return h;
  const given = offered.find((p) => p.startsWith(KEY_PROTOCOL));
  if (!given) return h;
  const out = new Headers(h);
  out.set('authorization', `Bearer ${given.slice(KEY_PROTOCOL.length)}`);
  return out;
}
