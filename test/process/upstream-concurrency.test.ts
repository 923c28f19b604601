// Black-box, on Node, Bun and Deno: more requests than Bun's fetch sends at once by default (256) are all in
// flight at the upstream together. The mock holds every request until the last one has arrived, so a gateway
// that queues any of them never completes the set. On Bun the entrypoint restarts itself once with
// BUN_CONFIG_MAX_HTTP_REQUESTS set (runtimes/bun-upstream-cap.ts): its PID is the one spawned, and an
// operator's own value is kept.
// Run: node build.mjs && node --import tsx --test test/process/upstream-concurrency.test.ts
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, environOf, resourcesFor, type RuntimeName, spawnGateway } from '../support/process.ts';

const CALLERS = 300;
const VAR = 'BUN_CONFIG_MAX_HTTP_REQUESTS';

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`upstream requests in flight on ${runtime}`, () => {
    const cleanup: (() => Promise<unknown>)[] = [];
    after(async () => {
      for (const c of cleanup.reverse()) await c();
    });

    test(`${CALLERS} callers are at the upstream at once`, async () => {
      const mock = await startMockUpstream();
      cleanup.push(() => mock.close());
      let release!: () => void;
      mock.setDefault({ hold: new Promise<void>((r) => (release = r)) });
      const g = await spawnGateway({
        runtime,
        config: baseConfig(),
        files: { 'resources.yaml': resourcesFor(mock.base) },
        env: { CALLER_KEY },
      });
      cleanup.push(() => g.stop(10_000));
      await g.waitReady('/readyz');
      cleanup.push(async () => release());
      const arrived = mock.waitForRequests(CALLERS, 30_000);
      const answers = Array.from({ length: CALLERS }, () =>
        fetch(g.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
          signal: AbortSignal.timeout(60_000),
        }).then(async (r) => {
          await r.text();
          return r.status;
        }));
      await arrived.catch((e) => {
        throw new Error(`${(e as Error).message}; ${mock.requests.length} of ${CALLERS} reached the upstream`);
      });
      release();
      assert.deepEqual(new Set(await Promise.all(answers)), new Set([200]));
      if (runtime === 'bun') {
        assert.equal(environOf(g.proc.pid!)[VAR], '65535', 'the spawned PID carries the raised cap');
      }
    });
  });
}

describe('an operator-set cap on bun', () => {
  test(`${VAR} from the environment is kept (no restart with another value)`, async (t) => {
    const mock = await startMockUpstream();
    t.after(() => mock.close());
    const g = await spawnGateway({
      runtime: 'bun',
      config: baseConfig(),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY, [VAR]: '1024' },
    });
    t.after(() => g.stop(10_000));
    await g.waitReady('/readyz');
    assert.equal(environOf(g.proc.pid!)[VAR], '1024');
  });
});
