// The resource-kind registry (src/resources/kinds.ts, docs/architecture.md "Adding a resource kind"): it lists
// every kind once, and the document parser, the etcd row parser, the file pipeline, the snapshot's counts and
// export each go through a kind's entry rather than a list of their own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { type Read } from '../../src/resources/documents.ts';
import {
  AISIX_KINDS,
  FILE_COLLECTIONS,
  type KindName,
  KINDS,
  parseDocument,
  RESOURCE_KINDS,
  type ResourceKind,
} from '../../src/resources/kinds.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import type { EtcdKv } from '../../src/sources/etcd/client.ts';
import { exportResources } from '../../src/sources/etcd/export.ts';
import { parseRow, resourceSet, rowValue, type ServedValue } from '../../src/sources/etcd/rows.ts';

const PREFIX = '/aisix';

/**
 * One document per served kind, valid both as an etcd row and as a file entry: a kind added to the registry
 * without a sample here does not compile.
 */
const SAMPLES: { [K in ResourceKind]: () => Record<string, unknown> } = {
  provider_keys: () => ({ display_name: 'pk', provider: 'openai', api_key: 'sk-sample' }),
  models: () => ({ display_name: 'm', model_name: 'up', provider_key_id: 'pk-id' }),
  api_keys: () => ({ display_name: 'k', key_hash: 'sample-hash', allowed_models: ['m'] }),
  rate_limit_policies: () => ({ name: 'p', limits: { rpm: 1 } }),
  guardrails: () => ({ name: 'g', kind: 'keyword', patterns: [{ kind: 'literal', value: 'x' }] }),
  guardrail_attachments: () => ({ guardrail_id: 'g-id', scope_type: 'env', priority: 0 }),
  cache_policies: () => ({ name: 'c' }),
  observability_exporters: () => ({ name: 'e', kind: 'otlp_http', endpoint: 'http://127.0.0.1:4318/v1/traces' }),
  mcp_policies: () => ({ scope: 'env', allow: ['*'] }),
  mcp_servers: () => ({ name: 's', url: 'http://127.0.0.1:1/mcp' }),
  mcp_auth_settings: () => ({ resource_url: 'https://gw.example.com/mcp' }),
  oidc_providers: () => ({ name: 'o', issuer: 'https://idp.example', audiences: ['sluice'] }),
  claim_mappings: () => ({
    name: 'cm',
    jwt_provider: 'o',
    match: [{ claim: 'groups', op: 'contains', values: ['eng'] }],
    resolve: { api_key_id: 'k-id' },
  }),
  a2a_agents: () => ({ name: 'agent', url: 'https://agents.example/a2a' }),
  passthrough_routes: () => ({
    name: 'r',
    path_prefix: '/raw',
    target_url: 'https://api.example.com/v1',
    provider_key_id: 'pk-id',
  }),
};

/** The etcd ids of the samples, so the model points at the provider key and the attachment at the guardrail. */
const IDS: { [K in ResourceKind]: string } = {
  provider_keys: 'pk-id',
  models: 'm-id',
  api_keys: 'k-id',
  rate_limit_policies: 'p-id',
  guardrails: 'g-id',
  guardrail_attachments: 'a-id',
  cache_policies: 'c-id',
  observability_exporters: 'e-id',
  mcp_policies: 'mp-id',
  mcp_servers: 's-id',
  mcp_auth_settings: 'as-id',
  oidc_providers: 'o-id',
  claim_mappings: 'cm-id',
  a2a_agents: 'ag-id',
  passthrough_routes: 'r-id',
};

type Reader = (id: string, doc: Record<string, unknown>, mode: 'strict' | 'lenient') => Read<unknown>;

/** Runs `fn` with every served kind's `read` counted per mode; the entries are restored after. */
async function withReadsCounted(fn: () => unknown): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  const saved = new Map<ResourceKind, Reader>();
  for (const kind of RESOURCE_KINDS) {
    const entry = KINDS[kind] as unknown as { read: Reader };
    const read = entry.read;
    saved.set(kind, read);
    entry.read = (id, doc, mode) => {
      calls.set(`${kind}:${mode}`, (calls.get(`${kind}:${mode}`) ?? 0) + 1);
      return read(id, doc, mode);
    };
  }
  try {
    await fn();
  } finally {
    for (const [kind, read] of saved) (KINDS[kind] as unknown as { read: Reader }).read = read;
  }
  return calls;
}

function etcdRows(): EtcdKv[] {
  return RESOURCE_KINDS.map((kind, i) => ({
    key: `${PREFIX}/${kind}/${IDS[kind]}`,
    value: JSON.stringify(SAMPLES[kind]()),
    modRevision: i + 1,
    createRevision: i + 1,
    version: 1,
  }));
}

/** The samples as a resources file: names for ids, as a file writes references. */
function fileText(): string {
  const doc: Record<string, unknown[]> = {};
  for (const kind of RESOURCE_KINDS) {
    if (!KINDS[kind].file) continue;
    const entry = SAMPLES[kind]();
    if (kind === 'models') {
      delete entry.provider_key_id;
      entry.provider_key = 'pk';
    }
    if (kind === 'claim_mappings') entry.resolve = { api_key: 'k' };
    doc[kind] = [entry];
  }
  return JSON.stringify({ _format_version: '1', ...doc });
}

describe('the resource-kind registry', () => {
  test("lists every kind once; AISIX's etcd and file orders name exactly its kinds", () => {
    const names = Object.keys(KINDS).sort();
    assert.deepEqual([...AISIX_KINDS].sort(), names, 'AISIX_KINDS names every kind once');
    const inFile = (Object.keys(KINDS) as KindName[]).filter((k) => KINDS[k].file).sort();
    assert.deepEqual([...FILE_COLLECTIONS].sort(), inFile, 'FILE_COLLECTIONS names every kind with a collection once');
    assert.equal(AISIX_KINDS.length, 15);
    assert.equal(FILE_COLLECTIONS.length, 13);
    assert.deepEqual(
      RESOURCE_KINDS,
      [
        'provider_keys',
        'models',
        'api_keys',
        'rate_limit_policies',
        'guardrails',
        'guardrail_attachments',
        'cache_policies',
        'observability_exporters',
        'mcp_policies',
        'oidc_providers',
        'claim_mappings',
        'mcp_servers',
        'mcp_auth_settings',
        'a2a_agents',
        'passthrough_routes',
      ],
      'the served kinds, in resource_counts order',
    );
  });

  for (const kind of RESOURCE_KINDS) {
    test(`${kind}: the document parser and the etcd row parser read it through its entry`, async () => {
      const calls = await withReadsCounted(() => {
        const strict = parseDocument(kind, IDS[kind], SAMPLES[kind](), 'strict');
        assert.ok(strict.ok && strict.resource !== undefined, JSON.stringify(strict));
        const row = parseRow(PREFIX, `${PREFIX}/${kind}/${IDS[kind]}`, JSON.stringify(SAMPLES[kind]()));
        assert.ok(row.ok && row.kind === kind && row.resource !== undefined, JSON.stringify(row));
      });
      assert.deepEqual(Object.fromEntries(calls), { [`${kind}:strict`]: 1, [`${kind}:lenient`]: 1 });
    });
  }

  test('the file pipeline reads each kind that has a collection through its entry, strictly', async () => {
    let loaded: Awaited<ReturnType<typeof loadResourcesFile>> | undefined;
    const calls = await withReadsCounted(async () => {
      loaded = await loadResourcesFile('kinds.yaml', fileText(), {});
    });
    assert.ok(loaded?.ok, loaded && !loaded.ok ? loaded.report.format() : 'not loaded');
    const expected = RESOURCE_KINDS.filter((k) => KINDS[k].file).map((k) => [`${k}:strict`, 1]);
    assert.deepEqual(Object.fromEntries(calls), Object.fromEntries(expected));
    for (const kind of RESOURCE_KINDS) {
      assert.equal(loaded.snapshot.of(kind).length, KINDS[kind].file ? 1 : 0, kind);
    }
  });

  test("the snapshot counts each counted kind, in the registry's order, and sizes every served one", () => {
    const rows = etcdRows();
    const served = new Map<string, ServedValue>();
    for (const r of rows) served.set(r.key, rowValue(PREFIX, r.key, r.value, { rev: r.modRevision }) as ServedValue);
    const snapshot = new Snapshot(resourceSet(rows.map((r) => r.key), served));
    const counted = RESOURCE_KINDS.filter((k) => KINDS[k].counted);
    assert.deepEqual(Object.entries(snapshot.counts()), counted.map((k) => [k, 1]));
    assert.equal(snapshot.size, RESOURCE_KINDS.length);
    for (const kind of RESOURCE_KINDS) assert.equal(snapshot.of(kind)[0]?.id, IDS[kind], kind);
  });

  test('export writes each kind as its entry says, and the file loads back to the same counts', async () => {
    const r = exportResources(etcdRows(), PREFIX, { withSecrets: true, revision: 9, source: 'test' });
    // AISIX's file has no `mcp_policies` collection: the row is named as left out, not lost silently.
    assert.deepEqual(r.skipped.map((x) => x.key), [`${PREFIX}/mcp_policies/${IDS.mcp_policies}`]);
    const doc = parse(r.yaml) as Record<string, Record<string, unknown>[]>;
    assert.deepEqual(
      Object.keys(doc),
      ['_format_version', ...FILE_COLLECTIONS.filter((k) => doc[k] !== undefined)],
      'collections in the file order',
    );
    for (const kind of RESOURCE_KINDS) {
      const entries = doc[kind];
      if (!KINDS[kind].file) {
        assert.equal(entries, undefined, `${kind} has no collection`);
        continue;
      }
      assert.equal(entries?.length, 1, kind);
      const { provider_key_id: _id, ...sample } = SAMPLES[kind]();
      if (KINDS[kind].export === 'as_stored') assert.deepEqual(entries[0], sample, `${kind} written as stored`);
      else assert.equal(entries[0]!.id, undefined, `${kind} written with references by name, no id`);
    }
    const back = await loadResourcesFile('exported.yaml', r.yaml, {});
    assert.ok(back.ok, back.ok ? '' : back.report.format());
    const counted = RESOURCE_KINDS.filter((k) => KINDS[k].counted && KINDS[k].file);
    assert.deepEqual(Object.entries(back.snapshot.counts()), counted.map((k) => [k, 1]));
  });
});
