// The usage an OpenAI-wire stream reports when Sluice asked for it behind the caller's back: a caller
// that sent no `stream_options` still has its tokens counted (limits, metrics, spend), and does not get a
// chunk it never asked for (docs/routing.md "Streams Sluice edits").
import { editSse, eventJson } from './sse-edit.ts';
import { eventKeys, HAS_USAGE_OBJECT } from './event-keys.ts';
import { isRecord, usageFromOpenai } from './translate/shared.ts';
import type { TokenCounts } from './types.ts';

/** The `stream_options` Sluice adds to a streamed chat or legacy-completions request that sent none. */
export const INJECTED_STREAM_OPTIONS = { include_usage: true } as const;

/** Whether Sluice asks for usage on this request: a stream whose caller sent no `stream_options` at all. */
export function injectsUsage(body: Record<string, unknown>, stream: boolean): boolean {
  return stream && body.stream_options === undefined;
}

const USAGE_OBJECT = /"usage"\s*:\s*\{/;
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
): AsyncIterableIterator<Uint8Array> {
  return editSse(chunks, {
    mayTouch: (text) => USAGE_OBJECT.test(text),
    // Most events carry no usage object: they pass without being decoded.
    event: (bytes) => (eventKeys(bytes) & HAS_USAGE_OBJECT) === 0 ? bytes : undefined,
    edit(event) {
      const j = eventJson(event);
      const usage = j && usageFromOpenai(j.usage);
      if (!j || !usage) return undefined;
      onUsage(usage);
      return usageOnly(j) ? null : undefined;
    },
  }, maxEventBytes);
}
