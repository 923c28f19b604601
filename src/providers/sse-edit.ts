// Editing a pass-through SSE stream event by event without re-serialising it: the caller's model name put
// into every chat chunk (caller-model.ts), the usage chunk Sluice asked for withheld (openai.ts). Events are
// cut at their blank line however the network split them; a chunk made of whole events that the edit does
// not touch goes out as the same bytes (docs/routing.md "Streams Sluice edits").

/**
 * One edit over a stream's events. `mayTouch` is a cheap test on raw text (a chunk or one event): false
 * lets it pass unchanged. `edit` gets one event's text (without its blank line) and answers undefined to
 * keep it, a string to replace it, or null to drop it with its blank line.
 */
export interface SseEdit {
  mayTouch(text: string): boolean;
  edit(event: string): string | null | undefined;
  /**
   * Optional: a chunk of whole events (the stream before it and the chunk itself end on a blank line)
   * edited as bytes, with no decode: the edited bytes (the chunk itself when unchanged), or undefined to
   * take the text path for this chunk.
   */
  whole?(chunk: Uint8Array): Uint8Array | undefined;
}

import { DEFAULT_MAX_SSE_EVENT_BYTES, oversizedEvent } from './sse.ts';
import { encodeText } from '../util/bytes.ts';

const LF = 10;
const CR = 13;
const BOUNDARY = /\r\n\r\n|\n\n|\r\r/g;

function endsAtBoundary(text: string): boolean {
  return text.endsWith('\n\n') || text.endsWith('\r\r') || text.endsWith('\r\n\r\n');
}

/** `endsAtBoundary` on bytes: the same three blank lines. */
function bytesEndAtBoundary(b: Uint8Array): boolean {
  const n = b.length;
  if (n < 2) return false;
  const last = b[n - 1];
  if (last === LF) return b[n - 2] === LF || (n >= 4 && b[n - 2] === CR && b[n - 3] === LF && b[n - 4] === CR);
  return last === CR && b[n - 2] === CR;
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
 * `UpstreamStreamError` (docs/operations.md, `upstream.max_sse_event_bytes`).
 */
export async function* editSse(
  chunks: AsyncIterable<Uint8Array>,
  e: SseEdit,
  maxEventBytes = DEFAULT_MAX_SSE_EVENT_BYTES,
): AsyncGenerator<Uint8Array> {
  const decoder = new TextDecoder();
  let pieces: string[] = [];
  let pendingLength = 0;
  /** The bytes so far ended on an event boundary: the decoder holds nothing, nothing is pending. */
  let clean = true;
  for await (const chunk of chunks) {
    // Clean before and ending on a boundary: the decoder would hold nothing after it either.
    if (clean && e.whole !== undefined && bytesEndAtBoundary(chunk)) {
      const out = e.whole(chunk);
      if (out !== undefined) {
        if (out.length > 0) yield out;
        continue;
      }
    }
    const text = decoder.decode(chunk, { stream: true });
    // Whole events from an event boundary on: the chunk itself goes out unless the edit changes it.
    const whole = clean && endsAtBoundary(text);
    if (whole && !e.mayTouch(text)) {
      yield chunk;
      continue;
    }
    // A boundary can begin at most three characters before the new text.
    const carry = tailOf(pieces, 3);
    const cut = lastBoundaryEnd(carry + text) - carry.length;
    if (cut <= 0) {
      if (text !== '') pieces.push(text);
      pendingLength += text.length;
      clean = false;
      if (maxEventBytes > 0 && pendingLength > maxEventBytes) throw oversizedEvent(maxEventBytes);
      continue;
    }
    const head = pieces.length === 0 ? '' : pieces.length === 1 ? pieces[0]! : pieces.join('');
    const complete = head + text.slice(0, cut);
    const rest = text.slice(cut);
    pieces = rest === '' ? [] : [rest];
    pendingLength = rest.length;
    clean = rest === '' && endsAtBoundary(text);
    if (maxEventBytes > 0 && pendingLength > maxEventBytes) throw oversizedEvent(maxEventBytes);
    const out = editEvents(complete, e);
    if (out === undefined) yield whole ? chunk : encodeText(complete);
    else if (out !== '') yield encodeText(out);
  }
  const pending = pieces.join('') + decoder.decode();
  if (pending !== '') {
    const out = editEvents(pending, e) ?? pending;
    if (out !== '') yield encodeText(out);
  }
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
