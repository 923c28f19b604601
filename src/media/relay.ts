// A relayed answer's body (docs/media-endpoints.md "Answers"): the upstream's bytes handed on as they come, in
// constant memory, with a copy of a small textual answer kept for its usage. Audio has no in-band error: a
// failure after the head cuts the body short, as AISIX's relay does.
import { type StreamEnd, UpstreamStreamError } from '../providers/types.ts';
import { joinBytes } from '../util/bytes.ts';

/** The most of a textual answer kept to read its usage (a transcript is far smaller; audio is never kept). */
export const MAX_KEPT_ANSWER_BYTES = 4_194_304;

export interface RelayHooks {
  /** Called once, when the body ended: whole, failed, or left by the caller (with the failure's words). */
  onEnd(end: StreamEnd, kept: string | undefined, detail?: string): void;
  /** Stop the upstream (the caller left). */
  abort(): void;
}

/** Whether an answer of this content type is text whose usage can be read (JSON, plain text, SSE). */
export function keepsText(contentType: string | undefined): boolean {
  const t = (contentType ?? '').toLowerCase();
  return t.includes('json') || t.startsWith('text/');
}

/**
 * The caller's body: `first`, then the rest of `it`. `keep`: a copy of the bytes is kept (up to
 * `MAX_KEPT_ANSWER_BYTES`) and handed to `onEnd` as text.
 */
export function relayBody(
  first: Uint8Array,
  it: AsyncIterator<Uint8Array>,
  keep: boolean,
  hooks: RelayHooks,
): ReadableStream<Uint8Array> {
  const kept: Uint8Array[] | undefined = keep ? [] : undefined;
  let keptBytes = 0;
  let overflow = false;
  const keepChunk = (c: Uint8Array) => {
    if (!kept || overflow) return;
    keptBytes += c.byteLength;
    if (keptBytes > MAX_KEPT_ANSWER_BYTES) {
      overflow = true;
      kept.length = 0;
    } else kept.push(c);
  };
  let ended = false;
  const end = (why: StreamEnd, detail?: string) => {
    if (ended) return;
    ended = true;
    const text = kept && !overflow ? new TextDecoder().decode(joinBytes(kept, keptBytes)) : undefined;
    hooks.onEnd(why, text, detail);
  };
  return new ReadableStream<Uint8Array>({
    start(c) {
      keepChunk(first);
      c.enqueue(first);
    },
    async pull(c) {
      let r: IteratorResult<Uint8Array>;
      try {
        r = await it.next();
      } catch (e) {
        const kind = e instanceof UpstreamStreamError ? e.kind : 'upstream_error';
        c.error(e);
        end(kind, (e as Error)?.message ?? String(e));
        return;
      }
      if (r.done) {
        c.close();
        end('complete');
        return;
      }
      keepChunk(r.value);
      c.enqueue(r.value);
    },
    cancel() {
      hooks.abort();
      void it.return?.();
      end('client_closed');
    },
  });
}
