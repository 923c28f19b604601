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

export async function* guardStream(
  chunks: AsyncIterable<Uint8Array>,
  o: StreamGuardOptions,
): AsyncGenerator<Uint8Array> {
  const policy = foldPolicy(o.chain, o.wire);
  let held: Held[] = [];
  let heldBytes = 0;
  let windowText = '';
  let context = '';
  let tool = '';
  let live = false; // fail-open overflow: everything from now on goes straight through, unchecked
  const channels = new Map<string, string>();
  const block = (name: string | undefined, v: Verdict | undefined, msg: string): Uint8Array => {
    if (v) countRequest(o.deps.metrics, v);
    o.deps.log('warn', msg, { guardrail: name, guardrail_hook: 'output' });
    o.abort();
    o.onBlock?.(name, v);
    return encoder.encode(streamBlockFrame(o.wire, name, o.endpoint));
  };
  const check = async (segments: Segment[]) => {
    const v = await runChain(o.chain, 'output', segments, o.deps);
    o.onVerdict?.(v);
    return v;
  };
  const release = function* (list: Held[]): Generator<Uint8Array> {
    for (const h of list) yield encoder.encode(h.frame.raw);
  };

  for await (const f of frames(chunks)) {
    const { deltas, tool: t } = deltasOf(o.endpoint, f);
    if (live) {
      yield encoder.encode(f.raw);
      continue;
    }
    tool += t;
    for (const d of deltas) channels.set(d.channel, (channels.get(d.channel) ?? '') + d.text);
    if (policy.kind === 'end') {
      if (isTerminal(f)) held.push({ frame: f, deltas });
      else yield encoder.encode(f.raw);
      continue;
    }
    held.push({ frame: f, deltas });
    if (policy.kind === 'buffer') {
      for (const d of deltas) heldBytes += utf8Length(d.text);
      if (heldBytes <= policy.maxBytes) continue;
      if (policy.failOpen) {
        live = true;
        yield* release(held);
        held = [];
        continue;
      }
      yield block(undefined, undefined, GUARDRAIL_MSG.bufferExceeded);
      return;
    }
    for (const d of deltas) windowText += d.text;
    if ([...windowText].length < policy.size) continue;
    const v = await check([{ role: 'assistant', text: context + windowText }, { role: 'assistant', text: tool }]);
    if (v.blocked) {
      yield block(v.blocked.guardrail.name, v, GUARDRAIL_MSG.blockedStreamWindow);
      return;
    }
    yield* release(held);
    held = [];
    const cps = [...windowText];
    context = cps.slice(Math.max(0, cps.length - policy.overlap)).join('');
    windowText = '';
  }
  if (live) return;
  yield* finish();

  function* emitMasked(v: Verdict, names: string[]): Generator<Uint8Array> {
    const rewritten = new Map(names.map((n, i) => [n, v.segments[i]!.text]));
    const first = new Set<string>();
    for (const h of held) {
      let changed = false;
      for (const d of h.deltas) {
        const text = rewritten.get(d.channel);
        if (text === undefined || text === channels.get(d.channel)) continue;
        d.set(first.has(d.channel) ? '' : text);
        first.add(d.channel);
        changed = true;
      }
      yield encoder.encode(changed ? serialise(h.frame) : h.frame.raw);
    }
  }

  async function* finish(): AsyncGenerator<Uint8Array> {
    const names = [...channels.keys()];
    const segments: Segment[] = names.map((n) => ({ role: 'assistant', text: channels.get(n)! }));
    if (policy.kind === 'window') {
      segments.splice(0, segments.length, { role: 'assistant', text: context + windowText });
    }
    segments.push({ role: 'assistant', text: tool });
    const v = await check(segments);
    if (v.blocked) {
      yield block(v.blocked.guardrail.name, v, GUARDRAIL_MSG.blockedStream);
      return;
    }
    countRequest(o.deps.metrics, v);
    if (v.masked && policy.kind === 'buffer') yield* emitMasked(v, names);
    else yield* release(held);
  }
}
