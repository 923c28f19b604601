// Guardrails on a passthrough route (docs/endpoints.md "Passthrough routes"; docs/guardrails.md): the chain of
// the caller's key, its team and the environment, over the text of the envelope the request body carries
// (chat or Anthropic Messages, Responses, completions; any other body as a whole). The bytes relayed are never
// rewritten: a mask is not applied (AISIX's), a block refuses. An answer is checked as its envelope's: an event
// stream of a known envelope through the guardrails' stream guard, anything else held whole and checked once.
import type { ChainDeps } from '../guardrails/chain.ts';
import { checkAnswer, checkRequest, runsOn } from '../guardrails/guard.ts';
import { blockMessage } from '../guardrails/messages.ts';
import type { GuardedEndpoint } from '../guardrails/slots.ts';
import { guardStream } from '../guardrails/stream.ts';
import type { Guardrail } from '../guardrails/types.ts';
import type { GuardWire } from '../guardrails/frames.ts';
import { ProxyError } from '../http/errors.ts';
import type { Envelope } from '../passthrough/usage.ts';
import { GUARDRAIL_RECORD } from './guardrail-record.ts';
import type { RequestRecord } from './record.ts';

/** The chain of one relayed request and how its text is read. */
export interface RelayGuard {
  chain: readonly Guardrail[];
  deps: ChainDeps;
  endpoint: GuardedEndpoint;
  wire: GuardWire;
  /** No envelope: the whole body is the text. */
  raw: boolean;
  route: string;
}

/** The guard of a request whose body is `envelope`, sent to `path`. */
export function relayGuard(
  found: { chain: readonly Guardrail[]; deps: ChainDeps },
  envelope: Envelope,
  path: string,
  route: string,
): RelayGuard {
  const messages = envelope === 'chat' && /\/messages$/.test(path);
  const endpoint: GuardedEndpoint = envelope === 'raw'
    ? 'completions'
    : envelope === 'chat'
    ? (messages ? 'messages' : 'chat')
    : envelope;
  return { ...found, endpoint, wire: messages ? 'anthropic' : 'openai', raw: envelope === 'raw', route };
}

const lossy = new TextDecoder();

/** The input check: the 422 refusal, or undefined. The body checked is a copy: masks never reach the bytes sent. */
export async function checkRelayedRequest(
  g: RelayGuard,
  parsed: unknown,
  body: Uint8Array | undefined,
  rec: RequestRecord,
): Promise<ProxyError | undefined> {
  if (!runsOn(g.chain, 'input')) return undefined;
  const doc = g.raw ? { prompt: body ? lossy.decode(body) : '' } : structuredClone(parsed as Record<string, unknown>);
  const r = await checkRequest(g.chain, g.endpoint, g.wire, doc, g.deps, g.route);
  if (r.verdict) rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
  return r.refusal ? new ProxyError(422, 'content_filter', blockMessage('request', r.refusal.guardrail)) : undefined;
}

/** Whether the answer is checked at all. */
export function checksAnswer(g: RelayGuard | undefined): g is RelayGuard {
  return g !== undefined && runsOn(g.chain, 'output');
}

/** A known envelope's event stream through the stream guard (its error frame ends a blocked one). */
export function guardRelayedStream(
  g: RelayGuard,
  chunks: AsyncIterable<Uint8Array>,
  rec: RequestRecord,
  abort: () => void,
): AsyncIterable<Uint8Array> {
  if (g.raw) return checkedWhole(g, chunks, rec, true);
  return guardStream(chunks, {
    chain: g.chain,
    endpoint: g.endpoint,
    wire: g.wire,
    deps: g.deps,
    abort,
    onVerdict: (v) => rec.facet(GUARDRAIL_RECORD).ran(v),
    onBlock(name, verdict) {
      if (!verdict) rec.facet(GUARDRAIL_RECORD).blocked = true;
      rec.endedByGateway('content_filter', blockMessage('response', name));
    },
  });
}

const encoder = new TextEncoder();

/**
 * The answer held whole and checked once: its bytes as they came, or (blocked) an SSE error frame for an
 * event stream, else nothing more (the caller's 422 is decided by `checkWholeAnswer` before the head goes).
 */
async function* checkedWhole(
  g: RelayGuard,
  chunks: AsyncIterable<Uint8Array>,
  rec: RequestRecord,
  eventStream: boolean,
): AsyncGenerator<Uint8Array> {
  const held: Uint8Array[] = [];
  for await (const c of chunks) held.push(c);
  const refusal = await checkWholeAnswer(g, held, rec);
  if (!refusal) return yield* held;
  if (eventStream) {
    const frame = { error: { type: 'content_filter', message: refusal.message } };
    yield encoder.encode(`event: error\ndata: ${JSON.stringify(frame)}\n\n`);
  }
}

/** A whole answer's check: the 422 refusal, or undefined. */
export async function checkWholeAnswer(
  g: RelayGuard,
  held: readonly Uint8Array[],
  rec: RequestRecord,
): Promise<ProxyError | undefined> {
  let text = '';
  const d = new TextDecoder();
  for (const c of held) text += d.decode(c, { stream: true });
  text += d.decode();
  const answer = g.raw || !isJsonObject(text) ? JSON.stringify({ choices: [{ text }] }) : text;
  const endpoint = g.raw || !isJsonObject(text) ? 'completions' : g.endpoint;
  const r = await checkAnswer(g.chain, endpoint, g.wire, answer, g.deps, g.route);
  if (r.verdict) rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
  if (!r.refusal) return undefined;
  const message = blockMessage('response', r.refusal.guardrail);
  rec.endedByGateway('content_filter', message);
  return new ProxyError(422, 'content_filter', message);
}

function isJsonObject(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}
