// Bundle the Node entrypoint so bin/sluice starts fast (no TypeScript loader at run time).
// Run by `npm ci`/`npm install` (prepare) and by the test command.
// `node build.mjs --binary` (npm run build:binary) instead compiles the Bun entrypoint into one executable,
// dist/sluice-<os>-<arch>, which needs no Node, npm or node_modules where it runs (docs/deploy.md).
// `node build.mjs --packages` prints the npm packages the two carry, which package.json lists as `dependencies`
// so that audits see them (docs/security.md "Deployments").
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

const NODE_ENTRY = 'runtimes/node.ts';
// runtimes/yaml-thread.ts is a second entrypoint of the executable: see compileBinary.
const BINARY_ENTRIES = ['runtimes/bun.ts', 'runtimes/yaml-thread.ts'];

if (process.argv.includes('--binary')) compileBinary();
else if (process.argv.includes('--packages')) await printPackages();
else await bundleNode();

async function bundleNode() {
  await build({
    entryPoints: { node: NODE_ENTRY },
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
  asciiOnly('dist/node.mjs');
}

/**
 * Escape what esbuild leaves non-ASCII (comments, and the text of tagged templates) as `\uXXXX`: one character past
 * Latin-1 makes V8 keep the whole bundle's source, which it holds for as long as the process runs, at two bytes per
 * character. In a comment the escape means nothing; in a template it cooks to the same string (`String.raw`
 * alone would see the difference).
 */
function asciiOnly(file) {
  const text = readFileSync(file, 'utf8');
  const escaped = text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (escaped !== text) writeFileSync(file, escaped);
}

/** The file `--binary` writes for this machine: `dist/sluice-linux-x64`, `dist/sluice-darwin-arm64` … */
function binaryPath() {
  return `dist/sluice-${process.platform}-${process.arch}`;
}

function compileBinary() {
  const bun = 'node_modules/.bin/bun';
  if (!existsSync(bun)) {
    console.error('build.mjs --binary: node_modules/.bin/bun is missing: run `npm ci` (bun is a devDependency)');
    process.exit(1);
  }
  // --bytecode: the executable starts from precompiled bytecode; --sourcemap keeps stack traces readable.
  // runtimes/yaml-thread.ts is a second entrypoint: the YAML worker thread loads it from inside the
  // executable (embedded as yaml-thread.js, the name runtimes/yaml-thread.ts asks for).
  const args = ['build', '--compile', '--minify', '--sourcemap', '--bytecode', ...BINARY_ENTRIES];
  // Written aside and renamed: a process running or copying the previous executable keeps a whole file.
  const tmp = `${binaryPath()}.tmp-${process.pid}`;
  const r = spawnSync(bun, [...args, '--outfile', tmp], { stdio: ['ignore', 'ignore', 'inherit'] });
  // The executable embeds its source maps.
  for (const map of [`${tmp}.map`, 'dist/yaml-thread.js.map']) rmSync(map, { force: true });
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    process.exit(r.status ?? 1);
  }
  renameSync(tmp, binaryPath());
  console.log(binaryPath());
}

/**
 * The npm packages the bundle and the executable carry, one name a line: what each one's entry points reach in
 * node_modules. The executable's graph is read with esbuild too (Bun's bundler follows the same imports).
 */
async function printPackages() {
  const names = new Set();
  for (const entryPoints of [[NODE_ENTRY], BINARY_ENTRIES]) {
    const r = await build({
      entryPoints,
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      outdir: 'dist',
      logLevel: 'error',
    });
    for (const input of Object.keys(r.metafile.inputs)) {
      if (!input.includes('node_modules/')) continue;
      const path = input.split('node_modules/').pop().split('/');
      names.add(path[0].startsWith('@') ? `${path[0]}/${path[1]}` : path[0]);
    }
  }
  console.log([...names].sort().join('\n'));
}
