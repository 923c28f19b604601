// OpenAI-compatible vendors' answers brought to OpenAI's shape (docs/aisix-compatibility.md "Providers"):
// OpenRouter-style `reasoning` becomes `reasoning_content` (DeepSeek's name, which OpenAI SDK users read),
// and DeepSeek's top-level `prompt_cache_hit_tokens` is mirrored into `prompt_tokens_details.cached_tokens`.
// Answers that mention neither pass through as bytes: only events carrying one are parsed.
import { isRecord, type Json, num } from './translate/shared.ts';
import type { ProviderAdapter, ProviderResult } from './types.ts';
import { eventKeys, HAS_QUIRK, QUIRK_KEYS } from './event-keys.ts';
import { editSse, type SseEdit } from './sse-edit.ts';

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

/** Each quirk key without its opening quote: JSON is full of quotes, so a search starting from one is slow. */
const QUIRK_TAILS = QUIRK_KEYS.map((k) => k.slice(1));

/** Whether `text` holds `"` + `tail` (a quirk key, quoted). */
function mentions(text: string, tail: string): boolean {
  for (let at = text.indexOf(tail, 1); at !== -1; at = text.indexOf(tail, at + 1)) {
    if (text.charCodeAt(at - 1) === 0x22 /* " */) return true;
  }
  return false;
}

const mentionsQuirk = (text: string) => mentions(text, QUIRK_TAILS[0]!) || mentions(text, QUIRK_TAILS[1]!);

function normaliseJson(r: Extract<ProviderResult, { kind: 'response' }>): ProviderResult {
  if (r.status < 200 || r.status >= 300 || !mentionsQuirk(r.body)) return r;
  try {
    const v: unknown = JSON.parse(r.body);
    return isRecord(v) ? { ...r, body: JSON.stringify(normaliseAnswer(v)) } : r;
  } catch {
    return r;
  }
}

/** One event mentioning a quirk re-encoded normalised; undefined when its data is not a JSON object. */
function rewrittenEvent(event: string): string | undefined {
  const lines = event.split(/\r\n|\n|\r/);
  const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
  try {
    const v: unknown = JSON.parse(data);
    if (!isRecord(v)) return undefined;
    const others = lines.filter((l) => !l.startsWith('data:'));
    return [...others, `data: ${JSON.stringify(normaliseAnswer(v))}`].join('\n');
  } catch {
    return undefined;
  }
}

/** Events that mention a quirk are rewritten; whole events go on as soon as they are complete. */
const QUIRKS: SseEdit = {
  mayTouch: mentionsQuirk,
  edit: rewrittenEvent,
  event: (bytes) => (eventKeys(bytes) & HAS_QUIRK) === 0 ? bytes : undefined,
};

/** An OpenAI-wire chat stream with quirky events rewritten. */
export function normalisedStream(
  chunks: AsyncIterable<Uint8Array>,
  maxEventBytes?: number,
): AsyncIterableIterator<Uint8Array> {
  return editSse(chunks, QUIRKS, maxEventBytes);
}

/** An OpenAI-wire chat answer (JSON or SSE) with the vendor quirks normalised. */
export function normaliseChatResult(r: ProviderResult, maxEventBytes?: number): ProviderResult {
  if (r.kind === 'response') return normaliseJson(r);
  if (r.kind === 'stream') return { ...r, chunks: normalisedStream(r.chunks, maxEventBytes) };
  return r;
}

/** `adapter` with its chat answers normalised. */
export function withVendorQuirks(adapter: ProviderAdapter): ProviderAdapter {
  return {
    name: adapter.name,
    supports: adapter.supports,
    // Not an async function: another endpoint's answer is the adapter's own promise, a chat answer one `then`.
    call(c) {
      try {
        if (c.endpoint !== 'chat') return adapter.call(c);
        const maxEventBytes = c.maxSseEventBytes;
        return adapter.call(c).then((r) => normaliseChatResult(r, maxEventBytes));
      } catch (e) {
        return Promise.reject(e);
      }
    },
  };
}
