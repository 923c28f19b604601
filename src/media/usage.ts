// What the audio, image and rerank answers say they used, on AISIX's basis (docs/media-endpoints.md
// "Accounting"): rerank's input tokens in any of its vendors' shapes, a transcription's audio seconds, a speech
// request's characters. Pure: strings in, numbers out.

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
