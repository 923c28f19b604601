// The `passthrough_routes` resource as AISIX defines it (docs/endpoints.md "Passthrough routes"): defaults, the
// schema's couplings on the strict file path and the lenient etcd path, the file's sugar by name, and the
// `allowed_routes` cross-check.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDocument } from '../../src/resources/kinds.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { uuidV5 } from '../../src/util/crypto.ts';

const read = (doc: Record<string, unknown>, mode: 'strict' | 'lenient' = 'strict') =>
  parseDocument('passthrough_routes', 'r-id', structuredClone(doc), mode);

const MIN = { name: 'r', path_prefix: '/raw', target_url: 'https://api.example.com/v1', provider_key_id: 'pk' };

describe('passthrough_routes documents', () => {
  test("AISIX's defaults; display_name is name's other spelling; hosts lower-cased", () => {
    const r = read(MIN);
    assert.ok(r.ok);
    assert.deepEqual(r.resource, {
      ...MIN,
      id: 'r-id',
      auth_mode: 'gateway_key',
      credential_mode: 'inject',
      enabled: true,
    });
    const d = read({
      display_name: 'd',
      hosts: ['API.Example.com', '*.x.example'],
      preserve_host: true,
      credential_mode: 'forward_client',
    });
    assert.ok(d.ok);
    assert.equal(d.resource?.name, 'd');
    assert.deepEqual(d.resource?.hosts, ['api.example.com', '*.x.example']);
  });

  test('each coupling refused on both paths, naming the member', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...MIN, display_name: 'r2' }, /name: set exactly one of `name` and `display_name`/],
      [
        { name: 'r', target_url: 'https://x', provider_key_id: 'pk' },
        /path_prefix: set `path_prefix`, `hosts` or both/,
      ],
      [{ ...MIN, path_prefix: '/v1/x' }, /path_prefix: a route without `hosts` cannot claim/],
      [{ ...MIN, path_prefix: 'raw' }, /path_prefix: must start with "\/"/],
      [{ ...MIN, preserve_host: true }, /target_url: set exactly one of `target_url` and `preserve_host: true`/],
      [{ ...MIN, target_url: undefined, preserve_host: true }, /preserve_host: needs `hosts`/],
      [{ ...MIN, target_url: 'ftp://x' }, /target_url: must be an http\(s\) URL/],
      [{ ...MIN, hosts: ['*.com'] }, /hosts\[0\]: must be a host name/],
      [{ ...MIN, hosts: ['*'] }, /hosts\[0\]/],
      [{ ...MIN, auth_mode: 'header_key' }, /auth_header_name: required when auth_mode is header_key/],
      [{ ...MIN, auth_mode: 'header_key', auth_header_name: 'x-api-key' }, /auth_header_name: must not be one of/],
      [{ ...MIN, auth_mode: 'header_key', auth_header_name: 'X-Key' }, /auth_header_name: must be a lowercase/],
      [{ ...MIN, auth_header_name: 'x-k' }, /auth_header_name: only allowed when auth_mode is header_key/],
      [{ ...MIN, auth_mode: 'anonymous' }, /anonymous_key_id: required.*source_cidrs: required/],
      [{ ...MIN, anonymous_key_id: 'k' }, /anonymous_key_id: only allowed when auth_mode is anonymous/],
      [{ ...MIN, provider_key_id: undefined }, /provider_key_id: required when credential_mode is inject/],
      [
        { ...MIN, credential_mode: 'forward_client' },
        /provider_key_id: not allowed when credential_mode is forward_client/,
      ],
      [{ ...MIN, identity_header: 'cookie' }, /identity_header: must not be one of/],
      [{ ...MIN, timeout_ms: 0 }, /timeout_ms: must be at least 1/],
    ];
    for (const [doc, error] of cases) {
      const clean = JSON.parse(JSON.stringify(doc)) as Record<string, unknown>;
      for (const mode of ['strict', 'lenient'] as const) {
        const r = read(clean, mode);
        assert.ok(!r.ok, `${JSON.stringify(clean)} (${mode}) was accepted`);
        assert.match(r.error, error, `${mode}: ${r.error}`);
      }
    }
  });

  test('a route a host claims may use a reserved prefix; null members are absent', () => {
    assert.ok(read({ ...MIN, path_prefix: '/v1', hosts: ['api.githubcopilot.com'] }).ok);
    const r = read({ ...MIN, hosts: null, auth_header_name: null, timeout_ms: null });
    assert.ok(r.ok);
    assert.equal(r.resource?.hosts, undefined);
  });

  test('lenient etcd rows drop unknown members and report them', () => {
    const r = read({ ...MIN, future_member: 1 }, 'lenient');
    assert.ok(r.ok);
    assert.deepEqual(r.ignored, ['future_member']);
  });
});

describe('passthrough_routes in a resources file', () => {
  const file = (routes: string, allowed = '[raw]') =>
    `_format_version: "1"
provider_keys:
  - { display_name: ant, provider: anthropic, secret: sk-ant-1234567 }
api_keys:
  - { display_name: app, key_hash: abc, allowed_models: [], allowed_routes: ${allowed} }
  - { display_name: office, key_hash: def, allowed_models: [] }
passthrough_routes:
${routes}
`;

  test('provider_key and anonymous_key by display name become the derived ids', async () => {
    const r = await loadResourcesFile(
      '/t/r.yaml',
      file(`  - { name: raw, path_prefix: /raw, target_url: "https://api.anthropic.com", provider_key: ant }
  - name: copilot
    hosts: [api.githubcopilot.com]
    preserve_host: true
    auth_mode: anonymous
    anonymous_key: office
    source_cidrs: [10.0.0.0/8]
    credential_mode: forward_client`),
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    const [raw, copilot] = r.snapshot.of('passthrough_routes');
    assert.equal(raw?.provider_key_id, uuidV5('provider_keys/ant'));
    assert.equal(copilot?.anonymous_key_id, uuidV5('api_keys/office'));
    assert.deepEqual(r.snapshot.counts().passthrough_routes, 2);
  });

  test('unknown names are errors with the candidates', async () => {
    const r = await loadResourcesFile(
      '/t/r.yaml',
      file(`  - { name: raw, path_prefix: /raw, target_url: "https://x", provider_key: nope }`, '[raw, ghost, "r*"]'),
      {},
    );
    assert.ok(!r.ok);
    const text = r.report.format();
    assert.match(text, /`provider_key` references unknown provider key "nope" \(defined provider_keys: ant\)/);
    assert.match(text, /allowed_routes entry references unknown passthrough route "ghost" \(defined routes: raw\)/);
    assert.doesNotMatch(text, /"r\*"/, 'a glob is not checked');
  });
});
