// Black-box, on Bun: the gateway runs with JavaScriptCore told a memory of 1 GiB (runtimes/bun-start-env.ts,
// docs/performance.md "Configuration at scale"), set by the restart the entrypoint makes as it starts, and an
// operator's own value is kept. Run: node --import tsx --test test/process/bun-heap-env.test.ts
import assert from 'node:assert/strict';
import { totalmem } from 'node:os';
import { describe, test } from 'node:test';
import { startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, environOf, resourcesFor, spawnGateway } from '../support/process.ts';

const VAR = 'BUN_JSC_forceRAMSize';

async function environOfGateway(env: Record<string, string>): Promise<Record<string, string>> {
  const mock = await startMockUpstream();
  const g = await spawnGateway({
    runtime: 'bun',
    config: baseConfig(),
    files: { 'resources.yaml': resourcesFor(mock.base) },
    env: { CALLER_KEY, ...env },
  });
  try {
    await g.waitReady('/readyz');
    return environOf(g.proc.pid!);
  } finally {
    await g.stop(10_000);
    await mock.close();
  }
}

describe("Bun's heap is told a memory of 1 GiB", () => {
  test('the serving PID carries it', { skip: totalmem() <= 1 << 30 && 'a machine of 1 GiB or less' }, async () => {
    assert.equal((await environOfGateway({}))[VAR], '1073741824');
  });

  test("an operator's value is kept", async () => {
    assert.equal((await environOfGateway({ [VAR]: '4294967296' }))[VAR], '4294967296');
  });
});
