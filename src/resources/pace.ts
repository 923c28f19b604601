// Time-sliced yields for the resources pipeline (docs/configuration.md "Reloading"): a large file is
// validated and indexed in slices, with a macrotask turn between them so requests keep their latency.
import { sleep } from '../util/sleep.ts';

/** The longest the pipeline keeps the event loop before it lets requests run. */
export const SLICE_MS = 2;

/**
 * The slice of bulk work (a first load, a full etcd range, hashing and decoding a large file): each yield costs a
 * timer turn (a millisecond or more), so with `SLICE_MS` such work would spend most of its time waiting.
 */
export const BULK_SLICE_MS = 10;

/** A macrotask turn: requests waiting on I/O run before the pipeline goes on (a microtask would not let them). */
export const yieldToLoop = (): Promise<void> => sleep(0);

/** Call `pace()` between units of work: it yields once the current slice has run `SLICE_MS`. */
export class Pacer {
  private since = performance.now();
  private calls = 0;

  /**
   * `sliceMs`: how long a slice runs before the loop gets a turn (bulk work takes longer ones). `every`: the
   * clock is read once per that many calls, for units of work cheaper than reading it (a million rows).
   */
  constructor(private readonly sliceMs = SLICE_MS, private readonly every = 1) {}

  /** Resolves at once while the slice lasts; otherwise after one turn of the event loop. */
  pace(): Promise<void> | undefined {
    if (++this.calls < this.every) return undefined;
    this.calls = 0;
    if (performance.now() - this.since < this.sliceMs) return undefined;
    return this.yield();
  }

  async yield(): Promise<void> {
    await yieldToLoop();
    this.since = performance.now();
  }
}
