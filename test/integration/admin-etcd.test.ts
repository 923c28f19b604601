// The admin surface in etcd mode (docs/aisix-compatibility.md "Endpoints"): the lists carry each row's etcd
// mod_revision, and `/admin/v1/health` has the `config` freshness block. Against a real etcd.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createAdminApp } from '../../src/admin/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway, trio } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';

const HASH = createHash('sha256').update('sk-caller-test-key').digest('hex');
const AUTH = { headers: { authorization: 'Bearer admin-secret-1' } };

let etcd: EtcdServer;
let t: EtcdTestGateway | undefined;

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  await t?.stop();
  await etcd?.stop();
});

test('lists carry mod_revision; health has the config block with the applied revision and its age', async () => {
  const s = seeder(etcd.endpoint);
  const P = '/adm';
  const revs: Record<string, number> = {};
  for (const [k, v] of trio(P, 'http://127.0.0.1:9/v1', HASH)) revs[k.slice(P.length + 1)] = await s.put(k, v);
  t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
  await t.until(() => t!.gw.snapshot?.resources.api_keys.length === 1, 'the trio served');
  const admin = createAdminApp(t.gw);

  const models = await (await admin.request('/admin/v1/models', AUTH)).json() as {
    id: string;
    value: Record<string, unknown>;
    revision: number;
  }[];
  assert.deepEqual(models, [{
    id: 'm1',
    value: { display_name: 'gpt-test', model_name: 'gpt-upstream', provider_key_id: 'pk1' },
    revision: revs['models/m1'],
  }]);
  const pks = await (await admin.request('/admin/v1/provider_keys', AUTH)).json() as { revision: number }[];
  assert.equal(pks[0]!.revision, revs['provider_keys/pk1']);
  const keys = await (await admin.request('/admin/v1/api_keys', AUTH)).json() as { revision: number }[];
  assert.equal(keys[0]!.revision, revs['api_keys/k1']);

  const later = await s.put(`${P}/models/m1`, { display_name: 'gpt-test', model_name: 'v2', provider_key_id: 'pk1' });
  await t.until(() => t!.gw.snapshot?.models.get('m1')?.model_name === 'v2', 'the update served');
  const updated = await (await admin.request('/admin/v1/models', AUTH)).json() as { revision: number }[];
  assert.equal(updated[0]!.revision, later);

  const health = await (await admin.request('/admin/v1/health', AUTH)).json() as Record<string, unknown>;
  assert.equal(health.status, 'ok');
  assert.deepEqual(health.models, [{ id: 'm1', name: 'gpt-test', health: 0 }]);
  const config = health.config as { snapshot_revision: number; snapshot_age_seconds: number | null };
  assert.equal(config.snapshot_revision, later);
  assert.equal(typeof config.snapshot_age_seconds, 'number');
  assert.ok(config.snapshot_age_seconds! >= 0 && config.snapshot_age_seconds! < 60);
  assert.equal((health.config_status as { state: string }).state, 'synced');
});

test('mcp_servers and a2a_agents from etcd: the rows as served, their mod_revision, the secret redacted', async () => {
  const s = seeder(etcd.endpoint);
  const P = '/adm-kinds';
  const mcpRev = await s.put(`${P}/mcp_servers/srv1`, {
    display_name: 'tools',
    url: 'http://127.0.0.1:9/mcp',
    auth_type: 'api_key',
    secret: 'mcp-SECRET-etcd-1',
    timeout_ms: 700,
  });
  const agentRev = await s.put(`${P}/a2a_agents/ag1`, {
    name: 'helper',
    url: 'http://127.0.0.1:9/a2a',
    protocol_version: '0.3',
    auth_type: 'bearer',
    secret: 'agent-SECRET-etcd-2',
  });
  await t?.stop();
  t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
  await t.until(() => t!.gw.snapshot?.of('a2a_agents').length === 1, 'the agent served');
  await t.until(() => t!.gw.snapshot?.of('mcp_servers').length === 1, 'the MCP server served');
  const admin = createAdminApp(t.gw);

  const servers = await admin.request('/admin/v1/mcp_servers', AUTH);
  const serversText = await servers.text();
  assert.equal(servers.status, 200, serversText);
  assert.deepEqual(JSON.parse(serversText), [{
    id: 'srv1',
    value: {
      name: 'tools',
      type: 'mcp',
      url: 'http://127.0.0.1:9/mcp',
      transport: 'streamable_http',
      auth_type: 'api_key',
      secret: '[redacted]',
      timeout_ms: 700,
      enabled: true,
    },
    revision: mcpRev,
  }]);
  const agent = await admin.request('/admin/v1/a2a_agents/ag1', AUTH);
  const agentText = await agent.text();
  assert.deepEqual(JSON.parse(agentText), {
    id: 'ag1',
    value: {
      name: 'helper',
      url: 'http://127.0.0.1:9/a2a',
      protocol_version: '0.3',
      auth_type: 'bearer',
      secret: '[redacted]',
      enabled: true,
    },
    revision: agentRev,
  });
  for (const text of [serversText, agentText]) assert.equal(/SECRET-etcd/.test(text), false, text);
  assert.equal((await admin.request('/admin/v1/mcp_servers/nope', AUTH)).status, 404);
});
