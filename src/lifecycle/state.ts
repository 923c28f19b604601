// The gateway's lifecycle is one value, `phase`; readiness, the drain and the exit are derived from it
// and from the in-flight count, never tracked in parallel flags.
//
//   starting ──► waiting (etcd: no configuration yet, proxy not bound) ──► serving ──► draining ──► stopped
//        └──────────────────────────────────────────────────────────────► serving
//   A signal in `starting`/`waiting` goes straight to `stopped` (nothing to drain).

export type Phase = 'starting' | 'waiting' | 'serving' | 'draining' | 'stopped';

export class Lifecycle {
  phase: Phase = 'starting';
  /** Requests being served on the proxy listener; a streamed response holds its slot until its last byte. */
  inFlight = 0;
  private idleWaiters: (() => void)[] = [];

  get draining(): boolean {
    return this.phase === 'draining' || this.phase === 'stopped';
  }

  /** Take an in-flight slot; the returned release is idempotent (safe from close, error and cancel). */
  acquire(): () => void {
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
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
