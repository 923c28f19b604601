// JWT callers in a real gateway process on Node, Bun and Deno (docs/identity.md): a token from a real OIDC issuer
// on 127.0.0.1 (test/support/mock-oidc.ts) runs a chat call through the echo provider as the key its subject is
// bound to, an expired one gets AISIX's 401, and a rotated signing key is picked up by a refetch.
// Run: node build.mjs && node --import tsx --test test/process/identity-jwt.test.ts
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { baseConfig, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

function resources(oidc: MockOidc): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: echo, provider_key: offline, model_name: e1 }
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp }
  - { display_name: eng, key_hash: h-eng, allowed_models: [echo], team_id: t-eng }
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice] }
claim_mappings:
  - { name: eng, jwt_provider: corp, match: [{ claim: groups, op: contains, values: [eng] }], resolve: { api_key: eng } }
`;
}

const running: GatewayProcess[] = [];
const issuers: MockOidc[] = [];
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await Promise.all(issuers.map((o) => o.close()));
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: JWT callers`, () => {
    test('a bound subject and a mapped group call through echo; expiry is 401; a rotated key is picked up', async () => {
      const oidc = await startMockOidc();
      issuers.push(oidc);
      const gw = await spawnGateway({ runtime, config: baseConfig(), files: { 'resources.yaml': resources(oidc) } });
      running.push(gw);
      await gw.waitReady();
      const now = () => Math.floor(Date.now() / 1000);
      const token = (claims: Record<string, unknown> = {}) =>
        oidc.sign({ iss: oidc.issuer, aud: 'sluice', sub: 'alice', exp: now() + 120, ...claims });
      const chat = async (t: string) => {
        const res = await fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
          body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hello there' }] }),
          signal: AbortSignal.timeout(15_000),
        });
        return { status: res.status, body: await res.text() };
      };

      const first = await chat(await token());
      assert.equal(first.status, 200, first.body);
      assert.equal(JSON.parse(first.body).choices[0].message.content, 'hello there');
      assert.deepEqual(oidc.fetches, { discovery: 1, jwks: 1 });
      assert.equal((await chat(await token({ sub: 'zed', groups: ['eng'] }))).status, 200, 'mapped to eng');

      const expired = await chat(await token({ exp: now() - 30 }));
      assert.equal(expired.status, 401);
      assert.equal(
        expired.body,
        '{"error":{"message":"JWT has expired","type":"invalid_api_key","code":"jwt_expired"}}',
      );

      // The issuer rotates: tokens signed by the new key verify once a refetch (at most one a second) has it.
      await oidc.rotate({ retire: true });
      let last = { status: 0, body: '' };
      await until(
        async () => (last = await chat(await token())).status === 200,
        10_000,
        () => `the rotated key never verified: ${last.status} ${last.body}`,
        200,
      );
      assert.ok(oidc.fetches.jwks >= 2 && oidc.fetches.jwks <= 3, `refetches bounded: ${oidc.fetches.jwks}`);

      const metrics = await (await fetch(gw.url('/metrics', 'status'))).text();
      assert.match(metrics, /aisix_auth_decisions_total\{method="jwt",result="allowed",reason="none"\} 3/);
      assert.match(metrics, /aisix_auth_decisions_total\{method="jwt",result="denied",reason="jwt_expired"\} 1/);
      assert.match(metrics, /aisix_llm_requests_total\{[^}]*team_id="t-eng"/);
    });
  });
}
