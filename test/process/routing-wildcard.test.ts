// Black-box on Node (docs/routing.md "Wildcard models"): a gateway process with a wildcard row; aliases a caller
// mints reach the upstream as the row's capture, share the row's one rate-limit bucket, and never become a
// metric label.
// Run: node build.mjs && node --import tsx --test test/process/routing-wildcard.test.ts
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, resourcesFor, spawnGateway } from '../support/process.ts';
import { roomInMinute } from '../support/until.ts';

let up: MockUpstream;
let gw: GatewayProcess;

before(async () => {
  up = await startMockUpstream();
  const wildcard = `  - { display_name: "openai/*", provider_key: mock, retries: 0, rate_limit: { rpm: 2 } }\n`;
  const resources = resourcesFor(up.base).replace('api_keys:\n', `${wildcard}api_keys:\n`);
  gw = await spawnGateway({
    config: baseConfig(),
    files: { 'resources.yaml': resources },
    env: { CALLER_KEY },
  });
  await gw.waitReady();
});
after(async () => {
  await gw?.stop();
  await up?.close();
});

async function chat(model: string): Promise<Response> {
  return await fetch(gw.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

test("caller-minted aliases share the wildcard row's bucket and its metric labels", async () => {
  await roomInMinute();
  for (const alias of ['openai/first-alias', 'openai/second-alias']) {
    const res = await chat(alias);
    const body = await res.json() as { model: string };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.model, alias);
    assert.equal(up.requests.at(-1)!.json?.model, alias.slice('openai/'.length));
  }
  const refused = await chat('openai/third-alias');
  assert.equal(refused.status, 429, await refused.clone().text());
  assert.ok(Number(refused.headers.get('retry-after')) >= 1, 'the refusal says when the minute ends');
  assert.match(((await refused.json()) as { error: { message: string } }).error.message, /model rpm/);
  assert.equal(up.requests.length, 2, 'the third alias reached no upstream');

  const metrics = await (await fetch(gw.url('/metrics', 'status'))).text();
  for (const alias of ['first-alias', 'second-alias', 'third-alias']) {
    assert.ok(!metrics.includes(alias), `${alias} is in /metrics`);
  }
  assert.match(metrics, /aisix_deployment_requests_total\{[^}]*model="openai\/\*"[^}]*upstream_model="\*"[^}]*\} 2/);
});
