// The libraries the shipped artefacts carry are what an audit sees (docs/security.md "Deployments"): every package
// the Node bundle and the executable bundle (`node build.mjs --packages`) is a production package of the lockfile,
// which `npm audit --omit=dev` reads; the ones Sluice imports are package.json `dependencies` pinned to the
// version installed; nothing else is.
// Run: node --import tsx --test test/integration/bundled-dependencies.test.ts
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

interface LockEntry {
  version: string;
  dev?: boolean;
  dependencies?: Record<string, string>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};
const dependencies = pkg.dependencies ?? {};

function bundled(): string[] {
  const r = spawnSync(process.execPath, ['build.mjs', '--packages'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean);
}

describe('bundled libraries are dependencies', () => {
  const packages = bundled();
  const entry = (name: string) => lock.packages[`node_modules/${name}`];

  test('the artefacts bundle the runtime libraries (the list is read, not empty)', () => {
    for (const name of ['hono', 'zod', 'yaml']) assert.ok(packages.includes(name), `${name} in ${packages.join(' ')}`);
  });

  test('every bundled package is a production package of the lockfile (npm audit --omit=dev sees it)', () => {
    for (const name of packages) {
      assert.ok(entry(name), `${name}: in package-lock.json`);
      assert.notEqual(entry(name)!.dev, true, `${name}: marked dev in package-lock.json`);
    }
  });

  test('each is a dependency of package.json or of a bundled dependency; no dependency is unbundled', () => {
    const reached = new Set(packages.flatMap((name) => Object.keys(entry(name)?.dependencies ?? {})));
    for (const name of packages) {
      assert.ok(name in dependencies || reached.has(name), `${name}: neither a dependency nor reached from one`);
    }
    for (const name of Object.keys(dependencies)) {
      assert.ok(packages.includes(name), `${name}: a dependency not bundled`);
    }
  });

  test('dependencies are pinned to the installed version and are not devDependencies too', () => {
    for (const [name, version] of Object.entries(dependencies)) {
      assert.equal(version, entry(name)?.version, `${name}: pinned to the lockfile's version`);
      assert.equal(pkg.devDependencies?.[name], undefined, `${name}: also a devDependency`);
    }
  });
});
