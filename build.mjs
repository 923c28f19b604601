// Bundle the Node entrypoint so bin/sluice starts fast (no TypeScript loader at run time).
// Run by `npm ci`/`npm install` (prepare) and by the test command.
import { build } from 'esbuild';

await build({
  entryPoints: { node: 'runtimes/node.ts' },
  outdir: 'dist',
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: 'linked',
  legalComments: 'none',
  logLevel: 'warning',
  // Some bundled CommonJS dependencies call require() for Node built-ins.
  banner: {
    js:
      "import { createRequire as __sluiceRequire } from 'node:module'; const require = __sluiceRequire(import.meta.url);",
  },
});
