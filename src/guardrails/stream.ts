// Output checks on a streamed answer (docs/guardrails.md "Streams"), as a transform over the upstream's SSE
// bytes. The chain's strictest output member decides how much is held back:
// - `buffer`: the whole answer is held, checked once at its end, then released (masked: each channel's
//   rewritten text on its first frame) or replaced by the error frame; over the cap it fails closed (the
//   error frame, no guardrail named) or open (released unchecked, the rest live);
// - `window`: frames are held until the held text reaches the window size, checked with the previous
//   window's overlap as context, then released; a block ends the stream there;
// - `end`: forwarded live, checked once at the end (monitor members only, or `/v1/messages` with a window
//   chain, whose block then arrives after the content).
// A blocked stream ends with the error frame and without its terminator; the upstream is aborted.
import { type ChainDeps, countRequest, runChain, type Verdict } from './chain.ts';
import { type GuardWire, streamBlockFrame } from './frames.ts';
import { GUARDRAIL_MSG } from './messages.ts';
import type { GuardedEndpoint } from './slots.ts';
import { deltasOf, type Frame, isTerminal, parseFrame, serialise } from './sse-text.ts';
import type { Guardrail, Segment, StreamPolicy } from './types.ts';
import { Utf8Stream } from '../util/utf8-stream.ts';

const RANK = { end: 0, window: 1, buffer: 2 } as const;

/** The chain's hold-back: the strictest enforcing output member's; ties take the tighter limits. */
export function foldPolicy(chain: readonly Guardrail[], wire: GuardWire): StreamPolicy {
  let p: StreamPolicy = { kind: 'end' };
  let allFailOpen = true;
  for (const g of chain) {
    if (!g.output || g.monitor) continue;
    const q = g.stream;
    if (q.kind === 'buffer' && !q.failOpen) allFailOpen = false;
    if (RANK[q.kind] > RANK[p.kind]) p = q;
    else if (q.kind === 'buffer' && p.kind === 'buffer') {
      p = { kind: 'buffer', maxBytes: Math.min(p.maxBytes, q.maxBytes), failOpen: false };
    } else if (q.kind === 'window' && p.kind === 'window') {
      p = { kind: 'window', size: Math.min(p.size, q.size), overlap: Math.max(p.overlap, q.overlap) };
    }
  }
  if (p.kind === 'buffer') p = { kind: 'buffer', maxBytes: p.maxBytes, failOpen: allFailOpen && wire !== 'anthropic' };
  // `/v1/messages` holds back only for a whole-answer check; a window chain is checked at the end.
  if (p.kind === 'window' && wire === 'anthropic') p = { kind: 'end' };
  return p;
}

export interface StreamGuardOptions {
  chain: readonly Guardrail[];
  endpoint: GuardedEndpoint;
  wire: GuardWire;
  deps: ChainDeps;
  /** Stops the upstream when the stream is blocked. */
  abort(): void;
  /** Called with the verdict of every check (each window, the end), for the request's usage fields. */
  onVerdict?(verdict: Verdict): void;
  /** Called once when the guard ends the stream with its error frame. */
  onBlock?(name: string | undefined, verdict: Verdict | undefined): void;
}

const encoder = new TextEncoder();
const utf8Length = (s: string) => encoder.encode(s).length;

/** Splits a byte stream into SSE frames (each with its blank-line terminator). */
async function* frames(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Frame> {
  const decoder = new Utf8Stream();
  let buf = '';
  for await (const c of chunks) {
    buf += decoder.decode(c);
    for (;;) {
      const m = /\r?\n\r?\n/.exec(buf);
      if (!m) break;
      const end = m.index + m[0].length;
      yield parseFrame(buf.slice(0, end));
      buf = buf.slice(end);
    }
  }
  buf += decoder.end();
  if (buf !== '') yield parseFrame(buf);
}

/** One held frame and the deltas it carries. */
interface Held {
  frame: Frame;
  deltas: ReturnType<typeof deltasOf>['deltas'];
}

/** The upstream's SSE bytes with the chain's output checks applied under its hold-back policy. */
export function guardStream(chunks: AsyncIterable<Uint8Array>, o: StreamGuardOptions): AsyncGenerator<Uint8Array> {
  const policy = foldPolicy(o.chain, o.wire);
  const guard = new StreamGuard(o);
  if (policy.kind === 'buffer') return holdAnswer(frames(chunks), guard, policy);
  if (policy.kind === 'window') return holdWindows(frames(chunks), guard, policy);
  return checkAtEnd(frames(chunks), guard);
}

/** `end`: every frame but the terminator forwarded live; the whole answer checked once at the end. */
async function* checkAtEnd(input: AsyncIterable<Frame>, guard: StreamGuard): AsyncGenerator<Uint8Array> {
  const held: Held[] = [];
  for await (const f of input) {
    const h = guard.read(f);
    if (isTerminal(f)) held.push(h);
    else yield encoder.encode(f.raw);
  }
  yield* guard.finish(guard.channelSegments(), held, false);
}

/** `buffer`: the whole answer held and checked at its end (masked on release); over the cap, closed or open. */
async function* holdAnswer(
  input: AsyncIterable<Frame>,
  guard: StreamGuard,
  policy: Extract<StreamPolicy, { kind: 'buffer' }>,
): AsyncGenerator<Uint8Array> {
  const held: Held[] = [];
  let heldBytes = 0;
  for await (const f of input) {
    const h = guard.read(f);
    held.push(h);
    for (const d of h.deltas) heldBytes += utf8Length(d.text);
    if (heldBytes <= policy.maxBytes) continue;
    if (!policy.failOpen) {
      yield guard.block(undefined, undefined, GUARDRAIL_MSG.bufferExceeded);
      return;
    }
    // Fail-open overflow: what was held and everything after it goes straight through, unchecked.
    yield* release(held);
    for await (const rest of input) yield encoder.encode(rest.raw);
    return;
  }
  yield* guard.finish(guard.channelSegments(), held, true);
}

/** `window`: frames held until the window fills, checked with the previous window's overlap, then released. */
async function* holdWindows(
  input: AsyncIterable<Frame>,
  guard: StreamGuard,
  policy: Extract<StreamPolicy, { kind: 'window' }>,
): AsyncGenerator<Uint8Array> {
  let held: Held[] = [];
  let windowText = '';
  let context = '';
  for await (const f of input) {
    const h = guard.read(f);
    held.push(h);
    for (const d of h.deltas) windowText += d.text;
    if ([...windowText].length < policy.size) continue;
    // A window's text is on its way once released: a mask cannot be written back into it.
    const v = await guard.check([
      { role: 'assistant', text: context + windowText },
      { role: 'assistant', text: guard.tool },
    ], false);
    if (v.blocked) {
      yield guard.block(v.blocked.guardrail.name, v, GUARDRAIL_MSG.blockedStreamWindow);
      return;
    }
    yield* release(held);
    held = [];
    const cps = [...windowText];
    context = cps.slice(Math.max(0, cps.length - policy.overlap)).join('');
    windowText = '';
  }
  yield* guard.finish([{ role: 'assistant', text: context + windowText }], held, false);
}

function* release(list: Held[]): Generator<Uint8Array> {
  for (const h of list) yield encoder.encode(h.frame.raw);
}

/** What the three policies share: the answer's text so far, per channel and in tool calls, and how to check and block. */
class StreamGuard {
  readonly channels = new Map<string, string>();
  tool = '';
  /** The answer's id, from the first frame that carries one (Aliyun joins a response's checks on it). */
  responseId: string | undefined;

  constructor(private readonly o: StreamGuardOptions) {}

  /** The frame's deltas, taken into the text seen so far. */
  read(frame: Frame): Held {
    this.responseId ??= idOf(frame.json);
    const { deltas, tool } = deltasOf(this.o.endpoint, frame);
    this.tool += tool;
    for (const d of deltas) this.channels.set(d.channel, (this.channels.get(d.channel) ?? '') + d.text);
    return { frame, deltas };
  }

  /** One segment per channel, in the order each channel first appeared. */
  channelSegments(): Segment[] {
    return [...this.channels.values()].map((text) => ({ role: 'assistant', text }));
  }

  async check(segments: Segment[], writeBack = true): Promise<Verdict> {
    // An answer without an id still is one session: one id for all its checks.
    this.responseId ??= crypto.randomUUID();
    const deps = { ...this.o.deps, ctx: { ...this.o.deps.ctx, responseId: this.responseId, writeBack } };
    const v = await runChain(this.o.chain, 'output', segments, deps);
    this.o.onVerdict?.(v);
    return v;
  }

  /** The error frame that ends a blocked stream; the upstream is aborted. */
  block(name: string | undefined, v: Verdict | undefined, msg: string): Uint8Array {
    if (v) countRequest(this.o.deps.metrics, v);
    this.o.deps.log('warn', msg, { guardrail: name, guardrail_hook: 'output' });
    this.o.abort();
    this.o.onBlock?.(name, v);
    return encoder.encode(streamBlockFrame(this.o.wire, name, this.o.endpoint));
  }

  /** The end-of-stream check of `segments` and the tool calls: the error frame, or what was held (masked when asked). */
  async *finish(segments: Segment[], held: Held[], mask: boolean): AsyncGenerator<Uint8Array> {
    // Where the text cannot be rewritten, a kind that would mask is told so (it refuses instead).
    const v = await this.check([...segments, { role: 'assistant', text: this.tool }], mask);
    if (v.blocked) {
      yield this.block(v.blocked.guardrail.name, v, GUARDRAIL_MSG.blockedStream);
      return;
    }
    countRequest(this.o.deps.metrics, v);
    if (v.masked && mask) yield* this.emitMasked(v, held);
    else yield* release(held);
  }

  /** The held frames with each channel's rewritten text on its first frame (the rest of its deltas emptied). */
  private *emitMasked(v: Verdict, held: Held[]): Generator<Uint8Array> {
    const names = [...this.channels.keys()];
    const rewritten = new Map(names.map((n, i) => [n, v.segments[i]!.text]));
    const first = new Set<string>();
    for (const h of held) {
      let changed = false;
      for (const d of h.deltas) {
        const text = rewritten.get(d.channel);
        if (text === undefined || text === this.channels.get(d.channel)) continue;
        d.set(first.has(d.channel) ? '' : text);
        first.add(d.channel);
        changed = true;
      }
      yield encoder.encode(changed ? serialise(h.frame) : h.frame.raw);
    }
  }
}

/** The answer id a stream frame carries: chat's `id`, Messages' `message.id`, Responses' `response.id`. */
function idOf(json: Record<string, unknown> | undefined): string | undefined {
  if (!json) return undefined;
  if (typeof json.id === 'string' && json.id !== '') return json.id;
  for (const k of ['message', 'response']) {
    const inner = json[k];
    if (typeof inner === 'object' && inner !== null && typeof (inner as { id?: unknown }).id === 'string') {
      const id = (inner as { id: string }).id;
      if (id !== '') return id;
    }
  }
  return undefined;
}
