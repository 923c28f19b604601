// The flags Sluice runs under on Deno (runtimes/deno-launch.ts) are the ones every documented way of starting it
// uses: the README's command and `deno task start`. The tests and the benchmark import the constant itself.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { DENO_RUN_FLAGS } from '../../runtimes/deno-launch.ts';
import { maglevProbeSource } from '../support/maglev-probe.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const command = `deno run ${DENO_RUN_FLAGS.join(' ')} runtimes/deno.ts --config examples/config.yaml`;

test('the README starts Sluice on Deno with the launch flags', () => {
  const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.includes(`node_modules/.bin/${command}`), `README.md lacks \`node_modules/.bin/${command}\``);
});

test('`deno task start` starts Sluice with the launch flags', () => {
  const tasks = (JSON.parse(readFileSync(resolve(ROOT, 'deno.json'), 'utf8')) as { tasks: Record<string, string> })
    .tasks;
  assert.equal(tasks.start, command);
});

/** Run `source` as a script on Deno under `flags`; its one line of JSON output. */
function runProbe<T>(flags: readonly string[], source: string): T {
  const bin = resolve(ROOT, 'node_modules/.bin/deno');
  if (!existsSync(bin)) throw new Error('deno is not installed: run `npm ci` (deno is a devDependency)');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-deno-launch-'));
  try {
    const script = join(dir, 'probe.ts');
    writeFileSync(script, source);
    const r = spawnSync(bin, ['run', ...flags, '--quiet', script], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as T;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the young generation of a Deno process started with `flags` can hold once grown (bytes). */
function youngGenerationRoom(flags: readonly string[]): number {
  // Objects that survive scavenges make V8 grow the semi-spaces to their cap; then the new space's room.
  return runProbe<{ room: number }>(
    flags,
    `import v8 from 'node:v8';
const held = [];
for (let i = 0; i < 3e6; i++) held.push({ i });
const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
console.log(JSON.stringify({ room: s ? s.space_available_size : -1, held: held.length }));`,
  ).room;
}

/**
 * The most the old space held (bytes) while a steady live set had objects promoted into it and dropped, as a
 * gateway's requests in flight are: each batch outlives a few scavenges, then dies in the old space.
 */
function oldSpacePeak(flags: readonly string[]): number {
  return runProbe<{ max: number }>(
    flags,
    `import v8 from 'node:v8';
const old = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
const live = [];
for (let i = 0; i < 300000; i++) live.push({ i, a: [i] });
const ring = new Array(256);
let max = 0;
for (let k = 0; k < 8000; k++) {
  const batch = [];
  for (let i = 0; i < 1000; i++) batch.push({ k, i });
  ring[k % 256] = batch;
  if (k % 20 === 0) max = Math.max(max, old());
}
console.log(JSON.stringify({ max, live: live.length }));`,
  ).max;
}

test('the launch flags cap V8 young generation at 8 MiB semi-spaces, which it grows past by default', () => {
  const MiB = 1024 * 1024;
  const capped = youngGenerationRoom(DENO_RUN_FLAGS);
  const byDefault = youngGenerationRoom(['-A']);
  assert.ok(capped > 0 && capped <= 8 * MiB, `with the flags the new space holds ${capped} bytes`);
  assert.ok(byDefault > 8 * MiB, `by default the new space holds ${byDefault} bytes (the flag would change nothing)`);
});

test("the launch flags let the old space grow to about twice what survives, not V8's four times", () => {
  const MB = 1e6;
  const capped = oldSpacePeak(DENO_RUN_FLAGS);
  const byDefault = oldSpacePeak(['-A']);
  assert.ok(
    capped < byDefault * 0.6,
    `old space peaked at ${(capped / MB).toFixed(1)} MB with the flags, ${(byDefault / MB).toFixed(1)} MB by default`,
  );
});

/**
 * How far the resident set grew (bytes) while the main thread kept V8 compiling new hot functions with Maglev, as a
 * gateway does while it warms under load.
 */
function rssGrowthWhileCompiling(flags: readonly string[]): number {
  return runProbe<{ grew: number }>(
    flags,
    maglevProbeSource('Deno.memoryUsage().rss'),
  ).grew;
}

test("the launch flags free Maglev's finished compilations, whose memory piles up by default", () => {
  const MB = 1e6;
  const flag = ',--no-maglev-destroy-on-background';
  const without = DENO_RUN_FLAGS.map((f) => f.replace(flag, ''));
  assert.notDeepEqual(without, DENO_RUN_FLAGS, `the launch flags lack ${flag.slice(1)}`);
  const freed = rssGrowthWhileCompiling(DENO_RUN_FLAGS);
  // The default's pile-up needs V8's background threads busy compiling while the probe queues more: a run on a
  // loaded machine can miss it, so the default has three tries to show it.
  let byDefault = 0;
  for (let i = 0; i < 3 && !(freed < byDefault * 0.5); i++) {
    byDefault = Math.max(byDefault, rssGrowthWhileCompiling(without));
  }
  assert.ok(
    freed < byDefault * 0.5,
    `the resident set grew ${(freed / MB).toFixed(1)} MB with the flags, ${(byDefault / MB).toFixed(1)} MB without`,
  );
});

/** Run `source` on Deno under `flags` with `knobs` added to their `--v8-flags`; its standard output. */
function tracedRun(flags: readonly string[], knobs: string, source: string): string {
  const traced = flags.map((f) => (f.startsWith('--v8-flags=') ? f + knobs : f));
  assert.notDeepEqual(traced, flags, 'the launch flags have no --v8-flags to add the trace to');
  const bin = resolve(ROOT, 'node_modules/.bin/deno');
  if (!existsSync(bin)) throw new Error('deno is not installed: run `npm ci` (deno is a devDependency)');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-deno-launch-'));
  try {
    const script = join(dir, 'probe.ts');
    writeFileSync(script, source);
    const r = spawnSync(bin, ['run', ...traced, '--quiet', script], {
      encoding: 'utf8',
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The lines V8's memory reducer traced while a probe under `flags` filled the old generation and then idled: the
 * start delay and the reducer's own timer are shortened so that it would act within the probe's second of idling.
 */
function memoryReducerLines(flags: readonly string[]): number {
  const out = tracedRun(
    flags,
    ',--trace-memory-reducer,--gc-memory-reducer-start-delay-ms=1,--memory-reducer-delay-ms=100',
    `let keep = [];
for (let k = 0; k < 40; k++) {
  const batch = [];
  for (let i = 0; i < 20000; i++) batch.push({ k, i, s: 'x' + i });
  keep.push(batch);
  if (keep.length > 20) keep.shift();
}
keep = [];
setTimeout(() => console.log('idled'), 1000);`,
  );
  assert.match(out, /idled/);
  return out.split('\n').filter((l) => l.includes('Memory reducer:')).length;
}

test("the launch flags turn V8's memory reducer off, which acts on an idle Deno by default", () => {
  const flag = ',--no-memory-reducer';
  const without = DENO_RUN_FLAGS.map((f) => f.replace(flag, ''));
  assert.notDeepEqual(without, DENO_RUN_FLAGS, `the launch flags lack ${flag.slice(1)}`);
  assert.equal(memoryReducerLines(DENO_RUN_FLAGS), 0, 'the memory reducer acted under the launch flags');
  assert.ok(
    memoryReducerLines(without) > 0,
    'without the flag the memory reducer traced nothing (the probe proves nothing)',
  );
});

/**
 * The incremental marking steps V8 ran as tasks of their own while a probe under `flags` built a second large live
 * set beside a first, yielding to the event loop every 2 ms as a reload does: the old generation's marking starts
 * and runs during the build.
 */
function markingTaskSteps(flags: readonly string[]): { task: number; all: number } {
  const out = tracedRun(
    flags,
    ',--trace-incremental-marking',
    `const live = [];
for (let i = 0; i < 600000; i++) live.push({ id: 'k' + i, n: i });
const next = [];
let since = performance.now();
for (let i = 0; i < 1200000; i++) {
  next.push({ id: 'n' + i, n: i, more: [i, i] });
  if ((i & 255) === 0 && performance.now() - since > 2) {
    await new Promise((r) => setTimeout(r, 0));
    since = performance.now();
  }
}
console.log('built', live.length + next.length);`,
  );
  assert.match(out, /built 1800000/);
  const steps = out.split('\n').filter((l) => l.includes('[IncrementalMarking] Step:'));
  return { task: steps.filter((l) => l.includes('origin: task')).length, all: steps.length };
}

test("the launch flags run V8's incremental marking without tasks of its own, which it posts by default", () => {
  const flag = ',--no-incremental-marking-task';
  const without = DENO_RUN_FLAGS.map((f) => f.replace(flag, ''));
  assert.notDeepEqual(without, DENO_RUN_FLAGS, `the launch flags lack ${flag.slice(1)}`);
  const flagged = markingTaskSteps(DENO_RUN_FLAGS);
  assert.equal(flagged.task, 0, 'incremental marking ran steps as tasks under the launch flags');
  assert.ok(flagged.all > 0, 'no incremental marking step under the launch flags: the probe proves nothing');
  assert.ok(
    markingTaskSteps(without).task > 0,
    'without the flag no marking step ran as a task (the probe proves nothing)',
  );
});
