// `sluice export` (docs/etcd.md "Export"), AISIX's export: a deployment seeded into a real etcd, exported,
// loaded back through the file pipeline and compared with what the etcd gateway serves; AISIX's placeholders
// for the five secret-bearing kinds; exit 1 when a row is left out.
// Run: node --import tsx --test test/integration/export.test.ts
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import type { ResourceSet } from '../../src/resources/snapshot.ts';
import { exportResources, runExport } from '../../src/sources/etcd/export.ts';
import { redactSecrets, type SecretPlaceholder } from '../../src/sources/etcd/export-secrets.ts';
import { canonicalJson } from '../../src/util/crypto.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { gatewayWith, testPlatform } from '../support/platform.ts';
import { deadEndpoint } from '../support/process.ts';

const UPSTREAM_SECRET = 'sk-upstream-SECRET-value';
const CALLER_KEY = 'sk-caller-test-key';
const CALLER_HASH = createHash('sha256').update(CALLER_KEY).digest('hex');

/**
 * A resource set with ids replaced by names (a file derives its ids from the names): what `export` must
 * preserve. An api key is named `apikey-<first 16 of key_hash>` (AISIX's); `allowed_models` entries naming
 * no model are dropped.
 */
function byName(set: ResourceSet): unknown {
  const pkName = new Map(set.provider_keys.map((k) => [k.id, k.display_name]));
  const models = new Set(set.models.map((m) => m.display_name));
  return {
    provider_keys: set.provider_keys.map(({ id: _id, ...k }) => k),
    models: set.models.map(({ id: _id, ...m }) =>
      m.kind === 'direct' ? { ...m, provider_key_id: pkName.get(m.provider_key_id) } : m
    ),
    api_keys: set.api_keys.map(({ id: _id, ...k }) => ({
      ...k,
      display_name: `apikey-${k.key_hash.slice(0, 16)}`,
      allowed_models: k.allowed_models.filter((n) => n.includes('*') || models.has(n)),
    })),
  };
}

const P = '/export';
const ROWS: [string, unknown][] = [
  [`${P}/provider_keys/pk1`, {
    display_name: 'Open AI main',
    provider: 'openai',
    api_key: 'sk-$dollar-SECRET',
    api_base: 'http://127.0.0.1:9/v1/',
  }],
  [`${P}/provider_keys/pk2`, { display_name: 'echo', provider: 'echo' }],
  [`${P}/provider_keys/pk3`, { display_name: 'openai.backup', provider: 'openai', api_key: UPSTREAM_SECRET }],
  [`${P}/models/m1`, {
    display_name: 'gpt-$cheap',
    model_name: 'gpt-4o-mini',
    provider_key_id: 'pk1',
    cooldown: { default_seconds: 5 },
    cost: { input_per_1k: 0.15, output_per_1k: 0.6 },
    new_field: 1,
  }],
  [`${P}/models/m2`, { display_name: 'openai/*', model_name: '*', provider_key_id: 'pk3' }],
  [`${P}/models/m3`, { display_name: 'echo-model', model_name: 'echo', provider_key_id: 'pk2', timeout: 1000 }],
  [`${P}/models/r1`, {
    display_name: 'smart',
    routing: { strategy: 'round_robin', targets: [{ model: 'gpt-$cheap', weight: 3 }, { model: 'echo-model' }] },
  }],
  [`${P}/api_keys/k1`, {
    display_name: 'caller',
    key_hash: CALLER_HASH,
    allowed_models: ['smart', 'openai/*', 'echo-model'],
    expires_at: '2999-01-01T00:00:00Z',
    rate_limit: { rpm: 60 },
  }],
  [`${P}/api_keys/k2`, { display_name: 'disabled', key_hash: 'a'.repeat(64), disabled: true, allowed_models: [] }],
  [`${P}/api_keys/k3`, { key_hash: 'no-name', allowed_models: ['ghost', 'smart'] }],
  // Exported as stored, secrets as placeholders.
  [`${P}/mcp_servers/s1`, { name: 'tools', url: 'http://127.0.0.1:9/mcp', secret: 'mcp-SECRET' }],
  [`${P}/a2a_agents/a1`, { name: 'agent', url: 'http://127.0.0.1:9/a2a', secret: 'a2a-SECRET' }],
  [`${P}/observability_exporters/o1`, {
    name: 'honeycomb',
    kind: 'otlp_http',
    endpoint: 'http://127.0.0.1:9/v1/traces',
    headers: { 'x-honeycomb-team': 'hc-SECRET' },
  }],
];

describe('sluice export (real etcd)', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  let t: EtcdTestGateway;
  before(async () => {
    etcd = await startEtcd();
    const s = seeder(etcd.endpoint);
    for (const [k, v] of ROWS) await s.put(k, v);
    t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
  });
  after(async () => {
    await t?.stop();
    await etcd?.stop();
  });
  const cmd = {
    kind: 'export' as const,
    endpoints: [] as string[],
    prefix: P,
    output: '/out/resources.yaml',
    withSecrets: false,
  };

  test('round trip: the file loads back to what the etcd gateway serves; secrets as AISIX placeholders', async () => {
    const platform = testPlatform();
    assert.equal(await runExport(platform, { ...cmd, endpoints: [etcd.endpoint] }), 0);
    const text = platform.fileMap.get('/out/resources.yaml')!;
    for (const secret of ['sk-$dollar-SECRET', UPSTREAM_SECRET, 'mcp-SECRET', 'a2a-SECRET', 'hc-SECRET']) {
      assert.ok(!text.includes(secret), `no plaintext ${secret}`);
    }
    const vars = {
      AISIXSECRET_PROVIDER_KEY_OPEN_AI_MAIN_API_KEY: 'sk-$dollar-SECRET',
      AISIXSECRET_PROVIDER_KEY_OPENAI_BACKUP_API_KEY: UPSTREAM_SECRET,
      AISIXSECRET_MCP_SERVER_TOOLS_SECRET: 'mcp-SECRET',
      AISIXSECRET_A2A_AGENT_AGENT_SECRET: 'a2a-SECRET',
      AISIXSECRET_OBSERVABILITY_EXPORTER_HONEYCOMB_HEADER_X_HONEYCOMB_TEAM: 'hc-SECRET',
    };
    for (const v of Object.keys(vars)) assert.ok(text.includes(`\${${v}}`), v);
    assert.match(text, /models\.new_field \(1 row\(s\)\)/);
    assert.match(text, new RegExp(`key_hash: ${CALLER_HASH}`), 'key_hash kept as-is');
    assert.match(text, new RegExp(`display_name: apikey-${CALLER_HASH.slice(0, 16)}\\n`));
    assert.match(text, /display_name: apikey-no-name\n/);

    // stderr: AISIX's report, the placeholder list sorted, nothing secret.
    const lines = platform.logs.map((l) => String(l.raw));
    assert.match(lines[0]!, /^Exported 13 resource\(s\) to \/out\/resources\.yaml \(\/export\/ at revision \d+\)$/);
    const at = lines.indexOf(
      "5 secret value(s) were replaced with ${VAR} placeholders. Set each variable to the real credential in the gateway's environment before loading this file:",
    );
    assert.ok(at > 0, lines.join('\n'));
    assert.deepEqual(lines.slice(at + 1, at + 6), [
      '  AISIXSECRET_A2A_AGENT_AGENT_SECRET — a2a_agents "agent" secret',
      '  AISIXSECRET_MCP_SERVER_TOOLS_SECRET — mcp_servers "tools" secret',
      '  AISIXSECRET_OBSERVABILITY_EXPORTER_HONEYCOMB_HEADER_X_HONEYCOMB_TEAM — observability_exporters "honeycomb" header x-honeycomb-team',
      '  AISIXSECRET_PROVIDER_KEY_OPENAI_BACKUP_API_KEY — provider_keys "openai.backup" api_key',
      '  AISIXSECRET_PROVIDER_KEY_OPEN_AI_MAIN_API_KEY — provider_keys "Open AI main" api_key',
    ]);
    assert.ok(!lines.join('\n').includes('SECRET-value'));

    const loaded = await loadResourcesFile('/out/resources.yaml', text, vars);
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.report.format());
    assert.equal(
      canonicalJson(byName(loaded.snapshot.resources)),
      canonicalJson(byName(t.gw.snapshot!.resources)),
      'same values, references by name',
    );
    // What a caller sees is the same from both sources.
    const file = await gatewayWith(text, { env: vars });
    const ask = async (app: ReturnType<typeof createProxyApp>) => {
      const res = await app.request('/v1/models', { headers: { authorization: `Bearer ${CALLER_KEY}` } });
      assert.equal(res.status, 200);
      return ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id).sort();
    };
    const fromFile = await ask(createProxyApp(file.gw));
    assert.deepEqual(fromFile, await ask(createProxyApp(t.gw)));
    assert.deepEqual(fromFile, ['echo-model', 'smart']);
  });

  test('--reveal-secrets to stdout: plaintext, a warning, and the file still loads', async () => {
    let out = '';
    const p = {
      ...testPlatform(),
      writeOut: (x: string) => {
        out += x;
      },
    };
    assert.equal(await runExport(p, { ...cmd, endpoints: [etcd.endpoint], output: undefined, withSecrets: true }), 0);
    assert.ok(out.includes('mcp-SECRET') && out.includes(UPSTREAM_SECRET));
    const lines = p.logs.map((l) => String(l.raw));
    assert.match(lines[0]!, /^Exported 13 resource\(s\) to stdout /);
    assert.ok(lines.includes(
      'warning: --reveal-secrets emitted live credentials inline; treat the output as a secret and do not commit it.',
    ));
    assert.ok(!lines.some((l) => l.includes('AISIXSECRET_')));
    const plain = await loadResourcesFile('/stdout.yaml', out, {});
    assert.ok(plain.ok, plain.ok ? '' : plain.report.format());
    assert.equal(canonicalJson(byName(plain.snapshot.resources)), canonicalJson(byName(t.gw.snapshot!.resources)));
  });

  test('a rejected or inexpressible row: the file is written without it, listed on stderr, exit 1', async () => {
    const Q = '/export-bad';
    const s = seeder(etcd.endpoint);
    await s.put(`${Q}/provider_keys/pk`, { display_name: 'pk', provider: 'openai', api_key: UPSTREAM_SECRET });
    await s.put(`${Q}/models/ok`, { display_name: 'ok', model_name: 'x', provider_key_id: 'pk' });
    await s.put(`${Q}/models/bad`, 'not json');
    await s.put(`${Q}/models/orphan`, { display_name: 'orphan', model_name: 'x', provider_key_id: 'missing' });
    await s.put(`${Q}/mcp_policies/p1`, { name: 'p' });
    await s.put(`${Q}/mcp_servers/a`, { name: 'same', url: 'http://127.0.0.1:9/a' });
    await s.put(`${Q}/mcp_servers/b`, { name: 'same', url: 'http://127.0.0.1:9/b' });
    const platform = testPlatform();
    assert.equal(await runExport(platform, { ...cmd, endpoints: [etcd.endpoint], prefix: Q }), 1);
    const text = platform.fileMap.get('/out/resources.yaml')!;
    const loaded = await loadResourcesFile('/x.yaml', text, { AISIXSECRET_PROVIDER_KEY_PK_API_KEY: 'k' });
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.report.format());
    assert.deepEqual(loaded.snapshot.resources.models.map((m) => m.display_name), ['ok']);
    const err = platform.logs.map((l) => String(l.raw)).join('\n');
    assert.match(
      err,
      /warning: 2 etcd entr\(ies\) were rejected during decode and omitted from the export:\n {2}- \/export-bad\/mcp_policies\/p1: schema_failed: [^\n]*\n {2}- \/export-bad\/models\/bad: non_json/,
    );
    assert.match(err, /2 row\(s\) cannot be written to the file — fix them in the source and re-export/);
    assert.match(err, /- \/export-bad\/mcp_servers\/b: not expressible in a file: a name another row holds/);
    assert.match(err, /- \/export-bad\/models\/orphan: not expressible/);
    assert.match(err, /export: 4 row\(s\) left out; the file does not hold the whole deployment \(exit 1\)$/);
  });

  test('rate-limit policies: references written by name, loaded back to the same rules', async () => {
    const Q = '/export-policies';
    const s = seeder(etcd.endpoint);
    await s.put(`${Q}/provider_keys/pk`, { display_name: 'pk', provider: 'openai', api_key: UPSTREAM_SECRET });
    await s.put(`${Q}/models/m1`, { display_name: 'gpt', model_name: 'x', provider_key_id: 'pk' });
    await s.put(`${Q}/api_keys/k1`, { key_hash: CALLER_HASH, allowed_models: ['gpt'], team_id: 't-1' });
    await s.put(`${Q}/rate_limit_policies/p1`, {
      name: 'per-model',
      scope: 'model',
      scope_ref: 'm1',
      window: 'day',
      max_tokens: 9,
    });
    await s.put(`${Q}/rate_limit_policies/p2`, {
      name: 'v2',
      limits: { rpm: 3 },
      conditions: [{ logic: 'or', children: [{ dimension: 'api_key', operator: 'in', value: ['k1'] }] }],
      group_by: ['team'],
    });
    await s.put(`${Q}/rate_limit_policies/p3`, {
      name: 'ghost',
      scope: 'api_key',
      scope_ref: 'k-none',
      window: 'minute',
      max_requests: 1,
    });
    const platform = testPlatform();
    assert.equal(await runExport(platform, { ...cmd, endpoints: [etcd.endpoint], prefix: Q }), 1, 'ghost is left out');
    const text = platform.fileMap.get('/out/resources.yaml')!;
    assert.match(
      String(platform.logs.map((l) => l.raw).join('\n')),
      /p3: not expressible in a file: it references api_key "k-none"/,
    );
    const loaded = await loadResourcesFile('/x.yaml', text, { AISIXSECRET_PROVIDER_KEY_PK_API_KEY: 'k' });
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.report.format());
    if (!loaded.ok) return;
    const snap = loaded.snapshot;
    const [a, b] = snap.policies;
    assert.equal(a!.form === 'classic' && snap.models.get(a!.scope_ref)?.display_name, 'gpt');
    const leaf = (b!.conditions![0] as { children: { value: string[] }[] }).children[0]!;
    assert.equal(snap.apiKeys.get(leaf.value[0]!)?.key_hash, CALLER_HASH);
    assert.deepEqual(b!.group_by, ['team']);
  });

  test('guardrails: the environment-wide ones written (secrets as placeholders), the narrower left out with a warning; cache policies by name', async () => {
    const Q = '/export-guardrails';
    const s = seeder(etcd.endpoint);
    await s.put(`${Q}/provider_keys/pk`, { display_name: 'pk', provider: 'openai', api_key: UPSTREAM_SECRET });
    await s.put(`${Q}/models/m1`, { display_name: 'gpt', model_name: 'x', provider_key_id: 'pk' });
    await s.put(`${Q}/api_keys/k1`, { key_hash: CALLER_HASH, allowed_models: ['gpt'] });
    const words = (value: string) => [{ kind: 'literal', value }];
    await s.put(`${Q}/guardrails/g1`, { name: 'everywhere', kind: 'keyword', patterns: words('forbidden') });
    await s.put(`${Q}/guardrail_attachments/a1`, { guardrail_id: 'g1', scope_type: 'env', priority: 0 });
    await s.put(`${Q}/guardrails/g2`, { name: 'unattached', kind: 'keyword', patterns: words('unsaid') });
    await s.put(`${Q}/guardrails/g3`, { name: 'model-only', kind: 'keyword', patterns: words('narrow') });
    await s.put(`${Q}/guardrail_attachments/a2`, {
      guardrail_id: 'g3',
      scope_type: 'model',
      scope_id: 'm1',
      priority: 0,
    });
    await s.put(`${Q}/guardrails/g4`, {
      name: 'mod',
      kind: 'openai_moderation',
      api_key: 'mod-SECRET',
      enabled: false,
    });
    await s.put(`${Q}/guardrail_attachments/a4`, { guardrail_id: 'g4', scope_type: 'env', priority: 0 });
    await s.put(`${Q}/cache_policies/c1`, { name: 'cache-all', ttl_seconds: 60 });
    const platform = testPlatform();
    assert.equal(await runExport(platform, { ...cmd, endpoints: [etcd.endpoint], prefix: Q }), 0);
    const text = platform.fileMap.get('/out/resources.yaml')!;
    assert.ok(!text.includes('mod-SECRET'));
    assert.ok(!text.includes('guardrail_attachments'), 'a file has no attachment collection');
    const err = platform.logs.map((l) => String(l.raw)).join('\n');
    assert.match(err, /warning: guardrails "model-only" left out: it is not attached to the whole environment/);
    assert.match(err, /AISIXSECRET_GUARDRAIL_MOD_API_KEY — guardrails "mod" api_key/);
    const env = {
      AISIXSECRET_PROVIDER_KEY_PK_API_KEY: UPSTREAM_SECRET,
      AISIXSECRET_GUARDRAIL_MOD_API_KEY: 'mod-SECRET',
    };
    const loaded = await loadResourcesFile('/x.yaml', text, env);
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.report.format());
    if (!loaded.ok) return;
    assert.deepEqual(loaded.snapshot.guardrails.map((g) => g.name), ['everywhere', 'unattached', 'mod']);
    assert.deepEqual(loaded.snapshot.cachePolicies.map((c) => [c.name, c.ttl_seconds]), [['cache-all', 60]]);
    // What a caller meets is the same from both sources for the guardrails written.
    const fromEtcd = startEtcdGateway({ endpoint: etcd.endpoint, prefix: Q });
    try {
      await fromEtcd.source.firstApplied;
      const file = await gatewayWith(text, { env });
      const ask = async (app: ReturnType<typeof createProxyApp>, word: string) => {
        const res = await app.request('/v1/chat/completions', {
          method: 'POST',
          headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: `say ${word}` }] }),
        });
        return res.status === 422 ? (await res.json() as { error: { message: string } }).error.message : res.status;
      };
      for (const word of ['forbidden', 'unsaid']) {
        const fromFile = await ask(createProxyApp(file.gw), word);
        assert.match(String(fromFile), /^request blocked by content policy/);
        assert.equal(fromFile, await ask(createProxyApp(fromEtcd.gw), word), word);
      }
    } finally {
      await fromEtcd.stop();
    }
  });

  test('unreachable etcd: exit 1, a message, no file', async () => {
    const p = testPlatform();
    assert.equal(await runExport(p, { ...cmd, endpoints: [await deadEndpoint()] }), 1);
    assert.match(String(p.logs[0]?.raw), /^export: cannot read \/export\/ from etcd: /);
    assert.equal(p.fileMap.size, 0);
  });
});

describe('export placeholders (AISIX export/secrets.rs)', () => {
  const redact = (kind: string, identity: string, doc: Record<string, unknown>) => {
    const out: SecretPlaceholder[] = [];
    const copy = structuredClone(doc) as Parameters<typeof redactSecrets>[2];
    redactSecrets(kind, identity, copy, out);
    return { doc: copy, vars: out.map((p) => p.envVar) };
  };

  test('names: upper-cased, every non-alphanumeric byte → _, never AISIX_', () => {
    const r = redact('provider_keys', 'openai-prod', { api_key: 'sk' });
    assert.deepEqual(r.doc, { api_key: '${AISIXSECRET_PROVIDER_KEY_OPENAI_PROD_API_KEY}' });
    assert.deepEqual(redact('provider_keys', '__a  b__', { api_key: 'sk' }).vars, [
      'AISIXSECRET_PROVIDER_KEY___A__B___API_KEY',
    ]);
  });

  test('provider keys: request.default_headers / default_body_fields strings; other values kept', () => {
    const r = redact('provider_keys', 'pk', {
      api_key: '',
      request: {
        default_headers: { 'x-tenant-token': 'tok', 'x-empty': '' },
        default_body_fields: { api_key: 'body', safe_prompt: true },
      },
    });
    assert.deepEqual(r.doc, {
      api_key: '',
      request: {
        default_headers: {
          'x-tenant-token': '${AISIXSECRET_PROVIDER_KEY_PK_DEFAULT_HEADERS_X_TENANT_TOKEN}',
          'x-empty': '',
        },
        default_body_fields: {
          api_key: '${AISIXSECRET_PROVIDER_KEY_PK_DEFAULT_BODY_FIELDS_API_KEY}',
          safe_prompt: true,
        },
      },
    });
  });

  test('guardrails: api_key, access_key_secret, secret_access_key at any depth; identifiers kept', () => {
    const r = redact('guardrails', 'bedrock-guard', {
      kind: 'bedrock',
      api_key: 'top',
      aws_credentials: { kind: 'static', access_key_id: 'AKIA', secret_access_key: 'wJalr' },
      list: [{ access_key_secret: 'ali' }],
    });
    assert.deepEqual(r.doc, {
      kind: 'bedrock',
      api_key: '${AISIXSECRET_GUARDRAIL_BEDROCK_GUARD_API_KEY}',
      aws_credentials: {
        kind: 'static',
        access_key_id: 'AKIA',
        secret_access_key: '${AISIXSECRET_GUARDRAIL_BEDROCK_GUARD_SECRET_ACCESS_KEY}',
      },
      list: [{ access_key_secret: '${AISIXSECRET_GUARDRAIL_BEDROCK_GUARD_ACCESS_KEY_SECRET}' }],
    });
  });

  test('a kind without secrets is untouched', () => {
    const doc = { name: 'c', api_key: 'not-a-secret-here' };
    assert.deepEqual(redact('cache_policies', 'c', doc).doc, doc);
  });

  test('two names folding to one variable: a warning, the file still written', () => {
    const kv = (key: string, v: unknown, rev: number) => ({
      key,
      value: JSON.stringify(v),
      createRevision: rev,
      modRevision: rev,
      version: 1,
    });
    const r = exportResources(
      [
        kv('/p/provider_keys/a', { display_name: 'openai-prod', provider: 'openai', api_key: 'x' }, 1),
        kv('/p/provider_keys/b', { display_name: 'openai.prod', provider: 'openai', api_key: 'y' }, 2),
      ],
      '/p',
      { withSecrets: false, revision: 2, source: 'e' },
    );
    assert.equal(r.skipped.length, 0);
    assert.deepEqual(r.warnings, [
      'secret placeholder ${AISIXSECRET_PROVIDER_KEY_OPENAI_PROD_API_KEY} is derived for both "openai-prod" and "openai.prod"; their names collapse to the same environment variable, so one real credential cannot be supplied to each — rename one entry to disambiguate',
    ]);
  });
});
