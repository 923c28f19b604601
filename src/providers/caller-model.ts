// The model name the caller sent (an alias or a routing group), put into a chat answer in place of the
// upstream's (often a dated snapshot id), as AISIX's answers carry it (docs/aisix-compatibility.md "Model
// name in answers"). The top-level `"model"` string is spliced in place: no parse and re-serialisation of
// the answer, except as a fallback for a body whose `model` the scan does not find.
import { editSse, eventJson, type SseEdit } from './sse-edit.ts';
import { concatBytes, hasAt, indexOfByte } from '../util/bytes.ts';

const encoder = new TextEncoder();
const LF = 10;
const CR = 13;

/** Where the value of the top-level string member `key` sits in the JSON object text from `from`. */
function topLevelString(text: string, key: string, from: number): { start: number; end: number } | undefined {
  if (from < 0) return undefined;
  let depth = 0;
  let expectKey = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      const end = stringEnd(text, i);
      if (end < 0) return undefined;
      if (depth === 1 && expectKey && text.slice(i + 1, end) === key) return valueAfterKey(text, end + 1);
      expectKey = false;
      i = end;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      depth++;
      expectKey = c === 123;
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      if (--depth === 0) return undefined;
    } else if (c === 44 /* , */) expectKey = true;
    else if (c === 58 /* : */) expectKey = false;
  }
  return undefined;
}

/** The index of the quote closing the string opened at `open`, or -1. */
function stringEnd(text: string, open: number): number {
  for (let j = open + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 92 /* \ */) j++;
    else if (c === 34) return j;
  }
  return -1;
}

/** After a key's closing quote: `: "value"` → the value's span (quotes included), when it is a string. */
function valueAfterKey(text: string, i: number): { start: number; end: number } | undefined {
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  if (text[i] !== ':') return undefined;
  i++;
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  if (text[i] !== '"') return undefined;
  const end = stringEnd(text, i);
  return end < 0 ? undefined : { start: i, end: end + 1 };
}

/** `text` (a JSON object from `from`) with its top-level `model` string set; undefined when it has none. */
function spliceModel(text: string, quoted: string, from: number): string | undefined {
  const at = topLevelString(text, 'model', from);
  if (!at) return undefined;
  if (text.slice(at.start, at.end) === quoted) return text;
  return text.slice(0, at.start) + quoted + text.slice(at.end);
}

/** A JSON chat answer naming `model`; a body that is not a JSON object comes back as it was. */
export function withCallerModel(body: string, model: string): string {
  const quoted = JSON.stringify(model);
  const spliced = spliceModel(body, quoted, body.indexOf('{'));
  if (spliced !== undefined) return spliced;
  try {
    const v: unknown = JSON.parse(body);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return body;
    return JSON.stringify({ ...v, model });
  } catch {
    return body;
  }
}

/** Where an SSE event's JSON names its top-level model: the value's span (quotes included). */
function eventModelSpan(event: string): { start: number; end: number } | undefined {
  const data = event.indexOf('data:');
  return data < 0 ? undefined : topLevelString(event, 'model', event.indexOf('{', data));
}

/** An event's JSON (no top-level model string the scan could find) re-serialised naming `model`. */
function reserialised(event: string, model: string): string | undefined {
  const j = eventJson(event);
  if (!j || typeof j.model !== 'string') return undefined;
  return `data: ${JSON.stringify({ ...j, model })}`;
}

/** One SSE event naming `model` when it is a JSON chunk that names a model; anything else unchanged. */
export function eventWithCallerModel(event: string, model: string): string | undefined {
  if (event.indexOf('data:') < 0) return undefined;
  const at = eventModelSpan(event);
  if (!at) return reserialised(event, model);
  const quoted = JSON.stringify(model);
  return event.slice(at.start, at.end) === quoted ? undefined : event.slice(0, at.start) + quoted + event.slice(at.end);
}

/**
 * The caller's model spliced into a stream's events. Upstreams open every chunk with the same bytes up to
 * the model's value (id, object, created, model): once one event was spliced as text, a chunk whose events
 * all open with those bytes is spliced as bytes, with no decode, scan or encode.
 */
class ModelSplice implements SseEdit {
  private readonly quoted: string;
  /** An event's bytes from its start through the upstream model's closing quote, and the same spliced. */
  private from: Uint8Array | undefined;
  private to: Uint8Array | undefined;

  constructor(private readonly model: string) {
    this.quoted = JSON.stringify(model);
  }

  mayTouch(text: string): boolean {
    return text.includes('"model"');
  }

  edit(event: string): string | undefined {
    const at = eventModelSpan(event);
    if (!at) return reserialised(event, this.model);
    const head = event.slice(0, at.start);
    this.from = encoder.encode(event.slice(0, at.end));
    this.to = encoder.encode(head + this.quoted);
    return event.slice(at.start, at.end) === this.quoted ? undefined : head + this.quoted + event.slice(at.end);
  }

  whole(chunk: Uint8Array): Uint8Array | undefined {
    const { from, to } = this;
    // Only `\n\n` ends an event here: a chunk with any CR takes the text path.
    if (from === undefined || to === undefined || indexOfByte(chunk, CR) >= 0) return undefined;
    const parts: Uint8Array[] = [];
    for (let at = 0; at < chunk.length;) {
      if (!hasAt(chunk, at, from)) return undefined;
      const end = blankLineEnd(chunk, at + from.length);
      parts.push(to, chunk.subarray(at + from.length, end));
      at = end;
    }
    return concatBytes(...parts);
  }
}

/** The index just past the first `\n\n` at or after `from` (the chunk ends with one). */
function blankLineEnd(b: Uint8Array, from: number): number {
  for (let i = indexOfByte(b, LF, from); i >= 0; i = indexOfByte(b, LF, i + 1)) {
    if (b[i + 1] === LF) return i + 2;
  }
  return b.length;
}

/** Chat (or legacy completions) SSE chunks naming `model`; events without a model pass as they came. */
export function streamWithCallerModel(chunks: AsyncIterable<Uint8Array>, model: string): AsyncGenerator<Uint8Array> {
  return editSse(chunks, new ModelSplice(model));
}
