// The usage an OpenAI-wire stream reports when Sluice asked for it behind the caller's back: a caller
// that sent no `stream_options` still has its tokens counted (limits, metrics, spend), and does not get a
// chunk it never asked for (docs/routing.md "Streams Sluice edits").
import { editSse, eventJson } from './sse-edit.ts';
import { indexOfBytes } from '../util/bytes.ts';
import { isRecord, usageFromOpenai } from './translate/shared.ts';
import type { TokenCounts } from './types.ts';

/** The `stream_options` Sluice adds to a streamed chat or legacy-completions request that sent none. */
export const INJECTED_STREAM_OPTIONS = { include_usage: true } as const;

/** Whether Sluice asks for usage on this request: a stream whose caller sent no `stream_options` at all. */
export function injectsUsage(body: Record<string, unknown>, stream: boolean): boolean {
  return stream && body.stream_options === undefined;
}

const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const USAGE_KEY = new TextEncoder().encode('"usage"');

/** `USAGE_OBJECT` on bytes: a `"usage"` key whose value is an object. */
function hasUsageObject(b: Uint8Array): boolean {
  for (let i = indexOfBytes(b, USAGE_KEY); i >= 0; i = indexOfBytes(b, USAGE_KEY, i + 1)) {
    let j = skipSpace(b, i + USAGE_KEY.length);
    if (b[j] !== 0x3a /* : */) continue;
    j = skipSpace(b, j + 1);
    if (b[j] === 0x7b /* { */) return true;
  }
  return false;
}

function skipSpace(b: Uint8Array, i: number): number {
  while (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d) i++;
  return i;
}

/** A chunk that carries nothing for the caller: no choice with a delta, text or finish reason. */
function usageOnly(j: Record<string, unknown>): boolean {
  const choices = Array.isArray(j.choices) ? j.choices : [];
  return choices.every((c) => {
    if (!isRecord(c)) return true;
    if (c.finish_reason !== null && c.finish_reason !== undefined) return false;
    if (typeof c.text === 'string' && c.text !== '') return false;
    const d = isRecord(c.delta) ? c.delta : {};
    return Object.values(d).every((v) => v === null || v === undefined || v === '');
  });
}

/**
 * The stream without its usage-only chunk; `onUsage` gets every usage the stream reports (the last one is
 * the answer's). A usage that arrives on a chunk with content stays in it (the caller loses nothing).
 */
export function withoutInjectedUsage(
  chunks: AsyncIterable<Uint8Array>,
  onUsage: (usage: TokenCounts) => void,
  maxEventBytes?: number,
): AsyncGenerator<Uint8Array> {
  return editSse(chunks, {
    mayTouch: (text) => USAGE_OBJECT.test(text),
    // Most chunks carry no usage object: they pass without being decoded.
    whole: (chunk) => hasUsageObject(chunk) ? undefined : chunk,
    edit(event) {
      const j = eventJson(event);
      const usage = j && usageFromOpenai(j.usage);
      if (!j || !usage) return undefined;
      onUsage(usage);
      return usageOnly(j) ? null : undefined;
    },
  }, maxEventBytes);
}
