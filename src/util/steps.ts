// Work written as a generator that yields between its pieces (`Generator<void, T>`), run either at once or
// with a pace awaited at each yield (src/resources/pace.ts), so one piece of code serves both a small input
// and one large enough to hold the event loop.

/** Runs `steps` to its end without pausing; returns its result. */
export function runSteps<T>(steps: Generator<void, T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Runs `steps` to its end, awaiting `pace()` at each yield (it resolves at once while a slice lasts). */
export async function paceSteps<T>(steps: Generator<void, T>, pace: () => Promise<void> | undefined): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    const p = pace();
    if (p) await p;
  }
}
