// What the gateway sends an A2A agent and what it answers when the agent cannot be reached (docs/a2a.md
// "Relay"): the agent's pinned `A2A-Version` and the gateway-held credential, never a header of the caller's;
// AISIX's -32000 JSON-RPC envelope for a failure on the gateway's side of the call.
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import { A2A_DEFAULT_TIMEOUT_MS, type A2aAgent } from '../resources/a2a-agent.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';

/** The headers of every request to `agent`: built fresh, so nothing of the caller's can ride along. */
export function agentHeaders(agent: A2aAgent, accept: string): Record<string, string> {
  const h: Record<string, string> = { accept, 'a2a-version': agent.protocol_version };
  if (agent.auth_type === 'bearer') h.authorization = `Bearer ${agent.secret}`;
  else if (agent.auth_type === 'api_key') h['x-api-key'] = agent.secret!;
  return h;
}

/** The deadline of a unary call, of a stream's opening and of the whole card fetch (ms). */
export function timeoutOf(agent: A2aAgent): number {
  return agent.timeout_ms ?? A2A_DEFAULT_TIMEOUT_MS;
}

/** AISIX's answer for a failure on the gateway's side of a call: HTTP 502 with this JSON-RPC body. */
export function rpcFailure(id: unknown, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code: -32000, message } });
}

export const UNREACHABLE = 'failed to reach upstream A2A agent';
export const FAILED = 'upstream A2A request failed';

/** An upstream call that could not give an answer to relay; `message` is what the caller may read. */
export class AgentFailure extends Error {}

/**
 * One request to the agent under its `timeout_ms`. The deadline runs until `done()`: the caller calls it once
 * the body was read (a unary call) or once the headers are in (a stream, which has no deadline after them).
 * `cancel` aborts the request, whatever stage it is at.
 */
export interface TimedCall {
  response: UpstreamResponse;
  cancel: Cancel;
  /** Stops the deadline. */
  done(): void;
}

export async function timedCall(
  upstream: UpstreamFetch,
  agent: A2aAgent,
  req: { url: string; method: 'GET' | 'POST'; accept: string; body?: string },
  /** The caller's connection: its end cancels the call, as AISIX's dropped request future does. */
  callerGone?: CancelSignal,
): Promise<TimedCall> {
  const cancel = new Cancel();
  const leave = () => cancel.abort(new AgentFailure('the caller went away'));
  if (callerGone?.aborted) leave();
  else callerGone?.addEventListener('abort', leave, { once: true });
  const ms = timeoutOf(agent);
  const timer = setTimeout(() => cancel.abort(new AgentFailure(`timed out after ${ms} ms`)), ms);
  const done = () => clearTimeout(timer);
  const headers = agentHeaders(agent, req.accept);
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  try {
    const response = await upstream({ url: req.url, method: req.method, headers, body: req.body, signal: cancel });
    return { response, cancel, done };
  } catch (e) {
    done();
    const why = cancel.aborted && cancel.reason instanceof AgentFailure ? cancel.reason.message : describe(e);
    throw new AgentFailure(`${UNREACHABLE}: ${why}`);
  }
}

/** A transport failure in a few words: the error's own message, never a stack. */
export function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** AISIX's A2A log lines (WARN), each written here only. */
export const A2A_LOG = {
  callFailed: 'A2A upstream call failed',
  streamOpenFailed: 'A2A upstream stream failed to open',
  streamFailed: 'A2A stream failed mid-flight',
  cardFailed: 'A2A agent card fetch failed',
  cleartext:
    'the gateway-held A2A agent credential is sent over cleartext http; anyone on the network path can read it — serve this agent over https',
} as const;

/** AISIX's texts of the refusals before the agent is called (text/plain bodies). */
export const A2A_REFUSAL = {
  unknownAgent: (agent: string) => `unknown A2A agent: ${agent}`,
  notAllowed: (agent: string) => `this key may not reach A2A agent: ${agent}`,
  badBody: 'invalid request body',
  notJson: 'invalid JSON-RPC body',
} as const;
