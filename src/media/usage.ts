// What the audio, image and rerank answers say they used, on AISIX's basis (docs/media-endpoints.md
// "Accounting"): rerank's input tokens in any of its vendors' shapes, a transcription's audio seconds (from the
// answer, else from a WAV upload's header), a speech request's characters. Pure: bytes and strings in, numbers out.
import { joinBytes } from '../util/bytes.ts';

/** `n` when it is a non-negative finite number. */
function count(n: unknown): number | undefined {
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined;
}

function objectOf(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Record<string, unknown> : undefined;
}

/**
 * A rerank answer's input tokens: `usage.prompt_tokens` | `usage.input_tokens` | `usage.total_tokens` (OpenAI-
 * compatible, Jina) | `meta.billed_units.input_tokens` (Cohere); undefined when it states none.
 */
export function rerankTokens(body: string): number | undefined {
  let v: Record<string, unknown> | undefined;
  try {
    v = objectOf(JSON.parse(body));
  } catch {
    return undefined;
  }
  const usage = objectOf(v?.usage);
  const billed = objectOf(objectOf(v?.meta)?.billed_units);
  return count(usage?.prompt_tokens) ?? count(usage?.input_tokens) ?? count(usage?.total_tokens) ??
    count(billed?.input_tokens);
}

const SECONDS = /"usage"\s*:\s*\{[^{}]*"seconds"\s*:\s*([0-9]+(?:\.[0-9]+)?)/;
const DURATION = /"duration"\s*:\s*([0-9]+(?:\.[0-9]+)?)/;

/**
 * The audio a transcription or translation answer covered, in seconds: `usage.seconds` (whisper's
 * `{"type":"duration"}` usage), else the top-level `duration` of `verbose_json`; undefined when neither is
 * there (text, SRT and VTT answers say nothing).
 */
export function audioSeconds(answer: string): number | undefined {
  const m = SECONDS.exec(answer) ?? DURATION.exec(answer);
  return m ? Number(m[1]) : undefined;
}

/** The characters of a speech request's `input` (the basis TTS is priced on), in code points. */
export function speechCharacters(body: Record<string, unknown>): number | undefined {
  const input = body.input;
  if (typeof input !== 'string') return undefined;
  let n = 0;
  for (const _ of input) n++;
  return n;
}

/** The most of an upload's head read to find a WAV file's format and data chunks. */
const PROBE_BYTES = 65_536;

/**
 * The duration of a WAV (RIFF/WAVE) upload from its header: the `data` chunk's size over the `fmt ` chunk's
 * byte rate; undefined for any other container or a header it cannot read. `head` is the file's first bytes.
 */
export function wavSeconds(head: Uint8Array): number | undefined {
  const ascii = (at: number) => String.fromCharCode(head[at]!, head[at + 1]!, head[at + 2]!, head[at + 3]!);
  if (head.length < 12 || ascii(0) !== 'RIFF' || ascii(8) !== 'WAVE') return undefined;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  let byteRate: number | undefined;
  for (let at = 12; at + 8 <= head.length;) {
    const id = ascii(at);
    const size = view.getUint32(at + 4, true);
    if (id === 'fmt ' && at + 16 <= head.length) byteRate = view.getUint32(at + 16, true);
    if (id === 'data') return byteRate ? Math.round((size / byteRate) * 1000) / 1000 : undefined;
    at += 8 + size + (size % 2);
  }
  return undefined;
}

/** The first `PROBE_BYTES` of a part's chunks, joined. */
export function headOf(chunks: readonly Uint8Array[]): Uint8Array {
  const parts: Uint8Array[] = [];
  let size = 0;
  for (const c of chunks) {
    if (size >= PROBE_BYTES) break;
    const piece = c.subarray(0, PROBE_BYTES - size);
    parts.push(piece);
    size += piece.byteLength;
  }
  return joinBytes(parts, size);
}
