// Bundles test files for Node's runner (test/run.sh's unit kind): each file becomes one ES module under
// .test-build/ with the sources it imports (shared pieces split into chunks, npm packages left as imports), so
// a file starts without a TypeScript loader — about half the CPU a unit run takes. Every module keeps its own
// source's `import.meta.url`, `dirname` and `filename`, so paths a test builds from them name the repository's
// files; inline source maps make stack traces and the runner's locations name the .ts lines.
// `node test/support/bundle-tests.mjs <file.test.ts>...` prints nothing on success.
import { build } from 'esbuild';
import { readFile, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
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

const files = process.argv.slice(2);
await rm(OUT_DIR, { recursive: true, force: true });
await build({
  entryPoints: files,
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
  plugins: [ownMeta],
});
