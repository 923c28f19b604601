// The MCP resource kinds (docs/mcp.md "Resources"): AISIX's fields, defaults and validation on both paths, and
// the api key's `mcp_access` / `mcp_rate_limits`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseDocument } from '../../src/resources/kinds.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';

type Kind = 'mcp_servers' | 'mcp_policies' | 'mcp_auth_settings' | 'api_keys';
function strict<K extends Kind>(kind: K, doc: object) {
  return parseDocument(kind, 'id1', structuredClone(doc) as Record<string, unknown>, 'strict');
}
function lenient<K extends Kind>(kind: K, doc: object) {
  return parseDocument(kind, 'id1', structuredClone(doc) as Record<string, unknown>, 'lenient');
}
function error(r: { ok: true } | { ok: false; errorKind: string; error: string }): string {
  assert.equal(r.ok, false, 'rejected');
  return r.ok ? '' : `${r.errorKind}: ${r.error}`;
}

describe('mcp_servers', () => {
  test("AISIX's defaults; the name comes from `name` or its former name `display_name`", () => {
    const r = strict('mcp_servers', { name: 'github', url: 'https://gh.example/mcp' });
    assert.ok(r.ok);
    assert.deepEqual(r.resource, {
      id: 'id1',
      name: 'github',
      type: 'mcp',
      url: 'https://gh.example/mcp',
      transport: 'streamable_http',
      auth_type: 'none',
      timeout_ms: 30_000,
      enabled: true,
    });
    const old = strict('mcp_servers', { display_name: 'gh', url: 'x', timeout_ms: null, secret: null });
    assert.ok(old.ok && old.resource?.name === 'gh' && old.resource.timeout_ms === 30_000);
  });

  test('the name: no `__`, no trailing `_`; one of name or display_name, not both', () => {
    assert.match(
      error(strict('mcp_servers', { name: 'a__b', url: 'x' })),
      /^schema_failed: name: must not contain `__`/,
    );
    assert.match(error(strict('mcp_servers', { name: 'gh_', url: 'x' })), /name: must not contain/);
    assert.ok(strict('mcp_servers', { name: 'g_h-1', url: 'x' }).ok);
    assert.match(error(strict('mcp_servers', { url: 'x' })), /name: required/);
    assert.equal(
      error(lenient('mcp_servers', { name: 'a', display_name: 'a', url: 'x' })),
      'parse_failed: duplicate field `name`: `display_name` is its former name',
    );
    assert.match(error(strict('mcp_servers', { name: 'a' })), /url: /);
  });

  test('credential coupling holds on etcd reads too', () => {
    for (const auth_type of ['bearer', 'api_key']) {
      assert.match(error(lenient('mcp_servers', { name: 'a', url: 'x', auth_type })), /secret: required with/);
      assert.match(error(lenient('mcp_servers', { name: 'a', url: 'x', auth_type, secret: '' })), /secret: required/);
      assert.ok(lenient('mcp_servers', { name: 'a', url: 'x', auth_type, secret: 's' }).ok);
    }
    const o = error(lenient('mcp_servers', { name: 'a', url: 'x', auth_type: 'oauth2', secret: 's' }));
    assert.match(o, /client_id: required with auth_type oauth2/);
    assert.match(o, /token_url: required with auth_type oauth2/);
    assert.ok(
      lenient('mcp_servers', {
        name: 'a',
        url: 'x',
        auth_type: 'oauth2',
        secret: 's',
        client_id: 'c',
        token_url: 'https://t',
        scopes: ['a', 'b'],
      }).ok,
    );
  });

  test('openapi needs an OpenAPI 3 spec; mcp takes no spec nor api_key_header', () => {
    assert.match(error(strict('mcp_servers', { name: 'a', url: 'x', type: 'openapi' })), /spec: required/);
    assert.match(
      error(strict('mcp_servers', { name: 'a', url: 'x', type: 'openapi', spec: { swagger: '2.0' } })),
      /Swagger 2.0/,
    );
    assert.ok(
      strict('mcp_servers', { name: 'a', url: 'x', type: 'openapi', spec: { openapi: '3.0.0', paths: {} } }).ok,
    );
    assert.match(error(strict('mcp_servers', { name: 'a', url: 'x', spec: {} })), /spec: only with type openapi/);
    assert.match(
      error(strict('mcp_servers', { name: 'a', url: 'x', api_key_header: 'x-k' })),
      /api_key_header: only with type openapi/,
    );
    assert.match(
      error(strict('mcp_servers', { name: 'a', url: 'x', type: 'openapi', spec: {}, api_key_header: 'x-k' })),
      /api_key_header: only with auth_type api_key/,
    );
    assert.match(
      error(strict('mcp_servers', { name: 'a', url: 'x', protocol_version: '2025-11-25' })),
      /protocol_version/,
    );
    assert.match(error(strict('mcp_servers', { name: 'a', url: 'x', transport: 'stdio' })), /transport/);
  });

  test('an unknown member: an error in a file, dropped and reported on etcd', () => {
    assert.match(error(strict('mcp_servers', { name: 'a', url: 'x', extra: 1 })), /extra: unknown field/);
    const r = lenient('mcp_servers', { name: 'a', url: 'x', extra: 1 });
    assert.ok(r.ok);
    assert.deepEqual(r.ignored, ['extra']);
  });
});

describe('mcp_policies', () => {
  test('scope env or team (team needs scope_ref); allow required in a file, `[]` when absent on etcd', () => {
    const r = strict('mcp_policies', { scope: 'env', allow: ['github__*'] });
    assert.ok(r.ok);
    assert.deepEqual(r.resource, { id: 'id1', scope: 'env', allow: ['github__*'], deny: [], enabled: true });
    assert.match(error(strict('mcp_policies', { scope: 'env' })), /allow: /);
    const old = lenient('mcp_policies', { scope: 'env' });
    assert.ok(old.ok);
    assert.deepEqual(old.resource?.allow, [], 'an old row never grants by omission');
    assert.match(error(lenient('mcp_policies', { scope: 'team', allow: [] })), /scope_ref: required with scope team/);
    assert.match(error(lenient('mcp_policies', { scope: 'org', allow: [] })), /scope: /);
  });
});

describe('mcp_auth_settings', () => {
  test('anonymous: api_key_id, servers and source_cidrs required; enabled and aggregate_entry defaulted', () => {
    const r = strict('mcp_auth_settings', {
      anonymous: { api_key_id: 'k', servers: ['gh'], source_cidrs: ['10.0.0.0/8'] },
    });
    assert.ok(r.ok);
    assert.deepEqual(r.resource?.anonymous, {
      enabled: true,
      api_key_id: 'k',
      servers: ['gh'],
      source_cidrs: ['10.0.0.0/8'],
      aggregate_entry: false,
    });
    assert.match(
      error(strict('mcp_auth_settings', { anonymous: { api_key_id: 'k', servers: [], source_cidrs: ['x'] } })),
      /anonymous.servers: needs at least one/,
    );
  });

  test("a file's resource_url must not embed a credential; etcd loads it (the surface stays dormant)", () => {
    const msg =
      'schema_failed: mcp_auth_settings resource_url must not embed credentials (user info or a token query ' +
      'parameter) — protected resource metadata is public';
    assert.equal(error(strict('mcp_auth_settings', { resource_url: 'https://u:p@gw.example/mcp' })), msg);
    assert.equal(error(strict('mcp_auth_settings', { resource_url: 'https://gw.example/mcp?access_token=x' })), msg);
    assert.ok(lenient('mcp_auth_settings', { resource_url: 'https://u:p@gw.example/mcp' }).ok);
  });
});

describe("api_keys' mcp_access and mcp_rate_limits", () => {
  const key = { key_hash: 'h', allowed_models: [] };
  test('mcp_access: allow required in a file; on etcd absent allow is [] and a legacy mode is dropped silently', () => {
    assert.match(error(strict('api_keys', { ...key, mcp_access: { deny: [] } })), /mcp_access.allow: /);
    assert.match(error(strict('api_keys', { ...key, mcp_access: { allow: [], mode: 'x' } })), /mode: unknown field/);
    const r = lenient('api_keys', { ...key, mcp_access: { mode: 'allowlist' } });
    assert.ok(r.ok);
    assert.deepEqual(r.resource?.mcp_access, { allow: [] });
    assert.deepEqual(r.ignored, [], 'not reported');
  });

  test('mcp_rate_limits: request dimensions and concurrency per server name, no token dimension', () => {
    const r = strict('api_keys', { ...key, mcp_rate_limits: { github: { rpm: 5, concurrency: 1 } } });
    assert.ok(r.ok);
    assert.deepEqual(r.resource?.mcp_rate_limits, { github: { rpm: 5, concurrency: 1 } });
    assert.match(error(strict('api_keys', { ...key, mcp_rate_limits: { github: { tpm: 5 } } })), /tpm: unknown field/);
  });
});

describe('a resources file with MCP', () => {
  test('loads mcp_servers, mcp_auth_settings and keys with mcp_access; has no mcp_policies collection', async () => {
    const text = `_format_version: "1"
mcp_servers:
  - { name: github, url: "https://gh.example/mcp", auth_type: bearer, secret: "\${GH}" }
mcp_auth_settings:
  - { resource_url: "https://gw.example.com/mcp" }
api_keys:
  - { display_name: dev, key_hash: h, allowed_models: [], mcp_access: { allow: ["github__*"] } }
`;
    const r = await loadResourcesFile('/r.yaml', text, { GH: 'token' });
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    assert.equal(r.snapshot.of('mcp_servers')[0]?.secret, 'token');
    assert.equal(r.snapshot.of('mcp_auth_settings').length, 1);
    const bad = await loadResourcesFile('/r.yaml', '_format_version: "1"\nmcp_policies: []\n', {});
    assert.equal(bad.ok, false);
    if (!bad.ok) assert.match(bad.report.format(), /unknown top-level key `mcp_policies`/);
  });
});
