// The caller-closed signal the `Bun.serve` listener (runtimes/bun-listener.ts) hands the core as
// `ConnInfo.closed`; web APIs only, so it is checked and tested with Node's types too.
import { Cancel, type CancelSignal } from '../src/util/cancel.ts';

/**
 * `request.signal` as `ConnInfo.closed`, linked on the first listener: one native listener per request, added
 * without options and never removed, while the core's come and go per attempt on a `Cancel`, whose listeners
 * cost a fraction of a native AbortSignal's on Bun (docs/performance.md "Decisions on the hot path").
 */
export class RequestClosed implements CancelSignal {
  private linked: Cancel | undefined;

  constructor(private readonly req: Request) {}

  get aborted(): boolean {
    return this.req.signal.aborted;
  }

  get reason(): unknown {
    return this.req.signal.reason;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    let linked = this.linked;
    if (linked === undefined) {
      const signal = this.req.signal;
      if (signal.aborted) return; // like AbortSignal: an aborted signal does not fire again
      const cancel = linked = this.linked = new Cancel();
      signal.addEventListener('abort', () => cancel.abort(signal.reason));
    }
    linked.addEventListener('abort', listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    this.linked?.removeEventListener('abort', listener);
  }
}
