// Content capture under `content_mode: full` (docs/operations.md "Tracing"): the prompt (the request body as
// sent upstream) and the completion (the assistant text the caller received), each cut to the exporter's
// `content_max_bytes`. The caller's credentials never reach a span: content is taken from bodies, never
// headers, and passes the request's scrubber (src/http/scrub.ts) before it is kept.

import { Utf8Stream } from '../util/utf8-stream.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** The shortest string the structural shrink still cuts (below it, the plain cut takes over). */
const MIN_STRING_CUT = 32;

function byteLength(s: string): number {
  // Most content is ASCII: its length is its byte count, without encoding it.
  let ascii = true;
  for (let i = 0; i < s.length && ascii; i++) if (s.charCodeAt(i) > 0x7f) ascii = false;
  return ascii ? s.length : encoder.encode(s).length;
}

/** `s` cut to at most `max` UTF-8 bytes, on a character boundary. */
export function cutUtf8(s: string, max: number): string {
  const bytes = encoder.encode(s);
  if (bytes.length <= max) return s;
  let end = max;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // back off a continuation byte
  return decoder.decode(bytes.subarray(0, end));
}

function shrinkStrings(v: unknown, limit: number): unknown {
  if (typeof v === 'string') {
    const n = byteLength(v);
    return n > limit ? `${cutUtf8(v, limit)}...[aisix: truncated, ${n} bytes total]` : v;
  }
  if (Array.isArray(v)) return v.map((x) => shrinkStrings(x, limit));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = shrinkStrings(x, limit);
    return out;
  }
  return v;
}

/**
 * `text` within `maxBytes` UTF-8 bytes. Oversized JSON is shrunk structurally first (long strings end in
 * `...[aisix: truncated, N bytes total]`, so the document stays valid JSON), anything else is cut on a
 * character boundary; `truncated` says whether anything was cut.
 */
export function capContent(text: string, maxBytes: number): { text: string; truncated: boolean } {
  if (byteLength(text) <= maxBytes) return { text, truncated: false };
  const first = text.charCodeAt(0);
  if (first === 0x7b || first === 0x5b) { // `{` or `[`
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      doc = undefined;
    }
    if (doc !== undefined) {
      for (let limit = Math.floor(maxBytes / 2); limit >= MIN_STRING_CUT; limit = Math.floor(limit / 2)) {
        const shrunk = JSON.stringify(shrinkStrings(doc, limit));
        if (byteLength(shrunk) <= maxBytes) return { text: shrunk, truncated: true };
      }
    }
  }
  return { text: cutUtf8(text, maxBytes), truncated: true };
}

/** The assistant text of a whole answer (OpenAI chat or completions, Anthropic messages); '' when none. */
export function completionOfAnswer(body: string): string {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(body);
  } catch {
    return '';
  }
  const choice = (doc.choices as Record<string, unknown>[] | undefined)?.[0];
  if (choice) {
    const msg = choice.message as { content?: unknown } | undefined;
    if (typeof msg?.content === 'string') return msg.content;
    if (typeof choice.text === 'string') return choice.text;
  }
  if (Array.isArray(doc.content)) {
    return doc.content.map((b: { type?: string; text?: string }) => (b.type === 'text' ? b.text ?? '' : '')).join('');
  }
  return '';
}

/**
 * Collects the assistant text of an SSE stream as its chunks go by (OpenAI `choices[0].delta.content` /
 * `choices[0].text`, Anthropic `content_block_delta` text), up to `maxBytes`; beyond it the rest is only
 * counted as cut.
 */
export class CompletionCollector {
  private text = '';
  private pending = '';
  /** This stream's own: a character split across chunks must not meet another stream's bytes. */
  private readonly decoder = new Utf8Stream();
  truncated = false;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Uint8Array): void {
    if (this.text.length >= this.maxBytes) {
      this.truncated = true;
      return;
    }
    this.pending += this.decoder.decode(chunk);
    let nl: number;
    while ((nl = this.pending.indexOf('\n')) >= 0) {
      const line = this.pending.slice(0, nl).trim();
      this.pending = this.pending.slice(nl + 1);
      if (line.startsWith('data:')) this.data(line.slice(5).trim());
    }
  }

  private data(payload: string): void {
    if (payload === '' || payload === '[DONE]') return;
    let ev: Record<string, unknown>;
    try {
      ev = JSON.parse(payload);
    } catch {
      return;
    }
    const choice = (ev.choices as Record<string, unknown>[] | undefined)?.[0];
    const delta = choice?.delta as { content?: unknown } | undefined;
    const piece = typeof delta?.content === 'string'
      ? delta.content
      : typeof choice?.text === 'string'
      ? choice.text
      : ev.type === 'content_block_delta'
      ? (ev.delta as { text?: unknown } | undefined)?.text
      : undefined;
    if (typeof piece === 'string') this.text += piece;
  }

  /** The text so far. */
  get completion(): string {
    return this.text;
  }
}
