// Black-box: two bin/sluice processes on one etcd prefix (docs/admin.md). A key issued through replica A's
// admin listener is served by both; rotated, the old key works on both through its grace; revoked, both
// answer 401 once their watch delivered the write; the audit line is in A's log without the key.
// Run: node build.mjs && node --import tsx --test test/process/admin-write-replicas.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { seeder } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const P = '/replicas';
const READ_KEY = 'admin-read-SECRET-proc';
const WRITE_KEY = 'admin-write-SECRET-proc';

let etcd: EtcdServer;
const replicas: GatewayProcess[] = [];

before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  for (const g of replicas) await g.stop();
  await etcd?.stop();
});

function config(endpoint: string): string {
  return `etcd: { endpoints: ["${endpoint}"], prefix: ${P} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [${READ_KEY}], write_keys: [${WRITE_KEY}] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;
}

async function status(g: GatewayProcess, key: string): Promise<number> {
  const r = await fetch(g.url('/v1/models'), { headers: { authorization: `Bearer ${key}` } });
  await r.body?.cancel();
  return r.status;
}

async function admin(g: GatewayProcess, path: string, key: string, body?: unknown): Promise<Response> {
  return await fetch(g.url(path, 'admin'), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
}

test('issue on A → both serve it → rotate (grace) → revoke → 401 on both', async () => {
  const s = seeder(etcd.endpoint);
  await s.put(`${P}/provider_keys/pk1`, { provider: 'openai', api_key: 'sk-up', api_base: 'http://127.0.0.1:9/v1' });
  await s.put(`${P}/models/m1`, { display_name: 'gpt-test', model_name: 'gpt-upstream', provider_key_id: 'pk1' });
  for (let i = 0; i < 2; i++) replicas.push(await spawnGateway({ config: config(etcd.endpoint) }));
  for (const g of replicas) await g.waitReady('/readyz');
  const [a, b] = replicas as [GatewayProcess, GatewayProcess];

  assert.equal((await admin(a, '/admin/v1/api_keys', READ_KEY, { allowed_models: ['*'] })).status, 403);
  const issued = await admin(a, '/admin/v1/api_keys', WRITE_KEY, { id: 'ci', allowed_models: ['*'] });
  assert.equal(issued.status, 201);
  const { key } = await issued.json() as { key: string };
  for (const g of [a, b]) await until(async () => (await status(g, key)) === 200, 5_000, 'the issued key served');

  const rotated = await admin(a, '/admin/v1/api_keys/ci/rotate', WRITE_KEY, { grace_seconds: 300 });
  assert.equal(rotated.status, 200);
  const { key: next } = await rotated.json() as { key: string };
  for (const g of [a, b]) {
    await until(async () => (await status(g, next)) === 200, 5_000, 'the rotated key served');
    assert.equal(await status(g, key), 200, 'the old key in its grace');
  }

  const t0 = Date.now();
  assert.equal((await admin(a, '/admin/v1/api_keys/ci/revoke', WRITE_KEY)).status, 200);
  for (const g of [a, b]) {
    await until(async () => (await status(g, next)) === 401, 5_000, 'the revoked key refused');
    assert.equal(await status(g, key), 401, 'the old key refused with it');
  }
  console.log(`revocation refused on both processes ${Date.now() - t0} ms after the write was sent`);

  const audit = a.logs.filter((l) => l.msg === 'admin write');
  assert.deepEqual(audit.map((l) => l.action), ['issue', 'rotate', 'revoke']);
  assert.equal(b.logs.filter((l) => l.msg === 'admin write').length, 0);
  const everything = JSON.stringify([...a.logs, ...b.logs, ...a.rawErr, ...b.rawErr]);
  for (const secret of [key, next, WRITE_KEY, READ_KEY]) assert.ok(!everything.includes(secret));
});
