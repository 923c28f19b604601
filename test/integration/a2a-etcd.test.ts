// A2A agents and allowed_agents read from a real etcd (docs/a2a.md "Resources"): rows serve and are counted, a
// row AISIX's schema refuses is rejected with its field named, unknown members are reported, and a key from
// etcd reaches an agent from etcd through the proxy, with the agent's held credential.
// Run: node --import tsx --test test/integration/a2a-etcd.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { sha256Hex } from '../../src/util/crypto.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';

let etcd: EtcdServer;
let agent: MockA2a;
const gws: EtcdTestGateway[] = [];
before(async () => {
  etcd = await startEtcd();
  agent = await mockA2a();
});
after(async () => {
  await Promise.all(gws.map((g) => g.stop()));
  await etcd?.stop();
  await agent?.close();
});

test('etcd: a2a_agents serve, a bad row is rejected, a key reaches an agent through the proxy', async () => {
  const s = seeder(etcd.endpoint);
  const P = '/a2a-etcd';
  await s.put(`${P}/api_keys/k1`, { key_hash: await sha256Hex('sk-etcd'), allowed_models: [], allowed_agents: ['*'] });
  await s.put(`${P}/a2a_agents/ag1`, { name: 'echo', url: agent.url, auth_type: 'api_key', secret: 'held', later: 1 });
  await s.put(`${P}/a2a_agents/ag2`, { name: 'bad', url: agent.url, auth_type: 'bearer' });
  const t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
  gws.push(t);
  await t.source.firstApplied;
  t.gw.lifecycle.serve();

  const body = await (await createStatusApp(t.gw).request('/status/config')).json();
  assert.deepEqual(body.applied.resource_counts, { api_keys: 1, a2a_agents: 1 });
  const rejected = body.rejected as { resource_kind: string; resource_id: string; last_error: string }[];
  assert.deepEqual(rejected.map((r) => [r.resource_kind, r.resource_id]), [['a2a_agents', 'ag2']]);
  assert.match(rejected[0]!.last_error, /^secret: required/);
  assert.deepEqual(body.partially_compatible, [{ resource_kind: 'a2a_agents', field: 'later', count: 1 }]);

  const before = agent.received.length;
  const res = await createProxyApp(t.gw).request('/a2a/echo', {
    method: 'POST',
    headers: { authorization: 'Bearer sk-etcd', 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 't-1' } }),
  }, { peer: '127.0.0.1:5555' });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).result.status.state, 'completed');
  assert.equal(agent.received[before]!.headers['x-api-key'], 'held');
});
