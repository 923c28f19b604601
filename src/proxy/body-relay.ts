// A relayed upstream body, streamed to the caller as it arrives: the tracking middleware holds the request's
// slot and record until its last byte (src/proxy/track.ts), as it does for an SSE answer.
import type { Context } from 'hono';
import type { StreamEnd } from '../providers/types.ts';
import type { ProxyEnv, StreamTracker } from './env.ts';

export function relayBody(
  c: Context<ProxyEnv>,
  chunks: AsyncIterable<Uint8Array>,
  status: number,
  headers: Record<string, string>,
  done: () => void,
): Response {
  const tracker: StreamTracker = { onEnd: undefined };
  c.set('stream', tracker);
  const it = chunks[Symbol.asyncIterator]();
  let ended = false;
  const end = (how: StreamEnd) => {
    if (ended) return;
    ended = true;
    done();
    tracker.onEnd?.(how);
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const r = await it.next();
        if (r.done) {
          ctrl.close();
          end('complete');
        } else ctrl.enqueue(r.value);
      } catch (e) {
        ctrl.error(e);
        end('upstream_error');
      }
    },
    async cancel() {
      end('client_closed');
      await it.return?.();
    },
  });
  return new Response(body, { status, headers });
}
