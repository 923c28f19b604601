// What the proxy's frames and handlers share through Hono's context, instead of hidden side tables.
import type { ConnInfo } from '../platform.ts';
import type { StreamEnd } from '../providers/types.ts';
import type { CallState } from './call-state.ts';
import type { RequestRecord } from './record.ts';

/**
 * A streamed answer's hand-off from the handler to the tracking middleware: the handler sets it on the
 * context with its response; the pump calls `onEnd` once the last byte is out (or the stream failed), and
 * the middleware fills `onEnd` in to release the in-flight slot and write the record then (`recorded`: once
 * it settles, the slot at once: a caller that left waits on nothing).
 */
export interface StreamTracker {
  onEnd: ((end: StreamEnd, recorded?: Promise<void>) => void) | undefined;
  /** The status the request's record states, when it is not the response's (a WebSocket session's outcome). */
  status?: number;
}

export type ProxyEnv = {
  Bindings: ConnInfo;
  Variables: {
    rec: RequestRecord;
    /** The features' per-call slots (call-state.ts), set with `rec`; emptied by `onError` on a throw. */
    state: CallState;
    /** Set by a handler that answered with a stream (track.ts waits for its end). */
    stream: StreamTracker | undefined;
    /** The response already carries `Server` and the request id (the frames leave its headers alone). */
    stamped: boolean | undefined;
    /** The `Server` header of this app's answers (`proxy.identity`). */
    server: string;
  };
};
