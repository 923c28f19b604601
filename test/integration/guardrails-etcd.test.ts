// Guardrails and their attachments read from a real etcd (docs/guardrails.md "Loading", "Attachments"):
// rows that serve, a row that cannot be built rejected with its field named (state degraded, its last good
// value serving), unknown members reported, attachments resolving per model and key.
// Run: node --import tsx --test test/integration/guardrails-etcd.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AttachmentIndex } from '../../src/guardrails/attachments.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';

let etcd: EtcdServer;
const gws: EtcdTestGateway[] = [];
before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  await Promise.all(gws.map((g) => g.stop()));
  await etcd?.stop();
});

test('etcd: guardrails serve, attachments resolve, an unbuildable row is rejected and its last good value kept', async () => {
  const s = seeder(etcd.endpoint);
  const P = '/guard';
  const kw = (value: string) => ({ name: 'words', kind: 'keyword', patterns: [{ kind: 'regex', value }] });
  await s.put(`${P}/models/m1`, { display_name: 'gpt', model_name: 'up', provider_key_id: 'pk1' });
  await s.put(`${P}/guardrails/g1`, kw('forbidden'));
  await s.put(`${P}/guardrails/g2`, { name: 'pii', kind: 'pii', detectors: [{ type: 'email' }], future: 1 });
  await s.put(`${P}/guardrails/g3`, kw('(?<=x)y'));
  await s.put(`${P}/guardrail_attachments/a1`, {
    guardrail_id: 'g2',
    scope_type: 'model',
    scope_id: 'm1',
    priority: 1,
  });
  const t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
  gws.push(t);
  await t.source.firstApplied;
  const body = await (await createStatusApp(t.gw).request('/status/config')).json();
  assert.equal(body.state, 'degraded');
  const rejected = body.rejected as {
    resource_kind: string;
    resource_id: string;
    last_error_kind: string;
    last_error: string;
  }[];
  assert.deepEqual(rejected.map((r) => [r.resource_kind, r.resource_id, r.last_error_kind]), [[
    'guardrails',
    'g3',
    'schema_failed',
  ]]);
  assert.match(rejected[0]!.last_error, /^patterns\[0\]\.value: invalid regex: look-around/);
  assert.deepEqual(body.partially_compatible, [{ resource_kind: 'guardrails', field: 'future', count: 1 }]);
  assert.deepEqual(body.applied.resource_counts, { models: 1, guardrails: 2, guardrail_attachments: 1 });

  const snap = () => t.gw.snapshot!;
  const chain = (modelId: string) =>
    new AttachmentIndex(snap().guardrails, snap().guardrailAttachments)
      .resolve({ modelId, apiKeyId: 'k', teamId: undefined })
      .map((g) => g.name);
  assert.deepEqual(chain('m1'), ['pii', 'words'], 'attached at priority 1, then the implicit env-wide one');
  assert.deepEqual(chain('other'), ['words']);

  // A good row broken later keeps serving its last good value.
  await s.put(`${P}/guardrails/g1`, kw('('));
  await t.until(
    () => t.gw.facts.rejected.some((r) => r.resource_id === 'g1'),
    'g1 rejected',
  );
  assert.deepEqual(chain('other'), ['words'], 'last known good');
});
