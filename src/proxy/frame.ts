// What every answer of the proxy listener passes through (docs/architecture.md "A request"), as one function
// around each route's handler instead of a chain of Hono middlewares: a request matches exactly one handler, which
// Hono calls without composing a chain (docs/performance.md "Decisions on the hot path, and their measured reasons").
import type { Context } from 'hono';
import type { ProxyEnv } from './env.ts';
import { requestIdFrom } from './request-id.ts';

export type Handler = (c: Context<ProxyEnv>) => Promise<Response>;
/** A handler that may answer at once. */
export type AnyHandler = (c: Context<ProxyEnv>) => Response | Promise<Response>;

/** Answers a handler's throw: with the JSON envelope, the call's slots let go (app.ts). */
export type ThrowAnswer = (e: unknown, c: Context<ProxyEnv>) => Response;

/** A request the passthrough routes claim by its host: their answer, else undefined. */
export type HostClaim = (c: Context<ProxyEnv>) => Promise<Response> | undefined;

/** The tracking of a request (track.ts) around its handler. */
export type Tracker = (c: Context<ProxyEnv>, inner: AnyHandler) => Promise<Response>;

export interface FrameDeps {
  /** The `Server` header of this app's answers. */
  readonly server: string;
  /** The headers a caller's request id is taken from (`proxy.request_id.accept_headers`). */
  readonly acceptHeaders: readonly string[];
  readonly thrown: ThrowAnswer;
}

/** `h`, with a throw answered by `thrown` (where Hono's compose called the app's error handler). */
function guarded(h: AnyHandler, thrown: ThrowAnswer): Handler {
  return async function guardedHandler(c) {
    try {
      return await h(c);
    } catch (e) {
      return thrown(e, c);
    }
  };
}

/** How the handlers of the proxy app are framed: each route's one function, made once at boot. */
export class Framing {
  /** What answers a throw in this app's handlers. */
  readonly thrown: ThrowAnswer;

  constructor(private readonly d: FrameDeps) {
    this.thrown = d.thrown;
  }

  /** A tracked route: a claimed host is relayed, anything else tracked (which answers a throw and stamps). */
  tracked(h: AnyHandler, track: Tracker, claim: HostClaim): Handler {
    const server = this.d.server;
    const claimed = this.claimed(claim);
    return function trackedRoute(c) {
      c.set('server', server);
      return claimed(c) ?? track(c, h);
    };
  }

  /** An untracked answer (a probe, the protected-resource document, the passthrough fallback), stamped. */
  untracked(h: AnyHandler, claim?: HostClaim): Handler {
    const server = this.d.server;
    const stamp = this.stamp.bind(this);
    const inner = guarded(h, this.d.thrown);
    const claimed = claim ? this.claimed(claim) : undefined;
    return async function untrackedRoute(c) {
      c.set('server', server);
      return claimed?.(c) ?? stamp(c, await inner(c));
    };
  }

  /** A claimed host's answer, stamped (a relay is tracked, a path no route serves is not). */
  private claimed(claim: HostClaim): HostClaim {
    return (c) => claim(c)?.then((res) => this.stamp(c, res));
  }

  /** The `Server` header and a request id on an answer that has neither yet. */
  private stamp(c: Context<ProxyEnv>, res: Response): Response {
    if (c.get('stamped')) return res;
    res.headers.set('server', this.d.server);
    if (!res.headers.has('x-aisix-request-id')) {
      res.headers.set('x-aisix-request-id', requestIdFrom(c.req.raw.headers, this.d.acceptHeaders));
    }
    return res;
  }
}

/** Whether Hono's `prefix/*` would match `path`: the prefix itself, or anything under it. */
export function under(prefix: string, path: string): boolean {
  return path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 47 /* / */);
}
