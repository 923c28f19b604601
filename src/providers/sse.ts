// Server-sent-event framing for the translating adapters: parse an upstream byte stream into events
// (however the network split it) and encode events back to bytes. Pass-through paths never use this —
// their bytes go to the caller untouched.

export interface SseEvent {
  /** The `event:` field, when the stream names its events (Anthropic does, OpenAI does not). */
  event?: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
}

import { UpstreamStreamError } from './types.ts';
import { yieldToLoop } from '../resources/pace.ts';
import { Utf8Stream } from '../util/utf8-stream.ts';

const encoder = new TextEncoder();

/** `upstream.max_sse_event_bytes`'s default: the largest event (or pass-through line) a stream may carry. */
export const DEFAULT_MAX_SSE_EVENT_BYTES = 4_194_304;

/** The failure a stream ends with when one event (or line) outgrows `upstream.max_sse_event_bytes`. */
export function oversizedEvent(max: number): UpstreamStreamError {
  return new UpstreamStreamError(
    'upstream_error',
    `upstream stream event over ${max} bytes without an end (upstream.max_sse_event_bytes)`,
  );
}

/**
 * How many chunks in a row a stream layer reads into one unfinished event before it gives the event loop a turn.
 * Chunks the upstream client already holds come through as microtasks, one after another: without the turn a long
 * line would be read up to its bound while every other caller of the instance waited.
 */
export const HELD_CHUNKS_PER_TURN = 8;

/**
 * Events as they complete; a trailing event without its blank line is delivered when the stream ends. An
 * event longer than `maxEventBytes` (counted in decoded characters, never more than its bytes; 0 = no
 * bound) rejects with `UpstreamStreamError`. Linear in the stream: each chunk's new text is searched once,
 * and a turn of the event loop is given every `HELD_CHUNKS_PER_TURN` chunks that complete no event.
 */
export async function* parseSse(
  chunks: AsyncIterable<Uint8Array>,
  maxEventBytes = DEFAULT_MAX_SSE_EVENT_BYTES,
): AsyncGenerator<SseEvent> {
  const decoder = new Utf8Stream();
  const splitter = new BlockSplitter();
  let held = 0;
  for await (const chunk of chunks) {
    const blocks = splitter.push(decoder.decode(chunk));
    for (const block of blocks) {
      if (maxEventBytes > 0 && block.length > maxEventBytes) throw oversizedEvent(maxEventBytes);
      const ev = parseBlock(block);
      if (ev) yield ev;
    }
    if (maxEventBytes > 0 && splitter.pendingLength > maxEventBytes) throw oversizedEvent(maxEventBytes);
    if (blocks.length > 0) held = 0;
    else if (++held % HELD_CHUNKS_PER_TURN === 0) await yieldToLoop();
  }
  const last = parseBlock(splitter.rest() + decoder.end());
  if (last) yield last;
}

const BOUNDARY = /\r\n\r\n|\n\n|\r\r/g;

/**
 * Whether `text` holds a CR or LF, which every event boundary ends with: text without one (a long line going
 * on) needs no search for a boundary, and the single-character search costs a fraction of that one.
 */
export function hasLineEnd(text: string): boolean {
  return text.indexOf('\n') >= 0 || text.indexOf('\r') >= 0;
}

/** The longest boundary less one: how far back a boundary begun in earlier text can start. */
const CARRY = 3;

/**
 * Cuts text into event blocks at blank lines. The unfinished event is kept as pieces, joined only once its
 * boundary arrives, and only the new text (with the few characters before it) is searched.
 */
class BlockSplitter {
  private pieces: string[] = [];
  pendingLength = 0;

  push(text: string): string[] {
    if (!hasLineEnd(text) || !this.completesBoundary(text)) {
      if (text !== '') this.pieces.push(text);
      this.pendingLength += text.length;
      return [];
    }
    const buf = this.rest() + text;
    const blocks: string[] = [];
    let pos = 0;
    BOUNDARY.lastIndex = Math.max(0, buf.length - text.length - CARRY);
    let m: RegExpExecArray | null;
    while ((m = BOUNDARY.exec(buf)) !== null) {
      blocks.push(buf.slice(pos, m.index));
      pos = m.index + m[0].length;
    }
    const rest = buf.slice(pos);
    this.pieces = rest === '' ? [] : [rest];
    this.pendingLength = rest.length;
    return blocks;
  }

  /** Whether `text` ends a boundary, counting one begun in the text before it. */
  private completesBoundary(text: string): boolean {
    BOUNDARY.lastIndex = 0;
    return BOUNDARY.test(this.tail() + text);
  }

  /** The unfinished event's text; empties the splitter. */
  rest(): string {
    const text = this.pieces.length === 1 ? this.pieces[0]! : this.pieces.join('');
    this.pieces = [];
    this.pendingLength = 0;
    return text;
  }

  private tail(): string {
    let tail = '';
    for (let i = this.pieces.length - 1; i >= 0 && tail.length < CARRY; i--) {
      tail = this.pieces[i]!.slice(-CARRY) + tail;
    }
    return tail.slice(-CARRY);
  }
}

function parseBlock(block: string): SseEvent | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r\n|\n|\r/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  return event === undefined ? { data: data.join('\n') } : { event, data: data.join('\n') };
}

/** `data: <json>\n\n`, OpenAI's framing. */
export function dataEvent(payload: unknown): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
}

/** `event: <name>\ndata: <json>\n\n`, Anthropic's framing. */
export function namedEvent(name: string, payload: unknown): Uint8Array {
  return encoder.encode(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`);
}

export const DONE_EVENT = encoder.encode('data: [DONE]\n\n');

/** A JSON object from an event's data, or undefined when it is not one (e.g. `[DONE]`). */
export function jsonData(ev: SseEvent): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(ev.data);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
