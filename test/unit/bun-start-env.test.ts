// What the Bun entrypoint restarts itself with (runtimes/bun-start-env.ts): the fetch cap and the memory told to
// JavaScriptCore's collector, each only where the environment has none.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HEAP_RAM_BYTES, HEAP_RAM_VAR, startEnv, UPSTREAM_REQUESTS_VAR } from '../../runtimes/bun-start-env.ts';

const GiB = 1 << 30;

describe('the environment Bun starts again with', () => {
  test('an empty environment on a large machine: the fetch cap and a memory of 1 GiB', () => {
    assert.deepEqual(startEnv({}, 24 * GiB), { [UPSTREAM_REQUESTS_VAR]: '65535', [HEAP_RAM_VAR]: '1073741824' });
    assert.equal(HEAP_RAM_BYTES, GiB);
  });

  test("an operator's values are kept, and nothing left to add means no restart", () => {
    assert.deepEqual(startEnv({ [UPSTREAM_REQUESTS_VAR]: '256' }, 24 * GiB), { [HEAP_RAM_VAR]: '1073741824' });
    assert.deepEqual(startEnv({ [HEAP_RAM_VAR]: '4294967296' }, 24 * GiB), { [UPSTREAM_REQUESTS_VAR]: '65535' });
    assert.deepEqual(startEnv({ [UPSTREAM_REQUESTS_VAR]: '1024', [HEAP_RAM_VAR]: '1' }, 24 * GiB), {});
  });

  test('a machine of 1 GiB or less keeps its own memory', () => {
    assert.deepEqual(startEnv({ [UPSTREAM_REQUESTS_VAR]: '1024' }, GiB), {});
    assert.deepEqual(startEnv({}, GiB / 2), { [UPSTREAM_REQUESTS_VAR]: '65535' });
  });
});
