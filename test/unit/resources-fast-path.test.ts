// A large resources file through the fast YAML path (src/util/plain-yaml.ts) and through the `yaml` package's
// stage: the same snapshot, and a file with an error refused with the same report, a YAML error still naming
// its line and a bad row its entry and field.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadResourcesFile, type LoadResult } from '../../src/resources/pipeline.ts';
import { FileReport, parseYaml } from '../../src/util/report.ts';
import { bigResources, withYamlStage } from '../support/big-resources.ts';

const FILE = '/etc/sluice/resources.yaml';
const ENV = { CALLER_KEY: 'sk-caller' };
const ROWS = 5_000;

function summary(r: LoadResult): unknown {
  return r.ok
    ? { counts: r.snapshot.counts(), resources: r.snapshot.resources, collections: r.collections }
    : { report: r.report.format(), entries: r.entryErrors };
}

test('a large file: the snapshot the yaml stage gives', async () => {
  const text = bigResources('http://127.0.0.1:9', ROWS, 'a');
  const fast = await loadResourcesFile(FILE, text, ENV);
  assert.equal(fast.ok, true);
  assert.deepEqual(summary(fast), summary(await loadResourcesFile(FILE, withYamlStage(text), ENV)));
});

test('a YAML error deep in a large file names its line, as the yaml stage words it', async () => {
  const lines = bigResources('http://127.0.0.1:9', ROWS, 'a').split('\n');
  const at = lines.indexOf(`  - display_name: k-a-${ROWS - 10}`);
  lines[at + 2] = '    allowed_models: [gpt-test';
  const text = lines.join('\n');
  const r = await loadResourcesFile(FILE, text, ENV);
  assert.equal(r.ok, false);
  // The yaml stage's own report, in the pipeline's words (src/resources/pipeline.ts `loadResourcesFile`).
  const scratch = new FileReport('resources file', '');
  assert.equal(parseYaml(text, scratch), undefined);
  const expected = new FileReport('resources file', FILE);
  for (const e of scratch.entries) expected.add('(file)', `YAML parse error: ${e.message} at line ${e.line}`);
  assert.equal(r.ok ? '' : r.report.format(), expected.format());
  // yaml notices the unclosed `[` on the line after it (1-based: `at` + 3 is the bad line).
  assert.equal(scratch.entries[0]?.line, at + 4);
});

test('a bad row deep in a large file names its entry and field, as the yaml stage does', async () => {
  const bad = `  - display_name: k-a-${ROWS - 3}\n`;
  const text = bigResources('http://127.0.0.1:9', ROWS, 'a').replace(bad, `${bad}    disabled: sometimes\n`);
  const r = await loadResourcesFile(FILE, text, ENV);
  assert.equal(r.ok, false);
  assert.deepEqual(summary(r), summary(await loadResourcesFile(FILE, withYamlStage(text), ENV)));
  assert.equal(
    r.ok ? '' : r.report.format(),
    `resources file ${FILE}: 1 error(s):\n` +
      `  - api_keys[${ROWS - 2}] ("k-a-${ROWS - 3}"): disabled: Invalid input: expected boolean, received string`,
  );
});
