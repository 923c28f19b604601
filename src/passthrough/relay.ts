// The answer's bytes, relayed as they arrive (docs/endpoints.md "Passthrough routes"): pull-based, so a slow
// caller slows the upstream read and nothing is held. An event stream gets `:\n\n` comments while the
// upstream is silent, only between frames (a comment inside a frame would corrupt it), and just ends if the
// upstream fails mid-relay (AISIX's); any other body errors, so the caller sees a cut answer as one.
import type { StreamEnd } from '../providers/types.ts';
import { IdleTimer } from '../util/idle-timer.ts';

const KEEPALIVE = new TextEncoder().encode(':\n\n');
const LF = 10;

/** What the relay needs of a keep-alive timer (util/idle-timer.ts's `IdleTimer`). */
export interface KeepaliveTimer {
  touch(): void;
  pause(): void;
  stop(): void;
}

export interface RelayOptions {
  chunks: AsyncIterable<Uint8Array>;
  eventStream: boolean;
  /** 0 = none; event streams only. */
  keepaliveMs: number;
  onChunk(chunk: Uint8Array): void;
  onFirstByte(): void;
  /** Called once: the last byte went out, the upstream failed (`detail`: its words, for the log), or the caller left. */
  onEnd(end: StreamEnd, detail?: string): void;
  /** The caller left: stop the upstream read. */
  abortUpstream(): void;
  /** The keep-alive timer; injectable so a test can fire it. Default `IdleTimer`. */
  timer?: (ms: number, onIdle: () => void) => KeepaliveTimer;
}

/** Whether the bytes sent so far end a frame (`\n\n`; `\r\n\r\n` ends in it too). */
function endsFrame(tail: number[]): boolean {
  return tail.length === 0 || (tail[tail.length - 1] === LF && (tail[tail.length - 2] === LF ||
    (tail[tail.length - 2] === 13 && tail[tail.length - 3] === LF)));
}

export function relayBody(o: RelayOptions): ReadableStream<Uint8Array> {
  const it = o.chunks[Symbol.asyncIterator]();
  let ended = false;
  let sent = false;
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** The last few bytes sent (frame boundaries). */
  let tail: number[] = [];
  const end = (why: StreamEnd, detail?: string) => {
    if (ended) return;
    ended = true;
    keepalive?.stop();
    o.onEnd(why, detail);
  };
  const keepalive = o.eventStream && o.keepaliveMs > 0
    ? (o.timer ?? ((ms, onIdle) => new IdleTimer(ms, onIdle)))(o.keepaliveMs, () => {
      if (!ended && endsFrame(tail)) controller?.enqueue(KEEPALIVE);
    })
    : undefined;
  keepalive?.pause();
  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    async pull(c) {
      keepalive?.touch();
      let r: IteratorResult<Uint8Array>;
      try {
        r = await it.next();
      } catch (e) {
        const detail = `upstream body failed mid-relay: ${(e as Error)?.message ?? String(e)}`;
        if (o.eventStream) c.close();
        else c.error(new Error('the upstream answer was cut'));
        end('upstream_error', detail);
        return;
      }
      keepalive?.pause();
      if (r.done) {
        c.close();
        end('complete');
        return;
      }
      if (r.value.byteLength === 0) return;
      if (!sent) {
        sent = true;
        o.onFirstByte();
      }
      o.onChunk(r.value);
      if (o.eventStream) tail = [...tail, ...r.value.subarray(Math.max(0, r.value.byteLength - 4))].slice(-4);
      c.enqueue(r.value);
    },
    async cancel() {
      o.abortUpstream();
      end('client_closed', 'the caller closed the stream');
      await it.return?.().catch(() => {});
    },
  }, { highWaterMark: 0 });
}
