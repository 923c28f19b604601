// Cancellation on the request path without AbortController, whose EventTarget machinery is a measurable
// part of Node's CPU per request (docs/performance.md "Decisions on the hot path"). `Cancel` has
// AbortSignal's shape, so an AbortSignal is accepted wherever a `CancelSignal` is expected, and undici
// (which duck-types its `signal` option) takes a `Cancel` directly.

/** The part of AbortSignal the request path uses. Any AbortSignal is one. */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** A one-shot cancellation: `abort(reason)` runs every listener once, in order, then forgets them. */
export class Cancel implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  // Most have zero or one listener: an array only when a second one arrives.
  private listeners: (() => void) | (() => void)[] | undefined;

  abort(reason: unknown = new Error('aborted')): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const l = this.listeners;
    this.listeners = undefined;
    if (typeof l === 'function') l();
    else if (l) { for (const fn of l) fn(); }
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return; // like AbortSignal: an aborted signal does not fire again
    const l = this.listeners;
    if (l === undefined) this.listeners = listener;
    else if (typeof l === 'function') this.listeners = [l, listener];
    else l.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const l = this.listeners;
    if (l === listener) this.listeners = undefined;
    else if (Array.isArray(l)) {
      const i = l.indexOf(listener);
      if (i >= 0) l.splice(i, 1);
    }
  }
}

// One Cancel aborted as the module loads, with two listeners: every Cancel shares its map, whose `aborted`,
// `reason` and `listeners` fields V8 takes as constant (or of one type) until some Cancel changes them. Left to
// the first caller who hangs up, that change throws away the request path's code optimised around them
// (docs/performance.md "Decisions on the hot path").
const first = new Cancel();
first.addEventListener('abort', () => {});
first.addEventListener('abort', () => {});
first.abort('loaded');

/** A real AbortSignal following `s`, for APIs that need one (the web `fetch`). */
export function toAbortSignal(s: CancelSignal): AbortSignal {
  if (s instanceof AbortSignal) return s;
  const ac = new AbortController();
  if (s.aborted) ac.abort(s.reason);
  else s.addEventListener('abort', () => ac.abort(s.reason), { once: true });
  return ac.signal;
}
