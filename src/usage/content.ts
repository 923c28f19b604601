// Content on usage records under `content_mode: full` (docs/usage-events.md "Content"): the prompt as sent
// upstream (after input masking) and the text the caller received, each cut to an exporter's
// `content_max_bytes` by AISIX's ladder, which keeps a JSON document valid JSON: compact it; then, rung by
// rung, cap long strings (a `data:` URI becomes a marker), keep an array's head and tail around a marker
// object, sort object keys; the first rung that fits wins. Anything else is cut on a character boundary.
import { completionOfAnswer } from '../telemetry/content.ts';

/** What one request's terminal record may carry. */
export interface CapturedContent {
  prompt: string;
  response: string;
}

/** One exporter's copy: each text within its cap, and whether any was cut. */
export interface CappedContent {
  prompt: string;
  response: string;
  truncated: boolean;
}

/** AISIX's rungs: (string cap in bytes, array head, array tail). */
const LADDER: readonly (readonly [number, number, number])[] = [
  [8192, 64, 16],
  [2048, 24, 8],
  [512, 10, 4],
  [128, 5, 2],
  [32, 2, 1],
];

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function bytes(s: string): number {
  let ascii = true;
  for (let i = 0; i < s.length && ascii; i++) if (s.charCodeAt(i) > 0x7f) ascii = false;
  return ascii ? s.length : encoder.encode(s).length;
}

/** `s` within `max` UTF-8 bytes, cut on a character boundary. */
export function cutUtf8(s: string, max: number): string {
  const b = encoder.encode(s);
  if (b.length <= max) return s;
  let end = max;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  return decoder.decode(b.subarray(0, end));
}

function reduce(v: unknown, [cap, head, tail]: readonly [number, number, number]): unknown {
  if (typeof v === 'string') {
    const n = bytes(v);
    if (n <= cap) return v;
    if (v.startsWith('data:') && v.includes(';base64,')) return `[aisix: base64 data uri omitted, ${n} bytes]`;
    return `${cutUtf8(v, cap)}...[aisix: truncated, ${n} bytes total]`;
  }
  if (Array.isArray(v)) {
    const r = (x: unknown) => reduce(x, [cap, head, tail]);
    if (v.length <= head + tail + 1) return v.map(r);
    const omitted = v.length - head - tail;
    return [...v.slice(0, head).map(r), { _aisix_truncated: true, omitted_items: omitted }, ...v.slice(-tail).map(r)];
  }
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = reduce((v as Record<string, unknown>)[k], [cap, head, tail]);
    return out;
  }
  return v;
}

/** `text` within `maxBytes`, and whether anything was cut. */
export function truncateContent(text: string, maxBytes: number): { text: string; truncated: boolean } {
  if (bytes(text) <= maxBytes) return { text, truncated: false };
  const c = text.trimStart().charCodeAt(0);
  if (c === 0x7b || c === 0x5b) { // `{` or `[`
    let doc: unknown;
    let parsed = true;
    try {
      doc = JSON.parse(text);
    } catch {
      parsed = false;
    }
    if (parsed) {
      const compact = JSON.stringify(doc);
      if (bytes(compact) <= maxBytes) return { text: compact, truncated: true };
      for (const rung of LADDER) {
        const reduced = JSON.stringify(reduce(doc, rung));
        if (bytes(reduced) <= maxBytes) return { text: reduced, truncated: true };
      }
    }
  }
  return { text: cutUtf8(text, maxBytes), truncated: true };
}

/** The record's copy for an exporter whose cap is `maxBytes`. */
export function capFor(c: CapturedContent, maxBytes: number): CappedContent {
  const p = truncateContent(c.prompt, maxBytes);
  const r = truncateContent(c.response, maxBytes);
  return { prompt: p.text, response: r.text, truncated: p.truncated || r.truncated };
}

/**
 * What a whole answer's record captures: an embeddings answer's JSON as it is (AISIX's), otherwise the text the
 * caller received — chat, completions and messages (src/telemetry/content.ts), a Responses answer's output text.
 */
export function capturedAnswer(handler: string, body: string): string {
  if (handler === 'embeddings') return body;
  if (handler !== 'responses') return completionOfAnswer(body);
  try {
    const doc = JSON.parse(body) as { output?: { content?: { type?: string; text?: unknown }[] }[] };
    return (doc.output ?? []).flatMap((o) => o.content ?? [])
      .map((c) => (c.type === 'output_text' && typeof c.text === 'string' ? c.text : '')).join('');
  } catch {
    return '';
  }
}
