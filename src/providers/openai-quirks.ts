// OpenAI-compatible vendors' answers brought to OpenAI's shape (docs/aisix-compatibility.md "Providers"):
// OpenRouter-style `reasoning` becomes `reasoning_content` (DeepSeek's name, which OpenAI SDK users read),
// and DeepSeek's top-level `prompt_cache_hit_tokens` is mirrored into `prompt_tokens_details.cached_tokens`.
// Answers that mention neither pass through as bytes: only events carrying one are parsed.
import { isRecord, type Json, num } from './translate/shared.ts';
import type { ProviderAdapter, ProviderResult } from './types.ts';
import { concatBytes, hasAt } from '../util/bytes.ts';

const MARKERS = ['"reasoning"', '"prompt_cache_hit_tokens"'];

/** `message` or `delta` with `reasoning` moved to `reasoning_content` (an existing non-empty one wins). */
function liftReasoning(m: unknown): void {
  if (!isRecord(m) || !('reasoning' in m)) return;
  const r = m.reasoning;
  delete m.reasoning;
  const has = typeof m.reasoning_content === 'string' && m.reasoning_content !== '';
  if (!has && typeof r === 'string' && r !== '') m.reasoning_content = r;
}

function mirrorCacheHits(u: unknown): void {
  if (!isRecord(u)) return;
  const hits = num(u.prompt_cache_hit_tokens);
  if (!hits) return;
  const details = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  if (!num(details.cached_tokens)) u.prompt_tokens_details = { ...details, cached_tokens: hits };
}

/** A completion or chunk with the vendor quirks normalised (in place). */
export function normaliseAnswer(j: Json): Json {
  for (const c of Array.isArray(j.choices) ? j.choices : []) {
    if (!isRecord(c)) continue;
    liftReasoning(c.message);
    liftReasoning(c.delta);
  }
  mirrorCacheHits(j.usage);
  return j;
}

const mentionsQuirk = (text: string) => MARKERS.some((m) => text.includes(m));

function normaliseJson(r: Extract<ProviderResult, { kind: 'response' }>): ProviderResult {
  if (r.status < 200 || r.status >= 300 || !mentionsQuirk(r.body)) return r;
  try {
    const v: unknown = JSON.parse(r.body);
    return isRecord(v) ? { ...r, body: JSON.stringify(normaliseAnswer(v)) } : r;
  } catch {
    return r;
  }
}

const encoder = new TextEncoder();
const LF = 10;
const CR = 13;

/** The end of the last event boundary (`\n\n`, `\r\n\r\n` or `\r\r`) in `b`, or -1. */
function lastBoundaryEnd(b: Uint8Array): number {
  for (let i = b.length - 1; i > 0; i--) {
    const c = b[i]!;
    if ((c === LF && b[i - 1] === LF) || (c === CR && b[i - 1] === CR)) return i + 1;
    if (c === LF && b[i - 1] === CR && i >= 3 && b[i - 2] === LF && b[i - 3] === CR) return i + 1;
  }
  return -1;
}

/** Whole events' text with every event that mentions a quirk re-encoded; the others kept as they were. */
function rewriteEvents(text: string): string {
  return text.split(/(\r\n\r\n|\n\n|\r\r)/).map((block) => {
    if (!mentionsQuirk(block)) return block;
    const lines = block.split(/\r\n|\n|\r/);
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    try {
      const v: unknown = JSON.parse(data);
      if (!isRecord(v)) return block;
      const others = lines.filter((l) => !l.startsWith('data:'));
      return [...others, `data: ${JSON.stringify(normaliseAnswer(v))}`].join('\n');
    } catch {
      return block;
    }
  }).join('');
}

const PATTERNS = MARKERS.map((m) => encoder.encode(m));

/** Whether `b` contains one of the markers' bytes: scanned without decoding, it runs on every chunk. */
function mentionsQuirkBytes(b: Uint8Array): boolean {
  // One pass: every marker starts with '"', where each is tried.
  for (let i = 0; i < b.length; i++) {
    if (b[i] !== 34) continue;
    for (const p of PATTERNS) if (hasAt(b, i, p)) return true;
  }
  return false;
}

const utf8 = new TextDecoder();

/**
 * The stream with quirky events rewritten. Whole events go on as soon as they are complete; a partial
 * event's bytes wait for the rest, so an event is never half forwarded before it could be rewritten. An
 * iterator rather than a generator: it runs once per chunk of every OpenAI-wire stream.
 */
export class NormalisedStream implements AsyncIterableIterator<Uint8Array> {
  private held: Uint8Array | undefined;
  private done = false;

  constructor(private readonly source: AsyncIterator<Uint8Array>) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    while (!this.done) {
      const r = await this.source.next();
      if (r.done) {
        this.done = true;
        const rest = this.held;
        this.held = undefined;
        if (rest) return { done: false, value: this.rewritten(rest) };
        break;
      }
      const bytes = this.held ? concatBytes(this.held, r.value) : r.value;
      const end = lastBoundaryEnd(bytes);
      if (end < 0) {
        this.held = bytes;
        continue;
      }
      this.held = end < bytes.length ? bytes.slice(end) : undefined;
      return { done: false, value: this.rewritten(end < bytes.length ? bytes.subarray(0, end) : bytes) };
    }
    return { done: true, value: undefined };
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    this.done = true;
    this.held = undefined;
    void this.source.return?.();
    return Promise.resolve({ done: true, value: undefined });
  }

  private rewritten(whole: Uint8Array): Uint8Array {
    return mentionsQuirkBytes(whole) ? encoder.encode(rewriteEvents(utf8.decode(whole))) : whole;
  }
}

/** An OpenAI-wire chat answer (JSON or SSE) with the vendor quirks normalised. */
export function normaliseChatResult(r: ProviderResult): ProviderResult {
  if (r.kind === 'response') return normaliseJson(r);
  if (r.kind === 'stream') return { ...r, chunks: new NormalisedStream(r.chunks[Symbol.asyncIterator]()) };
  return r;
}

/** `adapter` with its chat answers normalised. */
export function withVendorQuirks(adapter: ProviderAdapter): ProviderAdapter {
  return {
    name: adapter.name,
    supports: adapter.supports,
    async call(c) {
      const r = await adapter.call(c);
      return c.endpoint === 'chat' ? normaliseChatResult(r) : r;
    },
  };
}
