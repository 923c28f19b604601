// The agent card (docs/a2a.md "Agent card"): fetched from the agent, then every URL it advertises for
// reaching the agent rewritten to the gateway's `/a2a/<agent>`, so a client that follows the card never
// bypasses the gateway. A2A 1.0 cards carry their URLs in `supportedInterfaces` only and are accepted.
import type { UpstreamFetch } from '../platform.ts';
import type { A2aAgent } from '../resources/a2a-agent.ts';
import { Cancel } from '../util/cancel.ts';
import { AgentFailure, agentHeaders, describe, timeoutOf, UNREACHABLE } from './upstream.ts';

/** AISIX's candidates, in order: under the agent URL's path first, then under its origin; new name, then old. */
export function cardCandidates(agentUrl: string): string[] {
  const u = new URL(agentUrl);
  const path = u.pathname.replace(/\/+$/, '');
  const out: string[] = [];
  for (const file of ['agent-card.json', 'agent.json']) {
    if (path !== '') out.push(`${u.origin}${path}/.well-known/${file}`);
    out.push(`${u.origin}/.well-known/${file}`);
  }
  return out;
}

/**
 * The first candidate that answers 2xx with a card (a JSON object with a string `name`), all of them under the
 * agent's one `timeout_ms`; an `AgentFailure` naming the last reason when none does.
 */
export async function fetchCard(upstream: UpstreamFetch, agent: A2aAgent): Promise<Record<string, unknown>> {
  let candidates: string[];
  try {
    candidates = cardCandidates(agent.url);
  } catch {
    throw new AgentFailure(`${UNREACHABLE}: the agent's url is not a URL`);
  }
  const cancel = new Cancel();
  const ms = timeoutOf(agent);
  const timer = setTimeout(() => cancel.abort(new AgentFailure(`agent card fetch timed out after ${ms} ms`)), ms);
  const headers = agentHeaders(agent, 'application/json');
  let last = 'no candidate answered';
  try {
    for (const url of candidates) {
      if (cancel.aborted) break;
      try {
        const r = await upstream({ url, method: 'GET', headers, signal: cancel });
        if (r.status < 200 || r.status > 299) {
          await r.discard();
          last = `agent card fetch returned HTTP ${r.status}`;
          continue;
        }
        const card = parseCard(await r.text());
        if (typeof card !== 'string') return card;
        last = card;
      } catch (e) {
        last = cancel.aborted && cancel.reason instanceof AgentFailure ? cancel.reason.message : describe(e);
      }
    }
  } finally {
    clearTimeout(timer);
  }
  throw new AgentFailure(`${UNREACHABLE}: ${last}`);
}

/** The card, or why it is none. */
function parseCard(text: string): Record<string, unknown> | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'malformed agent card: not JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'malformed agent card: not a JSON object';
  const card = v as Record<string, unknown>;
  if (typeof card.name !== 'string') return 'malformed agent card: missing string `name`';
  return card;
}

/**
 * The card with the gateway's address for the agent in place of the agent's own: the top-level `url` (0.3)
 * when there is one, and the `url` of every entry of `supportedInterfaces` (1.0) and `additionalInterfaces`
 * (0.3), whatever its binding (a client then fails loudly rather than bypass the gateway).
 */
export function rewriteCard(card: Record<string, unknown>, gatewayUrl: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...card };
  if ('url' in out) out.url = gatewayUrl;
  for (const list of ['supportedInterfaces', 'additionalInterfaces']) {
    const v = out[list];
    if (!Array.isArray(v)) continue;
    out[list] = v.map((e) => typeof e === 'object' && e !== null && !Array.isArray(e) ? { ...e, url: gatewayUrl } : e);
  }
  return out;
}
