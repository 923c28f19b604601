// SSE pass-through: upstream chunks are forwarded as they arrive (pull-based, so the first chunk reaches
// the caller before the upstream finishes and a slow caller slows the upstream read), with `:\n\n`
// keep-alive comments while the upstream is silent, and a proper SSE error event when the upstream fails
// after the first byte — never a silently truncated stream.

import { type StreamEnd, UpstreamStreamError } from '../providers/types.ts';
import { sseErrorEvent, type StreamErrorKind } from '../http/sse.ts';
import { IdleTimer } from '../util/idle-timer.ts';
import type { Scrub } from '../http/scrub.ts';
import { MAX_UPSTREAM_MESSAGE } from '../providers/upstream-error.ts';

const KEEPALIVE = new TextEncoder().encode(':\n\n');

export type { StreamEnd };

export interface PumpOptions {
  chunks: AsyncIterable<Uint8Array>;
  /** 0 = no keep-alive comments. The silence deadline between chunks is the dispatcher's (stream_timeout). */
  keepaliveMs: number;
  /** Abort the upstream request (the caller went away). */
  abortUpstream(): void;
  /**
   * Called exactly once, when the last byte was handed over or the stream ended otherwise (with why, and for
   * the log the failure's detail, which may be a runtime's words the caller never sees).
   */
  onEnd(end: StreamEnd, detail?: string): void;
  /** The caller's wire's SSE error event; default OpenAI's `data: {"error":{…}}` (src/http/sse.ts). */
  errorEvent?: (type: StreamErrorKind, message: string) => Uint8Array;
  /**
   * Applied to every message an error event carries (src/http/scrub.ts), which also cuts it once scrubbed;
   * default: only the cut.
   */
  scrub?: Scrub;
  /** Called once, when the first upstream chunk is handed to the caller (keep-alive comments do not count). */
  onFirstByte?: () => void;
  /** The keep-alive timer; injectable so a test can observe it. Default `IdleTimer`. */
  timer?: (ms: number, onIdle: () => void) => KeepaliveTimer;
}

/** What the pump needs of a keep-alive timer (util/idle-timer.ts's `IdleTimer`). */
export interface KeepaliveTimer {
  touch(): void;
  pause(): void;
  stop(): void;
}

const idleTimer = (ms: number, onIdle: () => void): KeepaliveTimer => new IdleTimer(ms, onIdle);

interface PumpState {
  ended: boolean;
  ctrl: ReadableStreamDefaultController<Uint8Array> | undefined;
}

/**
 * The keep-alive timer's action, built apart from the pump's frame: a closure of that frame kept in the timer
 * kept every stream's objects alive through V8's young-generation collections on Deno (docs/performance.md
 * "Streams and the young generation").
 */
function keepaliveComment(s: PumpState): () => void {
  return () => {
    if (!s.ended) s.ctrl?.enqueue(KEEPALIVE);
  };
}

const TRANSPORT_FAILED = 'upstream stream failed: the connection ended before the stream did';
const cutOnly: Scrub = (s, max) => max !== undefined && s.length > max ? s.slice(0, max) : s;

export function pumpSse(o: PumpOptions): ReadableStream<Uint8Array> {
  const it = o.chunks[Symbol.asyncIterator]();
  const state: PumpState = { ended: false, ctrl: undefined };
  let sent = false;
  const end = (why: StreamEnd, message?: string) => {
    if (state.ended) return;
    state.ended = true;
    keepalive?.stop();
    o.onEnd(why, message);
  };
  // One timer for the stream's life: a comment goes out only while the caller waits on a silent upstream.
  const keepalive = o.keepaliveMs > 0 ? (o.timer ?? idleTimer)(o.keepaliveMs, keepaliveComment(state)) : undefined;
  keepalive?.pause();

  return new ReadableStream<Uint8Array>({
    start(c) {
      state.ctrl = c;
    },
    async pull(c) {
      let r: IteratorResult<Uint8Array>;
      keepalive?.touch();
      try {
        r = await it.next();
      } catch (e) {
        // A typed failure (a silence deadline, an error the upstream reported in-stream) keeps its kind and
        // message (scrubbed); anything else is the transport's, whose words (a runtime's advice text
        // included) go to the log only.
        const typed = e instanceof UpstreamStreamError;
        const kind = typed ? e.kind : 'upstream_error';
        const message = typed ? (o.scrub ?? cutOnly)(e.message, MAX_UPSTREAM_MESSAGE) : TRANSPORT_FAILED;
        c.enqueue((o.errorEvent ?? sseErrorEvent)(kind, message));
        c.close();
        end(kind, typed ? message : `${TRANSPORT_FAILED}: ${(e as Error)?.message ?? String(e)}`);
        return;
      }
      keepalive?.pause();
      if (r.done) {
        c.close();
        end('complete');
        return;
      }
      if (!sent) {
        sent = true;
        o.onFirstByte?.();
      }
      c.enqueue(r.value);
    },
    async cancel() {
      o.abortUpstream();
      end('client_closed', 'the caller closed the stream');
      await it.return?.().catch(() => {});
    },
  }, { highWaterMark: 0 });
}
