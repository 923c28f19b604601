// The input and output checks of one request (docs/guardrails.md "Where they run"), over the parsed request
// body and the answer's text: what the proxy's steps call. The chain is resolved once per request and reused
// for the input, the output and the stream.
import { type ChainDeps, countRequest, runChain, type Verdict } from './chain.ts';
import { blockBody, type GuardWire } from './frames.ts';
import { GUARDRAIL_MSG } from './messages.ts';
import { answerSlots, type GuardedEndpoint, requestSlots, writeBack } from './slots.ts';
import type { Guardrail } from './types.ts';

/** A refusal: the 422 body in the caller's wire. */
export interface Refusal {
  status: 422;
  body: string;
  guardrail: string;
}

export interface CheckedRequest {
  refusal?: Refusal;
  verdict: Verdict | undefined;
}

/**
 * The input hook: masks written into `body` in place (also when a later member blocks, as AISIX does, so a
 * capture of the request carries masked text), or the refusal.
 */
export async function checkRequest(
  chain: readonly Guardrail[],
  endpoint: GuardedEndpoint,
  wire: GuardWire,
  body: Record<string, unknown>,
  deps: ChainDeps,
  model: string,
): Promise<CheckedRequest> {
  const slots = requestSlots(endpoint, body);
  if (slots.length === 0) return { verdict: undefined };
  const v = await runChain(chain, 'input', slots, deps);
  if (v.masked) writeBack(slots, v.segments);
  countRequest(deps.metrics, v);
  if (!v.blocked) return { verdict: v };
  const name = v.blocked.guardrail.name;
  deps.log('warn', endpoint === 'embeddings' ? GUARDRAIL_MSG.blockedEmbeddings : GUARDRAIL_MSG.blockedRequest, {
    guardrail_hook: 'input',
    guardrail: name,
    model,
    reason: v.blocked.reason,
  });
  return { verdict: v, refusal: { status: 422, body: blockBody(wire, 'request', name), guardrail: name } };
}

export interface CheckedAnswer {
  /** The answer to send: the upstream's bytes unchanged, or re-serialised with masks. */
  body: string;
  refusal?: Refusal;
  verdict: Verdict | undefined;
}

/**
 * The output hook on a whole answer (a JSON object body): an upstream's, or a cached one (`blockedLine` then
 * says so in the block's log line).
 */
export async function checkAnswer(
  chain: readonly Guardrail[],
  endpoint: GuardedEndpoint,
  wire: GuardWire,
  text: string,
  deps: ChainDeps,
  model: string,
  blockedLine: string = GUARDRAIL_MSG.blockedResponse,
): Promise<CheckedAnswer> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { body: text, verdict: undefined };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { body: text, verdict: undefined };
  const slots = answerSlots(endpoint, body as Record<string, unknown>);
  if (slots.length === 0) return { body: text, verdict: undefined };
  const id = (body as { id?: unknown }).id;
  const withId = typeof id === 'string' && id !== '' ? { ...deps, ctx: { ...deps.ctx, responseId: id } } : deps;
  const v = await runChain(chain, 'output', slots, withId);
  countRequest(deps.metrics, v);
  if (v.blocked) {
    const name = v.blocked.guardrail.name;
    deps.log('warn', blockedLine, {
      guardrail_hook: 'output',
      guardrail: name,
      model,
      reason: v.blocked.reason,
    });
    return {
      body: text,
      verdict: v,
      refusal: { status: 422, body: blockBody(wire, 'response', name), guardrail: name },
    };
  }
  if (v.masked && writeBack(slots, v.segments)) return { body: JSON.stringify(body), verdict: v };
  return { body: text, verdict: v };
}

/** Whether any member of the chain checks this hook (no member: the step does nothing). */
export function runsOn(chain: readonly Guardrail[], hook: 'input' | 'output'): boolean {
  for (const g of chain) if (hook === 'input' ? g.input : g.output) return true;
  return false;
}
