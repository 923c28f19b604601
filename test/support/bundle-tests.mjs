// Bundles test files for Node's runner (test/run.sh's unit kind): each entry becomes one ES module under
// .test-build/ with the sources it imports (shared pieces split into chunks, npm packages left as imports), so
// a file starts without a TypeScript loader. Every module keeps its own source's `import.meta.url`, `dirname` and
// `filename`, so paths a test builds from them name the repository's files; inline source maps make stack traces
// and the runner's locations name the .ts lines.
// `--groups N` bundles the files into N entries (`.test-build/group-<i>.test.mjs`, and one more per file that must
// run alone), each importing its share in order, so one process starts and loads the gateway's modules once per
// group instead of once per file (most of a unit run's CPU). A file gets a group of its own when it has a top-level `beforeEach`/`afterEach` (in a shared
// module that hook would run around every other file's tests too) or a line `// Runs alone: <why>` (it needs a
// process whose modules no other file used first). Groups are filled largest file first.
// `node test/support/bundle-tests.mjs [--groups N] <file.test.ts>...` prints nothing on success.
import { build } from 'esbuild';
import { readFile, rm, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export const OUT_DIR = '.test-build';

const ownMeta = {
  name: 'own-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      let text = await readFile(args.path, 'utf8');
      if (text.includes('import.meta')) {
        text = text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
          .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
          .replaceAll('import.meta.filename', JSON.stringify(args.path));
      }
      return { contents: text, loader: 'ts' };
    });
  },
};

/** Entries `group:<i>` whose module imports the group's files in order. */
function groupEntries(groups) {
  return {
    name: 'test-groups',
    setup(b) {
      b.onResolve({ filter: /^group:\d+$/ }, (args) => ({ path: args.path, namespace: 'test-group' }));
      b.onLoad({ filter: /.*/, namespace: 'test-group' }, (args) => ({
        contents: groups[Number(args.path.slice('group:'.length))].map((f) => `import ${JSON.stringify(f)};`)
          .join('\n'),
        resolveDir: process.cwd(),
        loader: 'js',
      }));
    },
  };
}

/** Each file that must run alone in a group of its own, the rest largest first into the lightest of `n` groups. */
async function split(files, n) {
  const alone = [];
  const shared = [];
  for (const file of files) {
    const text = await readFile(file, 'utf8');
    if (/^(beforeEach|afterEach)\(|^\/\/ Runs alone:/m.test(text)) alone.push([file]);
    else shared.push({ file, size: (await stat(file)).size });
  }
  const bins = Array.from({ length: n }, () => ({ size: 0, files: [] }));
  for (const { file, size } of shared.sort((a, b) => b.size - a.size)) {
    const bin = bins.reduce((a, b) => (b.size < a.size ? b : a));
    bin.size += size;
    bin.files.push(file);
  }
  return [...alone, ...bins.filter((b) => b.files.length > 0).map((b) => b.files.sort())];
}

const args = process.argv.slice(2);
const at = args.indexOf('--groups');
const groupCount = at === -1 ? 0 : Number(args.splice(at, 2)[1]);
const files = args.map((f) => resolve(f));
const groups = groupCount > 0 ? await split(files, groupCount) : undefined;
await rm(OUT_DIR, { recursive: true, force: true });
await build({
  entryPoints: groups === undefined ? files : groups.map((_, i) => ({ in: `group:${i}`, out: `group-${i}.test` })),
  outdir: OUT_DIR,
  outbase: '.',
  outExtension: { '.js': '.mjs' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: 'inline',
  logLevel: 'warning',
  plugins: groups === undefined ? [ownMeta] : [ownMeta, groupEntries(groups)],
});
