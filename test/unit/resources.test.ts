// The resources-file pipeline (docs/configuration.md): YAML → ${VAR} → desugar → zod → cross-references → snapshot, with
// every error of a file in one report, and no secret in any message.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { interpolate, loadResourcesFile, type LoadResult, rowScope } from '../../src/resources/pipeline.ts';
import { globMatch, Snapshot } from '../../src/resources/snapshot.ts';
import type { DirectModel, RoutingModel } from '../../src/resources/schema.ts';
import { RESOURCE_ID_NAMESPACE, sha256Hex, uuidV5 } from '../../src/util/crypto.ts';
import { MALFORMED, MALFORMED_REPORT } from '../support/aisix-fixtures.ts';

const FILE = '/etc/sluice/resources.yaml';
const UUID_V5 = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** UUIDv5 computed independently with node:crypto (RFC 9562 §5.5). */
function refUuidV5(name: string, ns = RESOURCE_ID_NAMESPACE): string {
  const nsBytes = Buffer.from(ns.replace(/-/g, ''), 'hex');
  const h = createHash('sha1').update(Buffer.concat([nsBytes, Buffer.from(name, 'utf8')])).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const ENV = { OPENAI_API_KEY: 'sk-openai-SECRET-0001', TEAM_A_KEY: 'team-a-caller-SECRET' };

const VALID = `_format_version: "1"
provider_keys:
  - display_name: openai-main
    provider: openai
    api_key: \${OPENAI_API_KEY}
    api_base: https://api.openai.com/v1/
  - display_name: anthropic
    provider: anthropic
    secret: sk-ant-literal
  - display_name: offline
    provider: echo
models:
  - display_name: gpt-4o
    provider_key: openai-main
    model_name: gpt-4o-2024-08-06
    timeout: 30000
    retries: 1
  - display_name: claude
    provider_key: anthropic
    model_name: claude-3-5-sonnet
  - display_name: openai/*
    provider_key: openai-main
    model_name: "*"
  - display_name: smart
    routing:
      strategy: round_robin
      targets: [{ model: gpt-4o, weight: 3 }, { model: claude }]
api_keys:
  - display_name: team-a
    key_env: TEAM_A_KEY
    allowed_models: ["*"]
  - display_name: team-b
    key_hash: ${sha256('team-b-key')}
    allowed_models: [gpt-4o, "openai/*", "claude-*"]
    expires_at: "2030-01-01T00:00:00Z"
    rate_limit: { rpm: 60 }
`;

async function load(text: string, env: Record<string, string | undefined> = ENV): Promise<LoadResult> {
  return loadResourcesFile(FILE, text, env);
}

async function ok(text: string, env: Record<string, string | undefined> = ENV): Promise<Snapshot> {
  const r = await load(text, env);
  if (!r.ok) assert.fail(`expected the file to load, got:\n${r.report.format()}`);
  return r.snapshot;
}

async function report(text: string, env: Record<string, string | undefined> = ENV): Promise<string> {
  const r = await load(text, env);
  if (r.ok) assert.fail('expected the file to fail');
  return r.report.format();
}

/** One-row files: a provider key `pk` and whatever else. */
const PK = `_format_version: "1"
provider_keys:
  - display_name: pk
    provider: openai
    api_key: sk-x
`;

describe('a valid file', () => {
  test('loads with the right counts', async () => {
    const r = await load(VALID);
    assert.equal(r.ok, true, r.ok ? '' : r.report.format());
    if (!r.ok) return;
    assert.equal(r.resourceCount, 9);
    assert.deepEqual(r.snapshot.counts(), { provider_keys: 3, models: 4, api_keys: 2 });
    assert.equal(r.snapshot.size, 9);
  });

  test('ids are deterministic UUIDv5 of <kind>/<display_name>', async () => {
    const a = await ok(VALID);
    const b = await ok(VALID);
    const ids = (s: Snapshot) =>
      [...s.resources.provider_keys, ...s.resources.models, ...s.resources.api_keys].map((x) => x.id);
    assert.deepEqual(ids(a), ids(b));
    for (const id of ids(a)) assert.match(id, UUID_V5);
    assert.equal(new Set(ids(a)).size, 9);
    assert.equal(a.modelByName('gpt-4o')!.id, refUuidV5('models/gpt-4o'));
    assert.equal(a.modelByName('gpt-4o')!.id, '89243f84-b907-5f0a-b778-51dd2d8e10b1');
    assert.equal(a.resources.provider_keys[0]!.id, refUuidV5('provider_keys/openai-main'));
    assert.equal(a.resources.api_keys[1]!.id, refUuidV5('api_keys/team-b'));
  });

  test('the same display_name in two kinds gets two different ids', async () => {
    const s = await ok(`_format_version: "1"
provider_keys: [{ display_name: same, provider: openai, api_key: k }]
models: [{ display_name: same, provider_key: same, model_name: m }]
api_keys: [{ display_name: same, key_hash: ${sha256('x')}, allowed_models: [same] }]
`);
    const ids = [s.resources.provider_keys[0]!.id, s.resources.models[0]!.id, s.resources.api_keys[0]!.id];
    assert.equal(new Set(ids).size, 3);
  });

  test('uuidV5 matches the RFC test vector', () => {
    assert.equal(
      uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'),
      '2ed6657d-e927-568b-95e1-2665a8aea6a2',
    );
  });

  test('uuidV5 matches node:crypto for short, long and multi-byte names, call after call', () => {
    const names = [
      '',
      'models/a',
      'x'.repeat(496),
      'x'.repeat(497),
      'é'.repeat(248),
      'é'.repeat(249),
      '模型/😀',
      'models/b',
    ];
    for (const name of names) assert.equal(uuidV5(name), refUuidV5(name), `${name.length} characters`);
    assert.equal(
      uuidV5('a', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'),
      refUuidV5('a', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'),
    );
  });

  test('desugaring: provider_key → provider_key_id, secret → api_key, key_env → key_hash, adapters and bases', async () => {
    const s = await ok(VALID);
    const [openai, anthropic, offline] = s.resources.provider_keys;
    assert.equal(openai!.api_key, 'sk-openai-SECRET-0001');
    assert.equal(openai!.adapter, 'openai');
    assert.equal(openai!.api_base, 'https://api.openai.com/v1', 'trailing slash removed');
    assert.equal(anthropic!.api_key, 'sk-ant-literal', 'secret is an alias of api_key');
    assert.equal('secret' in anthropic!, false);
    assert.equal(anthropic!.adapter, 'anthropic');
    assert.equal(anthropic!.api_base, 'https://api.anthropic.com');
    assert.equal(offline!.adapter, 'echo');
    assert.equal(offline!.api_base, undefined);

    const gpt = s.modelByName('gpt-4o') as DirectModel;
    assert.equal(gpt.kind, 'direct');
    assert.equal(gpt.provider_key_id, openai!.id);
    assert.equal('provider_key' in gpt, false);
    assert.equal(gpt.model_name, 'gpt-4o-2024-08-06');
    assert.equal(gpt.timeout, 30000);
    assert.equal(gpt.retries, 1);
    const smart = s.modelByName('smart') as RoutingModel;
    assert.equal(smart.kind, 'routing');
    assert.deepEqual(smart.routing, {
      strategy: 'round_robin',
      retry_on_429: false,
      when_all_unavailable: 'fail',
      targets: [{ model: 'gpt-4o', weight: 3, priority: 0 }, { model: 'claude', weight: 1, priority: 0 }],
    });

    const [teamA, teamB] = s.resources.api_keys;
    assert.equal(teamA!.key_hash, sha256('team-a-caller-SECRET'));
    assert.equal('key_env' in teamA!, false);
    assert.deepEqual(teamA!.allowed_models, ['*']);
    assert.equal(teamA!.disabled, false);
    assert.equal(teamB!.key_hash, sha256('team-b-key'));
    assert.equal(teamB!.expires_at, '2030-01-01T00:00:00Z');
    assert.deepEqual(teamB!.rate_limit, { rpm: 60 });
    assert.equal(s.apiKeyByHash(sha256('team-b-key'))?.display_name, 'team-b');
    assert.equal(s.apiKeyByHash(sha256('nope')), undefined);
  });

  test('key_env: key_hash is the SHA-256 of the environment value', async () => {
    const s = await ok(
      `_format_version: "1"
api_keys: [{ display_name: k, key_env: CALLER_KEY, allowed_models: [] }]
`,
      { CALLER_KEY: 'my caller key ✓' },
    );
    const k = s.resources.api_keys[0]!;
    assert.equal(k.key_hash, sha256('my caller key ✓'));
    assert.equal(k.key_hash, await sha256Hex('my caller key ✓'));
    assert.deepEqual(k.allowed_models, []);
  });

  test('an empty file body with only _format_version is an empty snapshot', async () => {
    const r = await load('_format_version: "1"\n');
    assert.equal(r.ok && r.resourceCount, 0);
    const n = await load('_format_version: "1"\nmodels: []\n');
    assert.equal(n.ok && n.resourceCount, 0);
  });

  test('a JSON resources file loads', async () => {
    const s = await ok(JSON.stringify({
      _format_version: '1',
      provider_keys: [{ display_name: 'pk', provider: 'openai', api_key: 'k' }],
      models: [{ display_name: 'm', provider_key: 'pk', model_name: 'x' }],
    }));
    assert.equal(s.size, 2);
  });
});

describe('${VAR} interpolation', () => {
  test('replaces variables in every string scalar; $$ is a literal $; a lone $ stays', async () => {
    const s = await ok(
      `_format_version: "1"
provider_keys:
  - display_name: \${PK_NAME}
    provider: openai
    api_key: "pre-\${A}-\${B}-post"
    api_base: "http://\${HOST}:8080/v1"
  - display_name: dollars
    provider: openai
    api_key: "pa$$word-$$\{NOT_A_VAR}-a$b-$"
models:
  - display_name: m
    provider_key: \${PK_NAME}
    model_name: "\${MODEL}"
    timeout: 5000
`,
      { PK_NAME: 'main', A: 'aa', B: 'bb', HOST: 'upstream.local', MODEL: 'gpt-x' },
    );
    const [main, dollars] = s.resources.provider_keys;
    assert.equal(main!.display_name, 'main');
    assert.equal(main!.api_key, 'pre-aa-bb-post');
    assert.equal(main!.api_base, 'http://upstream.local:8080/v1');
    assert.equal(dollars!.api_key, 'pa$word-${NOT_A_VAR}-a$b-$');
    assert.equal((s.modelByName('m') as DirectModel).model_name, 'gpt-x');
    assert.equal((s.modelByName('m') as DirectModel).timeout, 5000);
  });

  test('interpolate() leaves non-strings alone and reports unset, empty and invalid references', () => {
    const errs: string[] = [];
    const out = interpolate(
      { a: 1, b: true, c: null, d: ['${X}', '$${X}'], e: { f: '${MISSING}', g: '${EMPTY}', h: '${1BAD}' } },
      { X: 'x', EMPTY: '' },
      (path, msg) => errs.push(`${path.join('.')}: ${msg}`),
    );
    assert.deepEqual(out, { a: 1, b: true, c: null, d: ['x', '${X}'], e: { f: '', g: '', h: '' } });
    assert.deepEqual(errs, [
      'e.f: environment variable MISSING is not set',
      'e.g: environment variable EMPTY is empty',
      'e.h: invalid variable reference "${1BAD}"',
    ]);
  });

  test('interpolate() copies only what it changes: the rest is the input itself', () => {
    const plain = { list: [{ name: 'a' }], nested: { x: 'no dollar' } };
    assert.equal(interpolate(plain, {}, assert.fail), plain);
    const input = { keep: { x: 'y' }, change: ['${X}', { z: 1 }], other: [1] };
    const out = interpolate(input, { X: 'x' }, assert.fail) as typeof input;
    assert.deepEqual(out, { keep: { x: 'y' }, change: ['x', { z: 1 }], other: [1] });
    assert.notEqual(out, input);
    assert.notEqual(out.change, input.change);
    assert.equal(out.keep, input.keep);
    assert.equal(out.change[1], input.change[1]);
    assert.equal(out.other, input.other);
    assert.deepEqual(input.change, ['${X}', { z: 1 }], 'the input is not written');
  });

  test('an unset variable is an error with the row scope and line', async () => {
    const out = await report(`${PK.replace('api_key: sk-x', 'api_key: ${NOT_SET}')}`, {});
    assert.equal(
      out,
      `resources file ${FILE}: 1 error(s):\n  - provider_keys[0]: field \`api_key\`: environment variable NOT_SET is not set`,
    );
  });

  test('an empty variable is an error', async () => {
    const out = await report(`${PK.replace('api_key: sk-x', 'api_key: "${EMPTY_ONE}"')}`, { EMPTY_ONE: '' });
    assert.equal(
      out,
      `resources file ${FILE}: 1 error(s):\n  - provider_keys[0]: field \`api_key\`: environment variable EMPTY_ONE is empty`,
    );
  });

  test('only entries are interpolated (AISIX): `_format_version` is read as written', async () => {
    const out = await report('_format_version: "${FV}"\n', { FV: '1' });
    assert.equal(
      out,
      `resources file ${FILE}: 1 error(s):\n  - (file): unrecognized _format_version "\${FV}" (supported: "1")`,
    );
  });

  test('an interpolation error in an entry: the first one, with the field path; the entry is not defined', async () => {
    const out = await report(
      `_format_version: "1"
models:
  - display_name: m
    model_name: \${A}
    routing: { targets: [{ model: "\${B}" }] }
api_keys:
  - { display_name: k, key_hash: h, allowed_models: [m] }
`,
      {},
    );
    assert.equal(
      out,
      `resources file ${FILE}: 2 error(s):\n` +
        '  - models[0]: field `model_name`: environment variable A is not set\n' +
        '  - api_keys[0] ("k"): allowed_models entry references unknown model "m" (defined models: none)',
    );
  });
});

describe('errors (AISIX wording and staging, docs/aisix-compatibility.md "Command line")', () => {
  const one = (scope: string, msg: string) => `resources file ${FILE}: 1 error(s):\n  - ${scope}: ${msg}`;

  test('a missing _format_version', async () => {
    for (const text of ['provider_keys: []\n', '', '# only a comment\n', 'models:\n']) {
      const r = await load(text);
      assert.equal(r.ok, false, JSON.stringify(text));
      if (r.ok) continue;
      assert.equal(r.report.format(), one('(file)', 'missing mandatory _format_version (expected "1")'));
    }
  });

  test('_format_version must be the string "1"', async () => {
    assert.equal(
      await report('_format_version: "2"\n'),
      one('(file)', 'unrecognized _format_version "2" (supported: "1")'),
    );
    assert.equal(
      await report('_format_version: 1\n'),
      one('(file)', '_format_version must be the string "1" (quote it)'),
    );
  });

  test('the top level must be a mapping', async () => {
    assert.equal(
      await report('- a\n- b\n'),
      one('(file)', 'top level must be a mapping with `_format_version` and resource collections'),
    );
  });

  test('an unknown top-level key names the 13 collections', async () => {
    assert.equal(
      await report('_format_version: "1"\nplugins: []\n'),
      one(
        '(file)',
        'unknown top-level key `plugins` (expected _format_version and resource collections: provider_keys, models, api_keys, guardrails, mcp_servers, a2a_agents, cache_policies, observability_exporters, rate_limit_policies, oidc_providers, claim_mappings, passthrough_routes, mcp_auth_settings)',
      ),
    );
  });

  test('a collection that is not a list, an entry that is not a mapping', async () => {
    assert.equal(
      await report('_format_version: "1"\nmodels: { a: 1 }\napi_keys:\n  - just-a-string\n'),
      `resources file ${FILE}: 2 error(s):\n  - (file): \`models\` must be a sequence of maps\n  - api_keys[0]: entry must be a mapping`,
    );
  });

  test('unknown fields at any depth; one error per entry', async () => {
    assert.equal(
      await report(`${PK}    colour: blue
models:
  - display_name: m
    provider_key: pk
    model_name: x
    max_tokenz: 5
    cooldown: { enabled: true, sticky: 1 }
`),
      `resources file ${FILE}: 2 error(s):\n` +
        '  - provider_keys[0] ("pk"): colour: unknown field\n' +
        '  - models[0] ("m"): cooldown.sticky: unknown field; max_tokenz: unknown field',
    );
  });

  test('an entry may not carry id', async () => {
    assert.equal(
      await report(`${PK}    id: pk-fixed-id\n`),
      one(
        'provider_keys[0] ("pk")',
        "the resources file does not accept `id` — ids are derived deterministically from the entry's name",
      ),
    );
  });

  test('wrong types', async () => {
    const out = await report(`${PK}  - display_name: pk2
    provider: openai
    api_base: ftp://example.com
    adapter: grpc
models:
  - display_name: m
    provider_key: pk
    model_name: x
    timeout: "abc"
    retries: -1
api_keys:
  - display_name: k
    key_hash: NOT-A-HASH
    allowed_models: gpt-4o
    expires_at: tomorrow
    disabled: "yes"
`);
    assert.equal(
      out,
      `resources file ${FILE}: 3 error(s):\n` +
        '  - provider_keys[1] ("pk2"): adapter: Invalid option: expected one of "openai"|"anthropic"|"bedrock"|"vertex"|"azure-openai"|"echo"; api_base: must be an http(s) URL\n' +
        '  - models[0] ("m"): timeout: Invalid input: expected number, received string; retries: Too small: expected number to be >=0\n' +
        '  - api_keys[0] ("k"): allowed_models: Invalid input: expected array, received string; expires_at: must be an RFC 3339 timestamp; disabled: Invalid input: expected boolean, received string',
    );
  });

  test('a duplicate identity: reported at pass 1 and dropped from every later check', async () => {
    const out = await report(`${PK}models:
  - display_name: m
    provider_key: pk
    model_name: x
  - display_name: m
    provider_key: nope
    colour: red
`);
    assert.equal(
      out,
      one(
        'models[1] ("m")',
        'duplicate models entry: display_name "m" is already defined at models[0] — identities must be unique within a kind',
      ),
    );
    assert.equal(
      await report(`${PK}  - display_name: pk\n    provider: openai\n`),
      one(
        'provider_keys[1] ("pk")',
        'duplicate provider_keys entry: display_name "pk" is already defined at provider_keys[0] — identities must be unique within a kind',
      ),
    );
  });

  test('a missing identity', async () => {
    assert.equal(
      await report('_format_version: "1"\napi_keys:\n  - { key_hash: abc, allowed_models: [] }\n'),
      one('api_keys[0]', "display_name is required and must be a non-empty string (it is the entry's identity)"),
    );
  });

  test('a dangling provider_key (desugar: no schema check after it) / provider_key_id', async () => {
    const out = await report(`${PK}  - display_name: other
    provider: openai
    api_key: k
models:
  - display_name: m
    provider_key: nope
  - display_name: m2
    provider_key_id: 00000000-0000-5000-8000-000000000000
    model_name: x
`);
    assert.equal(
      out,
      `resources file ${FILE}: 2 error(s):\n` +
        '  - models[0] ("m"): `provider_key` references unknown provider key "nope" (defined provider_keys: other, pk)\n' +
        '  - models[1] ("m2"): provider_key_id "00000000-0000-5000-8000-000000000000" does not match any provider key defined in this file — reference it by name with `provider_key` instead',
    );
    assert.equal(
      await report('_format_version: "1"\nmodels:\n  - { display_name: m, provider_key: nope, model_name: x }\n'),
      one(
        'models[0] ("m")',
        '`provider_key` references unknown provider key "nope" (no provider_keys are defined in this file)',
      ),
    );
  });

  test('provider_key and provider_key_id together', async () => {
    assert.equal(
      await report(`${PK}models:\n  - { display_name: m, provider_key: pk, provider_key_id: abc, model_name: x }\n`),
      one(
        'models[0] ("m")',
        '`provider_key` (a name reference) and `provider_key_id` are mutually exclusive — set exactly one',
      ),
    );
  });

  test('a direct model needs model_name and a provider key', async () => {
    assert.equal(
      await report(`${PK}models:\n  - display_name: m\n`),
      one(
        'models[0] ("m")',
        'model_name: required for a direct model (or give `routing`); provider_key_id: required for a direct model (`provider_key` by name in a file)',
      ),
    );
  });

  test('routing targets must name a model defined in the file (even one whose own schema failed)', async () => {
    const out = await report(`${PK}models:
  - display_name: a
    provider_key: pk
    model_name: x
  - display_name: broken
    provider_key: pk
  - display_name: r2
    routing:
      targets:
        - model: ghost
        - model: broken
        - model: a
`);
    assert.equal(
      out,
      `resources file ${FILE}: 2 error(s):\n` +
        '  - models[1] ("broken"): model_name: required for a direct model (or give `routing`)\n' +
        '  - models[2] ("r2"): routing target references unknown model "ghost" (defined models: a, broken, r2)',
    );
  });

  test('routing block validation: at least one target, known strategy, hash_on', async () => {
    const out = await report(`${PK}models:
  - display_name: r
    routing: { strategy: random, targets: [], hash_on: [{ type: header }, { type: query }] }
`);
    assert.match(out, /routing\.strategy: Invalid option/);
    assert.match(out, /routing\.targets: needs at least one target/);
    assert.match(out, /routing\.hash_on\[1\]\.type: Invalid option/);
  });

  test('direct-only and kind-inapplicable fields on a routing model (strict: errors)', async () => {
    const out = await report(`${PK}models:
  - display_name: a
    provider_key: pk
    model_name: x
  - display_name: r
    model_name: y
    timeout: 100
    stream_timeout: 0
    cost: { input_per_1k: 1, output_per_1k: 2 }
    cooldown: { enabled: false }
    routing: { targets: [{ model: a }] }
`);
    assert.equal(
      out,
      one(
        'models[1] ("r")',
        'model_name: not allowed on a routing model; cooldown: not allowed on a routing model; cost: not allowed on a routing model',
      ),
    );
  });

  test('allowed_models naming an unknown model is an error; globs are not checked', async () => {
    const out = await report(`${PK}models:
  - { display_name: gpt-4o, provider_key: pk, model_name: x }
api_keys:
  - display_name: k
    key_hash: ${sha256('k')}
    allowed_models: [gpt-4o, "gpt-*", "*", "nothing-matches-*", ghost]
`);
    assert.equal(
      out,
      one('api_keys[0] ("k")', 'allowed_models entry references unknown model "ghost" (defined models: gpt-4o)'),
    );
  });

  test('a duplicate key_hash is a duplicate api key credential', async () => {
    const out = await report(
      `_format_version: "1"
api_keys:
  - { display_name: a, key_hash: same, allowed_models: [] }
  - { display_name: b, key_env: K, allowed_models: [] }
  - { display_name: c, key_hash: same, allowed_models: [] }
`,
      { K: 'other' },
    );
    assert.equal(
      out,
      one(
        'api_keys[2] ("c")',
        'duplicate api key credential: this entry\'s key resolves to the same key_hash as api_keys[0] ("a") — every api key must have a distinct plaintext',
      ),
    );
  });

  test('each repeat of a key_hash names where that hash was first seen, in file order', async () => {
    const out = await report(`_format_version: "1"
api_keys:
  - { display_name: a, key_hash: h1, allowed_models: [] }
  - { display_name: b, key_hash: h2, allowed_models: [] }
  - { display_name: c, key_hash: h1, allowed_models: [] }
  - { display_name: d, key_hash: h1, allowed_models: [] }
  - { display_name: e, key_hash: h2, allowed_models: [] }
`);
    const dup = (row: string, first: string) =>
      `  - ${row}: duplicate api key credential: this entry's key resolves to the same key_hash as ${first} — every api key must have a distinct plaintext`;
    assert.equal(
      out,
      [
        `resources file ${FILE}: 3 error(s):`,
        dup('api_keys[2] ("c")', 'api_keys[0] ("a")'),
        dup('api_keys[3] ("d")', 'api_keys[0] ("a")'),
        dup('api_keys[4] ("e")', 'api_keys[1] ("b")'),
      ].join('\n'),
    );
  });

  test('key_env unset or empty; neither key_env nor key_hash; both', async () => {
    const base = '_format_version: "1"\napi_keys:\n';
    assert.equal(
      await report(`${base}  - { display_name: k, key_env: CALLER, allowed_models: [] }\n`, {}),
      one('api_keys[0] ("k")', '`key_env` environment variable `CALLER` is unset or empty'),
    );
    assert.equal(
      await report(`${base}  - { display_name: k, key_env: CALLER, allowed_models: [] }\n`, { CALLER: '' }),
      one('api_keys[0] ("k")', '`key_env` environment variable `CALLER` is unset or empty'),
    );
    assert.equal(
      await report(`${base}  - { display_name: k, allowed_models: [] }\n`),
      one(
        'api_keys[0] ("k")',
        'one of `key_env` (environment variable holding the plaintext key) or `key_hash` (SHA-256 hex of the plaintext) is required',
      ),
    );
    assert.equal(
      await report(`${base}  - { display_name: k, key_env: CALLER, key_hash: ${sha256('x')} }\n`, { CALLER: 'c' }),
      one('api_keys[0] ("k")', '`key_env` and `key_hash` are mutually exclusive — set exactly one'),
    );
  });

  test('api_key and its alias secret together', async () => {
    assert.equal(
      await report(`${PK}    secret: sk-y\n`),
      one(
        'provider_keys[0] ("pk")',
        'cannot decode canonical document: duplicate field `api_key`: `secret` is an alias of `api_key`; set exactly one',
      ),
    );
  });

  test('a provider key needs a credential (api_key or secret), except on the echo adapter', async () => {
    assert.equal(
      await report('_format_version: "1"\nprovider_keys:\n  - { display_name: pk, provider: openai }\n'),
      one('provider_keys[0] ("pk")', 'api_key: required (or its alias `secret`)'),
    );
    const s = await ok(
      '_format_version: "1"\nprovider_keys:\n  - { display_name: pk, secret: s }\n  - { display_name: e, provider: echo }\n',
    );
    assert.equal(s.resources.provider_keys[0]!.provider, '', 'provider defaults to ""');
    assert.equal(s.resources.provider_keys[0]!.adapter, 'openai', 'the default adapter of "" is openai');
    assert.equal(s.resources.provider_keys[0]!.api_key, 's');
  });

  test('a YAML syntax error is a (file) error with its line', async () => {
    const out = await report(`_format_version: "1"
models:
  - display_name: m
   provider: openai
`);
    assert.match(
      out,
      /^resources file \/etc\/sluice\/resources\.yaml: 1 error\(s\):\n {2}- \(file\): YAML parse error: .+ at line 4$/,
    );
    const dup = await report('_format_version: "1"\n_format_version: "1"\n');
    assert.equal(dup, one('(file)', 'YAML parse error: Map keys must be unique at line 2'));
  });

  test('kinds Sluice does not implement are accepted and not served (no gating kind has a file collection)', async () => {
    const r = await load(`_format_version: "1"
cache_policies: [{ name: c1 }, { name: c2 }]
observability_exporters: [{ name: o, kind: object_store }]
mcp_servers: [{ display_name: s, url: "http://127.0.0.1:9/mcp" }]
a2a_agents: [{ name: a, url: "https://agents.example/a2a" }]
mcp_auth_settings: [{ resource_url: "https://x" }]
`);
    assert.equal(r.ok, true, r.ok ? '' : r.report.format());
    if (!r.ok) return;
    assert.equal(r.snapshot.size, 5, 'cache_policies, a2a_agents and the MCP kinds are served');
    assert.equal(r.resourceCount, 6);
    assert.deepEqual(r.notServed, {
      observability_exporters: 1,
    });
    assert.equal(
      await report('_format_version: "1"\nmcp_auth_settings: [{}, {}]\n'),
      one(
        'mcp_auth_settings[1] ("mcp_auth_settings")',
        'duplicate mcp_auth_settings entry: name "mcp_auth_settings" is already defined at mcp_auth_settings[0] — identities must be unique within a kind',
      ),
    );
  });

  test('the malformed file of docs/aisix-compatibility.md "Command line" yields exactly its 4 errors', async () => {
    assert.equal(await report(MALFORMED), MALFORMED_REPORT(FILE));
  });

  test('rowScope', () => {
    assert.equal(rowScope('models', 2, { display_name: 'gpt-4o' }), 'models[2] ("gpt-4o")');
    assert.equal(rowScope('api_keys', 0, { display_name: 7 }), 'api_keys[0]');
    assert.equal(rowScope('api_keys', 1, 'x'), 'api_keys[1]');
    assert.equal(rowScope('guardrails', 1, { name: 'g' }), 'guardrails[1] ("g")');
  });
});

describe('no secret in any message', () => {
  test('interpolated and literal secrets never appear in the report', async () => {
    const secrets = {
      S1: 'sk-live-AAAA1111secret',
      S2: 'sk-live-BBBB2222secret',
      S3: 'caller-CCCC3333secret',
      S4: 'sk-live-DDDD4444secret',
    };
    const out = await report(
      `_format_version: "1"
provider_keys:
  - display_name: pk
    provider: openai
    api_key: \${S1}
    api_base: \${S2}
    adapter: \${S4}
    unknown_field: 1
  - display_name: pk2
    provider: 42
    api_key: sk-literal-EEEE5555secret
    api_base: "not a url sk-literal-FFFF6666secret"
  - display_name: pk3
    provider: openai
    api_key: ["\${S1}"]
models:
  - display_name: m
    provider_key: pk
    model_name: x
    timeout: \${S2}
    cost: { input: "\${S4}" }
api_keys:
  - display_name: k
    key_hash: \${S3}
    expires_at: \${S3}
  - display_name: k2
    key_env: S3
    key_hash: \${S3}
    disabled: \${S3}
`,
      secrets,
    );
    assert.equal(out.includes('YAML parse error'), false, `the file must reach validation:\n${out}`);
    for (
      const want of [
        '("pk"): adapter: Invalid option',
        'api_base: must be an http(s) URL',
        'unknown_field: unknown field',
        '("pk2"): provider: Invalid input',
        '("pk3"): api_key: Invalid input',
        '("m"): timeout: Invalid input',
        'cost.input: unknown field',
        '("k"): allowed_models: Invalid input',
        'expires_at: must be an RFC 3339',
        '("k2"): `key_env` and `key_hash` are mutually exclusive',
      ]
    ) {
      assert.ok(out.includes(want), `missing "${want}" in:\n${out}`);
    }
    for (
      const s of [
        ...Object.values(secrets),
        'sk-literal-EEEE5555secret',
        'sk-literal-FFFF6666secret',
        sha256(secrets.S3),
      ]
    ) {
      assert.equal(out.includes(s), false, `report contains ${s}:\n${out}`);
      assert.equal(out.includes(s.slice(0, 12)), false, `report contains a prefix of ${s}:\n${out}`);
    }
  });

  test('a YAML syntax error on a line with a secret does not quote the source', async () => {
    const cases = [
      `_format_version: "1"\nprovider_keys:\n  - display_name: pk\n    provider: openai\n    api_key: sk-live-GGGG7777secret: broken\n`,
      // yaml's "Not a YAML token: <source>"
      `_format_version: "1"\nprovider_keys:\n  - display_name: pk\n    provider: openai\n    api_key: >x sk-live-GGGG7777secret\n`,
      // yaml's "Unexpected scalar token in YAML stream: \"<source>\"" after a broken flow collection
      `_format_version: "1"\nmodels: [{ display_name: a }, {x: {y}}] }\nprovider_keys:\n  - display_name: pk\n    api_key: sk-live-GGGG7777secret\n`,
    ];
    for (const text of cases) {
      const out = await report(text);
      assert.match(out, /- \(file\): YAML parse error: .+ at line \d+/);
      assert.equal(out.includes('GGGG7777'), false, out);
    }
  });
});

describe('wildcard aliases and lookup', () => {
  test('openai/gpt-4o resolves via openai/* with * substituted in model_name; hidden from listableModels', async () => {
    const s = await ok(VALID);
    const r = s.resolveModel('openai/gpt-4o');
    assert.equal(r?.model.display_name, 'openai/*');
    assert.equal(r?.upstreamModel, 'gpt-4o');
    assert.deepEqual(s.listableModels().map((m) => m.display_name).sort(), ['claude', 'gpt-4o', 'smart']);
    assert.equal(s.modelByName('openai/*'), undefined, 'an alias is not a plain name');
    assert.equal(s.resolveModel('anthropic/claude'), undefined);
    assert.equal(s.resolveModel('nothing'), undefined);
  });

  test('exact names win; then the longest prefix; prefix+suffix aliases; routing models resolve with no upstream model', async () => {
    const s = await ok(`${PK}models:
  - { display_name: "openai/*", provider_key: pk, model_name: "*" }
  - { display_name: "openai/gpt-*", provider_key: pk, model_name: "gpt-*-2024" }
  - { display_name: "openai/special", provider_key: pk, model_name: "special-upstream" }
  - { display_name: "*-mini", provider_key: pk, model_name: "mini-*" }
  - { display_name: "r", routing: { targets: [{ model: openai/special }] } }
`);
    assert.deepEqual(pick(s.resolveModel('openai/special')), ['openai/special', 'special-upstream']);
    assert.deepEqual(pick(s.resolveModel('openai/gpt-4o')), ['openai/gpt-*', 'gpt-4o-2024']);
    assert.deepEqual(pick(s.resolveModel('openai/o1')), ['openai/*', 'o1']);
    assert.deepEqual(pick(s.resolveModel('openai/')), ['openai/*', '']);
    assert.deepEqual(pick(s.resolveModel('o4-mini')), ['*-mini', 'mini-o4']);
    assert.deepEqual(pick(s.resolveModel('r')), ['r', undefined]);
    assert.equal(s.resolveModel('-min'), undefined);
    assert.deepEqual(s.listableModels().map((m) => m.display_name).sort(), ['openai/special', 'r']);
  });
});

describe('the models the background checker runs for', () => {
  test('direct models with checks enabled, in file order; no wildcard alias, no disabled check, no routing model', async () => {
    const check = (enabled: boolean) =>
      `{ enabled: ${enabled}, interval_seconds: 30, timeout_seconds: 5, prompt: ping, max_tokens: 1, stale_after_seconds: 60 }`;
    const s = await ok(`${PK}models:
  - { display_name: b, provider_key: pk, model_name: b, background_model_check: ${check(true)} }
  - { display_name: "wild/*", provider_key: pk, model_name: "*", background_model_check: ${check(true)} }
  - { display_name: off, provider_key: pk, model_name: off, background_model_check: ${check(false)} }
  - { display_name: none, provider_key: pk, model_name: none }
  - { display_name: a, provider_key: pk, model_name: a, background_model_check: ${check(true)} }
  - { display_name: r, routing: { targets: [{ model: a }] } }
`);
    assert.deepEqual(s.checkedModels.map((m) => m.display_name), ['b', 'a']);
    assert.deepEqual(new Snapshot(s.resources).checkedModels, s.checkedModels, 'built in one go or in slices');
  });
});

function pick(r: ReturnType<Snapshot['resolveModel']>): [string, string | undefined] | undefined {
  return r ? [r.model.display_name, r.upstreamModel] : undefined;
}

describe('globMatch', () => {
  const cases: [string, string, boolean][] = [
    ['*', '', true],
    ['*', 'anything/at all', true],
    ['gpt-4o', 'gpt-4o', true],
    ['gpt-4o', 'gpt-4o-mini', false],
    ['gpt-4o', 'GPT-4o', false],
    ['gpt-*', 'gpt-4o', true],
    ['gpt-*', 'gpt-', true],
    ['gpt-*', 'gpt', false],
    ['gpt-*', 'xgpt-4o', false],
    ['*-mini', 'gpt-4o-mini', true],
    ['*-mini', 'gpt-4o-mini2', false],
    ['openai/*', 'openai/gpt-4o', true],
    ['openai/*', 'anthropic/claude', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'aXXbYYc', true],
    ['a*b*c', 'acb', false],
    ['a*b*c', 'ac', false],
    ['ab*ba', 'aba', false],
    ['a*a', 'a', false],
    ['a*a', 'aa', true],
    ['*b*', 'abc', true],
    ['*b*', 'ac', false],
    ['**', '', true],
    ['', '', true],
    ['', 'x', false],
    ['gpt.*', 'gptx4', false],
    ['[a]*', '[a]z', true],
  ];
  for (const [pattern, name, want] of cases) {
    test(`globMatch(${JSON.stringify(pattern)}, ${JSON.stringify(name)}) = ${want}`, () => {
      assert.equal(globMatch(pattern, name), want);
    });
  }
});

describe('one list under two collections', () => {
  test('a YAML alias: each collection reads its own rows and words its own errors', async () => {
    // The pipeline replaces and takes out rows in place: the second collection must not see the first's doing.
    const text = `${PK}models: &rows
  - display_name: m1
    provider_key: nope
    model_name: up
api_keys: *rows
`;
    const r = await report(text);
    assert.match(r, /models\[0\] \("m1"\)/);
    assert.match(r, /api_keys\[0\] \("m1"\)/);
  });
});
