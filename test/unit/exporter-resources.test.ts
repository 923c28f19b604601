// `observability_exporters` (docs/configuration.md, docs/aisix-compatibility.md "Resources"): kind otlp_http
// is served from the resources file (strict) and from etcd rows (lenient); AISIX's other kinds are accepted,
// not served.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { parseRow } from '../../src/sources/etcd/rows.ts';

describe('observability_exporters', () => {
  test('a file: defaults applied, served in the snapshot; AISIX errors for a bad entry', async () => {
    const r = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: c, kind: otlp_http, endpoint: "https://otel.example.com/v1/traces" }
  - { name: d, kind: object_store, provider: s3, bucket: b, prefix: p }
`,
      {},
    );
    assert.ok(r.ok, r.ok ? '' : r.report.format());
    const [e] = r.snapshot.exporters;
    assert.deepEqual({ ...e, id: undefined }, {
      id: undefined,
      name: 'c',
      kind: 'otlp_http',
      enabled: true,
      endpoint: 'https://otel.example.com/v1/traces',
      headers: {},
      sample_rate: 1,
      content_mode: 'metadata_only',
      content_max_bytes: 131072,
    });
    assert.equal(r.snapshot.exporters.length, 1);
    assert.deepEqual(r.notServed, { observability_exporters: 1 });
    const bad = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
observability_exporters:
  - { name: x, kind: otlp_http, endpoint: "http://example.com/v1/traces", sample_rate: 2, extra: 1 }
`,
      {},
    );
    assert.equal(bad.ok, false);
    if (!bad.ok) {
      const text = bad.report.format();
      assert.match(text, /endpoint: must be an https:\/\/ URL/);
      assert.match(text, /sample_rate/);
      assert.match(text, /extra: unknown field/);
    }
  });

  test('an etcd row: lenient (unknown members dropped and reported), types and patterns still apply', () => {
    const ok = parseRow(
      '/aisix',
      '/aisix/observability_exporters/e1',
      JSON.stringify({ name: 'c', kind: 'otlp_http', endpoint: 'http://127.0.0.1:4318/v1/traces', future: 1 }),
    );
    assert.ok(ok.ok && ok.kind === 'observability_exporters' && ok.resource);
    if (ok.ok && ok.kind === 'observability_exporters') {
      assert.equal(ok.resource!.id, 'e1');
      assert.deepEqual(ok.unknownFields, ['future']);
    }
    const other = parseRow(
      '/aisix',
      '/aisix/observability_exporters/e2',
      JSON.stringify({ name: 'd', kind: 'object_store' }),
    );
    assert.ok(other.ok && other.resource === undefined);
    if (other.ok) assert.deepEqual(other.unknownFields, ['*']);
    const bad = parseRow(
      '/aisix',
      '/aisix/observability_exporters/e3',
      JSON.stringify({ name: 'c', kind: 'otlp_http', endpoint: 'ftp://x', content_max_bytes: 0 }),
    );
    assert.equal(bad.ok, false);
    if (!bad.ok) assert.equal(bad.errorKind, 'schema_failed');
  });
});
