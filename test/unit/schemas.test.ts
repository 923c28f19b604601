// The published JSON Schemas (schemas/, docs/deploy.md "Schemas"): generated from the zod schemas and
// committed, so a drift fails here; every example, the Kubernetes ConfigMap and every docs snippet validates
// with a real JSON Schema validator (Ajv, draft 2020-12); and config.yaml documents get the same accept/reject
// verdict from the JSON Schema as from the loader, except for the rules JSON Schema cannot state, which are
// listed here and must disagree exactly as docs/deploy.md says. The resources tables are compared in
// test/conformance/aisix-resources.test.ts.
// Run: node --import tsx --test test/unit/schemas.test.ts
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/load.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { schemaFiles } from '../../schemas/generate.ts';
import { schemaValidator } from '../support/json-schema.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const { config: validConfig, resources: validResources } = schemaValidator();

type Kind = 'config' | 'resources';
const validatorOf = (k: Kind) => (k === 'config' ? validConfig : validResources);

function assertValid(kind: Kind, doc: unknown, where: string): void {
  const v = validatorOf(kind);
  assert.ok(v(doc), `${where} against schemas/${kind}.schema.json: ${JSON.stringify(v.errors, null, 1)}`);
}

describe('schemas/', () => {
  test('the committed files are what `npm run schemas` generates from the zod schemas', () => {
    for (const [name, text] of Object.entries(schemaFiles())) {
      assert.equal(read(`schemas/${name}`), text, `schemas/${name} is stale: run \`npm run schemas\``);
    }
  });
});

/** Every YAML file of examples/ (and examples/workers/), by kind. */
function exampleFiles(): [string, Kind][] {
  const out: [string, Kind][] = [];
  for (const dir of ['examples', 'examples/workers']) {
    for (const name of readdirSync(join(ROOT, dir)).filter((n) => n.endsWith('.yaml')).sort()) {
      out.push([`${dir}/${name}`, name.startsWith('resources') ? 'resources' : 'config']);
    }
  }
  return out;
}

describe('examples and deploy/', () => {
  const examples = exampleFiles();
  test('there are config and resources examples to check', () => {
    assert.ok(examples.filter(([, k]) => k === 'config').length >= 3);
    assert.ok(examples.filter(([, k]) => k === 'resources').length >= 2);
  });
  for (const [path, kind] of examples) {
    test(`${path} validates and names its schema in a yaml-language-server modeline`, () => {
      const text = read(path);
      assertValid(kind, parse(text), path);
      const depth = path.split('/').length - 1;
      const modeline = `# yaml-language-server: $schema=${'../'.repeat(depth)}schemas/${kind}.schema.json`;
      assert.equal(text.split('\n')[0], modeline, `${path}: first line`);
    });
  }

  test("the Kubernetes ConfigMap's config.yaml and the Secret's resources.yaml validate", () => {
    const docs = parseAllDocuments(read('deploy/kubernetes/sluice.yaml')).map((d) => d.toJS());
    const cm = docs.find((d) => d?.kind === 'ConfigMap' && d.metadata?.name === 'sluice-config');
    assert.ok(cm, 'the sluice-config ConfigMap');
    assertValid('config', parse(cm.data['config.yaml']), 'ConfigMap config.yaml');
    const secret = docs.find((d) => d?.kind === 'Secret' && d.metadata?.name === 'sluice-resources');
    assert.ok(secret, 'the sluice-resources Secret');
    assertValid('resources', parse(secret.stringData['resources.yaml']), 'Secret resources.yaml');
  });
});

// -- docs snippets ---------------------------------------------------------------------------------------

interface Snippet {
  where: string;
  doc: Record<string, unknown>;
}

/** Every ```yaml block of the README and docs/*.md. */
function snippets(): Snippet[] {
  const files = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs')).filter((n) => n.endsWith('.md')).map((n) => `docs/${n}`),
  ];
  const out: Snippet[] = [];
  for (const file of files) {
    const text = read(file);
    for (const m of text.matchAll(/^( *)```ya?ml\n([\s\S]*?)^\1```/gm)) {
      const line = text.slice(0, m.index).split('\n').length;
      const body = m[2]!.split('\n').map((l) => l.slice(m[1]!.length)).join('\n');
      for (const d of parseAllDocuments(body)) {
        const doc = d.toJS() as unknown;
        if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
          out.push({ where: `${file}:${line}`, doc: doc as Record<string, unknown> });
        }
      }
    }
  }
  return out;
}

/** A snippet's file: resources when it has the format key or only collections; config when only config sections. */
function kindOf(doc: Record<string, unknown>): Kind | undefined {
  const keys = Object.keys(doc);
  const of = (k: Kind) =>
    Object.keys((JSON.parse(read(`schemas/${k}.schema.json`)) as { properties: object }).properties);
  if (keys.every((k) => of('resources').includes(k))) return 'resources';
  if (keys.every((k) => of('config').includes(k))) return 'config';
  return undefined; // a Kubernetes object, an alert rule…: not Sluice's file
}

describe('docs snippets', () => {
  const all = snippets().map((s) => ({ ...s, kind: kindOf(s.doc) }));
  test('the docs hold config.yaml snippets to check', () => {
    assert.ok(all.filter((s) => s.kind === 'config').length >= 4, JSON.stringify(all.map((s) => s.where)));
  });
  for (const s of all.filter((x) => x.kind !== undefined)) {
    test(`${s.where} (${s.kind}) validates`, () => {
      const whole = s.kind === 'resources' ? '_format_version' in s.doc : 'proxy' in s.doc;
      if (whole) return assertValid(s.kind!, s.doc, s.where);
      // A fragment (a few sections of the file): each section against its schema, the rest of the file absent.
      const full = s.kind === 'resources'
        ? { _format_version: '1', ...s.doc }
        : { resources_file: 'r.yaml', proxy: { addr: ':3000' }, admin: { enabled: false }, ...s.doc };
      assertValid(s.kind!, full, s.where);
    });
  }
});

// -- verdicts: JSON Schema and the loader ---------------------------------------------------------------

/** The smallest file the loader accepts, with this `proxy` section. */
const withProxy = (proxy: string) => `resources_file: r.yaml\nproxy: ${proxy}\nadmin: { enabled: false }\n`;
const MIN = withProxy('{ addr: "0.0.0.0:3000" }');

/** config.yaml documents both must accept or both refuse. */
const AGREE: [string, string, boolean][] = [
  ['the minimal file', MIN, true],
  ['the example', read('examples/config.yaml'), true],
  ['etcd mode', 'etcd: { endpoints: [http://e:2379] }\nproxy: { addr: ":3000" }\nadmin: { enabled: false }', true],
  ['no proxy.addr', 'resources_file: r.yaml\nadmin: { enabled: false }', false],
  ['a bad address', 'resources_file: r.yaml\nproxy: { addr: "localhost" }\nadmin: { enabled: false }', false],
  ['an unknown key', `${MIN}zz_future: 1`, false],
  ['an unknown nested key', `${MIN}upstream: { zz: 1 }`, false],
  ['a negative timeout', `${MIN}upstream: { timeout_ms: -1 }`, false],
  ['a fractional retry count', `${MIN}upstream: { retries: 1.5 }`, false],
  ['a closed enum', `${MIN}observability: { log_level: loud }`, false],
  ['max_request_headers above 999', withProxy('{ addr: ":1", max_request_headers: 1000 }'), false],
  ['a metrics path without /', `${MIN}observability: { metrics: { prometheus: { path: metrics } } }`, false],
  ['a redis URL of another scheme', `${MIN}ratelimit: { redis: { url: "http://r:6379" } }`, false],
  [
    'AISIX keys Sluice ignores',
    `${MIN}bedrock_endpoint_url: x\nupstream: { pool_max_idle_per_host: 3, tcp_keepalive_secs: 60 }\nmanaged: { zz: 1 }`,
    true,
  ],
  ['AISIX proxy.listeners (refused)', withProxy('{ addr: ":1", listeners: [] }'), false],
  [
    'admin.tls',
    'resources_file: r.yaml\nproxy: { addr: ":1" }\nadmin: { enabled: false, tls: { cert_file: a, key_file: b } }',
    true,
  ],
  [
    'admin.tls without key_file',
    'resources_file: r.yaml\nproxy: { addr: ":1" }\nadmin: { enabled: false, tls: { cert_file: a } }',
    false,
  ],
];

/** Rules zod states in code (superRefine / refine) that the JSON Schema leaves to `sluice validate`. */
const ZOD_ONLY: [string, string][] = [
  ['no configuration source', 'proxy: { addr: ":3000" }\nadmin: { enabled: false }'],
  ['both sources', `${MIN}etcd: { endpoints: [http://e:2379] }`],
  ['admin on without admin_keys', 'resources_file: r.yaml\nproxy: { addr: ":3000" }'],
  ['redis backend without redis', `${MIN}ratelimit: { backend: redis }`],
  [
    'a sentinel without master_name',
    `${MIN}ratelimit: { backend: redis, redis: { mode: sentinel, sentinels: [s:1] } }`,
  ],
  ['a trusted proxy that is no CIDR', withProxy('{ addr: ":1", real_ip: { trusted_proxies: [nope] } }')],
  ['an upstream client certificate without its key', `${MIN}upstream: { tls: { client_cert_file: c.pem } }`],
];

describe('config.yaml verdicts: the JSON Schema and the loader', () => {
  for (const [name, text, ok] of AGREE) {
    test(`${name}: ${ok ? 'accepted' : 'refused'} by both`, () => {
      const loaded = loadConfig('/c/config.yaml', text, {});
      assert.equal(loaded.ok, ok, loaded.ok ? 'loader accepted' : loaded.report.format());
      assert.equal(validConfig(parse(text)), ok, JSON.stringify(validConfig.errors));
    });
  }
  for (const [name, text] of ZOD_ONLY) {
    test(`${name}: refused by the loader, not expressed in the JSON Schema`, () => {
      assert.equal(loadConfig('/c/config.yaml', text, {}).ok, false);
      assert.equal(validConfig(parse(text)), true);
    });
  }
});

/** resources.yaml documents beyond the conformance tables' entries: the file level and the file's sugar. */
const PK = '{ display_name: pk, api_key: sk-x }';
const RESOURCES: [string, string, boolean][] = [
  ['the example', read('examples/resources.yaml'), true],
  ['_format_version as a number', '_format_version: 1', false],
  ['no _format_version', 'models: []', false],
  ['an unknown collection', '_format_version: "1"\nplugins: []', false],
  ['an empty oidc_providers collection', '_format_version: "1"\noidc_providers: []', true],
  ['an OIDC provider without its issuer', '_format_version: "1"\noidc_providers: [{ name: g }]', false],
  [
    'a shared-secret OIDC provider without an issuer',
    '_format_version: "1"\noidc_providers: [{ name: g, hmac_secret: a-secret-of-at-least-thirty-two-bytes }]',
    true,
  ],
  [
    'a shared-secret OIDC provider with a jwks_uri',
    '_format_version: "1"\noidc_providers: [{ name: g, hmac_secret: a-secret-of-at-least-thirty-two-bytes, jwks_uri: "https://i/k" }]',
    false,
  ],
  ['a guardrail', '_format_version: "1"\nguardrails: [{ name: g, kind: keyword, patterns: [] }]', true],
  ['a guardrail without its kind', '_format_version: "1"\nguardrails: [{ name: g }]', false],
  ['an mcp_servers entry', '_format_version: "1"\nmcp_servers: [{ display_name: m, url: x }]', true],
  ['an mcp_servers entry without url', '_format_version: "1"\nmcp_servers: [{ name: m }]', false],
  ['a null collection', '_format_version: "1"\nmodels:', true],
  [
    'a ${VAR} api_base',
    `_format_version: "1"\nprovider_keys: [{ display_name: pk, api_key: k, api_base: "\${BASE}" }]`,
    true,
  ],
  [
    'key_env and key_hash',
    `_format_version: "1"\napi_keys: [{ display_name: a, key_env: K, key_hash: h, allowed_models: [] }]`,
    false,
  ],
  ['neither key_env nor key_hash', `_format_version: "1"\napi_keys: [{ display_name: a, allowed_models: [] }]`, false],
  ['key_env', `_format_version: "1"\napi_keys: [{ display_name: a, key_env: K, allowed_models: [] }]`, true],
  [
    'provider_key and provider_key_id',
    `_format_version: "1"\nprovider_keys: [${PK}]\nmodels: [{ display_name: m, model_name: x, provider_key: pk, provider_key_id: y }]`,
    false,
  ],
  [
    'a routing model with provider_key',
    `_format_version: "1"\nprovider_keys: [${PK}]\nmodels: [{ display_name: m, model_name: x, provider_key: pk }, { display_name: r, provider_key: pk, routing: { targets: [{ model: m }] } }]`,
    false,
  ],
  [
    'an echo key without credential',
    '_format_version: "1"\nprovider_keys: [{ display_name: e, provider: echo }]',
    true,
  ],
  ['an entry with id', `_format_version: "1"\nmcp_servers: [{ name: m, id: x }]`, false],
];

/** File rules only the pipeline checks: references across entries and uniqueness. */
const RESOURCES_PIPELINE_ONLY: [string, string][] = [
  ['an unknown provider_key', '_format_version: "1"\nmodels: [{ display_name: m, model_name: x, provider_key: nope }]'],
  ['a duplicate identity', `_format_version: "1"\nprovider_keys: [${PK}, ${PK}]`],
  [
    'an allowed model not defined',
    `_format_version: "1"\napi_keys: [{ display_name: a, key_hash: h, allowed_models: [gone] }]`,
  ],
  // The two forms and the condition tree are the pipeline's (src/resources/policy-schema.ts).
  ['a rate-limit policy of neither form', '_format_version: "1"\nrate_limit_policies: [{ name: g }]'],
];

describe('resources.yaml verdicts: the JSON Schema and the pipeline', () => {
  const env = { BASE: 'https://llm.example/v1', K: 'sk-plain' };
  for (const [name, text, ok] of RESOURCES) {
    test(`${name}: ${ok ? 'accepted' : 'refused'} by both`, async () => {
      const loaded = await loadResourcesFile('/r.yaml', text, env);
      assert.equal(loaded.ok, ok, loaded.ok ? 'pipeline accepted' : loaded.report.format());
      assert.equal(validResources(parse(text)), ok, JSON.stringify(validResources.errors));
    });
  }
  for (const [name, text] of RESOURCES_PIPELINE_ONLY) {
    test(`${name}: refused by the pipeline, not expressed in the JSON Schema`, async () => {
      assert.equal((await loadResourcesFile('/r.yaml', text, env)).ok, false);
      assert.equal(validResources(parse(text)), true);
    });
  }
});
