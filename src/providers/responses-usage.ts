// The usage of a native Responses stream, read in passing from its terminal event (`response.completed`,
// `response.incomplete` or `response.failed`, each carrying `response.usage`), whose shape the proxy's
// chat and Messages meter does not know. The bytes go to the caller untouched.
import { editSse, eventJson } from './sse-edit.ts';
import { isRecord, usageFromResponses } from './translate/shared.ts';
import type { TokenCounts } from './types.ts';

const TERMINAL = /"response\.(completed|incomplete|failed)"/;

export function observeResponsesUsage(
  chunks: AsyncIterable<Uint8Array>,
  onUsage: (usage: TokenCounts) => void,
  maxEventBytes?: number,
): AsyncIterableIterator<Uint8Array> {
  return editSse(chunks, {
    mayTouch: (text) => TERMINAL.test(text),
    edit(event) {
      const j = eventJson(event);
      const usage = j && isRecord(j.response) ? usageFromResponses(j.response.usage) : undefined;
      if (usage) onUsage(usage);
      return undefined;
    },
  }, maxEventBytes);
}
