// Conformance: resource documents as AISIX reads them (docs/aisix-compatibility.md "Resources" and "Metrics";
// the rows of both tables), driven through a REAL etcd (lenient read contract) and through the resources-file
// pipeline (strict), asserting what is served, what `/status/config` reports and what the config metrics say.
// Properties that hold for every field (null = absent, unknown-at-any-depth ignored) are generated from tables.
// Run: node --import tsx --test test/conformance/aisix-resources.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Gateway } from '../../src/gateway.ts';
import { loadConfig } from '../../src/config/load.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import type { ResourceKind } from '../../src/resources/kinds.ts';
import { FileSource } from '../../src/sources/file.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { testPlatform } from '../support/platform.ts';
import { schemaValidator } from '../support/json-schema.ts';

/** The gateway's file source for `path`: one per (gateway, path), as the boot makes one per gateway. */
const fileSources = new WeakMap<Gateway, Map<string, FileSource>>();
function fileSource(gw: Gateway, path: string): FileSource {
  const byPath = fileSources.get(gw) ?? new Map<string, FileSource>();
  fileSources.set(gw, byPath);
  const source = byPath.get(path) ?? new FileSource(path, gw);
  byPath.set(path, source);
  return source;
}

type Doc = Record<string, unknown>;
type Path = (string | number)[];

// -- documents ---------------------------------------------------------------------------------------------

/** Minimal valid documents per kind; references point at `base-pk` / `base-m` (no cross-row checks on etcd). */
const BASE: Record<string, () => Doc> = {
  provider_keys: () => ({ display_name: 'case', api_key: 'sk-case' }),
  direct: () => ({ display_name: 'case', provider: 'openai', model_name: 'up', provider_key_id: 'base-pk' }),
  routing: () => ({ display_name: 'case', routing: { targets: [{ model: 'base-m' }] } }),
  api_keys: () => ({ display_name: 'case', key_hash: 'case-hash', allowed_models: ['base-m'] }),
};
const KIND_OF: Record<string, ResourceKind> = {
  provider_keys: 'provider_keys',
  direct: 'models',
  routing: 'models',
  api_keys: 'api_keys',
};

/** Fully populated documents (every nested block present), for the unknown-field-at-any-depth table. */
const FULL: Record<string, () => Doc> = {
  provider_keys: () => ({ display_name: 'case', provider: 'openai', api_key: 'sk', adapter: 'openai' }),
  direct: () => ({
    ...BASE.direct!(),
    cooldown: { enabled: true },
    background_model_check: {
      enabled: true,
      interval_seconds: 60,
      timeout_seconds: 5,
      prompt: 'ping',
      max_tokens: 1,
      stale_after_seconds: 300,
    },
    rate_limit: { rpm: 10 },
    cost: { input_per_1k: 0.1, output_per_1k: 0.2 },
  }),
  routing: () => ({
    display_name: 'case',
    rate_limit: { rpm: 10 },
    routing: { strategy: 'consistent_hash', targets: [{ model: 'base-m' }], hash_on: [{ type: 'api_key' }] },
  }),
  api_keys: () => ({ ...BASE.api_keys!(), rate_limit: { rpm: 1 } }),
};
/** Where objects live in FULL documents (an unknown member may be added at each). */
const OBJECT_PATHS: Record<string, Path[]> = {
  provider_keys: [[]],
  direct: [[], ['cooldown'], ['background_model_check'], ['rate_limit'], ['cost']],
  routing: [[], ['routing'], ['routing', 'targets', 0], ['routing', 'hash_on', 0], ['rate_limit']],
  api_keys: [[], ['rate_limit']],
};

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function setAt(doc: Doc, path: Path, key: string, value: unknown): Doc {
  const out = clone(doc);
  let node: Record<string | number, unknown> = out;
  for (const p of path) node = node[p] as Record<string | number, unknown>;
  node[key] = value;
  return out;
}

function deleteAt(doc: Doc, path: Path): Doc {
  const out = clone(doc);
  let node: Record<string | number, unknown> = out;
  for (const p of path.slice(0, -1)) node = node[p] as Record<string | number, unknown>;
  delete node[path[path.length - 1]!];
  return out;
}

/** AISIX's reporting form: `a.b.[].c` (an array index is a segment of its own). */
const reported = (path: Path, key: string) => [...path, key].map((p) => (typeof p === 'number' ? '[]' : p)).join('.');
/** The file's error form: `a.b[0].c`. */
const strictPath = (path: Path, key: string) =>
  [...path, key].reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');

// -- cases -------------------------------------------------------------------------------------------------

interface Case {
  name: string;
  /** BASE key: provider_keys, direct, routing, api_keys. */
  shape: string;
  doc: Doc;
  /** etcd (lenient) outcome. */
  etcd: { load: true; ignored?: string[]; check?: (served: Doc) => void } | {
    load: false;
    kind: string;
    error?: RegExp;
  };
  /** file (strict) outcome; default: like etcd with no ignored field. */
  file?: { load: true; check?: (served: Doc) => void } | { load: false; error: RegExp };
}

const cases: Case[] = [];

/**
 * Optional members: [shape, field, a valid value, AISIX accepts null (= absent), expected served value, served
 * value when absent (the default)].
 */
const OPTIONAL: [string, string, unknown, boolean, unknown?, unknown?][] = [
  ['api_keys', 'display_name', 'label', true],
  ['api_keys', 'expires_at', '2999-01-01T00:00:00Z', true],
  ['api_keys', 'disabled', true, false, undefined, false],
  ['api_keys', 'rate_limit', { rpm: 5 }, true],
  ['api_keys', 'team_id', 'team-1', true],
  ['api_keys', 'user_id', 'user-1', true],
  ['api_keys', 'user_name', 'Ann', true],
  ['provider_keys', 'provider', 'anthropic', false],
  ['provider_keys', 'adapter', 'anthropic', true, undefined, 'openai'],
  ['provider_keys', 'api_base', 'https://llm.example/v1/', true, 'https://llm.example/v1', 'https://api.openai.com/v1'],
  ['direct', 'timeout', 0, false],
  ['direct', 'stream_timeout', 0, false],
  ['direct', 'retries', 2, false],
  ['direct', 'rate_limit', { rpm: 1 }, false],
  ['direct', 'allowed_cidrs', ['10.0.0.0/8', '2001:db8::/32'], false],
  ['direct', 'cost', { input_per_1k: 0.15, output_per_1k: 0.6 }, false],
  ['direct', 'background_model_check', {
    enabled: true,
    interval_seconds: 5,
    timeout_seconds: 1,
    prompt: 'ping',
    max_tokens: 1,
    stale_after_seconds: 60,
    ignore_statuses: [404],
  }, false],
  ['direct', 'cooldown', { enabled: false }, false, {
    enabled: false,
    default_seconds: 30,
    max_seconds: 600,
    honor_retry_after: true,
    trigger_statuses: [401, 408, 429, 500, 502, 503, 504],
    trigger_on_timeout: true,
    trigger_on_transport: true,
  }],
  ['routing', 'timeout', 0, false],
  ['routing', 'stream_timeout', 0, false],
  ['routing', 'rate_limit', { rpm: 1 }, false],
  ['routing', 'allowed_cidrs', ['192.168.0.0/16'], false],
];
for (const [shape, field, value, nullOk, servedAs, byDefault] of OPTIONAL) {
  const base = BASE[shape]!();
  const absent = { ...base };
  delete absent[field];
  const absentCase: Case = {
    name: `${shape}.${field} absent`,
    shape,
    doc: absent,
    etcd: { load: true, check: (s) => assert.deepEqual(s[field], field === 'provider' ? '' : byDefault, field) },
  };
  if (shape === 'api_keys' && field === 'display_name') {
    absentCase.file = { load: false, error: /display_name is required and must be a non-empty string/ };
  }
  cases.push(absentCase);
  cases.push({
    name: `${shape}.${field} present`,
    shape,
    doc: { ...base, [field]: value },
    etcd: { load: true, check: (s) => assert.deepEqual(s[field], servedAs ?? value, field) },
  });
  const nullCase: Case = {
    name: `${shape}.${field} null`,
    shape,
    doc: { ...base, [field]: null },
    etcd: nullOk
      ? { load: true, check: (s) => assert.deepEqual(s[field], byDefault, `${field}: null is absent`) }
      : { load: false, kind: 'schema_failed', error: new RegExp(`^${field}: `) },
  };
  // A file entry's display_name is its identity: required there.
  if (shape === 'api_keys' && field === 'display_name') {
    nullCase.file = { load: false, error: /display_name is required and must be a non-empty string/ };
  }
  cases.push(nullCase);
}

/** Routing members and target members: [path, value]. */
const ROUTING_MEMBERS: [Path, unknown][] = [
  [['routing', 'strategy'], 'least_cost'],
  [['routing', 'retries'], 1],
  [['routing', 'max_fallbacks'], 0],
  [['routing', 'retry_on_429'], true],
  [['routing', 'fallback_on_statuses'], [429, 400]],
  [['routing', 'when_all_unavailable'], 'try_anyway'],
  [['routing', 'hash_on'], [{ type: 'header', name: 'x-k' }, { type: 'cookie', name: 'c' }, { type: 'client_ip' }]],
  // AISIX's schema leaves `name` optional: a nameless header source loads and yields no key.
  [['routing', 'hash_on'], [{ type: 'header' }, { type: 'api_key' }]],
  [['routing', 'targets', 0, 'weight'], 3],
  [['routing', 'targets', 0, 'priority'], -2],
  [['routing', 'targets', 0, 'tags'], ['fast']],
];
for (const [path, value] of ROUTING_MEMBERS) {
  const doc = setAt(BASE.routing!(), path.slice(0, -1), path[path.length - 1] as string, value);
  const get = (s: Doc) => path.reduce<unknown>((n, p) => (n as Record<string | number, unknown>)[p], s);
  cases.push({
    name: `routing ${strictPath(path.slice(0, -1), String(path[path.length - 1]))} present`,
    shape: 'routing',
    doc,
    etcd: { load: true, check: (s) => assert.deepEqual(get(s), value) },
  });
  cases.push({
    name: `routing ${strictPath(path.slice(0, -1), String(path[path.length - 1]))} null (not nullable in a model)`,
    shape: 'routing',
    doc: setAt(BASE.routing!(), path.slice(0, -1), path[path.length - 1] as string, null),
    etcd: { load: false, kind: 'schema_failed', error: /^routing\./ },
  });
}
cases.push({
  name: 'routing defaults: failover, weight 1, priority 0',
  shape: 'routing',
  doc: BASE.routing!(),
  etcd: {
    load: true,
    check: (s) =>
      assert.deepEqual(s.routing, {
        strategy: 'failover',
        retry_on_429: false,
        when_all_unavailable: 'fail',
        targets: [{ model: 'base-m', weight: 1, priority: 0 }],
      }),
  },
});

/** Required members: [shape, path]. Missing ⇒ rejected on both paths. */
const REQUIRED: [string, Path][] = [
  ['api_keys', ['key_hash']],
  ['api_keys', ['allowed_models']],
  ['provider_keys', ['api_key']],
  ['direct', ['model_name']],
  ['direct', ['provider_key_id']],
  ['routing', ['routing', 'targets']],
  ['routing', ['routing', 'targets', 0, 'model']],
];
for (const [shape, path] of REQUIRED) {
  cases.push({
    name: `${shape} without ${strictPath(path.slice(0, -1), String(path[path.length - 1]))}`,
    shape,
    doc: deleteAt(shape === 'direct' || shape === 'routing' ? FULL[shape]!() : BASE[shape]!(), path),
    etcd: { load: false, kind: 'schema_failed', error: new RegExp(String(path[0])) },
  });
}
for (
  const m of ['enabled', 'interval_seconds', 'timeout_seconds', 'prompt', 'max_tokens', 'stale_after_seconds']
) {
  cases.push({
    name: `background_model_check without ${m}`,
    shape: 'direct',
    doc: deleteAt(FULL.direct!(), ['background_model_check', m]),
    etcd: { load: false, kind: 'schema_failed', error: new RegExp(`background_model_check\\.${m}`) },
  });
}
for (const m of ['input_per_1k', 'output_per_1k']) {
  cases.push({
    name: `cost without ${m}`,
    shape: 'direct',
    doc: deleteAt(FULL.direct!(), ['cost', m]),
    etcd: { load: false, kind: 'schema_failed', error: new RegExp(`cost\\.${m}`) },
  });
}

/** Values outside a type, range, pattern or closed enum: [shape, path, value]. Rejected on both paths. */
const INVALID: [string, Path, unknown][] = [
  ['api_keys', ['key_hash'], ''],
  ['api_keys', ['expires_at'], 'tomorrow'],
  ['provider_keys', ['adapter'], 'grpc'],
  ['provider_keys', ['api_base'], 'ftp://x'],
  ['direct', ['provider'], 'Not A Vendor'],
  ['direct', ['timeout'], -1],
  ['direct', ['allowed_cidrs'], ['10.0.0.0']],
  ['direct', ['allowed_cidrs'], ['10.0.0.0/33']],
  ['direct', ['allowed_cidrs'], ['2001:db8::/129']],
  ['direct', ['allowed_cidrs'], ['not-an-ip/8']],
  ['direct', ['background_model_check', 'interval_seconds'], 4],
  ['direct', ['background_model_check', 'ignore_statuses'], [99]],
  ['direct', ['cost', 'input_per_1k'], -0.1],
  ['direct', ['cooldown', 'max_seconds'], 0],
  ['routing', ['routing', 'strategy'], 'random'],
  ['routing', ['routing', 'targets', 0, 'weight'], 1.5],
  ['routing', ['routing', 'targets', 0, 'weight'], -1],
  ['routing', ['routing', 'targets', 0, 'priority'], 2 ** 31],
  ['routing', ['routing', 'hash_on'], []],
  ['routing', ['routing', 'hash_on'], [{ type: 'query', name: 'q' }]],
];
for (const [shape, path, value] of INVALID) {
  cases.push({
    name: `${shape} ${strictPath(path.slice(0, -1), String(path[path.length - 1]))} = ${JSON.stringify(value)}`,
    shape,
    doc: setAt(FULL[shape]!(), path.slice(0, -1), path[path.length - 1] as string, value),
    etcd: { load: false, kind: 'schema_failed', error: new RegExp(String(path[0])) },
  });
}

// Unknown members at every depth: ignored and reported on etcd, errors in a file.
for (const [shape, paths] of Object.entries(OBJECT_PATHS)) {
  for (const path of paths) {
    cases.push({
      name: `${shape}: unknown member at ${strictPath(path, 'zz_future')}`,
      shape,
      doc: setAt(FULL[shape]!(), path, 'zz_future', { any: ['thing'] }),
      etcd: {
        load: true,
        ignored: [reported(path, 'zz_future')],
        check: (s) => assert.equal(JSON.stringify(s).includes('zz_future'), false),
      },
      file: {
        load: false,
        error: new RegExp(`${strictPath(path, 'zz_future').replace(/[[\].]/g, '\\$&')}: unknown field`),
      },
    });
  }
}
{
  const doc: Doc = BASE.direct!();
  for (let i = 0; i < 70; i++) doc[`f${String(i).padStart(2, '0')}`] = i;
  const first64 = Array.from({ length: 64 }, (_, i) => `f${String(i).padStart(2, '0')}`);
  cases.push({
    name: 'direct: 70 unknown members are capped at 64, then ...truncated',
    shape: 'direct',
    doc,
    etcd: { load: true, ignored: [...first64, '...truncated'] },
    file: { load: false, error: /f69: unknown field/ },
  });
}

// `secret`: AISIX's alias of a provider key's `api_key` on every path.
cases.push({
  name: 'provider_keys: secret alone is the credential',
  shape: 'provider_keys',
  doc: { display_name: 'case', secret: 'sk-from-secret' },
  etcd: {
    load: true,
    check: (s) => {
      assert.equal(s.api_key, 'sk-from-secret');
      assert.equal('secret' in s, false);
      assert.equal(s.provider, '');
      assert.equal(s.adapter, 'openai');
    },
  },
});
cases.push({
  name: 'provider_keys: api_key and secret together',
  shape: 'provider_keys',
  doc: { display_name: 'case', api_key: 'a', secret: 'b' },
  etcd: { load: false, kind: 'parse_failed', error: /secret/ },
  file: { load: false, error: /cannot decode canonical document: duplicate field `api_key`/ },
});
cases.push({
  name: 'provider_keys: no credential at all',
  shape: 'provider_keys',
  doc: { display_name: 'case', provider: 'openai' },
  etcd: { load: false, kind: 'schema_failed', error: /^api_key: / },
});

// Kind-inapplicable members on a routing model: stripped on etcd, errors in a file.
for (
  const [field, value] of [['cost', { input_per_1k: 1, output_per_1k: 1 }], ['retries', 2], [
    'auto_prompt_caching',
    { enabled: true },
  ]] as const
) {
  cases.push({
    name: `routing: kind-inapplicable ${field}`,
    shape: 'routing',
    doc: { ...BASE.routing!(), [field]: value },
    etcd: { load: true, ignored: [`inapplicable:${field}`], check: (s) => assert.equal(s[field], undefined) },
    file: { load: false, error: new RegExp(`${field}: (not allowed on a routing model|unknown field)`) },
  });
}
for (const field of ['provider', 'model_name', 'provider_key_id']) {
  cases.push({
    name: `routing: direct-only ${field} rejects the row`,
    shape: 'routing',
    doc: { ...BASE.routing!(), [field]: 'x' },
    etcd: { load: false, kind: 'schema_failed', error: new RegExp(`${field}: not allowed on a routing model`) },
  });
}
// An `id` member is ignored on etcd (the id is the key's); a file entry may not carry one.
cases.push({
  name: 'an id member',
  shape: 'direct',
  doc: { ...BASE.direct!(), id: 'something-else' },
  etcd: { load: true, check: (s) => assert.notEqual(s.id, 'something-else') },
  file: { load: false, error: /the resources file does not accept `id`/ },
});
cases.push({
  name: 'api_keys: any non-empty key_hash (no hex check)',
  shape: 'api_keys',
  doc: { ...BASE.api_keys!(), key_hash: 'not hex at all' },
  etcd: { load: true, check: (s) => assert.equal(s.key_hash, 'not hex at all') },
});

// -- the etcd path -----------------------------------------------------------------------------------------

const keyOf = (i: number) => `c${String(i).padStart(3, '0')}`;

describe('AISIX documents through a real etcd (lenient)', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  let t: EtcdTestGateway;
  const P = '/conf';
  // deno-lint-ignore no-explicit-any -- JSON under test
  let status: Record<string, any>;
  let metrics: string;

  before(async () => {
    etcd = await startEtcd();
    const s = seeder(etcd.endpoint);
    for (const [i, c] of cases.entries()) await s.put(`${P}/${KIND_OF[c.shape]}/${keyOf(i)}`, c.doc);
    await s.put(`${P}/models/zz-not-json`, '{ nope');
    t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const app = createStatusApp(t.gw);
    status = await (await app.request('/status/config')).json();
    metrics = await (await app.request('/metrics')).text();
  });
  after(async () => {
    await t?.stop();
    await etcd?.stop();
  });

  for (const [i, c] of cases.entries()) {
    test(c.name, () => {
      const kind = KIND_OF[c.shape]!;
      const id = keyOf(i);
      const rejected = t.gw.facts.rejected.find((r) => r.resource_kind === kind && r.resource_id === id);
      const snap = t.gw.snapshot!;
      const served = (kind === 'provider_keys' ? snap.providerKeys : kind === 'models' ? snap.models : snap.apiKeys)
        .get(id) as Doc | undefined;
      if (c.etcd.load) {
        assert.equal(rejected, undefined, `rejected: ${rejected?.last_error}`);
        assert.ok(served, 'served');
        c.etcd.check?.(served);
        const fields = t.gw.facts.partiallyCompatible.filter((p) => p.resource_kind === kind).map((p) => p.field);
        for (const f of c.etcd.ignored ?? []) assert.ok(fields.includes(f), `partially_compatible lists ${kind} ${f}`);
      } else {
        assert.equal(served, undefined, 'not served');
        assert.ok(rejected, 'listed in rejected[]');
        assert.equal(rejected.last_error_kind, c.etcd.kind, rejected.last_error);
        if (c.etcd.error) assert.match(rejected.last_error, c.etcd.error);
        assert.equal(rejected.serving_stale_since, undefined);
      }
    });
  }

  test('/status/config: state degraded, every rejected row listed in key order, the load is not successful', () => {
    const expectedRejected = cases.flatMap((c, i) => (c.etcd.load ? [] : [`${KIND_OF[c.shape]}/${keyOf(i)}`]));
    const listed = (status.rejected as { resource_kind: string; resource_id: string }[]).map((r) =>
      `${r.resource_kind}/${r.resource_id}`
    );
    assert.deepEqual(listed.sort(), [...expectedRejected, 'models/zz-not-json'].sort());
    assert.equal(status.state, 'degraded');
    assert.equal(status.last_reload.successful, false);
    // The sticky last_failure is the first rejected row (key order).
    assert.equal(status.last_failure.last_error_kind, status.rejected[0].last_error_kind);
    assert.equal(status.last_failure.last_error, status.rejected[0].last_error);
    assert.match(status.last_failure.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.match(status.applied.applied_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.match(status.last_reload.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const counts: Record<string, number> = {};
    for (const [i, c] of cases.entries()) {
      if (c.etcd.load) counts[KIND_OF[c.shape]!] = (counts[KIND_OF[c.shape]!] ?? 0) + 1;
      void i;
    }
    assert.deepEqual(status.applied.resource_counts, counts);
    // partially_compatible: sorted by kind then field, count = rows.
    const pc = status.partially_compatible as { resource_kind: string; field: string; count: number }[];
    const sorted = [...pc].sort((a, b) =>
      a.resource_kind === b.resource_kind ? (a.field < b.field ? -1 : 1) : a.resource_kind < b.resource_kind ? -1 : 1
    );
    assert.deepEqual(pc, sorted);
    assert.deepEqual(
      pc.find((p) => p.resource_kind === 'models' && p.field === 'zz_future'),
      { resource_kind: 'models', field: 'zz_future', count: 2 },
      'direct and routing models each carry one at the top',
    );
    assert.deepEqual(
      pc.find((p) => p.resource_kind === 'models' && p.field === 'routing.targets.[].zz_future'),
      { resource_kind: 'models', field: 'routing.targets.[].zz_future', count: 1 },
    );
  });

  test('metrics: rows per kind for rejected and partially compatible; one counted reload with both reasons', () => {
    const sample = (series: string) => {
      const line = metrics.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    for (const kind of ['provider_keys', 'models', 'api_keys'] as const) {
      const rejected = cases.filter((c) => !c.etcd.load && KIND_OF[c.shape] === kind).length +
        (kind === 'models' ? 1 : 0);
      assert.equal(sample(`aisix_config_rejected_resources{kind="${kind}"}`), rejected, kind);
      const partial = cases.filter((c) => c.etcd.load && KIND_OF[c.shape] === kind && (c.etcd.ignored ?? []).length > 0)
        .length;
      assert.equal(sample(`aisix_config_partially_compatible_resources{kind="${kind}"}`), partial || undefined, kind);
    }
    assert.equal(sample('aisix_config_last_reload_successful'), 0);
    assert.equal(sample('aisix_config_last_reload_success_timestamp_seconds'), undefined, 'never a clean load');
    assert.equal(sample('aisix_config_reloads_total'), 1);
    assert.equal(sample('aisix_config_reload_failures_total{reason="validate"}'), 1);
    assert.equal(sample('aisix_config_reload_failures_total{reason="parse"}'), 1, 'the non-JSON row');
    assert.equal(typeof sample('aisix_config_observed_revision'), 'number');
    assert.equal(sample('aisix_config_source_connected'), 1);
  });
});

// -- the file path -----------------------------------------------------------------------------------------

/** The case's document as a file entry: references by name, next to the base entries it names. */
function fileFor(c: Case): string {
  const entry = clone(c.doc);
  if (c.shape === 'direct' && entry.provider_key_id === 'base-pk') {
    delete entry.provider_key_id;
    entry.provider_key = 'base-pk';
  }
  const lists: Record<string, Doc[]> = {
    provider_keys: [{ display_name: 'base-pk', api_key: 'sk-base' }],
    models: [{ display_name: 'base-m', model_name: 'x', provider_key: 'base-pk' }],
    api_keys: [],
  };
  lists[KIND_OF[c.shape]!]!.push(entry);
  return JSON.stringify({ _format_version: '1', ...lists });
}

describe('AISIX documents through the resources file (strict)', () => {
  for (const c of cases) {
    test(c.name, async () => {
      const r = await loadResourcesFile('/r.yaml', fileFor(c), {});
      const want = c.file ??
        (c.etcd.load ? { load: true, check: c.etcd.check } : { load: false, error: c.etcd.error ?? /./ });
      if (want.load) {
        assert.ok(r.ok, r.ok ? '' : r.report.format());
        const kind = KIND_OF[c.shape]!;
        const list = r.snapshot.resources[kind] as unknown as Doc[];
        const served = list.find((x) =>
          x.display_name === 'case' || (kind === 'api_keys' && x.key_hash === c.doc.key_hash)
        );
        assert.ok(served, 'served');
        want.check?.(served);
      } else {
        assert.equal(r.ok, false, 'the file must not load');
        if (r.ok) return;
        const text = r.report.format();
        assert.equal(r.report.entries.length, 1, text);
        assert.match(r.report.entries[0]!.message, want.error, text);
        assert.doesNotMatch(text, /\(line \d+\)/, 'AISIX has no line suffix');
      }
    });
  }
});

// -- the published JSON Schema (schemas/resources.schema.json) against the file's verdicts ------------------

/** File verdicts the JSON Schema cannot reach, and why (docs/deploy.md "Schemas"). */
const SCHEMA_CANNOT: Record<string, string> = {
  ...Object.fromEntries(
    ['10.0.0.0', '10.0.0.0/33', '2001:db8::/129', 'not-an-ip/8'].map((v) => [
      `direct allowed_cidrs = ${JSON.stringify([v])}`,
      'a CIDR is checked in code',
    ]),
  ),
  'provider_keys api_base = "ftp://x"': 'an http(s) URL unless the adapter is azure-openai, checked in code',
};

describe("schemas/resources.schema.json gives each case the file pipeline's verdict", () => {
  const { resources } = schemaValidator();
  for (const c of cases) {
    const why = SCHEMA_CANNOT[c.name];
    test(why ? `${c.name} (not expressible: ${why})` : c.name, async () => {
      const text = fileFor(c);
      const loads = (await loadResourcesFile('/r.yaml', text, {})).ok;
      const valid = resources(JSON.parse(text));
      if (why) assert.equal(valid, true, 'the schema accepts what only the pipeline refuses');
      else assert.equal(valid, loads, JSON.stringify(resources.errors));
    });
  }
});

// -- AISIX kinds Sluice does not implement -----------------------------------------------------------------

const GATING: string[] = [
  // Every kind AISIX's resources define is served now; a kind AISIX adds later joins one of these lists.
];
const NOT_SERVED: string[] = [];

describe('AISIX kinds Sluice does not implement (never fail open)', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  const gws: EtcdTestGateway[] = [];
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await etcd?.stop();
  });

  test('etcd: accepted-not-served kinds are partially compatible (`*`), WARN once per kind; the state stays synced', async () => {
    const s = seeder(etcd.endpoint);
    const P = '/ns';
    await s.put(`${P}/models/m1`, BASE.direct!());
    for (const kind of NOT_SERVED) {
      await s.put(`${P}/${kind}/a`, { name: 'a' });
      await s.put(`${P}/${kind}/deep/id/b`, { name: 'b' });
    }
    const t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    gws.push(t);
    await t.source.firstApplied;
    const app = createStatusApp(t.gw);
    const body = await (await app.request('/status/config')).json();
    assert.equal(body.state, 'synced');
    assert.deepEqual(body.rejected, []);
    assert.equal(body.last_reload.successful, true);
    assert.deepEqual(body.applied.resource_counts, { models: 1 });
    assert.deepEqual(
      body.partially_compatible,
      [...NOT_SERVED].sort().map((k) => ({ resource_kind: k, field: '*', count: 2 })),
    );
    const m = await (await app.request('/metrics')).text();
    for (const k of NOT_SERVED) {
      assert.match(m, new RegExp(`aisix_config_partially_compatible_resources\\{kind="${k}"\\} 2`));
    }
    for (const k of NOT_SERVED) {
      assert.equal(t.platform.logs.filter((l) => l.level === 'WARN' && l.kind === k).length, 1, `one WARN for ${k}`);
    }
    assert.match(m, /aisix_config_last_reload_success_timestamp_seconds \d+/);
  });

  test('etcd: gating kinds are rejected as unsupported (state degraded); an unknown kind is unknown_kind', async () => {
    const s = seeder(etcd.endpoint);
    const P = '/gate';
    await s.put(`${P}/models/m1`, BASE.direct!());
    for (const kind of GATING) await s.put(`${P}/${kind}/x`, { name: 'x' });
    await s.put(`${P}/plugins/p`, { name: 'p' });
    const t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    gws.push(t);
    await t.source.firstApplied;
    const body = await (await createStatusApp(t.gw).request('/status/config')).json();
    assert.equal(body.state, 'degraded');
    assert.equal(body.last_reload.successful, false);
    const kinds = Object.fromEntries(
      (body.rejected as { resource_kind: string; last_error_kind: string }[]).map((
        r,
      ) => [r.resource_kind, r.last_error_kind]),
    );
    assert.deepEqual(kinds, { ...Object.fromEntries(GATING.map((k) => [k, 'unsupported'])), plugins: 'unknown_kind' });
    assert.equal(t.gw.snapshot!.models.size, 1, 'the rest serves');
  });

  test('file: gating collections are load errors; the others are accepted, not served, reported, WARN once', async () => {
    for (const kind of GATING.filter((k) => k !== 'mcp_policies')) {
      const r = await loadResourcesFile('/r.yaml', `_format_version: "1"\n${kind}: [{ name: x }]\n`, {});
      assert.equal(r.ok, false, kind);
      if (!r.ok) {
        assert.match(r.report.format(), new RegExp(`${kind}\\[0\\] \\("x"\\): Sluice does not implement ${kind}`));
      }
    }
    for (const kind of ['guardrail_attachments', 'mcp_policies']) {
      const r = await loadResourcesFile('/r.yaml', `_format_version: "1"\n${kind}: [{ name: x }]\n`, {});
      assert.equal(r.ok, false);
      if (!r.ok) {
        assert.match(r.report.format(), new RegExp(`unknown top-level key \`${kind}\``), 'not a file collection');
      }
    }
    const platform = testPlatform();
    const text = `_format_version: "1"\n${NOT_SERVED.map((k) => `${k}:\n  - { name: a }`).join('\n')}\n`;
    platform.fileMap.set('/r.yaml', text);
    const c = loadConfig('/c.yaml', 'resources_file: /r.yaml\nproxy: { addr: ":0" }\nadmin: { enabled: false }\n', {});
    assert.ok(c.ok);
    if (!c.ok) return;
    const gw = new Gateway(c.config, platform);
    assert.deepEqual(await fileSource(gw, '/r.yaml').read(), { ok: true, resources: NOT_SERVED.length });
    await fileSource(gw, '/r.yaml').read();
    const body = await (await createStatusApp(gw).request('/status/config')).json();
    assert.equal(body.state, 'empty');
    assert.deepEqual(
      body.partially_compatible,
      [...NOT_SERVED].sort().map((k) => ({ resource_kind: k, field: '*', count: 1 })),
    );
    for (const k of NOT_SERVED) {
      assert.equal(platform.logs.filter((l) => l.level === 'WARN' && l.kind === k).length, 1, `one WARN for ${k}`);
    }
    const m = await (await createStatusApp(gw).request('/metrics')).text();
    assert.equal(m.includes('aisix_config_observed_revision'), false, 'no etcd-only family in file mode');
    assert.equal(m.includes('aisix_config_applied_revision'), false);
    assert.equal(m.includes('aisix_config_source_connected'), false);
    assert.match(m, /aisix_config_reloads_total 2/);
  });
});

// -- reload facts over time (etcd) -------------------------------------------------------------------------

describe('reload facts over time (etcd)', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  let t: EtcdTestGateway;
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await t?.stop();
    await etcd?.stop();
  });

  test('watch events are loads but not counted reloads; success needs nothing rejected; apply_seq follows config_hash; kinds stay at 0', async () => {
    const s = seeder(etcd.endpoint);
    const P = '/facts';
    await s.put(`${P}/models/m1`, { ...BASE.direct!(), zz: 1 });
    t = startEtcdGateway({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const app = createStatusApp(t.gw);
    // deno-lint-ignore no-explicit-any -- JSON under test
    const st = async (): Promise<Record<string, any>> => (await app.request('/status/config')).json();
    const metric = async (series: string): Promise<number | undefined> => {
      const line = (await (await app.request('/metrics')).text()).split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    let body = await st();
    assert.equal(body.last_reload.successful, true);
    const seq = body.applied.apply_seq;
    assert.equal(await metric('aisix_config_reloads_total'), 1);
    assert.equal(await metric('aisix_config_partially_compatible_resources{kind="models"}'), 1);

    // A rejected put: a load that fails, counted nowhere in reloads_total; apply_seq unchanged (nothing served changed).
    let rev = await s.put(`${P}/api_keys/k1`, { key_hash: 'h' });
    await t.until(() => t.gw.facts.applied?.applied_revision === rev, 'rejected put applied');
    body = await st();
    assert.equal(body.last_reload.successful, false);
    assert.equal(body.last_failure.last_error_kind, 'schema_failed');
    assert.match(body.last_failure.last_error, /allowed_models/);
    assert.equal(body.applied.apply_seq, seq);
    assert.equal(await metric('aisix_config_reloads_total'), 1, 'watch events are not counted');
    assert.equal(await metric('aisix_config_last_reload_successful'), 0);
    assert.equal(await metric('aisix_config_rejected_resources{kind="api_keys"}'), 1);

    // Fixed: a clean load again; last_failure sticky; the api_keys gauge stays, at 0; apply_seq + 1.
    rev = await s.put(`${P}/api_keys/k1`, { key_hash: 'h', allowed_models: [] });
    await t.until(() => t.gw.facts.applied?.applied_revision === rev, 'fixed');
    body = await st();
    assert.equal(body.last_reload.successful, true);
    assert.equal(body.last_failure.last_error_kind, 'schema_failed', 'sticky');
    assert.equal(body.applied.apply_seq, seq + 1);
    assert.equal(await metric('aisix_config_rejected_resources{kind="api_keys"}'), 0, 'kept at 0');
    assert.equal(await metric('aisix_config_last_reload_successful'), 1);

    // The partially compatible row is rewritten clean: the models gauge stays, at 0.
    rev = await s.put(`${P}/models/m1`, BASE.direct!());
    await t.until(() => t.gw.facts.applied?.applied_revision === rev, 'clean row');
    assert.equal(await metric('aisix_config_partially_compatible_resources{kind="models"}'), 0, 'kept at 0');
    assert.deepEqual((await st()).partially_compatible, []);
    // One WARN for the (models, zz) field set, not one per load.
    assert.equal(
      t.platform.logs.filter((l) =>
        l.msg ===
          'row loaded with unknown fields ignored (partially compatible; likely written by a newer control plane)'
      ).length,
      1,
    );
    const warn = t.platform.logs.find((l) => l.kind === 'models' && l.ignored_fields === 'zz');
    assert.ok(warn && warn.key === `${P}/models/m1`, JSON.stringify(warn));
  });
});
