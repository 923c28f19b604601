// The gateway's lifecycle is one value, `phase`; readiness, the drain and the exit are derived from it
// and from the in-flight count, never tracked in parallel flags. `phase` moves only through the methods
// below, each of which refuses a transition the diagram does not have (it throws, naming from → to).
//
//   starting ──► waiting (etcd: no configuration yet, proxy not bound) ──► serving ──► draining ──► stopped
//        └──────────────────────────────────────────────────────────────► serving
//   A signal in `starting`/`waiting` goes straight to `stopped` (nothing to drain).
//
// While draining, the facts the drain report is derived from (src/lifecycle/drain-report.ts) are recorded
// here, where the events are seen: probe answers, caller arrivals, new connections, in-flight durations.
// Diagram and phase names: docs/operations.md "Boot and lifecycle".
import { type Clock, systemClock } from '../util/clock.ts';

export type Phase = 'starting' | 'waiting' | 'serving' | 'draining' | 'stopped';

/** Every legal transition of the diagram above, by the phase it leaves. */
export const TRANSITIONS: Readonly<Record<Phase, readonly Phase[]>> = {
  starting: ['waiting', 'serving', 'stopped'],
  waiting: ['serving', 'stopped'],
  serving: ['draining'],
  draining: ['stopped'],
  stopped: [],
};

/** Thrown by a transition the diagram does not have: a bug in the caller, never a runtime condition. */
export class IllegalTransition extends Error {
  constructor(readonly from: Phase, readonly to: Phase) {
    super(`illegal lifecycle transition: ${from} → ${to}`);
    this.name = 'IllegalTransition';
  }
}

/** What one drain observed; times are Unix milliseconds. The report is derived from these alone. */
export interface DrainFacts {
  signalAt: number;
  minDrainSecs: number;
  /** `/readyz` answers on the proxy listener that were 503 after the signal. */
  readyzFailedProbes: number;
  /** Caller requests (every `/v1/*`; probes excluded) that arrived after the signal. */
  arrivals: number;
  lastArrivalAt?: number;
  /** Downstream connections accepted on the proxy listener after the signal (probes' included). */
  newConnections: number;
  /** The longest arrival-to-last-byte time of a request that finished after the signal. */
  longestInFlightMs: number;
  /** When the listeners were closed (the exit follows). */
  endedAt?: number;
}

export class Lifecycle {
  private _phase: Phase = 'starting';
  /** Requests being served on the proxy listener; a streamed response holds its slot until its last byte. */
  inFlight = 0;
  /** Set when a drain begins; undefined before. */
  drain: DrainFacts | undefined;
  private idleWaiters: (() => void)[] = [];

  /** `clock`: the gateway's one clock; every drain time below is read from it. */
  constructor(readonly clock: Clock = systemClock) {}

  get phase(): Phase {
    return this._phase;
  }

  get draining(): boolean {
    const phase = this.phase;
    return phase === 'draining' || phase === 'stopped';
  }

  /** etcd mode: the status and admin listeners are bound, the proxy waits for the first configuration. */
  waitForConfig(): void {
    this.move('waiting');
  }

  /** The proxy listener is bound (or, on Workers, the handler answers): requests are served. */
  serve(): void {
    this.move('serving');
  }

  /** Enter `draining` and start recording its facts. */
  beginDrain(minDrainSecs: number): void {
    this.move('draining');
    this.drain = {
      signalAt: this.clock(),
      minDrainSecs,
      readyzFailedProbes: 0,
      arrivals: 0,
      newConnections: 0,
      longestInFlightMs: 0,
    };
  }

  /** The listeners were closed: the drain's end time (the report is complete from now on). */
  endDrain(): DrainFacts {
    const facts = this.drain;
    if (!facts) throw new Error('endDrain before beginDrain');
    facts.endedAt = this.clock();
    return facts;
  }

  /** The end: after a drain, or on a signal before anything was served. */
  stop(): void {
    this.move('stopped');
  }

  private move(to: Phase): void {
    if (!TRANSITIONS[this._phase].includes(to)) throw new IllegalTransition(this._phase, to);
    this._phase = to;
  }

  /** A caller request arrived (the `request arrived while draining` line). */
  recordArrival(): void {
    if (!this.drain) return;
    this.drain.arrivals++;
    this.drain.lastArrivalAt = this.clock();
  }

  /** A downstream connection was accepted (the `accepted a new downstream connection while draining` line). */
  recordConnection(): void {
    if (this.drain) this.drain.newConnections++;
  }

  /** A proxy-listener `/readyz` answer; returned as is, so the route can wrap its handler. */
  recordReadyz<R extends { status: number }>(answer: R): R {
    if (this.drain && answer.status === 503) this.drain.readyzFailedProbes++;
    return answer;
  }

  /**
   * Take an in-flight slot; the returned release is idempotent (safe from close, error and cancel). `start`:
   * when the request arrived, on this lifecycle's clock, when the caller has just read it; else read here.
   */
  acquire(start = this.clock()): () => void {
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      if (this.drain) this.drain.longestInFlightMs = Math.max(this.drain.longestInFlightMs, this.clock() - start);
      if (this.inFlight === 0 && this.idleWaiters.length > 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    };
  }

  /** Resolves when no request is in flight (at once if none is). */
  whenIdle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
