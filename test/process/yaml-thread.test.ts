// The YAML worker (runtimes/yaml-thread.ts) on Deno and Bun, the runtimes that run its TypeScript as it is
// (Node runs it from the bundle, in the reload tests): each parse gets its own document or errors; kept
// workers (Deno's setting) serve parse after parse from one worker, a worker left with an unfinished parse is
// ended, and the process is free to exit with a worker kept; otherwise each parse has a worker of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DENO_RUN_FLAGS } from '../../runtimes/deno-launch.ts';

const ROOT = join(import.meta.dirname, '../..');
const PROBE = join(ROOT, 'test/support/yaml-thread-probe.ts');
/** What the probe prints, given how many workers had started after each parse. */
const want = (started: number[]) => [
  { ok: true, names: ['a-1198', 'a-1199'] },
  started[0],
  { ok: false, lines: [2, 3] },
  started[1],
  { ok: true, names: ['b-1', 'b-2'] },
  started[2],
  'head',
  { ok: true, names: ['d-0', 'd-1'] },
  started[3],
  { ok: true, names: ['e-0'] },
  started[4],
];

const RUNS = [
  { runtime: 'deno', args: ['run', ...DENO_RUN_FLAGS, PROBE], keep: true, started: [1, 1, 1, 2, 2] },
  { runtime: 'bun', args: [PROBE], keep: true, started: [1, 1, 1, 2, 2] },
  { runtime: 'bun', args: [PROBE], keep: false, started: [1, 2, 3, 5, 6] },
] as const;

for (const r of RUNS) {
  test(`${r.runtime}, workers ${r.keep ? 'kept' : 'not kept'}: parse after parse`, async () => {
    const bin = join(ROOT, 'node_modules/.bin', r.runtime);
    assert.ok(existsSync(bin), `${r.runtime} is not installed: run \`npm ci\``);
    // The timeout fails the test if a kept worker held the process open.
    const { stdout } = await promisify(execFile)(bin, [...r.args, r.keep ? 'keep' : 'new'], { timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1)!), want([...r.started]));
  });
}
