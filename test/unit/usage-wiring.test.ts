// Usage events of the callers and kinds of call the first event builder did not know (docs/usage-events.md): a
// JWT-authenticated request's `jwt_subject`, `jwt_provider` and `jwt_claim_mapping`, as a real Datadog intake on
// 127.0.0.1 receives them from a gateway trusting a real OIDC issuer on 127.0.0.1.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-plain-usage-wiring';
let oidc: MockOidc;
let intake: DatadogIntake;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  oidc = await startMockOidc();
  intake = await startDatadogIntake();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models:
  - { display_name: echo, provider: echo, model_name: echo, provider_key: offline }
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp }
  - { display_name: eng, key_hash: h-eng, allowed_models: ["*"] }
  - { display_name: plain, key_env: KEY, allowed_models: ["*"] }
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice] }
claim_mappings:
  - name: engineers
    jwt_provider: corp
    priority: 10
    match: [{ claim: groups, op: contains, values: [eng] }]
    resolve: { api_key: eng }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: team-a, service: gw }
`,
    { env: { KEY, DD_CRED_TEAM_A_API_KEY: 'dd-key' } },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  await gw.usage.close(1000);
  gw.stop();
  await oidc.close();
  await intake.close();
});

const token = (claims: Record<string, unknown>) =>
  oidc.sign({ iss: oidc.issuer, aud: 'sluice', exp: Math.floor(Date.now() / 1000) + 60, ...claims });

async function chat(bearer: string): Promise<Response> {
  return await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
  }, { peer: '127.0.0.1:1' });
}

/** The logs of the request `res` answered, once the exporter delivered them. */
async function logsOf(res: Response): Promise<Record<string, unknown>[]> {
  await res.text();
  const id = res.headers.get('x-aisix-request-id');
  await gw.usage.flush();
  return intake.logs.filter((l) => l['aisix.request_id'] === id);
}

const jwtFields = (log: Record<string, unknown> | undefined) =>
  Object.fromEntries(Object.entries(log ?? {}).filter(([k]) => k.startsWith('aisix.jwt_')));

describe('JWT callers', () => {
  test('a directly bound subject: its subject and provider, no claim mapping', async () => {
    const res = await chat(await token({ sub: 'alice' }));
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.deepEqual(jwtFields(log), { 'aisix.jwt_subject': 'alice', 'aisix.jwt_provider': 'corp' });
  });

  test('a subject a claim mapping resolved: the mapping is named too', async () => {
    const res = await chat(await token({ sub: 'carol', groups: ['eng'] }));
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.deepEqual(jwtFields(log), {
      'aisix.jwt_subject': 'carol',
      'aisix.jwt_provider': 'corp',
      'aisix.jwt_claim_mapping': 'engineers',
    });
  });

  test('a plaintext key: no JWT field', async () => {
    const res = await chat(KEY);
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.ok(log);
    assert.deepEqual(jwtFields(log), {});
  });
});
