// Bounded polling for a condition the test cannot be told about directly (a counter in another process, a
// log line, a metric): checks every `everyMs`, fails naming `what` after `ms`.
import assert from 'node:assert/strict';

export async function until(
  cond: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
  everyMs = 10,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
