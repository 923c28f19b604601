// The first Cancel aborted after the request path is optimised must not throw that code away (src/util/cancel.ts:
// the module aborts one as it loads). Its own file: no other Cancel may be aborted in this process before the test.
// Runs alone: other files' tests abort Cancels, which would make this one pass without the fix.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import { Cancel } from '../../src/util/cancel.ts';

/** V8's %GetOptimizationStatus bit for a function running optimised code. */
const OPTIMIZED = 1 << 4;

test("aborting a Cancel keeps code optimised around Cancel's fields", () => {
  v8.setFlagsFromString('--allow-natives-syntax');
  let sink = 0;
  // Two loads of `aborted` around other work, as runAttempts reads it around an attempt.
  const read = (c: Cancel) => {
    if (c.aborted) sink++;
    sink += String(c.reason).length;
    if (c.aborted) sink++;
    return sink;
  };
  const natives = new Function(
    'f',
    'return { prepare: () => %PrepareFunctionForOptimization(f), optimize: () => %OptimizeFunctionOnNextCall(f), status: () => %GetOptimizationStatus(f) };',
  )(read) as { prepare(): void; optimize(): void; status(): number };
  natives.prepare();
  for (let i = 0; i < 10; i++) read(new Cancel());
  natives.optimize();
  read(new Cancel());
  assert.ok(natives.status() & OPTIMIZED, `not optimised (status ${natives.status().toString(2)})`);
  new Cancel().abort('gone');
  assert.ok(natives.status() & OPTIMIZED, `deoptimised by the abort (status ${natives.status().toString(2)})`);
});
