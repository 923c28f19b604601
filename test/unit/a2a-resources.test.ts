// AISIX's `a2a_agents` kind and `api_keys.allowed_agents` (docs/a2a.md "Resources"): defaults, validation on
// both paths (the file strict, etcd lenient), the two spellings of the name, the doc's example accepted by
// `sluice validate`, and the export's secret placeholder.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { agentAllowed, servedAgent, wildcardMatch } from '../../src/a2a/agents.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { exportResources } from '../../src/sources/etcd/export.ts';
import { parseRow } from '../../src/sources/etcd/rows.ts';
import { validateResources } from '../../src/tools/validate.ts';
import { testPlatform } from '../support/platform.ts';

const read = (doc: Record<string, unknown>, mode: 'strict' | 'lenient' = 'strict') =>
  parseDocument('a2a_agents', 'id-1', doc, mode);

describe('a2a_agents documents', () => {
  test("AISIX's defaults: protocol 1.0, no auth, enabled; display_name is the former spelling of name", () => {
    for (const doc of [{ name: 'invoice', url: 'https://x/a2a' }, { display_name: 'invoice', url: 'https://x/a2a' }]) {
      const r = read(doc);
      assert.ok(r.ok);
      assert.deepEqual(r.resource, {
        id: 'id-1',
        name: 'invoice',
        url: 'https://x/a2a',
        protocol_version: '1.0',
        auth_type: 'none',
        enabled: true,
      });
    }
  });

  test('refused: no url, a name that is no path segment, an unknown version or auth, a credential without secret', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: 'a' }, /^url: /],
      [{ url: 'https://x' }, /^name: required/],
      [{ name: 'a/b', url: 'https://x' }, /^name: must be one URL path segment/],
      [{ name: 'a b', url: 'https://x' }, /^name: must be one URL path segment/],
      [{ name: 'a%2F', url: 'https://x' }, /^name: must be one URL path segment/],
      [{ name: 'a', url: 'https://x', protocol_version: '2.0' }, /^protocol_version: /],
      [{ name: 'a', url: 'https://x', auth_type: 'oauth2', secret: 's' }, /^auth_type: /],
      [{ name: 'a', url: 'https://x', auth_type: 'bearer' }, /^secret: required .* when auth_type is bearer/],
      [{ name: 'a', url: 'https://x', auth_type: 'api_key', secret: '' }, /^secret: required .* api_key/],
      [{ name: 'a', url: 'https://x', timeout_ms: 0 }, /^timeout_ms: /],
      [{ name: 'a', url: 'https://x', client_id: 'c' }, /^client_id: unknown field/],
    ];
    for (const [doc, why] of cases) {
      const r = read(doc);
      assert.ok(!r.ok, JSON.stringify(doc));
      assert.equal(r.errorKind, 'schema_failed');
      assert.match(r.error, why, JSON.stringify(doc));
    }
  });

  test('both spellings of the name: parse_failed, as serde answers a duplicate field', () => {
    const r = read({ name: 'a', display_name: 'b', url: 'https://x' });
    assert.ok(!r.ok);
    assert.equal(r.errorKind, 'parse_failed');
  });

  test('etcd: unknown members dropped and reported; a credential without secret rejects the row', () => {
    const ok = parseRow('/aisix', '/aisix/a2a_agents/ag1', JSON.stringify({ name: 'a', url: 'https://x', extra: 1 }));
    assert.ok(ok.ok && ok.kind === 'a2a_agents');
    assert.deepEqual(ok.unknownFields, ['extra']);
    const bad = parseRow(
      '/aisix',
      '/aisix/a2a_agents/ag2',
      JSON.stringify({ name: 'a', url: 'x', auth_type: 'bearer' }),
    );
    assert.ok(!bad.ok);
    assert.equal(bad.errorKind, 'schema_failed');
  });

  test('api_keys.allowed_agents: a list of strings or null, in files and on etcd', () => {
    const row = (allowed: unknown) =>
      parseDocument('api_keys', 'k', { key_hash: 'h', allowed_models: [], allowed_agents: allowed }, 'strict');
    const listed = row(['a*']);
    assert.ok(listed.ok && listed.resource.allowed_agents?.[0] === 'a*');
    const none = row(null);
    assert.ok(none.ok && none.resource.allowed_agents === undefined);
    assert.ok(!row('a').ok);
  });
});

describe('allowed_agents', () => {
  test("AISIX's single-* globs; absent or empty reaches none; two stars match nothing", () => {
    assert.equal(agentAllowed(undefined, 'a'), false);
    assert.equal(agentAllowed([], 'a'), false);
    assert.equal(agentAllowed(['*'], 'anything'), true);
    assert.equal(agentAllowed(['research-*'], 'research-agent'), true);
    assert.equal(agentAllowed(['research-*'], 'researcher'), false);
    assert.equal(agentAllowed(['a'], 'ab'), false);
    assert.equal(wildcardMatch('*-agent', 'x-agent'), true);
    assert.equal(wildcardMatch('a*b*', 'ab'), false);
    assert.equal(wildcardMatch('ab*ba', 'aba'), false, 'head and tail may not overlap');
  });

  test('a disabled agent is absent, the lookup exact', () => {
    const a = (name: string, enabled: boolean) => ({
      id: name,
      name,
      url: 'u',
      protocol_version: '1.0' as const,
      auth_type: 'none' as const,
      enabled,
    });
    assert.equal(servedAgent([a('x', false)], 'x'), undefined);
    assert.equal(servedAgent([a('x', true)], 'X'), undefined);
    assert.equal(servedAgent([a('x', true)], 'x')?.id, 'x');
  });
});

describe('files, validate, export', () => {
  test("docs/a2a.md's example: `sluice validate` accepts it", async () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../docs/a2a.md'), 'utf8');
    const yaml = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(yaml, 'the doc has a yaml example');
    const platform = testPlatform({ PLANNER_KEY: 'sk-p', RESEARCH_AGENT_TOKEN: 't', INVOICES_AGENT_KEY: 'k' });
    platform.fileMap.set('/t/resources.yaml', yaml);
    const out: string[] = [];
    platform.writeOut = (s: string) => void out.push(s);
    assert.equal(await validateResources(platform, '/t/resources.yaml'), 0, JSON.stringify(platform.logs));
    assert.deepEqual(out, ['OK: /t/resources.yaml loaded 3 resource(s)\n']);
    const r = await loadResourcesFile('/t/resources.yaml', yaml, platform.env);
    assert.ok(r.ok);
    assert.deepEqual(r.snapshot.of('a2a_agents').map((a) => [a.name, a.enabled]), [
      ['research-agent', true],
      ['legacy-invoices', false],
    ]);
  });

  test('a file entry with both spellings, or two agents of one name, is an error', async () => {
    const both = await loadResourcesFile(
      '/t/r.yaml',
      '_format_version: "1"\na2a_agents: [{ name: a, display_name: a, url: "https://x" }]\n',
      {},
    );
    assert.ok(!both.ok);
    const twice = await loadResourcesFile(
      '/t/r.yaml',
      '_format_version: "1"\na2a_agents: [{ name: a, url: "https://x" }, { display_name: a, url: "https://y" }]\n',
      {},
    );
    assert.ok(!twice.ok);
    assert.match(twice.report.format(), /duplicate a2a_agents entry/);
  });

  test('export writes the row as stored, its secret a placeholder', () => {
    const r = exportResources(
      [{
        key: '/aisix/a2a_agents/ag1',
        value: JSON.stringify({ name: 'research', url: 'https://x/a2a', auth_type: 'bearer', secret: 'tok-1' }),
        modRevision: 1,
        createRevision: 1,
        version: 1,
      }],
      '/aisix',
      { withSecrets: false, revision: 1, source: 'test' },
    );
    const doc = parse(r.yaml) as { a2a_agents: Record<string, unknown>[] };
    assert.deepEqual(doc.a2a_agents, [{
      name: 'research',
      url: 'https://x/a2a',
      auth_type: 'bearer',
      secret: '${AISIXSECRET_A2A_AGENT_RESEARCH_SECRET}',
    }]);
    assert.ok(!r.yaml.includes('tok-1'));
  });

  test("export keeps an api key's allowed_agents", () => {
    const r = exportResources(
      [{
        key: '/aisix/api_keys/k1',
        value: JSON.stringify({ key_hash: 'abc', allowed_models: [], allowed_agents: ['research-*'] }),
        modRevision: 1,
        createRevision: 1,
        version: 1,
      }],
      '/aisix',
      { withSecrets: false, revision: 1, source: 'test' },
    );
    const doc = parse(r.yaml) as { api_keys: Record<string, unknown>[] };
    assert.deepEqual(doc.api_keys[0]!.allowed_agents, ['research-*']);
  });
});
