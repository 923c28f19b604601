// Shared-secret (HMAC) OIDC providers through app.request() (docs/identity.md "Shared-secret providers"): tokens
// signed by jose with each provider's secret, a provider an issuer selects and the issuer-less ones tried in turn,
// the algorithm family pinned per provider (a key-set provider refuses HS* before fetching anything from the real
// issuer on 127.0.0.1 beside them), which failure a trial reports, the log level of a probe, the row's rules, the
// export's redaction, the /mcp metadata that names no shared-secret provider, and the `aisix.jwt_*` span
// attributes of a JWT caller at a real OTLP receiver.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Hono } from 'hono';
import { SignJWT } from 'jose';
import { discoveryOf } from '../../src/mcp/discovery.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { ProxyEnv } from '../../src/proxy/env.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { exportResources } from '../../src/sources/etcd/export.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import type { Gateway } from '../../src/gateway.ts';

const PINNED = 'pinned-secret-of-at-least-32-bytes!!';
const SHARED_A = 'a-shared-secret-of-at-least-32-byte';
const SHARED_B = 'b-shared-secret-of-at-least-32-byte';
const HMAC_ISSUER = 'https://hmac.test';

function resources(oidc: MockOidc): string {
  return `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models:
  - { display_name: echo, provider: echo, model_name: echo, provider_key: offline }
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp }
  - { display_name: hal, key_hash: h-hal, allowed_models: ["*"], jwt_subject: hal, jwt_provider: pinned }
  - { display_name: ann, key_hash: h-ann, allowed_models: ["*"], jwt_subject: ann, jwt_provider: a-shared }
  - { display_name: sam, key_hash: h-sam, allowed_models: ["*"], jwt_subject: sam, jwt_provider: b-shared }
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice] }
  - { name: pinned, issuer: "${HMAC_ISSUER}", audiences: [sluice], hmac_secret: "${PINNED}" }
  - { name: b-shared, hmac_secret: "${SHARED_B}" }
  - { name: a-shared, hmac_secret: "${SHARED_A}", required_scopes: [chat] }
`;
}

describe('shared-secret providers', () => {
  let oidc: MockOidc;
  let gw: Gateway;
  let platform: TestPlatform;
  let app: Hono<ProxyEnv>;
  const nowSecs = () => Math.floor(Date.now() / 1000);
  before(async () => {
    oidc = await startMockOidc();
    ({ gw, platform } = await gatewayWith(resources(oidc)));
    app = createProxyApp(gw);
  });
  after(() => oidc.close());

  const hs = (secret: string, claims: Record<string, unknown>, alg = 'HS256') =>
    new SignJWT({ exp: nowSecs() + 60, ...claims }).setProtectedHeader({ alg }).sign(
      new TextEncoder().encode(secret),
    );
  const chat = (token: string) =>
    Promise.resolve(app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
    }, { peer: '127.0.0.1' }));
  /** The key a 200 ran as (the access log's), or the refusal's status and code. */
  const outcome = async (token: string) => {
    const res = await chat(token);
    if (res.status !== 200) return `${res.status} ${((await res.json()) as { error: { code: string } }).error.code}`;
    await res.body?.cancel();
    const id = platform.logs.findLast((l) => l.msg === 'proxy request completed')?.api_key_id;
    return [...gw.snapshot!.apiKeys.values()].find((k) => k.id === id)?.display_name;
  };
  const reasons = () => {
    const out: string[] = [];
    for (const m of gw.metrics.registry.render().matchAll(/^aisix_auth_decisions_total\{(.*)\} (\d+)$/gm)) {
      out.push(`${/reason="([^"]*)"/.exec(m[1]!)![1]} ${m[2]}`);
    }
    return out.sort();
  };

  test('a pinned issuer selects its provider: HS256/384/512 with its secret, iss and aud required', async () => {
    for (const alg of ['HS256', 'HS384', 'HS512']) {
      assert.equal(await outcome(await hs(PINNED, { iss: HMAC_ISSUER, aud: 'sluice', sub: 'hal' }, alg)), 'hal');
    }
    assert.equal(await outcome(await hs(PINNED, { iss: HMAC_ISSUER, sub: 'hal' })), '401 jwt_invalid', 'no aud');
    assert.equal(await outcome(await hs(PINNED, { iss: HMAC_ISSUER, aud: 'x', sub: 'hal' })), '401 jwt_invalid');
    platform.logs.length = 0;
    assert.equal(
      await outcome(await hs(SHARED_A, { iss: HMAC_ISSUER, aud: 'sluice', sub: 'hal' })),
      '401 jwt_invalid',
      'another secret',
    );
    const warn = platform.logs.find((l) => l.msg === 'rejected inbound JWT');
    assert.equal(warn?.reason, 'jwt_bad_signature');
    assert.equal(warn?.level, 'WARN', 'a token that named a configured issuer is worth a WARN');
    const expired = await hs(PINNED, { iss: HMAC_ISSUER, aud: 'sluice', sub: 'hal', exp: nowSecs() - 10 });
    assert.equal(await outcome(expired), '401 jwt_expired');
    assert.ok(!JSON.stringify(platform.logs).includes(PINNED), 'the secret is never logged');
  });

  test('no issuer a provider claims: each issuer-less provider in name order, the first that verifies wins', async () => {
    assert.equal(await outcome(await hs(SHARED_B, { sub: 'sam' })), 'sam');
    // iss and aud are not consulted by a provider that pins neither.
    assert.equal(
      await outcome(await hs(SHARED_A, { sub: 'ann', scope: 'chat', iss: 'https://whoever', aud: 'whatever' })),
      'ann',
    );
    // a-shared sorts first and holds the key: its own requirements apply (no `chat` scope: 403).
    assert.equal(await outcome(await hs(SHARED_A, { sub: 'ann' })), '403 jwt_claims_rejected');
  });

  test("a trial reports the failure that speaks about the token, not a candidate's missing key", async () => {
    // a-shared fails on the signature (not its key); b-shared verifies and finds the token expired.
    assert.equal(await outcome(await hs(SHARED_B, { sub: 'sam', exp: nowSecs() - 10 })), '401 jwt_expired');
    platform.logs.length = 0;
    const before = reasons();
    assert.equal(await outcome(await hs('nobody-holds-this-secret-of-32-bytes', { sub: 'x' })), '401 jwt_invalid');
    assert.deepEqual(
      reasons().filter((r) => !before.includes(r)).map((r) => r.split(' ')[0]),
      ['jwt_bad_signature'],
    );
    // Any forged bearer reaches the trial, so its refusal is DEBUG (below the log level here), never a WARN.
    assert.ok(!platform.logs.some((l) => l.msg === 'rejected inbound JWT'), JSON.stringify(platform.logs));
  });

  test("the algorithm family is the provider's: neither mode accepts the other's tokens", async () => {
    const fetched = { ...oidc.fetches };
    // An HS token naming the key-set provider's issuer: refused before its key set is fetched.
    assert.equal(
      await outcome(await hs(SHARED_A, { iss: oidc.issuer, aud: 'sluice', sub: 'alice' })),
      '401 jwt_invalid',
    );
    assert.deepEqual(oidc.fetches, fetched, 'a public key is never used as a shared secret');
    // An RS256 token naming the pinned shared-secret provider, and one naming no issuer.
    const rs = await oidc.sign({ iss: HMAC_ISSUER, aud: 'sluice', sub: 'hal', exp: nowSecs() + 60 });
    assert.equal(await outcome(rs), '401 jwt_invalid');
    const rsNoIss = await oidc.sign({ aud: 'sluice', sub: 'sam', exp: nowSecs() + 60 });
    assert.equal(await outcome(rsNoIss), '401 jwt_invalid');
    const d = reasons();
    assert.ok(d.some((r) => r.startsWith('jwt_alg_not_allowed ')), d.join());
    // The key-set provider still works beside them.
    assert.equal(
      await outcome(await oidc.sign({ iss: oidc.issuer, aud: 'sluice', sub: 'alice', exp: nowSecs() + 60 })),
      'alice',
    );
  });

  test('without any issuer-less provider a token with no issuer is jwt_missing_issuer, as before', async () => {
    const { gw: other } = await gatewayWith(resources(oidc).replace(/ {2}- \{ name: [ab]-shared.*\n/g, ''));
    const res = await createProxyApp(other).request('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await hs(SHARED_B, { sub: 'sam' })}` },
      body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 401);
    assert.match(other.metrics.registry.render(), /reason="jwt_missing_issuer"\} 1/);
  });
});

describe('the row', () => {
  const file = (provider: string) =>
    `_format_version: "1"
oidc_providers:
  - ${provider}
`;
  const load = async (provider: string) => {
    const r = await loadResourcesFile('/t/r.yaml', file(provider), {});
    return r.ok ? 'ok' : r.report.format();
  };

  test('a secret of 32 bytes or more; no jwks_uri beside it; issuer and audiences required without it', async () => {
    assert.equal(await load(`{ name: h, hmac_secret: "${SHARED_A}" }`), 'ok');
    assert.match(await load('{ name: h, hmac_secret: short }'), /hmac_secret: must be at least 32 bytes/);
    assert.match(
      await load(`{ name: h, hmac_secret: "${SHARED_A}", jwks_uri: "https://idp/jwks" }`),
      /jwks_uri: not allowed beside hmac_secret/,
    );
    assert.match(await load('{ name: k, audiences: [a] }'), /issuer: required \(optional only beside hmac_secret\)/);
    assert.match(await load('{ name: k, issuer: "https://idp" }'), /audiences: needs at least one audience/);
  });

  test('two issuer-less providers are no duplicate issuer', async () => {
    const r = await loadResourcesFile(
      '/t/r.yaml',
      `_format_version: "1"
oidc_providers:
  - { name: a, hmac_secret: "${SHARED_A}" }
  - { name: b, hmac_secret: "${SHARED_B}" }
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
  });

  test('the export writes the secret as a placeholder unless asked to reveal it', () => {
    const rows = [{
      key: '/aisix/oidc_providers/o1',
      value: JSON.stringify({ name: 'shared', hmac_secret: SHARED_A }),
      modRevision: 1,
      createRevision: 1,
      version: 1,
    }];
    const hidden = exportResources(rows, '/aisix', { withSecrets: false, revision: 1, source: 'test' });
    assert.ok(!hidden.yaml.includes(SHARED_A), hidden.yaml);
    assert.match(hidden.yaml, /hmac_secret: \$\{AISIXSECRET_OIDC_PROVIDER_SHARED_HMAC_SECRET\}/);
    const shown = exportResources(rows, '/aisix', { withSecrets: true, revision: 1, source: 'test' });
    assert.ok(shown.yaml.includes(SHARED_A));
  });

  test("/mcp's metadata names no shared-secret provider, and one alone keeps it dormant", async () => {
    const mcp = (providers: string) =>
      loadResourcesFile(
        '/t/r.yaml',
        `_format_version: "1"
mcp_auth_settings: [{ resource_url: "https://gw.example/mcp" }]
oidc_providers:
${providers}`,
        {},
      );
    const alone = await mcp(`  - { name: h, hmac_secret: "${SHARED_A}" }\n`);
    assert.ok(alone.ok);
    assert.equal(discoveryOf(alone.snapshot), 'no_oidc_provider');
    const both = await mcp(
      `  - { name: h, hmac_secret: "${SHARED_A}", issuer: "${HMAC_ISSUER}" }\n  - { name: k, issuer: "https://idp.test", audiences: [a] }\n`,
    );
    assert.ok(both.ok);
    const d = discoveryOf(both.snapshot);
    assert.ok(typeof d === 'object');
    assert.deepEqual(JSON.parse(d.document).authorization_servers, ['https://idp.test']);
  });
});

describe("a JWT caller's spans", () => {
  let rx: OtlpReceiver;
  let gw: Gateway;
  let app: Hono<ProxyEnv>;
  before(async () => {
    rx = await startOtlpReceiver();
    ({ gw } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models:
  - { display_name: echo, provider: echo, model_name: echo, provider_key: offline }
api_keys:
  - { display_name: sam, key_hash: h-sam, allowed_models: ["*"], jwt_subject: sam, jwt_provider: shared }
  - { display_name: team, key_hash: h-team, allowed_models: ["*"] }
  - { display_name: plain, key_env: PLAIN, allowed_models: ["*"] }
oidc_providers:
  - { name: shared, hmac_secret: "${SHARED_A}" }
claim_mappings:
  - { name: by-team, jwt_provider: shared, match: [{ claim: team, op: exact, values: [t1] }], resolve: { api_key: team } }
observability_exporters:
  - { name: t, kind: otlp_http, endpoint: "${rx.url}" }
`,
      { env: { PLAIN: 'sk-plain-spans' } },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    await gw.telemetry.close(1000);
    gw.stop();
    await rx.close();
  });

  /** The `aisix.jwt_*` attributes of the request's spans that carry `aisix.api_key_id`. */
  const jwtAttrs = async (bearer: string) => {
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.text();
    await gw.telemetry.flush();
    const spans = rx.spans.filter((s) =>
      s.attrs['aisix.request_id'] === res.headers.get('x-aisix-request-id') && s.attrs['aisix.api_key_id']
    );
    assert.ok(spans.length > 0);
    return spans.map((s) => Object.fromEntries(Object.entries(s.attrs).filter(([k]) => k.startsWith('aisix.jwt_'))));
  };
  const token = (claims: Record<string, unknown>) =>
    new SignJWT({ exp: Math.floor(Date.now() / 1000) + 60, ...claims }).setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(SHARED_A));

  test('aisix.jwt_subject and aisix.jwt_provider; aisix.jwt_claim_mapping only when a mapping chose the key', async () => {
    for (const a of await jwtAttrs(await token({ sub: 'sam' }))) {
      assert.deepEqual(a, { 'aisix.jwt_subject': 'sam', 'aisix.jwt_provider': 'shared' });
    }
    for (const a of await jwtAttrs(await token({ sub: 'carol\u0007', team: 't1' }))) {
      assert.deepEqual(a, {
        'aisix.jwt_subject': 'carol',
        'aisix.jwt_provider': 'shared',
        'aisix.jwt_claim_mapping': 'by-team',
      }, 'control characters removed, as on the usage event');
    }
    for (const a of await jwtAttrs('sk-plain-spans')) assert.deepEqual(a, {}, 'an api-key caller has none');
  });
});
