// Tokens a response used — for the `tpm` rate limits, the token metric families and the access log — and
// the provider's own response id (`provider_request_id`). JSON answers carry `usage` (OpenAI's
// prompt/completion/total tokens, Anthropic's input/output tokens). Streams carry it in their events, read
// as the bytes pass by, unless the adapter counted them itself (`counted()`: a usage chunk it asked for
// behind the caller's back, or a translation's richer count), which then wins. An answer without usage is
// estimated (src/providers/estimate.ts) for the limits and telemetry only, and marked `estimated`.
//
// Cheap on purpose, since it runs on every answer: a JSON body is not parsed whole — only its `usage`
// object (found from the end, where every wire puts it) and its leading `"id"` are read; a stream's lines
// are parsed only when they carry a `"usage"` object (or, for the first one, the id); a `data:` line's
// leading `type` (any JSON spacing) says what an Anthropic event is when no `event:` line names it.
import { DEFAULT_MAX_SSE_EVENT_BYTES, oversizedEvent } from '../providers/sse.ts';
import type { TokenCounts } from '../providers/types.ts';
import { finishReasonOf } from '../telemetry/finish-reason.ts';
import { CHUNKS_DONE, concatBytes } from '../util/bytes.ts';
import { Utf8Stream } from '../util/utf8-stream.ts';

export interface Usage {
  input?: number;
  output?: number;
  total?: number;
  /** Some counter came from the local estimate, not from the upstream. */
  estimated?: boolean;
  /** Anthropic's cache counters, part of `input` unless `cacheOutsideInput` (the usage event reports them apart). */
  cacheCreation?: number;
  cacheRead?: number;
  /** The cache counters are beside `input` (TokenCounts `cacheOutsideInput`). */
  cacheOutsideInput?: true;
  /** OpenAI's cached prompt tokens and reasoning tokens: subsets of `input` and `output`. */
  cachedPrompt?: number;
  reasoning?: number;
}

/** An adapter's own count (ProviderResult `counted`) as the usage the record and the limits read. */
export function fromCounts(c: TokenCounts | undefined): Usage | undefined {
  if (!c) return undefined;
  const u: Usage = { input: c.input, output: c.output };
  if (c.total !== undefined) u.total = c.total;
  if (c.estimated) u.estimated = true;
  if (c.cacheCreation) u.cacheCreation = c.cacheCreation;
  if (c.cacheRead) u.cacheRead = c.cacheRead;
  if (c.cacheOutsideInput) u.cacheOutsideInput = true;
  if (c.reasoning) u.reasoning = c.reasoning;
  return u;
}

/**
 * An embeddings answer's counts as AISIX reads them: the prompt is `prompt_tokens`, else (0 or absent)
 * `total_tokens`; the total is the larger of the two.
 */
export function embeddingsUsage(u: Usage | undefined): Usage | undefined {
  if (!u) return u;
  const input = u.input || u.total;
  return input === undefined ? u : { ...u, input, total: Math.max(u.total ?? 0, input) };
}

function n(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/**
 * Anthropic's input counters seen so far in one answer: a stream reports them on `message_start` and (some
 * relays only there) on `message_delta`, so each keeps the larger value, as AISIX's meter does.
 */
interface AnthropicInput {
  input: number;
  cacheCreation: number;
  cacheRead: number;
}

/**
 * Fold one `usage` object (either wire) into what is known so far: OpenAI's counters, later numbers win;
 * Anthropic's input counters per counter the larger (`parts` carries them between the events of a stream).
 */
function fold(into: Usage, usage: unknown, parts?: AnthropicInput): void {
  if (typeof usage !== 'object' || usage === null) return;
  const u = usage as Record<string, unknown>;
  const prompt = n(u.prompt_tokens);
  const input = n(u.input_tokens);
  const creation = n(u.cache_creation_input_tokens);
  const read = n(u.cache_read_input_tokens);
  if (prompt !== undefined) into.input = prompt;
  else if (input !== undefined || creation !== undefined || read !== undefined) {
    const p = parts ?? { input: 0, cacheCreation: 0, cacheRead: 0 };
    p.input = Math.max(p.input, input ?? 0);
    p.cacheCreation = Math.max(p.cacheCreation, creation ?? 0);
    p.cacheRead = Math.max(p.cacheRead, read ?? 0);
    into.input = p.input + p.cacheCreation + p.cacheRead;
    if (p.cacheCreation > 0) into.cacheCreation = p.cacheCreation;
    if (p.cacheRead > 0) into.cacheRead = p.cacheRead;
  }
  const cached = details(u, 'prompt_tokens_details', 'cached_tokens') ??
    details(u, 'input_tokens_details', 'cached_tokens');
  if (cached) into.cachedPrompt = cached;
  const reasoning = details(u, 'completion_tokens_details', 'reasoning_tokens') ??
    details(u, 'output_tokens_details', 'reasoning_tokens');
  if (reasoning) into.reasoning = reasoning;
  const output = n(u.completion_tokens) ?? n(u.output_tokens);
  if (output !== undefined) into.output = output;
  if (n(u.total_tokens) !== undefined) into.total = n(u.total_tokens);
}

/** A count inside one of a usage's detail objects (`prompt_tokens_details.cached_tokens`). */
function details(u: Record<string, unknown>, k: string, field: string): number | undefined {
  return n((u[k] as Record<string, unknown> | null | undefined)?.[field]);
}

/**
 * Whether `u` is a usage an upstream reported: a stated total of 0 is none (a translation's answer states 0
 * when its upstream stated nothing; a generation's prompt is never empty).
 */
export function isReported(u: Usage | undefined): u is Usage {
  return (totalOf(u) ?? 0) > 0;
}

/** Total tokens: the stated total, else input + output; undefined when nothing was stated. */
export function totalOf(u: Usage | undefined): number | undefined {
  if (!u) return undefined;
  if (u.total !== undefined) return u.total;
  if (u.input === undefined && u.output === undefined) return undefined;
  return (u.input ?? 0) + (u.output ?? 0);
}

/** The JSON object (or array) starting at `text[i]`, by bracket matching; undefined if it does not close. */
function objectAt(text: string, i: number): string | undefined {
  let depth = 0;
  let inStr = false;
  for (let j = i; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (inStr) {
      if (c === 92) j++; // backslash
      else if (c === 34) inStr = false;
    } else if (c === 34) inStr = true;
    else if (c === 123 || c === 91) depth++;
    else if (c === 125 || c === 93) {
      if (--depth === 0) return text.slice(i, j + 1);
    }
  }
  return undefined;
}

/** The value of the last `"usage": {…}` member in `text` (a key, not an escaped string), parsed. */
function lastUsageObject(text: string): unknown {
  let at = text.length;
  for (;;) {
    at = text.lastIndexOf('"usage"', at - 1);
    if (at < 0) return undefined;
    if (at > 0 && text[at - 1] === '\\') continue;
    let j = at + 7;
    while (text[j] === ' ' || text[j] === '\n' || text[j] === '\r' || text[j] === '\t') j++;
    if (text[j] !== ':') continue;
    j++;
    while (text[j] === ' ' || text[j] === '\n' || text[j] === '\r' || text[j] === '\t') j++;
    if (text[j] !== '{') continue;
    const obj = objectAt(text, j);
    if (obj === undefined) return undefined;
    try {
      return JSON.parse(obj);
    } catch {
      return undefined;
    }
  }
}

const ID = /"id"\s*:\s*"((?:[^"\\]|\\.){1,200})"/;
const USAGE_KEY = '"usage"';

/** Whether `: {` (any JSON whitespace around the colon) follows at `i` on one line. */
function objectFollows(text: string, i: number): boolean {
  while (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9) i++;
  if (text.charCodeAt(i++) !== 58 /* : */) return false;
  while (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9) i++;
  return text.charCodeAt(i) === 123 /* { */;
}

/**
 * The first member of a `data:` line's JSON object (matched from the value's start): `error` (OpenAI's error
 * chunk), or `type` with its value (how Anthropic's events say what they are, whether or not an `event:` line
 * named them). Any JSON spacing.
 */
const LEADING_MEMBER = /\s*\{\s*"(error|type)"\s*:\s*(?:"([a-z_.]{1,40})")?/y;

/** The first `"id": "…"` of a JSON text (every wire puts the response id first), or undefined. */
function leadingId(text: string): string | undefined {
  const m = ID.exec(text.length > 4096 ? text.slice(0, 4096) : text);
  return m ? m[1] : undefined;
}

/** Usage and response id of a JSON answer: `usage` when the body states some, `id` when it has one. */
export function readBody(text: string): { usage: Usage | undefined; id: string | undefined } {
  const u: Usage = {};
  fold(u, lastUsageObject(text));
  // One shape for every answer: object spreads cost more than the scan itself here.
  return { usage: totalOf(u) !== undefined ? u : undefined, id: leadingId(text) };
}

/** Total tokens of a JSON answer, or undefined when it states none. */
export function usageOfBody(text: string): number | undefined {
  return totalOf(readBody(text).usage);
}

/**
 * Reads `usage` (and the response id) out of SSE bytes passing by, without changing them, and whether the
 * stream ended as its wire says a whole answer ends (`data: [DONE]` for OpenAI's, `message_stop` for
 * Anthropic's) and whether it carried an error event.
 */
export class StreamUsage {
  private readonly decoder = new Utf8Stream();
  /** The unfinished last line, in pieces: joined once its `\n` arrives, so a long line costs linear time. */
  private line: string[] = [];
  private lineLength = 0;
  private readonly counted: Usage = {};
  private readonly parts: AnthropicInput = { input: 0, cacheCreation: 0, cacheRead: 0 };
  /** The provider's response id, from the first event that carries one. */
  id: string | undefined;
  /** Saw the wire's terminator: `data: [DONE]` or Anthropic's `message_stop` event. */
  terminated = false;
  /** Saw an error event: `event: error`, or a `data:` line whose JSON starts with `"error"`. */
  errored = false;
  /** The text of the last chunk observed (complete characters only). */
  piece = '';
  /** The first finish reason an event gave (read only with `readsFinishReason`). */
  finishReason: string | undefined;
  /** Where the text being read next holds `"usage"` at or after the current line; -1: nowhere. */
  private usageAt = -1;

  /**
   * `maxLineBytes`: the longest line (decoded characters, never more than its bytes) `observe` accepts; 0 = any.
   * `readsFinishReason`: also look for the finish reason (a traced request; nobody else reads it).
   */
  constructor(
    private readonly maxLineBytes = DEFAULT_MAX_SSE_EVENT_BYTES,
    private readonly readsFinishReason = false,
  ) {}

  /** Rejects with `UpstreamStreamError` once an unfinished line outgrows `maxLineBytes`. */
  observe(chunk: Uint8Array): void {
    const piece = this.decoder.decode(chunk);
    this.piece = piece;
    let nl = piece.indexOf('\n');
    let from = 0;
    if (nl >= 0 && this.line.length > 0) {
      this.readLine(this.takeLine() + piece.slice(0, nl));
      from = nl + 1;
      nl = piece.indexOf('\n', from);
    }
    // The lines are read where they lie in the chunk's text: no array of them, no string per line, and one
    // search for a usage object over the whole piece.
    this.usageAt = nl >= 0 ? piece.indexOf(USAGE_KEY, from) : -1;
    for (; nl >= 0; from = nl + 1, nl = piece.indexOf('\n', from)) this.readLineIn(piece, from, nl);
    if (from < piece.length) {
      this.line.push(from === 0 ? piece : piece.slice(from));
      this.lineLength += piece.length - from;
    }
    if (this.maxLineBytes > 0 && this.lineLength > this.maxLineBytes) {
      this.line = [];
      this.lineLength = 0;
      throw oversizedEvent(this.maxLineBytes);
    }
  }

  private takeLine(): string {
    const text = this.line.length === 1 ? this.line[0]! : this.line.join('');
    this.line = [];
    this.lineLength = 0;
    return text;
  }

  /** Whether an event so far stated a non-zero usage (cheap: the answer's usage is only read by `usage()`). */
  get reported(): boolean {
    const c = this.counted;
    return (c.input ?? 0) > 0 || (c.output ?? 0) > 0 || (c.total ?? 0) > 0;
  }

  /** What the stream said it used; call once it ended. */
  usage(): Usage | undefined {
    const rest = this.takeLine();
    if (rest) this.readLine(rest);
    return totalOf(this.counted) === undefined ? undefined : this.counted;
  }

  /** Total tokens seen, or undefined when the stream carried no usage. */
  tokens(): number | undefined {
    return totalOf(this.usage());
  }

  private readLine(line: string): void {
    this.usageAt = line.indexOf(USAGE_KEY);
    this.readLineIn(line, 0, line.length);
  }

  /** The line `text[start, end)` (its `\n` excluded). */
  private readLineIn(text: string, start: number, end: number): void {
    if (end > start && text.charCodeAt(end - 1) === 13) end--;
    if (text.startsWith('event:', start)) {
      const name = text.slice(start + 6, end).trim();
      // Anthropic's terminator, and a Responses stream's terminal events (there is no `[DONE]` on that wire).
      if (name === 'message_stop' || name === 'response.completed' || name === 'response.incomplete') {
        this.terminated = true;
      } else if (name === 'error' || name === 'response.failed') this.errored = true;
      return;
    }
    if (!text.startsWith('data:', start)) return;
    const data = text.charCodeAt(start + 5) === 32 ? start + 6 : start + 5;
    if (end - data === 6 && text.startsWith('[DONE]', data)) {
      this.terminated = true;
      return;
    }
    LEADING_MEMBER.lastIndex = data;
    const lead = LEADING_MEMBER.exec(text);
    if (lead && LEADING_MEMBER.lastIndex <= end) {
      const type = lead[2];
      if (lead[1] === 'error' || type === 'error' || type === 'response.failed') this.errored = true;
      else if (type === 'message_stop' || type === 'response.completed' || type === 'response.incomplete') {
        this.terminated = true;
      }
    }
    if (this.id === undefined) this.id = leadingId(text.slice(start, end));
    if (this.readsFinishReason && this.finishReason === undefined) {
      this.finishReason = finishReasonOf(text.slice(data, end));
    }
    if (this.usageAt >= 0 && this.usageAt < data) this.usageAt = text.indexOf(USAGE_KEY, data);
    // Only a `"usage"` whose value is an object is worth a parse (chat chunks carry `"usage":null`).
    while (this.usageAt >= 0 && this.usageAt < end && !objectFollows(text, this.usageAt + USAGE_KEY.length)) {
      this.usageAt = text.indexOf(USAGE_KEY, this.usageAt + USAGE_KEY.length);
    }
    if (this.usageAt < 0 || this.usageAt + USAGE_KEY.length > end) return;
    try {
      const v = JSON.parse(text.slice(start + 5, end)) as {
        usage?: unknown;
        message?: { usage?: unknown };
        response?: { usage?: unknown };
      };
      fold(this.counted, v.message?.usage, this.parts);
      fold(this.counted, v.response?.usage, this.parts);
      fold(this.counted, v.usage, this.parts);
    } catch {
      // not JSON: nothing to count
    }
  }
}

/** What `meteredChunks` shows each chunk to (with its decoded text) and waits on once the upstream ended. */
export interface StreamEnding {
  observe(chunk: Uint8Array, text: string): void;
  /** Settled before the caller sees the stream's end (or its failure). */
  ended(): Promise<void>;
}

const encoder = new TextEncoder();
const lineDecoder = new TextDecoder();
const EVENT_END = encoder.encode('\n\n');

/**
 * The same chunks, observed by `meter` on the way through. Until the stream mentions `error`, chunks pass as
 * they came. From then on (an upstream's in-stream error event may echo a credential) it goes line by line:
 * the complete lines of what arrived have every configured secret scrubbed (`scrub`) and the unfinished last
 * line waits for the rest of it, so a secret split across chunks is whole when it is looked for; what is left
 * when the stream ends is scrubbed and sent. `error` itself split across two chunks is found (the end of the
 * previous piece is searched with the next), and a character whose first bytes went out before the switch is
 * completed, not re-encoded (lines are cut at `\n` bytes, which never occur inside a UTF-8 character).
 * `ending` sees every chunk the meter read, and the stream's end or failure waits for its `ended()`.
 */
export function meteredChunks(
  chunks: AsyncIterable<Uint8Array>,
  meter: StreamUsage,
  scrub?: () => (text: string) => string,
  ending?: StreamEnding,
): AsyncIterableIterator<Uint8Array> {
  return new Metered(chunks[Symbol.asyncIterator](), meter, scrub, ending);
}

/**
 * `meteredChunks` as an iterator, not an async generator: it runs once per SSE chunk, and a generator layer
 * costs several promise turns per chunk (docs/performance.md). `out` holds what one chunk gave beyond its
 * first piece; `failure` is thrown once `out` has gone out.
 */
class Metered implements AsyncIterableIterator<Uint8Array> {
  private s: ((text: string) => string) | undefined;
  private tail = '';
  private held: Uint8Array = new Uint8Array(0);
  private out: Uint8Array[] = [];
  private failure: { error: unknown } | undefined;
  private state: 'reading' | 'ending' | 'over' = 'reading';

  constructor(
    private readonly source: AsyncIterator<Uint8Array>,
    private readonly meter: StreamUsage,
    private readonly scrub: (() => (text: string) => string) | undefined,
    private readonly ending: StreamEnding | undefined,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    for (;;) {
      const queued = this.out.shift();
      if (queued !== undefined) return { done: false, value: queued };
      if (this.state === 'over') return CHUNKS_DONE;
      if (this.failure) {
        const { error } = this.failure;
        this.failure = undefined;
        this.state = 'over';
        await this.source.return?.().catch(() => {}); // as a `for await` left by a throw closes its source
        await this.ending?.ended();
        throw error;
      }
      if (this.state === 'ending') {
        this.state = 'over';
        await this.ending?.ended();
        return CHUNKS_DONE;
      }
      let r: IteratorResult<Uint8Array>;
      try {
        r = await this.source.next();
      } catch (e) {
        this.state = 'over';
        await this.ending?.ended();
        throw e;
      }
      if (r.done) {
        this.state = 'ending';
        if (this.s && this.held.length > 0) this.out.push(encoder.encode(this.s(lineDecoder.decode(this.held))));
        continue;
      }
      const first = this.take(r.value);
      if (first !== undefined) return { done: false, value: first };
    }
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    if (this.state === 'over') return CHUNKS_DONE;
    this.state = 'over';
    this.out = [];
    await this.source.return?.();
    return CHUNKS_DONE;
  }

  /** One upstream chunk: the first piece to send (the rest queued in `out`), or undefined for none yet. */
  private take(chunk: Uint8Array): Uint8Array | undefined {
    try {
      this.meter.observe(chunk);
    } catch (e) {
      // The caller already has the start of the line: end it, so the error event stands as its own event.
      this.failure = { error: e };
      return EVENT_END;
    }
    this.ending?.observe(chunk, this.meter.piece);
    let c = chunk;
    if (this.s === undefined) {
      // `error` whole in this piece, or begun in the last four characters before it (which a piece shorter
      // than that carries on).
      const piece = this.meter.piece;
      const tail = this.tail;
      if (!this.scrub || !(piece.includes('error') || (tail !== '' && (tail + piece.slice(0, 4)).includes('error')))) {
        this.tail = piece.length >= 4 ? piece.slice(-4) : (tail + piece).slice(-4);
        return c;
      }
      this.s = this.scrub();
      let cont = 0; // continuation bytes of a character begun in the chunk before, which went out as it came
      while (cont < c.length && (c[cont]! & 0xc0) === 0x80) cont++;
      if (cont > 0) {
        this.out.push(c.subarray(0, cont));
        c = c.subarray(cont);
      }
    }
    const bytes = this.held.length === 0 ? c : concatBytes(this.held, c);
    const end = bytes.lastIndexOf(0x0a) + 1;
    this.held = bytes.slice(end);
    if (end > 0) this.out.push(encoder.encode(this.s(lineDecoder.decode(bytes.subarray(0, end)))));
    return this.out.shift();
  }
}
