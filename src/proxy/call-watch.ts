// What a request hook may watch of one model call beyond its record (docs/architecture.md "Where to add"): the
// upstream attempts, the body dispatched and the answer the caller got. Traces (src/telemetry/request-hooks.ts)
// and the usage events (src/usage/watch.ts) watch; the answer path tells a call's watch and knows nothing of
// what it does. A call nobody watches has none, and the answer path does nothing more for it.
import type { Scrub } from '../http/scrub.ts';
import type { AttemptWatch } from '../routing/dispatch-types.ts';
import { slotKey } from './call-state.ts';

export interface CallWatch {
  /** The call's trace id, when a trace keeps it (the usage events name it). */
  readonly traceId?: string;
  /** What dispatch tells of each upstream attempt; one watcher of a call at most (its `traceparent` goes upstream). */
  readonly attempts?: AttemptWatch;
  /** The body about to be dispatched; `scrub` gives the call's scrubber (built on first use). */
  sending(body: Record<string, unknown>, scrub: () => Scrub): void;
  /** A whole answer the caller gets with a 2xx: its body. */
  answered(body: string, scrub: () => Scrub): void;
  /** A streamed answer begins: what sees each of its chunks as the upstream sent them, if anything. */
  streaming(): ((chunk: Uint8Array) => void) | undefined;
  /** The stream ended; `finishReason` is the first its events gave. */
  streamEnded(finishReason: string | undefined, scrub: () => Scrub): void;
}

/** The call's watch, set by the tracking middleware from its hooks' `begin` (track.ts). */
export const CALL_WATCH = slotKey<CallWatch>('call watch');

/** Two hooks' watches of one call, each told everything in turn; the attempts are the first's that watches them. */
export function joinWatches(a: CallWatch, b: CallWatch): CallWatch {
  return {
    traceId: a.traceId ?? b.traceId,
    attempts: a.attempts ?? b.attempts,
    sending(body, scrub) {
      a.sending(body, scrub);
      b.sending(body, scrub);
    },
    answered(body, scrub) {
      a.answered(body, scrub);
      b.answered(body, scrub);
    },
    streaming() {
      const x = a.streaming();
      const y = b.streaming();
      return x && y ? (chunk) => (x(chunk), y(chunk)) : x ?? y;
    },
    streamEnded(finishReason, scrub) {
      a.streamEnded(finishReason, scrub);
      b.streamEnded(finishReason, scrub);
    },
  };
}
