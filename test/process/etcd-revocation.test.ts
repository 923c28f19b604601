// A malformed revocation revokes (docs/security.md "Security state fails closed", the review's L6): an etcd
// api_keys row rewritten with `"disabled":"true"` (a string) or `expires_at:"2020-01-01"` is rejected, and the
// key stops serving at once instead of keeping its last good value; a valid row serves it again. Gateway
// processes on Node, Bun and Deno in etcd mode, each under its own prefix of one real etcd.
// Run: node build.mjs && node --import tsx --test test/process/etcd-revocation.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { seeder, trio } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const CALLER_HASH = createHash('sha256').update(CALLER_KEY).digest('hex');

function config(endpoint: string, prefix: string): string {
  return `etcd: { endpoints: ["${endpoint}"], prefix: ${prefix} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;
}

async function chat(g: GatewayProcess): Promise<{ status: number; text: string }> {
  const r = await fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hello' }] }),
    signal: AbortSignal.timeout(5000),
  });
  return { status: r.status, text: await r.text() };
}

let etcd: EtcdServer;
let mock: MockUpstream;
let s: ReturnType<typeof seeder>;
before(async () => {
  [etcd, mock] = await Promise.all([startEtcd(), startMockUpstream()]);
  s = seeder(etcd.endpoint);
});
after(async () => {
  await Promise.all([etcd?.stop(), mock?.close()]);
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: a malformed revocation in etcd`, () => {
    const prefix = `/l6-${runtime}`;
    let g: GatewayProcess;
    before(async () => {
      for (const [k, v] of trio(prefix, mock.base, CALLER_HASH)) await s.put(k, v);
      g = await spawnGateway({ runtime, config: config(etcd.endpoint, prefix) });
      await g.waitReady('/readyz', 'proxy', 30_000);
    });
    after(() => g.stop(10_000));

    test('"disabled":"true" and expires_at "2020-01-01" stop the key at once; a valid row serves it again', async () => {
      assert.equal((await chat(g)).status, 200);
      const row = { display_name: 'caller', key_hash: CALLER_HASH, allowed_models: ['*'] };
      for (const bad of [{ disabled: 'true' }, { expires_at: '2020-01-01' }]) {
        await s.put(`${prefix}/api_keys/k1`, { ...row, ...bad });
        let last = { status: 0, text: '' };
        await until(async () => (last = await chat(g)).status === 401, 15_000, `${JSON.stringify(bad)} to revoke`, 50);
        assert.equal(JSON.parse(last.text).error.message, 'invalid API key', last.text);
        await s.put(`${prefix}/api_keys/k1`, row);
        await until(async () => (await chat(g)).status === 200, 15_000, 'a valid row to serve again', 50);
      }
    });
  });
}
