// A resources file past SLICED_BYTES through the file source (src/sources/file.ts): hashed and decoded a slice
// at a time, to the digest and the text a single pass gives, multi-byte characters across slices included, and
// a malformed byte anywhere still refused as not UTF-8.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { createGateway } from '../../src/boot.ts';
import { loadConfig } from '../../src/config/load.ts';
import { type FileSource, SLICED_BYTES } from '../../src/sources/file.ts';
import { testPlatform } from '../support/platform.ts';

const RES = '/srv/resources.yaml';

/** A file of api keys whose names hold two-, three- and four-byte characters, past `SLICED_BYTES`. */
function largeFile(): string {
  const out = ['_format_version: "1"', 'models:', '  - { display_name: m, provider_key: pk, model_name: up }'];
  out.push(
    'provider_keys:',
    '  - { display_name: pk, provider: openai, api_key: sk-x, api_base: "http://127.0.0.1:9" }',
  );
  out.push('api_keys:');
  // Each row is some 1,100 bytes (few rows, so the test is quick): enough to pass the threshold by a fifth.
  const pad = 'é€😀'.repeat(100);
  for (let i = 0; i < (SLICED_BYTES * 1.2) / 1100; i++) {
    const hash = createHash('sha256').update(`k${i}`).digest('hex');
    out.push(`  - display_name: "${pad}-${i}"`, `    key_hash: ${hash}`, '    allowed_models: [m]');
  }
  return out.join('\n') + '\n';
}

/** A gateway over a resources file of `bytes` (a function: what each read finds, for a reload). */
function gateway(bytes: Uint8Array | (() => Uint8Array), heap?: boolean[]) {
  const platform = testPlatform({});
  platform.files = { ...platform.files!, read: async () => typeof bytes === 'function' ? bytes() : bytes };
  if (heap) platform.boundHeapGrowth = (on) => void heap.push(on);
  const c = loadConfig(
    '/srv/config.yaml',
    `resources_file: ${RES}\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n`,
    {},
  );
  if (!c.ok) throw new Error(c.report.format());
  return createGateway(c.config, platform);
}

test('a large file: the digest of its bytes, and every multi-byte name whole', async () => {
  const text = largeFile();
  const bytes = new TextEncoder().encode(text);
  assert.ok(bytes.length >= SLICED_BYTES, 'past the size hashed and decoded in slices');
  const g = gateway(bytes);
  const r = await g.source.load!();
  assert.equal(r.ok, true, r.ok ? '' : r.message);
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(bytes).digest('hex'));
  const names = g.gw.snapshot!.resources.api_keys.map((k) => k.display_name);
  const want = [...text.matchAll(/display_name: "((?:é€😀)+-\d+)"/g)].map((m) => m[1]);
  assert.deepEqual(names, want);
});

test('a large file with a malformed byte past the first slice: refused as not UTF-8', async () => {
  const bytes = new TextEncoder().encode(largeFile());
  bytes[SLICED_BYTES - 3] = 0xff;
  const r = await gateway(bytes).source.load!();
  assert.deepEqual(r, { ok: false, message: `resources file ${RES}: not valid UTF-8` });
});

test('a large file with a line longer than a slice: read whole, every name kept', async () => {
  // A comment of 2.5 MiB: a line that spans three of the decoder's slices.
  const text = largeFile().replace('api_keys:\n', `api_keys:\n# ${'x'.repeat(5 << 19)}\n`);
  const g = gateway(new TextEncoder().encode(text));
  const r = await g.source.load!();
  assert.equal(r.ok, true, r.ok ? '' : r.message);
  const names = g.gw.snapshot!.resources.api_keys.map((k) => k.display_name);
  assert.equal(names.length, [...text.matchAll(/display_name: "/g)].length);
});

test("a large file's load bounds the heap's growth while it runs, a failed one too; a small file's does not", async () => {
  const bytes = new TextEncoder().encode(largeFile());
  const heap: boolean[] = [];
  const g = gateway(bytes, heap);
  assert.equal((await g.source.load!()).ok, true);
  assert.deepEqual(heap, [true, false]);

  // A row the schema refuses: the load fails after the file was read.
  const bad = new TextEncoder().encode(largeFile() + '  - { display_name: no-hash, allowed_models: [m] }\n');
  const failed: boolean[] = [];
  assert.equal((await gateway(bad, failed).source.load!()).ok, false);
  assert.deepEqual(failed, [true, false]);

  const small: boolean[] = [];
  const text = '_format_version: "1"\napi_keys:\n  - { display_name: a, key_hash: ' + 'a'.repeat(64) +
    ', allowed_models: [] }\n';
  assert.equal((await gateway(new TextEncoder().encode(text), small).source.load!()).ok, true);
  assert.deepEqual(small, []);
});

test('a reload of a large file, hashed and decoded in the short slices of a serving gateway: the same digest and names', async () => {
  const first = new TextEncoder().encode(largeFile());
  const text = largeFile().replaceAll('😀-', '😀€-');
  const next = new TextEncoder().encode(text);
  let bytes = first;
  const g = gateway(() => bytes);
  assert.equal((await g.source.load!()).ok, true);
  bytes = next;
  await g.source.reload!();
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(next).digest('hex'));
  const names = g.gw.snapshot!.resources.api_keys.map((k) => k.display_name);
  assert.deepEqual(names, [...text.matchAll(/display_name: "((?:é€😀)+€-\d+)"/g)].map((m) => m[1]));
});

test("the platform's SHA-256 hashes every byte of each read, to the digest of the file", async () => {
  const first = new TextEncoder().encode(largeFile());
  const next = new TextEncoder().encode(largeFile().replaceAll('😀-', '😀€-'));
  let bytes = first;
  const g = gateway(() => bytes);
  const hashed: number[] = [];
  g.gw.platform.sha256Stream = () => {
    const h = createHash('sha256');
    hashed.push(0);
    return {
      update: (b) => {
        hashed[hashed.length - 1]! += b.length;
        h.update(b);
      },
      digest: () => h.digest(),
    };
  };
  assert.equal((await g.source.load!()).ok, true);
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(first).digest('hex'));
  bytes = next;
  await g.source.reload!();
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(next).digest('hex'));
  // The load's one read, then the reload's two that agreed.
  assert.deepEqual(hashed, [first.length, next.length, next.length]);
});

/**
 * A platform that reads a file a piece at a time (`openRead`), its whole-file `read` refusing: each piece asked
 * for is recorded (its size), and `files()` answers what the file holds at each open.
 */
function piecewiseGateway(files: () => Uint8Array) {
  const asked: number[] = [];
  let open = 0;
  const g = gateway(() => assert.fail('read whole'));
  g.gw.platform.files!.openRead = async () => {
    const bytes = files();
    let at = 0;
    open++;
    return {
      read: async (into: Uint8Array) => {
        // Less than asked at times, as a runtime may answer: the source reads on until its piece is full.
        const n = Math.min(into.length, bytes.length - at, 300_000);
        asked.push(into.length);
        into.set(bytes.subarray(at, at + n));
        at += n;
        return n;
      },
      close: async () => void open--,
    };
  };
  return { g, asked, isClosed: () => open === 0 };
}

test('a platform that reads in pieces: never read whole, into one buffer of a megabyte, the same digest and names', async () => {
  const text = largeFile();
  const bytes = new TextEncoder().encode(text);
  const { g, asked, isClosed } = piecewiseGateway(() => bytes);
  const r = await g.source.load!();
  assert.equal(r.ok, true, r.ok ? '' : r.message);
  assert.ok(isClosed(), 'the file is closed once read');
  assert.ok(Math.max(...asked) <= 1 << 20, `no piece over a megabyte (${Math.max(...asked)})`);
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(bytes).digest('hex'));
  const names = g.gw.snapshot!.resources.api_keys.map((k) => k.display_name);
  assert.deepEqual(names, [...text.matchAll(/display_name: "((?:é€😀)+-\d+)"/g)].map((m) => m[1]));
});

test('a platform that reads in pieces: a reload waits for the file to settle, a malformed byte is refused', async () => {
  const first = new TextEncoder().encode(largeFile());
  const changed = new TextEncoder().encode(largeFile().replaceAll('😀-', '😀€-'));
  let reads: Uint8Array[] = [first];
  const { g, isClosed } = piecewiseGateway(() => reads.length > 1 ? reads.shift()! : reads[0]!);
  assert.equal((await g.source.load!()).ok, true);
  // The file changes under the reload's first read: the text applied is the one two reads agreed on.
  reads = [first, changed, changed];
  await g.source.reload!();
  assert.ok(isClosed());
  assert.equal(g.gw.facts.applied?.config_hash, createHash('sha256').update(changed).digest('hex'));
  assert.equal(g.gw.snapshot!.resources.api_keys[0]!.display_name!.endsWith('€-0'), true);
  const bad = changed.slice();
  bad[SLICED_BYTES + 5] = 0xff;
  reads = [bad];
  const r = await (g.source as FileSource).read({ reload: true });
  assert.deepEqual(r, { ok: false, message: `resources file ${RES}: not valid UTF-8` });
});
