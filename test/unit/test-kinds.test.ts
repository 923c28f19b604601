// test/unit needs nothing beyond `npm ci` (docs/architecture.md "Tests by kind"): no unit file starts etcd or
// Redis, makes certificates with openssl or spawns a process. Such a file belongs in test/integration/.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const UNIT = resolve(import.meta.dirname);

/** The support modules that start a server or a tool the machine must have installed. */
const NEEDS_A_TOOL = /from '\.\.\/support\/(etcd|etcd-gateway|redis|redis-fleet|tls|wrangler-dev)\.ts'/;
const SPAWNS = /from 'node:child_process'/;

test('no unit test starts etcd, Redis, openssl or another process', () => {
  const leaks = readdirSync(UNIT)
    .filter((f) => f.endsWith('.ts') && f !== 'test-kinds.test.ts')
    .filter((f) => {
      const text = readFileSync(join(UNIT, f), 'utf8');
      return NEEDS_A_TOOL.test(text) || SPAWNS.test(text);
    });
  assert.deepEqual(leaks, [], 'move these to test/integration/ (git mv), so that npm run test:unit needs nothing');
});
