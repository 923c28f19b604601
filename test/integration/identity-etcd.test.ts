// JWT callers configured through a real etcd (docs/identity.md "Configuration"): rows read leniently (an unknown
// member dropped and reported), a mapping by key id, a new provider row trusted as soon as it is applied, and a
// rejected update of a provider row that stops it serving rather than keeping the old trust (fails closed).
// Run: node --import tsx --test test/integration/identity-etcd.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';

describe('identity resources from etcd', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  let oidc: MockOidc;
  let t: EtcdTestGateway;
  before(async () => {
    [etcd, oidc] = await Promise.all([startEtcd(), startMockOidc()]);
  });
  after(async () => {
    await t?.stop();
    await Promise.all([etcd?.stop(), oidc?.close()]);
  });

  test('a mapped caller authenticates; a provider row that turns invalid stops trusting its issuer', async () => {
    const s = seeder(etcd.endpoint);
    const P = '/jwt';
    await s.put(`${P}/provider_keys/pk`, { display_name: 'offline', provider: 'echo' });
    await s.put(`${P}/models/m`, { display_name: 'echo', model_name: 'echo', provider_key_id: 'pk' });
    await s.put(`${P}/api_keys/eng`, { display_name: 'eng', key_hash: 'h-eng', allowed_models: ['*'] });
    await s.put(`${P}/claim_mappings/cm`, {
      name: 'eng',
      jwt_provider: 'corp',
      match: [{ claim: 'groups', op: 'contains', values: ['eng'] }],
      resolve: { api_key_id: 'eng' },
    });
    t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const app = createProxyApp(t.gw);
    const chat = async () => {
      const token = await oidc.sign({
        iss: oidc.issuer,
        aud: 'sluice',
        sub: 'zed',
        groups: ['eng'],
        exp: Math.floor(Date.now() / 1000) + 60,
      });
      const res = await app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
      });
      return { status: res.status, body: await res.text() };
    };
    assert.equal((await chat()).status, 401, 'no provider yet: an unknown key');

    await s.put(`${P}/oidc_providers/corp`, {
      name: 'corp',
      issuer: oidc.issuer,
      audiences: ['sluice'],
      future_member: true,
    });
    await t.until(() => t.gw.snapshot!.of('oidc_providers').length === 1, 'the provider row applied');
    const ok = await chat();
    assert.equal(ok.status, 200, ok.body);
    const status = t.gw.facts;
    assert.ok(JSON.stringify(status).includes('future_member'), 'the unknown member is reported');

    // An update etcd cannot honour (leeway over 300): the row stops serving, it does not keep trusting the issuer.
    await s.put(`${P}/oidc_providers/corp`, {
      name: 'corp',
      issuer: oidc.issuer,
      audiences: ['sluice'],
      leeway_secs: 999,
    });
    await t.until(() => t.gw.snapshot!.of('oidc_providers').length === 0, 'the rejected row withdrawn');
    const refused = await chat();
    assert.equal(refused.status, 401);
    assert.equal(refused.body, '{"error":{"message":"invalid API key","type":"invalid_api_key"}}');
  });
});
