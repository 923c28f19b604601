// SSE pass-through: upstream chunks are forwarded as they arrive (pull-based, so the first chunk reaches
// the caller before the upstream finishes and a slow caller slows the upstream read), with `:\n\n`
// keep-alive comments while the upstream is silent, and a proper SSE error event when the upstream fails
// after the first byte — never a silently truncated stream.

import { UpstreamStreamError } from '../providers/types.ts';
import { IdleTimer } from '../util/idle-timer.ts';

const encoder = new TextEncoder();
const KEEPALIVE = encoder.encode(':\n\n');

export type StreamEnd = 'complete' | 'upstream_timeout' | 'upstream_error' | 'client_closed';

export interface PumpOptions {
  chunks: AsyncIterable<Uint8Array>;
  /** 0 = no keep-alive comments. The silence deadline between chunks is the dispatcher's (stream_timeout). */
  keepaliveMs: number;
  /** Abort the upstream request (the caller went away). */
  abortUpstream(): void;
  /** Called exactly once, when the last byte was handed over or the stream ended otherwise (with why). */
  onEnd(end: StreamEnd, message?: string): void;
  /** The caller's wire's SSE error event; default OpenAI's `data: {"error":{…}}`. */
  errorEvent?: (type: 'upstream_error' | 'upstream_timeout', message: string) => Uint8Array;
}

export function sseErrorEvent(type: string, message: string): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify({ error: { message, type } })}\n\n`);
}

/**
 * Anthropic's in-stream error event (`/v1/messages`). Its `error.type` is Anthropic's closed set: a failure
 * of the upstream is an `api_error` (as a 502/504 would be in the envelope).
 */
export function anthropicSseErrorEvent(_type: string, message: string): Uint8Array {
  const event = { type: 'error', error: { type: 'api_error', message } };
  return encoder.encode(`event: error\ndata: ${JSON.stringify(event)}\n\n`);
}

export function pumpSse(o: PumpOptions): ReadableStream<Uint8Array> {
  const it = o.chunks[Symbol.asyncIterator]();
  let ended = false;
  const end = (why: StreamEnd, message?: string) => {
    if (ended) return;
    ended = true;
    keepalive?.stop();
    o.onEnd(why, message);
  };
  let ctrl: ReadableStreamDefaultController<Uint8Array> | undefined;
  // One timer for the stream's life: a comment goes out only while the caller waits on a silent upstream.
  const keepalive = o.keepaliveMs > 0
    ? new IdleTimer(o.keepaliveMs, () => {
      if (!ended) ctrl?.enqueue(KEEPALIVE);
    })
    : undefined;
  keepalive?.pause();

  return new ReadableStream<Uint8Array>({
    start(c) {
      ctrl = c;
    },
    async pull(c) {
      let r: IteratorResult<Uint8Array>;
      keepalive?.touch();
      try {
        r = await it.next();
      } catch (e) {
        // A typed failure (a silence deadline, an error the upstream reported in-stream) keeps its kind.
        const kind = e instanceof UpstreamStreamError ? e.kind : 'upstream_error';
        const message = e instanceof UpstreamStreamError
          ? e.message
          : `upstream stream failed: ${(e as Error)?.message ?? 'error'}`;
        c.enqueue((o.errorEvent ?? sseErrorEvent)(kind, message));
        c.close();
        end(kind, message);
        return;
      }
      keepalive?.pause();
      if (r.done) {
        c.close();
        end('complete');
        return;
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
