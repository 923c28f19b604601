// The closing summary of test/run.sh names each failed test (test/support/tap-failures.awk), since a CI log may
// keep only its tail: a real `node --test` report of failing tests goes through the awk program run.sh uses.
// Run: node --import tsx --test test/integration/test-summary.test.ts
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const FAILING = `import { describe, it, test } from 'node:test';
import assert from 'node:assert/strict';
describe('a suite', () => {
  it('passes', () => {});
  it('fails inside', () => assert.equal(200, 429));
});
test('throws', () => { throw new Error('boom here'); });
`;

// Without the parent's NODE_TEST_CONTEXT, which would make the child report to this runner instead of stdout.
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

test('each failed test is named with its place and error; a suite failed only through them is not', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-summary-'));
  try {
    writeFileSync(join(dir, 'f.test.mjs'), FAILING);
    const run = spawnSync(process.execPath, ['--test', '--test-reporter=tap', 'f.test.mjs'], {
      cwd: dir,
      encoding: 'utf8',
      env: childEnv(),
    });
    assert.notEqual(run.status, 0, 'the fixture fails');
    writeFileSync(join(dir, 'report.tap'), run.stdout);
    const summary = execFileSync('awk', [
      '-v',
      `root=${dir}/`,
      '-f',
      'test/support/tap-failures.awk',
      join(dir, 'report.tap'),
    ], {
      encoding: 'utf8',
    });
    assert.equal(
      summary,
      [
        '  not ok: fails inside',
        '    at f.test.mjs:5:3',
        '    Expected values to be strictly equal: 200 !== 429',
        '  not ok: throws',
        '    at f.test.mjs:7:1',
        "    'boom here'",
        '',
      ].join('\n'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
