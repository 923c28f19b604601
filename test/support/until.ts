// Bounded polling for a condition the test cannot be told about directly (a counter in another process, a
// log line, a metric): checks every `everyMs`, fails naming `what` after `ms`.
import assert from 'node:assert/strict';
import { sleep } from '../../src/util/sleep.ts';

/** The one plain wait of the tests (the core's abortable sleep): for pacing load, never to prove a negative. */
export { sleep };

export async function until(
  cond: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
  everyMs = 10,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
