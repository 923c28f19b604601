// The identity resources in a resources file and in etcd rows (docs/identity.md "Configuration"): the schemas'
// defaults, the file sugar `resolve.api_key`, and the file's checks between entries with AISIX's messages.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { uuidV5 } from '../../src/util/crypto.ts';

const HEAD = `_format_version: "1"
api_keys:
  - { display_name: a, key_hash: h-a, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp }
  - { display_name: b, key_hash: h-b, allowed_models: ["*"] }
`;

async function errorsOf(text: string): Promise<string[]> {
  const r = await loadResourcesFile('/t/resources.yaml', text, {});
  if (r.ok) return [];
  return r.report.format().split('\n').slice(1).map((l) => l.trim());
}

describe('identity resources in a file', () => {
  test('load with their defaults; resolve.api_key becomes the key id', async () => {
    const r = await loadResourcesFile(
      '/t/resources.yaml',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s] }]
claim_mappings: [{ name: m, jwt_provider: corp, match: [{ claim: g, op: exact, values: [x] }], resolve: { api_key: b } }]
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    const [p] = r.snapshot.of('oidc_providers');
    assert.deepEqual(
      { ...p, id: undefined },
      {
        id: undefined,
        name: 'corp',
        issuer: 'https://idp',
        audiences: ['s'],
        identity_claim: 'sub',
        required_scopes: [],
        leeway_secs: 0,
        enabled: true,
      },
    );
    const [m] = r.snapshot.of('claim_mappings');
    const b = [...r.snapshot.apiKeys.values()].find((k) => k.display_name === 'b')!;
    assert.deepEqual(m!.resolve, { api_key_id: b.id });
    assert.equal(m!.priority, 0);
    assert.deepEqual(r.snapshot.counts(), { api_keys: 2, oidc_providers: 1, claim_mappings: 1 });
  });

  test('resolve.api_key_id naming a key of the file is kept, in each of several mappings', async () => {
    const id = uuidV5('api_keys/b');
    const r = await loadResourcesFile(
      '/t/resources.yaml',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s] }]
claim_mappings:
  - { name: m1, jwt_provider: corp, match: [{ claim: g, op: exact, values: [x] }], resolve: { api_key_id: ${id} } }
  - { name: m2, jwt_provider: corp, match: [{ claim: g, op: exact, values: [y] }], resolve: { api_key_id: ${id} } }
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    const b = [...r.snapshot.apiKeys.values()].find((k) => k.display_name === 'b')!;
    assert.deepEqual(r.snapshot.of('claim_mappings').map((m) => m.resolve), [{ api_key_id: b.id }, {
      api_key_id: b.id,
    }]);
  });

  const cases: [string, string, string][] = [
    [
      'a duplicate binding',
      `_format_version: "1"
api_keys:
  - { display_name: a, key_hash: h-a, allowed_models: [], jwt_subject: s, jwt_provider: p }
  - { display_name: b, key_hash: h-b, allowed_models: [], jwt_subject: s, jwt_provider: p }
`,
      'api_keys[1] ("b"): duplicate jwt binding "p"/"s": already used by api_keys[0] ("a") — every (jwt_provider, jwt_subject) pair must be distinct',
    ],
    [
      'a subject without provider',
      `_format_version: "1"
api_keys: [{ display_name: a, key_hash: h-a, allowed_models: [], jwt_subject: s }]
`,
      'api_keys[0] ("a"): jwt_subject "s" is set without jwt_provider — name the OIDC provider allowed to assert this subject',
    ],
    [
      'two enabled providers of one issuer',
      `${HEAD}oidc_providers:
  - { name: corp, issuer: "https://idp", audiences: [s] }
  - { name: corp2, issuer: "https://idp", audiences: [s] }
  - { name: off, issuer: "https://idp", audiences: [s], enabled: false }
`,
      'oidc_providers[1] ("corp2"): duplicate enabled OIDC issuer "https://idp": already used by oidc_providers[0] ("corp") — a token\'s issuer must select one provider; disable or remove one',
    ],
    [
      'a mapping of an unknown provider',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s] }]
claim_mappings: [{ name: m, jwt_provider: nope, match: [{ claim: g, op: exact, values: [x] }], resolve: { api_key: b } }]
`,
      'claim_mappings[0] ("m"): jwt_provider references unknown OIDC provider "nope" (defined providers: corp)',
    ],
    [
      'a mapping to an id the file does not define',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s] }]
claim_mappings: [{ name: m, jwt_provider: corp, match: [{ claim: g, op: exact, values: [x] }], resolve: { api_key_id: zz } }]
`,
      'claim_mappings[0] ("m"): resolve.api_key_id "zz" does not match any api key defined in this file — reference the key by name via `resolve.api_key` instead',
    ],
    [
      'both resolve forms',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s] }]
claim_mappings: [{ name: m, jwt_provider: corp, match: [{ claim: g, op: exact, values: [x] }], resolve: { api_key: b, api_key_id: zz } }]
`,
      'claim_mappings[0] ("m"): `resolve.api_key` and `resolve.api_key_id` are mutually exclusive — name the key once',
    ],
    [
      'a jwks_uri with a token',
      `${HEAD}oidc_providers: [{ name: corp, issuer: "https://idp", audiences: [s], jwks_uri: "https://idp/k?Access_Token=x" }]
`,
      'oidc_providers[0] ("corp"): OIDC provider jwks_uri must not embed credentials (user info or a token query parameter) — JWKS endpoints are public',
    ],
  ];
  for (const [what, text, message] of cases) {
    test(`refused: ${what}`, async () => {
      assert.deepEqual(await errorsOf(text), [`- ${message}`]);
    });
  }

  test('a key whose jwt_provider names no provider still loads (an inert binding)', async () => {
    assert.deepEqual(await errorsOf(HEAD), []);
  });
});

describe('identity rows from etcd', () => {
  test('lenient: unknown members dropped and reported; ranges enforced', () => {
    const ok = parseDocument('oidc_providers', 'o1', {
      name: 'corp',
      issuer: 'https://idp',
      audiences: ['s'],
      client_secret: 'x',
    }, 'lenient');
    assert.ok(ok.ok);
    assert.deepEqual(ok.ignored, ['client_secret']);
    // A shared secret too short to be one fails the row closed, never serves it without.
    const short = parseDocument('oidc_providers', 'o3', { name: 'h', hmac_secret: 'x' }, 'lenient');
    assert.equal(short.ok, false);
    const bad = parseDocument('oidc_providers', 'o2', {
      name: 'corp',
      issuer: 'https://idp',
      audiences: [],
      leeway_secs: 301,
    }, 'lenient');
    assert.equal(bad.ok, false);
    const mapping = parseDocument('claim_mappings', 'm1', {
      name: 'm',
      jwt_provider: 'corp',
      match: [{ claim: 'g', op: 'regex', values: ['x'] }],
      resolve: { api_key_id: 'k' },
    }, 'lenient');
    assert.equal(mapping.ok, false);
  });
});
