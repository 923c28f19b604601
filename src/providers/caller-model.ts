// The model name the caller sent (an alias or a routing group), put into every answer in place of the
// upstream's (often a dated snapshot id), as AISIX's chat answers carry it (docs/aisix-compatibility.md "Model
// name in chat answers"). The `"model"` string is spliced in place: no parse and re-serialisation of the
// answer, except as a fallback for a JSON body whose `model` the scan does not find.
import { editSse, eventJson, type SseEdit } from './sse-edit.ts';
import { concatBytes, hasAt } from '../util/bytes.ts';

const encoder = new TextEncoder();

/** Where the value of the top-level string member `key` sits in the JSON object text from `from`. */
function topLevelString(text: string, key: string, from: number): { start: number; end: number } | undefined {
  const at = topLevelValue(text, key, from);
  if (at === undefined || text[at] !== '"') return undefined;
  const end = stringEnd(text, at);
  return end < 0 ? undefined : { start: at, end: end + 1 };
}

/** Where the value of the top-level member `key` starts in the JSON object text from `from`. */
function topLevelValue(text: string, key: string, from: number): number | undefined {
  if (from < 0) return undefined;
  let depth = 0;
  let expectKey = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      const end = stringEnd(text, i);
      if (end < 0) return undefined;
      // Compared in place: a substring per key passed would be garbage on every answer.
      if (depth === 1 && expectKey && end - i - 1 === key.length && text.startsWith(key, i + 1)) {
        return valueAfterKey(text, end + 1);
      }
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

/**
 * The index of the quote closing the string opened at `open`, or -1: the first quote after an even run of
 * backslashes. Found with `indexOf` (native) rather than a loop over every character of the string.
 */
function stringEnd(text: string, open: number): number {
  for (let j = text.indexOf('"', open + 1); j >= 0; j = text.indexOf('"', j + 1)) {
    let k = j - 1;
    while (k > open && text.charCodeAt(k) === 92 /* \ */) k--;
    if ((j - k) % 2 === 1) return j;
  }
  return -1;
}

/** After a key's closing quote: `: value` → where the value starts. */
function valueAfterKey(text: string, i: number): number | undefined {
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  if (text[i] !== ':') return undefined;
  i++;
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  return i;
}

/** How far into an answer a `"model"` key is taken for the one at the top (chat and Responses put it first). */
const HEAD = 1024;

/**
 * The top-level `"model"` string of a JSON object that names it last (an embeddings answer, after its data):
 * the last `"model"` key, when the text after its value closes exactly the root object. Undefined: not so.
 */
function lastTopLevelModel(text: string): { start: number; end: number } | undefined {
  const key = text.lastIndexOf('"model"');
  if (key <= 0 || text[key - 1] === '\\') return undefined;
  const value = valueAfterKey(text, key + '"model"'.length);
  if (value === undefined || text[value] !== '"') return undefined;
  const end = stringEnd(text, value);
  if (end < 0) return undefined;
  let depth = 0;
  for (let i = end + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      i = stringEnd(text, i);
      if (i < 0) return undefined;
    } else if (c === 123 /* { */ || c === 91 /* [ */) depth++;
    else if (c === 125 /* } */ || c === 93 /* ] */) {
      if (--depth >= 0) continue;
      return c === 125 && text.slice(i + 1).trim() === '' ? { start: value, end: end + 1 } : undefined;
    }
  }
  return undefined;
}

/** `text` (a JSON object from `from`) with its top-level `model` string set; undefined when it has none. */
function spliceModel(text: string, quoted: string, from: number): string | undefined {
  // A large answer that names its model last is not scanned from the start (an embeddings answer is MBs).
  const early = from >= 0 && text.slice(from, from + HEAD).includes('"model"');
  const at = (early ? undefined : lastTopLevelModel(text)) ?? topLevelString(text, 'model', from);
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

/**
 * The event's answer object, which names the model in Anthropic's and Responses' streams: `message` of
 * `message_start`, `response` of the `response.*` lifecycle events.
 */
const ANSWER_MEMBERS = ['message', 'response'] as const;

/** Where an SSE event's answer object (`ANSWER_MEMBERS`) names its model: the value's span (quotes included). */
function nestedModelSpan(event: string): { start: number; end: number } | undefined {
  const data = event.indexOf('data:');
  if (data < 0) return undefined;
  const open = event.indexOf('{', data);
  for (const member of ANSWER_MEMBERS) {
    const at = topLevelValue(event, member, open);
    if (at !== undefined && event[at] === '{') return topLevelString(event, 'model', at);
  }
  return undefined;
}

/**
 * The caller's model put into the answer objects of an Anthropic Messages or Responses stream
 * (`message_start`, `response.created`, …, `response.completed`); every other event passes untouched.
 */
class NestedModelSplice implements SseEdit {
  private readonly quoted: string;

  constructor(model: string) {
    this.quoted = JSON.stringify(model);
  }

  mayTouch(text: string): boolean {
    return text.includes('"model"');
  }

  edit(event: string): string | undefined {
    const at = nestedModelSpan(event);
    if (!at || event.slice(at.start, at.end) === this.quoted) return undefined;
    return event.slice(0, at.start) + this.quoted + event.slice(at.end);
  }
}

/** A Messages or Responses stream whose answer objects name `model`. */
export function answerStreamWithCallerModel(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  maxEventBytes?: number,
): AsyncIterableIterator<Uint8Array> {
  return editSse(chunks, new NestedModelSplice(model), maxEventBytes);
}

/** An event's JSON (no top-level model string the scan could find) re-serialised naming `model`. */
function reserialised(event: string, model: string): string | undefined {
  const j = eventJson(event);
  if (!j || typeof j.model !== 'string') return undefined;
  return `data: ${JSON.stringify({ ...j, model })}`;
}

/**
 * The caller's model spliced into a stream's events. Upstreams open every chunk with the same bytes up to
 * the model's value (id, object, created, model): once one event was spliced as text, an event that opens
 * with those bytes is spliced as bytes, with no decode, scan or encode.
 */
class ModelSplice implements SseEdit {
  private readonly quoted: string;
  /** An event's text from its start through the upstream model's closing quote, as last spliced. */
  private fromText: string | undefined;
  /** The same as bytes, and spliced (undefined when the upstream already named the caller's model). */
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
    const fromText = event.slice(0, at.end);
    const same = event.slice(at.start, at.end) === this.quoted;
    if (fromText !== this.fromText) {
      this.fromText = fromText;
      this.from = encoder.encode(fromText);
      this.to = same ? undefined : encoder.encode(head + this.quoted);
    }
    return same ? undefined : head + this.quoted + event.slice(at.end);
  }

  event(b: Uint8Array): Uint8Array | undefined {
    const { from, to } = this;
    if (from !== undefined && hasAt(b, 0, from)) return to === undefined ? b : concatBytes(to, b.subarray(from.length));
    return b.length === DONE.length && hasAt(b, 0, DONE) ? b : undefined;
  }
}

const DONE = encoder.encode('data: [DONE]\n\n');

/** Chat (or legacy completions) SSE chunks naming `model`; events without a model pass as they came. */
export function streamWithCallerModel(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  maxEventBytes?: number,
): AsyncIterableIterator<Uint8Array> {
  return editSse(chunks, new ModelSplice(model), maxEventBytes);
}
