// The tests' one set of waits. `until` polls a condition the test cannot be told about directly (a counter in
// another process, a log line, a metric); `within` bounds a promise the test can await; `latch` is an event
// one part of a test resolves and another awaits. Each fails naming `what` after its bound.
import assert from 'node:assert/strict';
import { sleep } from '../../src/util/sleep.ts';

/** The one plain wait of the tests (the core's abortable sleep): for pacing load, never to prove a negative. */
export { sleep };

/**
 * Checks `cond` every `everyMs` until it holds; resolves with the milliseconds that took, fails after `ms`
 * (`what` may be a function, read at the failure, to name the last value seen).
 */
export async function until(
  cond: () => boolean | Promise<boolean>,
  ms: number,
  what: string | (() => string),
  everyMs = 10,
): Promise<number> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > ms) {
      assert.fail(`timed out after ${ms} ms waiting for ${typeof what === 'string' ? what : what()}`);
    }
    await sleep(everyMs);
  }
  return Date.now() - start;
}

/** Resolves as `p` does, or rejects naming `what` if `p` has not settled after `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface Latch<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
}

/** A promise and its resolver: one side of a test signals an event, the other awaits it. */
export function latch<T = void>(): Latch<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Waits, if it must, until at least `secs` of the current minute are left on this machine's clock, so requests a
 * test counts against an `rpm`/`tpm` limit fall in one of the gateway's fixed minute windows. A process gateway
 * reads the same clock; a unit gateway is given `midMinute()` instead (test/support/platform.ts).
 */
export async function roomInMinute(secs = 20): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < secs * 1000) await sleep(left + 200);
}
