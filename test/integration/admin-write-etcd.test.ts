// The admin write API end to end against a real etcd (docs/admin.md): a key issued on one replica's admin
// listener is served by two replicas watching the same prefix; rotated, the old key works through its grace on
// both; revoked, both answer 401 once their watch delivered the change.
// Run: node --import tsx --test test/integration/admin-write-etcd.test.ts
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdminApp } from '../../src/admin/app.ts';
import { adminWritesFor } from '../../src/admin/write-setup.ts';
import { AUDIT_MSG } from '../../src/admin/writes.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { until } from '../support/until.ts';

const WRITE_KEY = 'admin-write-SECRET-e2e';
const P = '/adminw';

let etcd: EtcdServer;
const replicas: EtcdTestGateway[] = [];

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  for (const r of replicas) await r.stop();
  await etcd?.stop();
});

test('issue → use → rotate → old key in grace → revoke → 401 on both replicas', async () => {
  const s = seeder(etcd.endpoint);
  await s.put(`${P}/provider_keys/pk1`, {
    display_name: 'mock',
    provider: 'openai',
    api_key: 'sk-up',
    api_base: 'http://127.0.0.1:9/v1',
  });
  await s.put(`${P}/models/m1`, { display_name: 'gpt-test', model_name: 'gpt-upstream', provider_key_id: 'pk1' });
  for (let i = 0; i < 2; i++) replicas.push(startEtcdGateway({ endpoint: etcd.endpoint, prefix: P }));
  const a = replicas[0]!;
  for (const r of replicas) await r.until(() => r.gw.snapshot?.models.has('m1') === true, 'the model served');

  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const host = {
    config: { ...a.gw.config, admin: { ...a.gw.config.admin, write_keys: [WRITE_KEY] } },
    platform: a.platform,
    log: { info: (msg: string, fields?: Record<string, unknown>) => lines.push({ msg, fields: fields ?? {} }) },
  };
  const writes = adminWritesFor(host);
  assert.ok(writes, 'etcd mode with a write key: writes are on');
  const admin = createAdminApp(a.gw, undefined, [writes]);
  const proxies = replicas.map((r) => createProxyApp(r.gw));
  const write = async (method: string, path: string, body?: unknown) => {
    const res = await admin.request(path, {
      method,
      headers: { authorization: `Bearer ${WRITE_KEY}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as { key?: string; revision: number };
  };
  const statusOn = async (i: number, key: string) =>
    (await proxies[i]!.request('/v1/models', { headers: { authorization: `Bearer ${key}` } }, { peer: '127.0.0.1:1' }))
      .status;
  const applied = (revision: number) => async () => {
    for (const r of replicas) {
      await r.until(() => (r.gw.facts.applied?.applied_revision ?? 0) >= revision, `rev ${revision}`);
    }
  };

  const issued = await write('POST', '/admin/v1/api_keys', { id: 'ci', allowed_models: ['*'], team_id: 't1' });
  await applied(issued.revision)();
  for (const i of [0, 1]) assert.equal(await statusOn(i, issued.key!), 200, `replica ${i} serves the issued key`);
  const stored = await s.client.range(`${P}/api_keys/ci`);
  assert.ok(!stored.kvs[0]!.value.includes(issued.key!), 'etcd holds the hash, never the key');

  const rotated = await write('POST', '/admin/v1/api_keys/ci/rotate', { grace_seconds: 2 });
  await applied(rotated.revision)();
  for (const i of [0, 1]) {
    assert.equal(await statusOn(i, rotated.key!), 200, `replica ${i}: the new key`);
    assert.equal(await statusOn(i, issued.key!), 200, `replica ${i}: the old key in its grace`);
  }
  // The grace ends on each replica's clock: the old key stops without any further write.
  for (const i of [0, 1]) {
    await until(async () => (await statusOn(i, issued.key!)) === 401, 10_000, `replica ${i}: old key after the grace`);
  }

  const t0 = performance.now();
  const revoked = await write('POST', '/admin/v1/api_keys/ci/revoke');
  await applied(revoked.revision)();
  const propagationMs = performance.now() - t0;
  for (const i of [0, 1]) assert.equal(await statusOn(i, rotated.key!), 401, `replica ${i}: revoked`);
  assert.ok(propagationMs < 2_000, `revocation reached both replicas in ${propagationMs.toFixed(0)} ms`);
  console.log(`revocation applied on both replicas ${propagationMs.toFixed(0)} ms after the write was sent`);

  assert.deepEqual(lines.map((l) => [l.msg, l.fields.action, l.fields.admin_key]), [
    [AUDIT_MSG, 'issue', 'write_keys[0]'],
    [AUDIT_MSG, 'rotate', 'write_keys[0]'],
    [AUDIT_MSG, 'revoke', 'write_keys[0]'],
  ]);
  const logged = JSON.stringify(lines);
  assert.ok(!logged.includes(issued.key!) && !logged.includes(rotated.key!) && !logged.includes(WRITE_KEY));
});

test('two admins editing one key: neither edit is lost (compare-and-swap on the revision)', async () => {
  const r = replicas[0]!;
  const host = {
    config: { ...r.gw.config, admin: { ...r.gw.config.admin, write_keys: [WRITE_KEY] } },
    platform: r.platform,
    log: { info() {} },
  };
  const admin = createAdminApp(r.gw, undefined, [adminWritesFor(host)]);
  const send = (method: string, path: string, body: unknown) =>
    admin.request(path, {
      method,
      headers: { authorization: `Bearer ${WRITE_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  assert.equal((await send('POST', '/admin/v1/api_keys', { id: 'race', allowed_models: [] })).status, 201);
  const edits = await Promise.all([
    send('PATCH', '/admin/v1/api_keys/race', { team_id: 'team-x' }),
    send('PATCH', '/admin/v1/api_keys/race', { user_id: 'user-y' }),
    send('PATCH', '/admin/v1/api_keys/race', { allowed_models: ['gpt-*'] }),
  ]);
  assert.deepEqual(edits.map((e) => e.status), [200, 200, 200]);
  const row = JSON.parse((await seeder(etcd.endpoint).client.range(`${P}/api_keys/race`)).kvs[0]!.value);
  assert.equal(row.team_id, 'team-x');
  assert.equal(row.user_id, 'user-y');
  assert.deepEqual(row.allowed_models, ['gpt-*']);
});
