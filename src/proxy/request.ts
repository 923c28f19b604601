// One request on any proxy route, as its handler sees it (docs/architecture.md "A request"): the context, the
// record tracking made, the features' per-call slots, and the caller once `identify` ran. A kind of call that
// is no model call (`/v1/models` today) runs `identify` on it; a model call (`ModelCall`, pipeline.ts) is one.
import type { Context } from 'hono';
import type { JwtIdentity } from '../identity/authenticate.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { CallState } from './call-state.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestRecord } from './record.ts';

/** An authenticated caller and the snapshot its request is served from. */
export interface Caller {
  key: ApiKey;
  snapshot: Snapshot;
  /** Who a JWT named, when the caller came with one (docs/identity.md); the key is the one it selected. */
  jwt?: JwtIdentity;
}

export class ProxyRequest {
  /** identify */
  caller!: Caller;

  constructor(
    readonly c: Context<ProxyEnv>,
    readonly rec: RequestRecord,
    /** Each feature's own state on this call, under the key the feature exports (call-state.ts). */
    readonly state: CallState = new CallState(),
  ) {}

  get headers(): Headers {
    return this.c.req.raw.headers;
  }
}
