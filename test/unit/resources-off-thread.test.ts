// The resources pipeline with its YAML parsed elsewhere (src/resources/yaml-pieces.ts): the same snapshot and
// the same report as a parse on the event loop, the rows handed over in pieces, and the parse on the event
// loop again when the other thread fails. The thread here is simulated in-process; test/process/reload-
// latency.test.ts runs the runtimes' real workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  loadResourcesFile,
  type LoadResult,
  OFF_THREAD_MIN_BYTES,
  type ParsedOn,
} from '../../src/resources/pipeline.ts';
import { type YamlPiece, type YamlPieces, yamlPieces } from '../../src/resources/yaml-pieces.ts';
import { withYamlStage } from '../support/big-resources.ts';

const FILE = '/etc/sluice/resources.yaml';

/** A file past the off-thread threshold: `rows` models and as many api keys (1 400 rows: just past it). */
function bigFile(rows: number, tail = ''): string {
  const out = ['_format_version: "1"', 'provider_keys:', '  - display_name: mock', '    provider: echo', 'models:'];
  for (let i = 0; i < rows; i++) out.push(`  - display_name: m-${i}`, '    model_name: up', '    provider_key: mock');
  out.push('api_keys:');
  for (let i = 0; i < rows; i++) {
    const hash = createHash('sha256').update(`k-${i}`).digest('hex');
    out.push(`  - display_name: k-${i}`, `    key_hash: ${hash}`, '    allowed_models: [m-0]');
  }
  const text = withYamlStage(out.join('\n') + '\n' + tail);
  assert.ok(text.length >= OFF_THREAD_MIN_BYTES);
  return text;
}

/** `yamlPieces` behind the thread contract, counting the pieces asked for. */
function inProcess(pieces: YamlPiece['type'][]): (text: string) => YamlPieces {
  return (text) => {
    const next = yamlPieces(text);
    return {
      next: async () => {
        const p = next();
        pieces.push(p.type);
        return p;
      },
      close: () => {},
    };
  };
}

function summary(r: LoadResult): unknown {
  return r.ok
    ? { counts: r.snapshot.counts(), resources: r.snapshot.resources, collections: r.collections }
    : { report: r.report.format(), entries: r.entryErrors };
}

test('a large file parsed in pieces gives the snapshot a parse on the event loop gives', async () => {
  const text = bigFile(1400);
  const pieces: YamlPiece['type'][] = [];
  const told: ParsedOn[] = [];
  const off = await loadResourcesFile(FILE, text, {}, {
    parseOffThread: inProcess(pieces),
    onParsed: (w) => told.push(w),
  });
  const here = await loadResourcesFile(FILE, text, {}, { onParsed: (w) => told.push(w) });
  assert.equal(off.ok, true);
  assert.deepEqual(summary(off), summary(here));
  assert.deepEqual(told, [{ on: 'worker thread' }, { on: 'event loop' }]);
  // The head, then 1 400 models, 1 400 keys and one provider key in pieces of 500 rows, then done.
  assert.deepEqual(pieces, ['head', ...Array(3 + 3 + 1).fill('rows'), 'done']);
});

test('a YAML error and a row error read the same as from a parse on the event loop', async () => {
  for (const text of [bigFile(1400, 'oops: [1\nb: 2\n'), bigFile(1400).replace('    model_name: up\n', '')]) {
    const off = await loadResourcesFile(FILE, text, {}, { parseOffThread: inProcess([]) });
    const here = await loadResourcesFile(FILE, text, {});
    assert.equal(off.ok, false);
    assert.deepEqual(summary(off), summary(here));
  }
});

test('a thread that fails leaves the parse to the event loop, and says why', async () => {
  const text = bigFile(1400);
  let closed = 0;
  const broken = (): YamlPieces => ({
    next: () => Promise.reject(new Error('worker died')),
    close: () => void closed++,
  });
  const told: ParsedOn[] = [];
  const r = await loadResourcesFile(FILE, text, {}, { parseOffThread: broken, onParsed: (w) => told.push(w) });
  assert.equal(r.ok, true);
  assert.deepEqual(summary(r), summary(await loadResourcesFile(FILE, text, {})));
  assert.equal(closed, 1);
  assert.deepEqual(told, [{ on: 'event loop', workerError: 'worker died' }]);
  // A worker that cannot even be constructed: the same.
  const unborn = () => {
    throw new Error('no such module');
  };
  told.length = 0;
  assert.equal(
    (await loadResourcesFile(FILE, text, {}, { parseOffThread: unborn, onParsed: (w) => told.push(w) })).ok,
    true,
  );
  assert.deepEqual(told, [{ on: 'event loop', workerError: 'no such module' }]);
});

test('a small file is parsed on the event loop', async () => {
  let asked = 0;
  const told: ParsedOn[] = [];
  const r = await loadResourcesFile(FILE, '_format_version: "1"\nmodels: []\n', {}, {
    parseOffThread: (t) => {
      asked++;
      return inProcess([])(t);
    },
    onParsed: (w) => told.push(w),
  });
  assert.equal(r.ok, true);
  assert.equal(asked, 0);
  assert.deepEqual(told, [{ on: 'event loop' }]);
});
