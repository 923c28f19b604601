// The process signals of `serve()` (docs/operations.md "Boot and lifecycle"), registered before anything
// else so a signal during start-up is never lost: the first SIGTERM/SIGINT asks to stop, later ones go to
// `onRepeat`; SIGHUP calls whatever `onHup` installed (the source's reload once it has a configuration).
import type { Platform, SignalName } from '../platform.ts';

export interface Signals {
  /** The stop signal received so far, if any. */
  readonly stopRequested: SignalName | undefined;
  /** Resolves with the first stop signal (at once when one has arrived already). */
  readonly stopped: Promise<SignalName>;
  /** What SIGHUP does from now on; undefined: nothing. */
  onHup(handler: (() => void) | undefined): void;
  /** What a SIGTERM/SIGINT after the first does from now on (it never stops anything twice). */
  onRepeat(handler: (signal: SignalName) => void): void;
}

export function listenForSignals(platform: Platform): Signals {
  let requested: SignalName | undefined;
  let resolveStop!: (s: SignalName) => void;
  const stopped = new Promise<SignalName>((r) => (resolveStop = r));
  let hup: (() => void) | undefined;
  let repeat: ((s: SignalName) => void) | undefined;
  for (const s of ['SIGTERM', 'SIGINT'] as const) {
    platform.onSignal(s, () => {
      if (requested) return repeat?.(s);
      requested = s;
      resolveStop(s);
    });
  }
  platform.onSignal('SIGHUP', () => hup?.());
  return {
    get stopRequested() {
      return requested;
    },
    stopped,
    onHup: (h) => {
      hup = h;
    },
    onRepeat: (h) => {
      repeat = h;
    },
  };
}
