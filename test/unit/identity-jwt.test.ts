// JWT/OIDC callers through app.request() (docs/identity.md), against a real OIDC issuer on 127.0.0.1
// (test/support/mock-oidc.ts): discovery, the key set's cache, rotation and refetch floor, the contract's claim
// edges (`exp` equal to now is valid, zero default skew, `kid`-less tokens against several keys), claim
// mapping order and direct bindings, AISIX's 401/403/503 bodies and `aisix_auth_decisions_total`.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Hono } from 'hono';
import { SignJWT } from 'jose';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { ProxyEnv } from '../../src/proxy/env.ts';
import { sha256Hex } from '../../src/util/crypto.ts';
import { type MockOidc, newKey, startMockOidc } from '../support/mock-oidc.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import type { Gateway } from '../../src/gateway.ts';
import { type ResourceSet, Snapshot } from '../../src/resources/snapshot.ts';

const START = Date.UTC(2026, 11, 5, 12, 0, 0);

interface Rig {
  oidc: MockOidc;
  app: Hono<ProxyEnv>;
  gw: Gateway;
  platform: TestPlatform;
  clock: { ms: number };
  nowSecs(): number;
  token(
    claims?: Record<string, unknown>,
    opts?: { key?: MockOidc['keys'][number]; header?: Record<string, unknown> },
  ): Promise<string>;
  chat(
    token: string,
    opts?: { model?: string; header?: 'authorization' | 'x-api-key'; path?: string },
  ): Promise<Response>;
  decisions(): Record<string, number>;
}

function resources(oidc: MockOidc): string {
  return `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models:
  - { display_name: echo, provider: echo, model_name: echo, provider_key: offline }
  - { display_name: other, provider: echo, model_name: echo, provider_key: offline }
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp, team_id: t-alice }
  - { display_name: bob, key_hash: h-bob, allowed_models: ["*"], jwt_subject: bob, jwt_provider: corp, disabled: true }
  - { display_name: eng, key_hash: h-eng, allowed_models: [echo], rate_limit: { rpm: 2 }, team_id: t-eng }
  - { display_name: admins, key_hash: h-admins, allowed_models: ["*"] }
  - { display_name: plain, key_env: PLAIN_KEY, allowed_models: ["*"] }
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice, other-aud] }
  - name: skewed
    issuer: "${oidc.issuer}/skewed"
    jwks_uri: "${oidc.jwksUri}"
    audiences: [sluice]
    leeway_secs: 5
  - name: strict
    issuer: "${oidc.issuer}/strict"
    jwks_uri: "${oidc.jwksUri}"
    audiences: [sluice]
    required_scopes: [chat]
    bound_claims: { tenant: acme, "org.region": [eu, us] }
    identity_claim: email
claim_mappings:
  - name: eng
    jwt_provider: corp
    priority: 10
    match: [{ claim: groups, op: contains, values: [eng] }]
    resolve: { api_key: eng }
  - name: admins
    jwt_provider: corp
    priority: 5
    match: [{ claim: groups, op: contains, values: [admin] }, { claim: realm.tier, op: exact, values: [gold] }]
    resolve: { api_key: admins }
  - name: strict-all
    jwt_provider: strict
    match: [{ claim: tenant, op: exact, values: [acme] }]
    resolve: { api_key: admins }
`;
}

async function rig(): Promise<Rig> {
  const oidc = await startMockOidc();
  const clock = { ms: START };
  const { gw, platform } = await gatewayWith(resources(oidc), {
    now: () => new Date(clock.ms),
    env: { PLAIN_KEY: 'sk-plain' },
  });
  const app = createProxyApp(gw);
  const nowSecs = () => Math.floor(clock.ms / 1000);
  return {
    oidc,
    app,
    gw,
    platform,
    clock,
    nowSecs,
    token: (claims = {}, opts = {}) =>
      oidc.sign(
        { iss: oidc.issuer, aud: 'sluice', sub: 'alice', exp: nowSecs() + 60, ...claims },
        opts.key,
        opts.header,
      ),
    chat: (token, opts = {}) =>
      Promise.resolve(app.request(opts.path ?? '/v1/chat/completions', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(opts.header === 'x-api-key' ? { 'x-api-key': token } : { authorization: `Bearer ${token}` }),
          ...(opts.path === '/v1/messages' ? { 'anthropic-version': '2023-06-01' } : {}),
        },
        body: JSON.stringify(
          opts.path === '/v1/messages'
            ? { model: opts.model ?? 'echo', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }
            : { model: opts.model ?? 'echo', messages: [{ role: 'user', content: 'hi' }] },
        ),
      }, { peer: '127.0.0.1' })),
    decisions() {
      const out: Record<string, number> = {};
      for (const m of gw.metrics.registry.render().matchAll(/^aisix_auth_decisions_total\{(.*)\} (\d+)$/gm)) {
        out[m[1]!] = Number(m[2]);
      }
      return out;
    },
  };
}

const jwtLabel = (reason: string) =>
  `method="jwt",result="${reason === 'none' ? 'allowed' : 'denied'}",reason="${reason}"`;

async function refused(res: Response, status: number, code: string, message: string, type = 'invalid_api_key') {
  assert.equal(res.status, status);
  assert.equal(res.headers.get('retry-after'), null);
  assert.deepEqual(await res.json(), { error: { message, type, code } });
}
const INVALID = [401, 'jwt_invalid', 'invalid JWT'] as const;
const UNMAPPED = [401, 'jwt_identity_unmapped', 'no API key is bound to this JWT identity'] as const;
const CLAIMS = [
  403,
  'jwt_claims_rejected',
  'JWT does not satisfy the required scopes or claims',
  'permission_denied',
] as const;

describe('JWT callers: verification edges', () => {
  let r: Rig;
  before(async () => {
    r = await rig();
  });
  after(() => r.oidc.close());

  test('a directly bound subject runs as its key; discovery then the key set, fetched once', async () => {
    const res = await r.chat(await r.token());
    assert.equal(res.status, 200, await res.clone().text());
    const body = await res.json() as { choices: { message: { content: string } }[] };
    assert.equal(body.choices[0]!.message.content, 'hi');
    assert.deepEqual(r.oidc.fetches, { discovery: 1, jwks: 1 });
    assert.equal((await r.chat(await r.token())).status, 200);
    assert.deepEqual(r.oidc.fetches, { discovery: 1, jwks: 1 }, 'cached');
    assert.equal(r.decisions()[jwtLabel('none')], 2);
    const alice = [...r.gw.snapshot!.apiKeys.values()].find((k) => k.display_name === 'alice')!;
    const line = r.platform.logs.find((l) => l.msg === 'proxy request completed' && l.status === 200);
    assert.equal(line?.api_key_id, alice.id, 'the access log names the bound key');
    const series = r.gw.metrics.registry.render();
    assert.match(series, /aisix_llm_requests_total\{[^}]*api_key_id="[^"]+"[^}]*team_id="t-alice"/);
  });

  test('exp equal to now is valid; one second earlier is expired (zero default skew)', async () => {
    assert.equal((await r.chat(await r.token({ exp: r.nowSecs() }))).status, 200);
    await refused(await r.chat(await r.token({ exp: r.nowSecs() - 1 })), 401, 'jwt_expired', 'JWT has expired');
    assert.equal(r.decisions()[jwtLabel('jwt_expired')], 1);
  });

  test("leeway_secs widens exp and nbf by the provider's skew, no more", async () => {
    const iss = `${r.oidc.issuer}/skewed`;
    const res = await r.chat(await r.token({ iss, exp: r.nowSecs() - 5 }));
    await refused(res, ...UNMAPPED);
    await refused(await r.chat(await r.token({ iss, exp: r.nowSecs() - 6 })), 401, 'jwt_expired', 'JWT has expired');
    await refused(await r.chat(await r.token({ iss, nbf: r.nowSecs() + 6 })), ...INVALID);
    await refused(await r.chat(await r.token({ iss, nbf: r.nowSecs() + 5 })), ...UNMAPPED);
  });

  test('nbf: now is valid, one second later is not yet valid', async () => {
    assert.equal((await r.chat(await r.token({ nbf: r.nowSecs() }))).status, 200);
    await refused(await r.chat(await r.token({ nbf: r.nowSecs() + 1 })), ...INVALID);
    assert.equal(r.decisions()[jwtLabel('jwt_not_yet_valid')], 2, "and the skewed provider's one above");
  });

  test('aud: a string or an array that names an accepted audience; required', async () => {
    assert.equal((await r.chat(await r.token({ aud: ['x', 'other-aud'] }))).status, 200);
    await refused(await r.chat(await r.token({ aud: 'stranger' })), ...INVALID);
    await refused(await r.chat(await r.token({ aud: undefined })), ...INVALID);
    await refused(await r.chat(await r.token({ exp: undefined })), ...INVALID);
    const d = r.decisions();
    assert.equal(d[jwtLabel('jwt_audience_mismatch')], 1);
    assert.equal(d[jwtLabel('jwt_missing_claim')], 2);
  });

  test('issuer, algorithm and header refusals come before any key is fetched', async () => {
    const before = { ...r.oidc.fetches };
    await refused(await r.chat(await r.token({ iss: 'https://stranger.example' })), ...INVALID);
    await refused(await r.chat(await r.token({ iss: 42 })), ...INVALID);
    const hs = await new SignJWT({ iss: r.oidc.issuer, aud: 'sluice', sub: 'alice', exp: r.nowSecs() + 60 })
      .setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode('a-shared-secret-of-32-bytes-long!'));
    await refused(await r.chat(hs), ...INVALID);
    const none = `${b64({ alg: 'none' })}.${b64({ iss: r.oidc.issuer, aud: 'sluice', sub: 'alice' })}.x`;
    await refused(await r.chat(none), ...INVALID);
    assert.deepEqual(r.oidc.fetches, before);
    const d = r.decisions();
    assert.equal(d[jwtLabel('jwt_untrusted_issuer')], 1);
    assert.equal(d[jwtLabel('jwt_missing_issuer')], 1);
    assert.equal(d[jwtLabel('jwt_alg_not_allowed')], 1);
    assert.equal(d[jwtLabel('jwt_malformed')], 1);
  });

  test('a bad signature is jwt_bad_signature, and a JWT in x-api-key is judged the same way', async () => {
    const t = await r.token();
    const forged = t.slice(0, t.lastIndexOf('.') + 1) + 'A'.repeat(t.length - t.lastIndexOf('.') - 1);
    await refused(await r.chat(forged), ...INVALID);
    assert.equal(r.decisions()[jwtLabel('jwt_bad_signature')], 1);
    const line = r.platform.logs.find((l) => l.msg === 'rejected inbound JWT' && l.reason === 'jwt_bad_signature');
    assert.ok(line, 'a WARN line');
    assert.equal(line.level, 'WARN');
    assert.equal(line.target, 'aisix::auth');
    assert.equal(line.issuer, r.oidc.issuer);
    assert.equal(line.source_ip, '127.0.0.1');
    assert.equal(line.path, '/v1/chat/completions');
    assert.ok(!JSON.stringify(r.platform.logs).includes(forged.split('.')[2]!), 'the token is never logged');
    assert.equal((await r.chat(await r.token(), { header: 'x-api-key' })).status, 200);
  });

  test('the Anthropic wire carries the same message in its envelope', async () => {
    const res = await r.chat(await r.token({ exp: r.nowSecs() - 1 }), { path: '/v1/messages' });
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), {
      type: 'error',
      error: { type: 'authentication_error', message: 'JWT has expired' },
    });
  });

  test('a plain api key still works beside the providers, counted as method api_key', async () => {
    assert.equal((await r.chat('sk-plain')).status, 200);
    const unknown = await r.chat('sk-unknown');
    assert.equal(unknown.status, 401);
    assert.deepEqual(await unknown.json(), { error: { message: 'invalid API key', type: 'invalid_api_key' } });
    const d = r.decisions();
    assert.equal(d['method="api_key",result="allowed",reason="none"'], 1);
    assert.equal(d['method="api_key",result="denied",reason="unknown_key"'], 1);
  });
});

describe('JWT callers: keys, rotation and the refetch floor', () => {
  let r: Rig;
  before(async () => {
    r = await rig();
  });
  after(() => r.oidc.close());

  test('a rotated key is picked up by one refetch on its unknown kid; the floor holds the next for a second', async () => {
    assert.equal((await r.chat(await r.token())).status, 200);
    assert.equal(r.oidc.fetches.jwks, 1);
    const fresh = await r.oidc.rotate();
    // Within a second of the last fetch even a new kid waits: the floor bounds what garbage kids can cost.
    await refused(await r.chat(await r.token({}, { key: fresh })), ...INVALID);
    assert.equal(r.oidc.fetches.jwks, 1);
    r.clock.ms += 1000;
    assert.equal((await r.chat(await r.token({}, { key: fresh }))).status, 200, 'refetched for the new kid');
    assert.equal(r.oidc.fetches.jwks, 2);
    // A kid nobody publishes: within a second of the last fetch, no new fetch.
    const stranger = await newKey('RS256', 'nobody');
    await refused(await r.chat(await r.token({}, { key: stranger })), ...INVALID);
    assert.equal(r.oidc.fetches.jwks, 2, 'held by the floor');
    assert.equal(r.decisions()[jwtLabel('jwt_unknown_kid')], 2);
    r.clock.ms += 1000;
    await refused(await r.chat(await r.token({}, { key: stranger })), ...INVALID);
    assert.equal(r.oidc.fetches.jwks, 3, 'one refetch once the floor passed');
  });

  test('a kid-less token is tried against each usable key; a claim failure stops at once', async () => {
    r.clock.ms += 1000;
    const old = r.oidc.keys[r.oidc.keys.length - 1]!;
    const t = await r.oidc.sign({ iss: r.oidc.issuer, aud: 'sluice', sub: 'alice', exp: r.nowSecs() + 60 }, old, {
      kid: undefined,
    });
    assert.ok(!JSON.parse(atob(t.split('.')[0]!)).kid, 'no kid in the header');
    assert.equal((await r.chat(t)).status, 200, 'the second key verifies it');
    const expired = await r.oidc.sign({ iss: r.oidc.issuer, aud: 'sluice', sub: 'alice', exp: r.nowSecs() - 1 }, old, {
      kid: undefined,
    });
    await refused(await r.chat(expired), 401, 'jwt_expired', 'JWT has expired');
  });

  test('a key whose use is enc, or whose alg is another, is not a candidate', async () => {
    r.clock.ms += 1000;
    const k = await r.oidc.rotate({ kid: 'enc-key' });
    k.jwk.use = 'enc';
    await refused(await r.chat(await r.token({}, { key: k })), ...INVALID);
    k.jwk.use = 'sig';
    k.jwk.alg = 'RS384';
    r.clock.ms += 1000;
    await refused(await r.chat(await r.token({}, { key: k })), ...INVALID);
    assert.equal(r.decisions()[jwtLabel('jwt_unknown_kid')], 5);
  });

  test('every accepted algorithm verifies with a key of its family', async () => {
    for (const alg of ['RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'EdDSA']) {
      r.clock.ms += 1000;
      const k = await r.oidc.rotate({ alg });
      assert.equal((await r.chat(await r.token({}, { key: k }))).status, 200, alg);
    }
  });

  test('after the TTL a failing refetch keeps the stale set serving', async () => {
    r.clock.ms += 601_000;
    r.oidc.failStatus = 500;
    const before = r.oidc.fetches.jwks;
    assert.equal((await r.chat(await r.token({}, { key: r.oidc.keys[1] }))).status, 200);
    assert.equal(r.oidc.fetches.jwks, before + 1, 'it did try');
    assert.ok(r.platform.logs.some((l) => l.msg === 'JWKS re-fetch failed; keeping the previously fetched key set'));
    assert.ok(
      r.platform.logs.some((l) => l.msg === 'OIDC discovery re-fetch failed; keeping the previously resolved JWKS URL'),
      'the discovered URL expired with the set, and its re-discovery failed too',
    );
    r.oidc.failStatus = undefined;
  });
});

describe('JWT callers: concurrent first requests', () => {
  test('share one discovery and one key-set fetch', async () => {
    const r = await rig();
    try {
      const tokens = await Promise.all([1, 2, 3, 4, 5].map(() => r.token()));
      const answers = await Promise.all(tokens.map((t) => r.chat(t)));
      assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 200, 200]);
      assert.deepEqual(r.oidc.fetches, { discovery: 1, jwks: 1 });
    } finally {
      await r.oidc.close();
    }
  });
});

describe('JWT callers: the key set cannot be had', () => {
  test('nothing cached and the issuer down: 503 jwks_unavailable, never anonymous; then it recovers', async () => {
    const r = await rig();
    try {
      r.oidc.failStatus = 503;
      await refused(
        await r.chat(await r.token()),
        503,
        'jwks_unavailable',
        "unable to fetch the identity provider's signing keys",
        'api_error',
      );
      assert.equal(r.decisions()[jwtLabel('jwks_unavailable')], 1);
      assert.ok(r.platform.logs.some((l) => l.msg === "cannot resolve the trust provider's JWKS endpoint"));
      r.oidc.failStatus = undefined;
      r.clock.ms += 1000;
      assert.equal((await r.chat(await r.token())).status, 200);
    } finally {
      await r.oidc.close();
    }
  });

  test('the Anthropic wire says overloaded_error', async () => {
    const r = await rig();
    try {
      r.oidc.failStatus = 500;
      const res = await r.chat(await r.token(), { path: '/v1/messages' });
      assert.equal(res.status, 503);
      assert.deepEqual(await res.json(), {
        type: 'error',
        error: { type: 'overloaded_error', message: "unable to fetch the identity provider's signing keys" },
      });
    } finally {
      await r.oidc.close();
    }
  });

  test('a redirecting, oversized, non-JWKS or foreign discovery answer is jwks_unavailable', async () => {
    const cases: [string, (o: MockOidc) => void][] = [
      ['a redirect', (o) => (o.redirectTo = 'http://127.0.0.1:9/elsewhere')],
      ['an oversized key set', (o) => (o.rawJwks = JSON.stringify({ keys: [], pad: 'x'.repeat(600 * 1024) }))],
      ['not a key set', (o) => (o.rawJwks = '{"keys":"no"}')],
      ['a discovery document of another issuer', (o) => (o.discovery = { issuer: 'https://other.example' })],
      ['a jwks_uri off the issuer origin', (o) => (o.discovery = { jwks_uri: 'http://localhost:1/jwks' })],
      ['a jwks_uri with a token', (o) => (o.discovery = { jwks_uri: `${o.issuer}/jwks?access_token=x` })],
    ];
    for (const [what, set] of cases) {
      const r = await rig();
      try {
        set(r.oidc);
        const res = await r.chat(await r.token());
        assert.equal(res.status, 503, what);
      } finally {
        await r.oidc.close();
      }
    }
  });
});

describe('JWT callers: claim mapping and what the key brings', () => {
  let r: Rig;
  before(async () => {
    r = await rig();
  });
  after(() => r.oidc.close());

  test('a subject no key binds goes through the mappings, lowest priority first', async () => {
    const both = await r.token({ sub: 'carol', groups: ['eng', 'admin'], realm: { tier: 'gold' } });
    assert.equal((await r.chat(both, { model: 'other' })).status, 200, 'admins (priority 5) wins over eng');
    const engOnly = await r.token({ sub: 'carol', groups: ['eng'] });
    const res = await r.chat(engOnly, { model: 'other' });
    assert.equal(res.status, 403, 'the eng key may use echo only');
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'permission_denied');
  });

  test("a mapping's conditions all hold: exact wants a string, contains an array", async () => {
    await refused(
      await r.chat(await r.token({ sub: 'carol', groups: ['admin'], realm: { tier: ['gold'] } })),
      ...UNMAPPED,
    );
    await refused(await r.chat(await r.token({ sub: 'carol', groups: 'eng' })), ...UNMAPPED);
    await refused(await r.chat(await r.token({ sub: 'carol' })), ...UNMAPPED);
    assert.equal(r.decisions()[jwtLabel('jwt_identity_unmapped')], 3);
  });

  test('a directly bound subject never falls through to a mapping, even when its key is refused', async () => {
    const aliceAdmin = await r.token({ sub: 'alice', groups: ['admin'], realm: { tier: 'gold' } });
    assert.equal((await r.chat(aliceAdmin)).status, 200);
    const bob = await r.token({ sub: 'bob', groups: ['eng'] });
    const res = await r.chat(bob);
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'api_key_disabled');
    assert.equal(r.decisions()[jwtLabel('key_disabled')], 1);
  });

  test("the mapped key's rate limit applies to every token that maps to it", async () => {
    const a = await r.token({ sub: 'dave', groups: ['eng'] });
    const b = await r.token({ sub: 'erin', groups: ['eng'] });
    assert.equal((await r.chat(a)).status, 200);
    assert.equal((await r.chat(b)).status, 200);
    assert.equal((await r.chat(a)).status, 429, 'the eng key has rpm 2');
  });

  test('required scopes and bound claims: 403; the identity claim is the configured one', async () => {
    const iss = `${r.oidc.issuer}/strict`;
    const good = { iss, email: 'x@acme', tenant: 'acme', org: { region: 'eu' }, scope: 'read chat' };
    assert.equal((await r.chat(await r.token(good))).status, 200);
    assert.equal((await r.chat(await r.token({ ...good, scope: ['chat'] }))).status, 200);
    await refused(await r.chat(await r.token({ ...good, scope: 'read' })), ...CLAIMS);
    await refused(await r.chat(await r.token({ ...good, org: { region: 'apac' } })), ...CLAIMS);
    await refused(
      await r.chat(await r.token({ ...good, tenant: ['acme', 'x'], org: { region: ['us'] } })),
      ...UNMAPPED,
    );
    await refused(await r.chat(await r.token({ ...good, email: undefined })), ...UNMAPPED);
    const d = r.decisions();
    assert.equal(d[jwtLabel('jwt_scope_missing')], 1);
    assert.equal(d[jwtLabel('jwt_bound_claim_mismatch')], 1);
    assert.equal(d[jwtLabel('jwt_identity_claim_missing')], 1);
  });

  test('/v1/models lists what the mapped key may use', async () => {
    const res = await r.app.request('/v1/models', {
      headers: { authorization: `Bearer ${await r.token({ sub: 'frank', groups: ['eng'] })}` },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id), ['echo']);
  });
});

describe('no enabled provider: a JWT is just an unknown key', () => {
  test('401 invalid API key, nothing fetched', async () => {
    const oidc = await startMockOidc();
    try {
      const { gw } = await gatewayWith(`_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models: [{ display_name: echo, provider: echo, model_name: echo, provider_key: offline }]
api_keys: [{ display_name: k, key_hash: "${await sha256Hex('x')}", allowed_models: ["*"] }]
oidc_providers: [{ name: corp, issuer: "${oidc.issuer}", audiences: [sluice], enabled: false }]
`);
      const app = createProxyApp(gw);
      const t = await oidc.sign({ iss: oidc.issuer, aud: 'sluice', sub: 'a', exp: Math.floor(Date.now() / 1000) + 60 });
      const res = await app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 401);
      assert.deepEqual(await res.json(), { error: { message: 'invalid API key', type: 'invalid_api_key' } });
      assert.deepEqual(oidc.fetches, { discovery: 0, jwks: 0 });
    } finally {
      await oidc.close();
    }
  });
});

function b64(v: unknown): string {
  return btoa(JSON.stringify(v)).replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
}

describe('what only etcd rows can hold fails closed', () => {
  let r: Rig;
  let original: ResourceSet;
  before(async () => {
    r = await rig();
    original = r.gw.snapshot!.resources;
  });
  after(() => r.oidc.close());

  /** The rig's first snapshot with `change` applied to a copy of its resources (etcd runs no cross-row checks). */
  function serve(change: (res: Record<string, unknown[]>) => void): void {
    const res = structuredClone(original) as unknown as Record<string, unknown[]>;
    change(res);
    r.gw.apply(new Snapshot(res as unknown as ResourceSet), { configHash: `h-${Math.random()}` });
  }

  test('two enabled providers of one issuer: jwt_untrusted_issuer and a WARN', async () => {
    serve((res) => res.oidc_providers!.push({ ...(res.oidc_providers![0] as object), id: 'dup', name: 'corp-2' }));
    await refused(await r.chat(await r.token()), ...INVALID);
    assert.equal(r.decisions()[jwtLabel('jwt_untrusted_issuer')], 1);
    assert.ok(r.platform.logs.some((l) => String(l.msg).startsWith('two enabled OIDC providers claim this issuer')));
  });

  test('two keys bound to one subject: jwt_binding_ambiguous, never a mapping', async () => {
    serve((res) => {
      const alice = res.api_keys!.find((k) => (k as { display_name?: string }).display_name === 'alice') as object;
      res.api_keys!.push({ ...alice, id: 'alice-2', key_hash: 'h-alice-2' });
    });
    await refused(await r.chat(await r.token({ groups: ['eng'] })), ...UNMAPPED);
    assert.equal(r.decisions()[jwtLabel('jwt_binding_ambiguous')], 1);
  });

  test('a mapping whose key is gone: claim_mapping_target_missing', async () => {
    serve((res) => {
      for (const m of res.claim_mappings! as { resolve: { api_key_id: string } }[]) m.resolve.api_key_id = 'gone';
    });
    await refused(await r.chat(await r.token({ sub: 'carol', groups: ['eng'] })), ...UNMAPPED);
    assert.equal(r.decisions()[jwtLabel('claim_mapping_target_missing')], 1);
  });

  test('an expired bound key: api_key_expired', async () => {
    serve((res) => {
      const alice = res.api_keys!.find((k) => (k as { display_name?: string }).display_name === 'alice') as {
        expires_at?: string;
      };
      alice.expires_at = new Date(r.clock.ms - 1000).toISOString();
    });
    const res = await r.chat(await r.token());
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'api_key_expired');
  });
});
