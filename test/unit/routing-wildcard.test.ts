// Wildcard models end to end (docs/routing.md "Wildcard models"): the proxy app through app.request() against a
// mock upstream that records the upstream id each call named; the row's rate-limit bucket shared by every alias
// a caller mints, and /metrics naming the row, never the caller's text.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith, midMinute } from '../support/platform.ts';

const CALLER = 'sk-caller-wild-SECRET-1';
const SCOPED = 'sk-caller-wild-scoped-SECRET-2';
const ENV = { CALLER, SCOPED, UPSTREAM_KEY: 'sk-upstream-wild-SECRET-9' };

let up: MockUpstream;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;
let status: ReturnType<typeof createStatusApp>;

before(async () => {
  up = await startMockUpstream();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: p, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${up.base} }
models:
  - { display_name: "openai/*", provider_key: p, retries: 0, rate_limit: { rpm: 3 } }
  - { display_name: "gpt-*", provider_key: p, model_name: fixed-up, retries: 0 }
  - { display_name: "*-mini", provider_key: p, model_name: "mini-*", retries: 0 }
  - { display_name: "a/*/*", provider_key: p, model_name: two-stars, retries: 0 }
  - { display_name: m-plain, provider_key: p, model_name: up-plain, retries: 0 }
  - display_name: "grp/*"
    routing: { targets: [{ model: m-plain }] }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: scoped, key_env: SCOPED, allowed_models: ["openai/*"] }
`,
    { env: ENV, config: BASE_CONFIG, now: midMinute() },
  ));
  app = createProxyApp(gw);
  status = createStatusApp(gw);
});
after(async () => {
  gw.stop();
  await up.close();
});

async function chat(model: string, key = CALLER): Promise<Response> {
  return await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** The upstream id the call named, after checking a 200 whose answer echoes the caller's name. */
async function upstreamOf(res: Response, asked: string): Promise<string> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.equal((JSON.parse(text) as { model: string }).model, asked, 'the answer names the model as the caller did');
  return String(up.requests.at(-1)!.json?.model);
}

describe('wildcard models through the proxy', () => {
  test('the most literal characters win: gpt-4o-mini goes to *-mini, not gpt-*', async () => {
    assert.equal(await upstreamOf(await chat('gpt-4o-mini'), 'gpt-4o-mini'), 'mini-gpt-4o');
    assert.equal(await upstreamOf(await chat('gpt-4o'), 'gpt-4o'), 'fixed-up');
  });

  test('a row without model_name sends the capture upstream', async () => {
    assert.equal(await upstreamOf(await chat('openai/alpha', SCOPED), 'openai/alpha'), 'alpha');
  });

  test('a name with two stars is a plain name; a routing model is never a wildcard', async () => {
    assert.equal((await chat('a/b/c')).status, 404);
    assert.equal(await upstreamOf(await chat('a/*/*'), 'a/*/*'), 'two-stars');
    assert.equal((await chat('grp/x')).status, 404);
    assert.equal(await upstreamOf(await chat('grp/*'), 'grp/*'), 'up-plain');
  });

  test("allowed_models globs match the caller's name", async () => {
    assert.equal((await chat('gpt-4o', SCOPED)).status, 403);
  });

  test("every alias a caller mints shares the row's rate-limit bucket", async () => {
    // openai/alpha above took one of the row's 3 requests a minute; two more names take the rest.
    assert.equal(await upstreamOf(await chat('openai/beta'), 'openai/beta'), 'beta');
    assert.equal(await upstreamOf(await chat('openai/gamma'), 'openai/gamma'), 'gamma');
    const calls = up.requests.length;
    const res = await chat('openai/delta-never-seen');
    assert.equal(res.status, 429, await res.clone().text());
    const body = await res.json() as { error: { type: string; message: string } };
    assert.equal(body.error.type, 'rate_limit_exceeded');
    assert.match(body.error.message, /model rpm/);
    assert.equal(up.requests.length, calls, 'the refused alias reached no upstream');
  });

  test("/metrics labels the row and its template, never the caller's text", async () => {
    const text = await (await status.request('/metrics')).text();
    for (const minted of ['openai/alpha', 'openai/beta', 'openai/gamma', 'delta-never-seen', 'gpt-4o-mini']) {
      assert.ok(!text.includes(minted), `${minted} is in /metrics`);
    }
    for (const capture of ['"alpha"', '"beta"', '"mini-gpt-4o"']) assert.ok(!text.includes(capture), capture);
    assert.match(text, /aisix_deployment_requests_total\{[^}]*model="openai\/\*"[^}]*upstream_model="\*"/);
    assert.match(text, /aisix_deployment_requests_total\{[^}]*model="\*-mini"[^}]*upstream_model="mini-\*"/);
    assert.match(text, /aisix_ratelimit_rejections_total\{[^}]*layer="model"/);
  });
});

describe('wildcard rows in the resources file', () => {
  test('model_name may be left out only on a single-star row', async () => {
    const head = `_format_version: "1"
provider_keys:
  - { display_name: p, provider: openai, api_key: k, api_base: http://127.0.0.1:9/v1 }
models:
`;
    const okRow = await loadResourcesFile('/t/r.yaml', `${head}  - { display_name: "x/*", provider_key: p }\n`, {});
    assert.ok(okRow.ok);
    const plain = await loadResourcesFile('/t/r.yaml', `${head}  - { display_name: plain, provider_key: p }\n`, {});
    assert.ok(!plain.ok);
    assert.match(plain.report.format(), /model_name: required for a direct model/);
    const twoStars = await loadResourcesFile(
      '/t/r.yaml',
      `${head}  - { display_name: "a/*/*", provider_key: p }\n`,
      {},
    );
    assert.ok(!twoStars.ok);
  });
});
