// The flags Sluice runs under on Deno (runtimes/deno-launch.ts) are the ones every documented way of starting it
// uses: the README's command and `deno task start`. The tests and the benchmark import the constant itself.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { DENO_RUN_FLAGS } from '../../runtimes/deno-launch.ts';

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

/** What the young generation of a Deno process started with `flags` can hold once grown (bytes). */
function youngGenerationRoom(flags: readonly string[]): number {
  const bin = resolve(ROOT, 'node_modules/.bin/deno');
  if (!existsSync(bin)) throw new Error('deno is not installed: run `npm ci` (deno is a devDependency)');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-deno-launch-'));
  try {
    const script = join(dir, 'young.ts');
    // Objects that survive scavenges make V8 grow the semi-spaces to their cap; then the new space's room.
    writeFileSync(
      script,
      `import v8 from 'node:v8';
const held = [];
for (let i = 0; i < 3e6; i++) held.push({ i });
const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
console.log(JSON.stringify({ room: s ? s.space_available_size : -1, held: held.length }));`,
    );
    const r = spawnSync(bin, ['run', ...flags, '--quiet', script], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    return (JSON.parse(r.stdout) as { room: number }).room;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the launch flags cap V8 young generation at 8 MiB semi-spaces, which it grows past by default', () => {
  const MiB = 1024 * 1024;
  const capped = youngGenerationRoom(DENO_RUN_FLAGS);
  const byDefault = youngGenerationRoom(['-A']);
  assert.ok(capped > 0 && capped <= 8 * MiB, `with the flags the new space holds ${capped} bytes`);
  assert.ok(byDefault > 8 * MiB, `by default the new space holds ${byDefault} bytes (the flag would change nothing)`);
});
