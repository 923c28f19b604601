// Editing a pass-through SSE stream event by event without re-serialising it: the caller's model name put
// into every chat chunk (caller-model.ts), the usage chunk Sluice asked for withheld (injected-usage.ts),
// vendor quirks normalised (openai-quirks.ts). Events are cut at their blank line however the network split
// them; a chunk made of whole events that the edits do not touch goes out as the same bytes, and edits
// stacked on a stream not yet read run in one pass (docs/routing.md "Streams Sluice edits").

/**
 * One edit over a stream's events. `mayTouch` is a cheap test on raw text (a chunk or one event): false
 * lets it pass unchanged. `edit` gets one event's text (without its blank line) and answers undefined to
 * keep it, a string to replace it, or null to drop it with its blank line.
 */
export interface SseEdit {
  mayTouch(text: string): boolean;
  edit(event: string): string | null | undefined;
  /**
   * Optional: one event's bytes, ending with its `\n\n` (and holding no CR), edited with no decode: the same
   * array to keep it, new bytes (with their own blank line) to replace it, null to drop it, or undefined to
   * leave it to `edit` on its text.
   */
  event?(bytes: Uint8Array): Uint8Array | null | undefined;
}

import { DEFAULT_MAX_SSE_EVENT_BYTES, hasLineEnd, HELD_CHUNKS_PER_TURN, oversizedEvent } from './sse.ts';
import { yieldToLoop } from '../resources/pace.ts';
import { CHUNKS_DONE, concatBytes, encodeText, indexOfByte } from '../util/bytes.ts';
import { Utf8Stream } from '../util/utf8-stream.ts';

const LF = 10;
const CR = 13;
const BOUNDARY = /\r\n\r\n|\n\n|\r\r/g;

function endsAtBoundary(text: string): boolean {
  return text.endsWith('\n\n') || text.endsWith('\r\r') || text.endsWith('\r\n\r\n');
}

/** Where the last complete event (with its blank line) ends in `text`; 0 when none is complete. */
function lastBoundaryEnd(text: string): number {
  const lf = text.lastIndexOf('\n\n');
  const cr = text.lastIndexOf('\r\r');
  const crlf = text.lastIndexOf('\r\n\r\n');
  return Math.max(lf < 0 ? 0 : lf + 2, cr < 0 ? 0 : cr + 2, crlf < 0 ? 0 : crlf + 4);
}

/**
 * `text` holds whole events (the last may lack its blank line at the stream's end); each one edited.
 * Undefined when the edit changed none of them.
 */
function editEvents(text: string, e: SseEdit): string | undefined {
  let out = '';
  let changed = false;
  let at = 0;
  BOUNDARY.lastIndex = 0;
  for (;;) {
    const m = BOUNDARY.exec(text);
    const end = m ? m.index : text.length;
    const sep = m ? m[0] : '';
    const event = text.slice(at, end);
    if (event !== '' || sep !== '') {
      const r = e.mayTouch(event) ? e.edit(event) : undefined;
      if (r === undefined) out += event + sep;
      else {
        changed = true;
        if (r !== null) out += r + sep;
      }
    }
    if (!m) return changed ? out : undefined;
    at = BOUNDARY.lastIndex;
  }
}

/**
 * The stream with `e` applied to every event; cheap when most chunks are whole events `e` leaves alone. An
 * unfinished event is kept as pieces and only new text is searched for a boundary, so a long one costs
 * linear time; one longer than `maxEventBytes` (decoded characters; 0 = any) rejects with
 * `UpstreamStreamError` (docs/operations.md, `upstream.max_sse_event_bytes`). Editing a stream this returned,
 * before it is read, gives one stream running both edits in order (the first one's bound or the second's,
 * whichever is tighter); the first can then no longer be read.
 */
export function editSse(
  chunks: AsyncIterable<Uint8Array>,
  e: SseEdit,
  maxEventBytes = DEFAULT_MAX_SSE_EVENT_BYTES,
): AsyncIterableIterator<Uint8Array> {
  if (chunks instanceof EditedStream) {
    const fused = chunks.fuse(e, maxEventBytes);
    if (fused) return fused;
  }
  return new EditedStream(chunks, e, maxEventBytes);
}

/** A stream under an edit; until it is read, a further edit joins it instead of wrapping it. */
class EditedStream implements AsyncIterableIterator<Uint8Array> {
  private run: Edited | undefined;
  private fused = false;

  constructor(
    private readonly source: AsyncIterable<Uint8Array>,
    private readonly e: SseEdit,
    private readonly maxEventBytes: number,
  ) {}

  /** A stream running this edit and then `next`, or undefined once this one is being read. */
  fuse(next: SseEdit, maxEventBytes: number): EditedStream | undefined {
    if (this.run !== undefined || this.fused) return undefined;
    this.fused = true;
    return new EditedStream(this.source, chain(this.e, next), tighter(this.maxEventBytes, maxEventBytes));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    return this.started().next();
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    return this.started().return();
  }

  private started(): Edited {
    if (this.fused) throw new Error('this stream was edited further: read the stream that edit returned');
    return (this.run ??= new Edited(this.source, this.e, this.maxEventBytes));
  }
}

function tighter(a: number, b: number): number {
  return a === 0 ? b : b === 0 ? a : Math.min(a, b);
}

/** `a`, then `b` on what `a` left. */
function chain(a: SseEdit, b: SseEdit): SseEdit {
  const ea = a.event?.bind(a);
  const eb = b.event?.bind(b);
  return {
    mayTouch: (text) => a.mayTouch(text) || b.mayTouch(text),
    edit(event) {
      const x = a.mayTouch(event) ? a.edit(event) : undefined;
      if (x === null) return null;
      const text = x ?? event;
      const y = b.mayTouch(text) ? b.edit(text) : undefined;
      return y === undefined ? x : y;
    },
    event: ea && eb
      ? (bytes) => {
        const x = ea(bytes);
        if (x === undefined || x === null) return x;
        return eb(x) ?? textEdited(x, b);
      }
      : undefined,
  };
}

/**
 * The stream with `e` applied, read chunk by chunk. An iterator, not an async generator: it runs once per SSE
 * chunk, and a generator layer costs several promise turns per chunk (docs/performance.md). Each chunk gives
 * at most one piece out; a throw of its own closes the source, as a `for await` left by a throw would. Chunks
 * that give nothing (an event going on) get a turn of the event loop every `HELD_CHUNKS_PER_TURN`.
 */
class Edited implements AsyncIterator<Uint8Array> {
  private readonly decoder = new Utf8Stream();
  private pieces: string[] = [];
  private pendingLength = 0;
  /** The bytes so far ended on an event boundary: the decoder holds nothing, nothing is pending. */
  private clean = true;
  private over = false;
  /** Chunks read in a row that gave nothing out: an event going on (`HELD_CHUNKS_PER_TURN`). */
  private held = 0;
  private it: AsyncIterator<Uint8Array> | undefined;

  constructor(
    private readonly chunks: AsyncIterable<Uint8Array>,
    private readonly e: SseEdit,
    private readonly maxEventBytes: number,
  ) {}

  async next(): Promise<IteratorResult<Uint8Array>> {
    const source = (this.it ??= this.chunks[Symbol.asyncIterator]());
    while (!this.over) {
      let r: IteratorResult<Uint8Array>;
      try {
        r = await source.next();
      } catch (err) {
        this.over = true; // a failed source is done, as for `for await`: not closed
        throw err;
      }
      if (r.done) {
        this.over = true;
        const last = this.rest();
        return last === undefined ? CHUNKS_DONE : { done: false, value: last };
      }
      let out: Uint8Array | undefined;
      try {
        out = this.take(r.value);
      } catch (err) {
        this.over = true;
        await source.return?.().catch(() => {});
        throw err;
      }
      if (out !== undefined) {
        this.held = 0;
        return { done: false, value: out };
      }
      if (++this.held % HELD_CHUNKS_PER_TURN === 0) await yieldToLoop();
    }
    return CHUNKS_DONE;
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    if (!this.over) {
      this.over = true;
      await this.it?.return?.();
    }
    return CHUNKS_DONE;
  }

  /** One chunk: what goes out for it (undefined: nothing yet). Throws when an unfinished event is too long. */
  private take(chunk: Uint8Array): Uint8Array | undefined {
    const e = this.e;
    // Clean before and ending on a blank line: the decoder would hold nothing after it either.
    if (this.clean && e.event !== undefined && endsWithLfLf(chunk) && indexOfByte(chunk, CR) < 0) {
      const out = editedBytes(chunk, e);
      return out.length > 0 ? out : undefined;
    }
    const text = this.decoder.decode(chunk);
    // Whole events from an event boundary on: the chunk itself goes out unless the edit changes it.
    const whole = this.clean && endsAtBoundary(text);
    if (whole && !e.mayTouch(text)) return chunk;
    const cut = hasLineEnd(text) ? this.boundaryEnd(text) : 0;
    if (cut <= 0) {
      if (text !== '') this.pieces.push(text);
      this.pendingLength += text.length;
      this.clean = false;
      this.checkPending();
      return undefined;
    }
    const pieces = this.pieces;
    const head = pieces.length === 0 ? '' : pieces.length === 1 ? pieces[0]! : pieces.join('');
    const complete = head + text.slice(0, cut);
    const rest = text.slice(cut);
    this.pieces = rest === '' ? [] : [rest];
    this.pendingLength = rest.length;
    this.clean = rest === '' && endsAtBoundary(text);
    this.checkPending();
    const out = editEvents(complete, e);
    if (out === undefined) return whole ? chunk : encodeText(complete);
    return out !== '' ? encodeText(out) : undefined;
  }

  /** Where the last complete event ends in `text`, the new text (0: none), counting a boundary begun before. */
  private boundaryEnd(text: string): number {
    // A boundary can begin at most three characters before the new text.
    const carry = tailOf(this.pieces, 3);
    return lastBoundaryEnd(carry + text) - carry.length;
  }

  private checkPending(): void {
    if (this.maxEventBytes > 0 && this.pendingLength > this.maxEventBytes) throw oversizedEvent(this.maxEventBytes);
  }

  /** What is left once the source ended: its last event, edited. */
  private rest(): Uint8Array | undefined {
    const pending = this.pieces.join('') + this.decoder.end();
    if (pending === '') return undefined;
    const out = editEvents(pending, this.e) ?? pending;
    return out !== '' ? encodeText(out) : undefined;
  }
}

function endsWithLfLf(b: Uint8Array): boolean {
  return b.length >= 2 && b[b.length - 1] === LF && b[b.length - 2] === LF;
}

/**
 * A chunk of whole `\n`-delimited events edited one by one as bytes; only an event the byte edit leaves to
 * the text edit is decoded. The chunk itself when nothing changed.
 */
function editedBytes(chunk: Uint8Array, e: SseEdit): Uint8Array {
  // Views of a plain array: a Buffer's subarray is a Buffer, dearer to make, for every event.
  const b = chunk.constructor === Uint8Array ? chunk : new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length);
  let parts: Uint8Array[] | undefined;
  let keptFrom = 0;
  for (let at = 0, end = 0; at < b.length; at = end) {
    end = blankLineEnd(b, at);
    const event = b.subarray(at, end);
    const r = e.event!(event) ?? textEdited(event, e);
    if (r === event) continue;
    parts ??= [];
    if (keptFrom < at) parts.push(b.subarray(keptFrom, at));
    if (r !== null) parts.push(r);
    keptFrom = end;
  }
  if (parts === undefined) return chunk;
  if (keptFrom < b.length) parts.push(b.subarray(keptFrom));
  return parts.length === 1 ? parts[0]! : concatBytes(...parts);
}

/** The index just past the first `\n\n` at or after `from`, or the end of `b`. */
function blankLineEnd(b: Uint8Array, from: number): number {
  for (let i = indexOfByte(b, LF, from); i >= 0; i = indexOfByte(b, LF, i + 1)) {
    if (b[i + 1] === LF) return i + 2;
  }
  return b.length;
}

const eventDecoder = new TextDecoder();

/** One event's bytes (with its `\n\n`) through the text edit: the same array when it keeps the event. */
function textEdited(event: Uint8Array, e: SseEdit): Uint8Array | null {
  const text = eventDecoder.decode(event.subarray(0, event.length - 2));
  if (!e.mayTouch(text)) return event;
  const r = e.edit(text);
  return r === undefined ? event : r === null ? null : encodeText(r + '\n\n');
}

/** The last `n` characters of the pieces' text, without joining them. */
function tailOf(pieces: string[], n: number): string {
  let tail = '';
  for (let i = pieces.length - 1; i >= 0 && tail.length < n; i--) tail = pieces[i]!.slice(-n) + tail;
  return tail.slice(-n);
}

/** The JSON of an event's `data:` lines, or undefined (a comment, `[DONE]`, not an object). */
export function eventJson(event: string): Record<string, unknown> | undefined {
  let data = '';
  let any = false;
  for (const line of event.split(/\r\n|\n|\r/)) {
    if (!line.startsWith('data:')) continue;
    data += (any ? '\n' : '') + (line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5));
    any = true;
  }
  if (!any) return undefined;
  try {
    const v: unknown = JSON.parse(data);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
