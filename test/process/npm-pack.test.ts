// The installable package (docs/deploy.md "npm package"): `npm pack` yields a tarball of the `bin`, the built
// bundle, the schemas and the example (nothing test-only, no sources), and `npm install -g` of it into a fresh
// prefix gives a `sluice` command that prints its version and runs the example until SIGTERM. The install also
// brings the libraries the bundle carries, at the versions it carries (the package's `dependencies`, for audits;
// the bundle never loads them): from npm's cache when it has them, else from the registry.
// Run: node --import tsx --test test/process/npm-pack.test.ts
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MSG } from '../../src/observability/messages.ts';
import { VERSION } from '../../src/version.ts';
import { freePort, spawnGateway } from '../support/process.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const SHIPPED = [
  'README.md',
  'bin/sluice',
  'dist/node.mjs',
  'examples/config.yaml',
  'examples/resources.yaml',
  'package.json',
  'schemas/config.schema.json',
  'schemas/resources.schema.json',
];

let tmp: string;
let tarball: string;
let prefix: string;

function npm(args: string[], cwd: string): string {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `npm ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

before(() => {
  // The bundle the test command built: `prepare` would rebuild it under gateways other tests are starting.
  if (!existsSync(join(ROOT, 'dist/node.mjs'))) throw new Error('dist/node.mjs is missing: run `npm run build`');
  tmp = mkdtempSync(join(tmpdir(), 'sluice-pack-'));
  const out = npm(['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], ROOT);
  const report = JSON.parse(out) as { filename: string }[];
  tarball = join(tmp, report[0]!.filename);
  prefix = join(tmp, 'prefix');
  npm(['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], tmp);
});
after(() => rmSync(tmp, { recursive: true, force: true }));

describe('npm pack + npm install -g', () => {
  test('the tarball holds the bin, the bundle, the schemas and the example: nothing else', () => {
    const r = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
    const files = r.stdout.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, '')).sort();
    assert.deepEqual(files, SHIPPED);
  });

  test('the install holds the dependencies at the versions the bundle carries', () => {
    const installed = join(prefix, 'lib/node_modules/sluice');
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    const ours = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: object };
    assert.deepEqual(pkg.dependencies, ours.dependencies);
    for (const [name, version] of Object.entries(pkg.dependencies!)) {
      const dep = JSON.parse(readFileSync(join(installed, 'node_modules', name, 'package.json'), 'utf8'));
      assert.equal(dep.version, version, name);
    }
  });

  test('`sluice --version` from the fresh prefix', () => {
    const r = spawnSync(join(prefix, 'bin/sluice'), ['--version'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr.trim(), `sluice ${VERSION} (node)`);
  });

  test('the installed example runs: ready, a chat, SIGTERM → exit 0', async () => {
    const installed = join(prefix, 'lib/node_modules/sluice/examples/config.yaml');
    const [proxy, status, admin] = [await freePort(), await freePort(), await freePort()];
    const g = await spawnGateway({
      executable: join(prefix, 'bin/sluice'),
      config: '',
      args: ['--config', installed],
      env: {
        AISIX_PROXY__ADDR: `127.0.0.1:${proxy}`,
        AISIX_ADMIN__ADDR: `127.0.0.1:${admin}`,
        AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${status}`,
        AISIX_SHUTDOWN__MIN_DRAIN_SECS: '0',
      },
    });
    try {
      const url = (path: string) => `http://127.0.0.1:${proxy}${path}`;
      await g.waitForLog((l) => l.msg === MSG.listening && l.listener === 'proxy', 20_000);
      assert.equal((await fetch(url('/readyz'))).status, 200);
      const r = await fetch(url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: 'Bearer sk-sluice-demo', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'from the package' }] }),
      });
      assert.equal(r.status, 200);
      assert.match(await r.text(), /from the package/);
      assert.equal(await g.stop(), 0);
    } finally {
      g.kill();
    }
  });
});
