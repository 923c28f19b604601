// SSE pass-through: upstream chunks are forwarded as they arrive (pull-based, so the first chunk reaches
// the caller before the upstream finishes and a slow caller slows the upstream read), with `:\n\n`
// keep-alive comments while the upstream is silent, a silence deadline, and a proper SSE error event when
// the upstream fails after the first byte — never a silently truncated stream.

import { UpstreamStreamError } from '../providers/types.ts';

const encoder = new TextEncoder();
const KEEPALIVE = encoder.encode(':\n\n');

export type StreamEnd = 'complete' | 'upstream_timeout' | 'upstream_error' | 'client_closed';

export interface PumpOptions {
  chunks: AsyncIterable<Uint8Array>;
  /** 0 = no keep-alive comments. */
  keepaliveMs: number;
  /** Max silence between upstream chunks; 0 = none. */
  silenceMs: number;
  /** Abort the upstream request (client went away, or silence deadline). */
  abortUpstream(): void;
  /** Called exactly once, when the last byte was handed over or the stream ended otherwise. */
  onEnd(end: StreamEnd): void;
  /** The caller's wire's SSE error event; default OpenAI's `data: {"error":{…}}`. */
  errorEvent?: (type: 'upstream_error' | 'upstream_timeout', message: string) => Uint8Array;
}

export function sseErrorEvent(type: string, message: string): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify({ error: { message, type } })}\n\n`);
}

/** Anthropic's in-stream error event (`/v1/messages`). */
export function anthropicSseErrorEvent(type: string, message: string): Uint8Array {
  return encoder.encode(`event: error\ndata: ${JSON.stringify({ type: 'error', error: { type, message } })}\n\n`);
}

const TICK = Symbol('tick');

export function pumpSse(o: PumpOptions): ReadableStream<Uint8Array> {
  const it = o.chunks[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<Uint8Array>> | undefined;
  let lastChunkAt = Date.now();
  let ended = false;
  const end = (why: StreamEnd) => {
    if (ended) return;
    ended = true;
    o.onEnd(why);
  };
  const timed = o.keepaliveMs > 0 || o.silenceMs > 0;
  const tickMs = Math.min(...[o.keepaliveMs, o.silenceMs].filter((x) => x > 0));
  /** The keep-alive/silence tick being waited on; cleared on cancel so it does not outlive the stream. */
  let timer: ReturnType<typeof setTimeout> | undefined;

  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      pending ??= it.next();
      let r: IteratorResult<Uint8Array> | typeof TICK;
      try {
        if (!timed) r = await pending;
        else {
          const wait = Math.max(1, Math.min(tickMs, o.silenceMs > 0 ? lastChunkAt + o.silenceMs - Date.now() : tickMs));
          r = await Promise.race([pending, new Promise<typeof TICK>((res) => { timer = setTimeout(res, wait, TICK); })]);
          clearTimeout(timer);
        }
      } catch (e) {
        clearTimeout(timer);
        // A typed failure (a silence deadline, an error the upstream reported in-stream) keeps its kind.
        pending = undefined;
        const kind = e instanceof UpstreamStreamError ? e.kind : 'upstream_error';
        const message = e instanceof UpstreamStreamError ? e.message : `upstream stream failed: ${(e as Error)?.message ?? 'error'}`;
        ctrl.enqueue((o.errorEvent ?? sseErrorEvent)(kind, message));
        ctrl.close();
        end(kind);
        return;
      }
      if (r === TICK) {
        if (o.silenceMs > 0 && Date.now() - lastChunkAt >= o.silenceMs) {
          o.abortUpstream();
          pending?.catch(() => {});
          ctrl.enqueue((o.errorEvent ?? sseErrorEvent)('upstream_timeout', `upstream sent nothing for ${o.silenceMs} ms`));
          ctrl.close();
          end('upstream_timeout');
        } else if (o.keepaliveMs > 0) {
          ctrl.enqueue(KEEPALIVE);
        }
        return;
      }
      pending = undefined;
      if (r.done) {
        ctrl.close();
        end('complete');
        return;
      }
      lastChunkAt = Date.now();
      ctrl.enqueue(r.value);
    },
    async cancel() {
      clearTimeout(timer);
      o.abortUpstream();
      pending?.catch(() => {});
      end('client_closed');
      await it.return?.().catch(() => {});
    },
  }, { highWaterMark: 0 });
}
