// The plain api key document read without the schema (src/resources/plain-api-key.ts; docs/performance.md
// "Configuration at scale"): every document it takes must read exactly as the schema reads it (the resource, its
// members' order, the canonical text), and every other document must still reach the schema.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readApiKey, withId } from '../../src/resources/documents.ts';
import { isPlainApiKey, isSamePlainApiKey, plainApiKey, plainApiKeyText } from '../../src/resources/plain-api-key.ts';
import { ApiKeySchema } from '../../src/resources/schema.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { hashRows, parseRow, type RowValue, rowValue } from '../../src/sources/etcd/rows.ts';
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../src/util/crypto.ts';

const HASH = 'a'.repeat(64);

const PLAIN: Record<string, unknown>[] = [
  { display_name: 'user-1', key_hash: HASH, allowed_models: ['gpt-test'] },
  { key_hash: HASH, allowed_models: [] },
  { allowed_models: ['b', 'a*'], key_hash: 'x', display_name: '' },
  { key_hash: HASH, allowed_models: ['m'], disabled: true },
  {
    disabled: false,
    display_name: 'quote " and \u00e9 and \ud83d\ude00',
    key_hash: HASH,
    allowed_models: ['m\u0000n'],
  },
  { display_name: 'back\\slash, tab\t, ~ and \u007f', key_hash: 'lone \ud800', allowed_models: ['m'] },
  { display_name: 'user-2', key_hash: 'quote"', allowed_models: ['m'] },
  { key_hash: '\u001f', allowed_models: ['m'] },
];

/** What the schema makes of a document, as `readApiKey` did before it had a plain path. */
function bySchema(id: string, doc: Record<string, unknown>) {
  return withId(id, ApiKeySchema.parse(structuredClone(doc))).resource;
}

describe('plain api key documents', () => {
  test('read as the schema reads them: the same resource, members in the same order, the same canonical text', () => {
    for (const doc of PLAIN) {
      assert.equal(isPlainApiKey(doc), true, JSON.stringify(doc));
      const want = bySchema('k1', doc);
      const got = plainApiKey('k1', structuredClone(doc));
      assert.deepEqual(got, want);
      assert.deepEqual(Object.keys(got), Object.keys(want), 'member order');
      assert.equal(plainApiKeyText(doc), canonicalJson(doc));
      const read = readApiKey('k1', structuredClone(doc), 'lenient');
      assert.deepEqual(read, { ok: true, resource: want, ignored: [] });
    }
  });

  test('an etcd row of the plain shape keeps the canonical text and judgement the schema path gave', () => {
    const raw = '{ "key_hash": "h", "display_name": "d", "allowed_models": ["m"], "disabled": false }';
    const v = rowValue('/aisix', '/aisix/api_keys/k', raw, { rev: 3 });
    assert.equal(v.text, canonicalJson(JSON.parse(raw)));
    assert.deepEqual(v.parsed, parseRow('/aisix', '/aisix/api_keys/k', raw));
    assert.deepEqual(v.parsed, {
      ok: true,
      kind: 'api_keys',
      id: 'k',
      resource: { display_name: 'd', key_hash: 'h', allowed_models: ['m'], disabled: false, id: 'k' },
      unknownFields: [],
    });
  });

  test("a row's verdict, kind, resource and ignored fields read as its judgement's, without making one", () => {
    const rows: [string, string][] = [
      ['/aisix/api_keys/plain', JSON.stringify({ key_hash: 'h', allowed_models: ['m'] })],
      ['/aisix/api_keys/extra', JSON.stringify({ key_hash: 'h', allowed_models: ['m'], future: 1 })],
      ['/aisix/models/m', JSON.stringify({ display_name: 'm', model_name: 'x', provider_key_id: 'pk', later: true })],
      ['/aisix/api_keys/bad', 'not json'],
      ['/aisix/api_keys/closed', JSON.stringify({ allowed_models: ['m'] })],
      ['/aisix/nonsense/x', JSON.stringify({})],
    ];
    for (const [key, raw] of rows) {
      const v = rowValue('/aisix', key, raw);
      const p = v.parsed;
      assert.equal(v.ok, p.ok, key);
      assert.equal(v.kind, p.kind, key);
      assert.equal(v.resource, p.ok ? p.resource : undefined, key);
      assert.deepEqual(v.unknownFields, p.ok ? p.unknownFields : [], key);
    }
    assert.deepEqual(rowValue('/aisix', rows[1]![0], rows[1]![1]).unknownFields, ['future']);
  });

  test('equal model lists are one array; a different list is its own', () => {
    const a = plainApiKey('a', { key_hash: 'h1', allowed_models: ['gpt-test'] });
    const b = plainApiKey('b', { key_hash: 'h2', allowed_models: ['gpt-test'] });
    const c = plainApiKey('c', { key_hash: 'h3', allowed_models: ['gpt-test', 'other'] });
    assert.equal(a.allowed_models, b.allowed_models);
    assert.notEqual(a.allowed_models, c.allowed_models);
  });

  test('every other document goes to the schema, its verdict and message unchanged', () => {
    const others: Record<string, unknown>[] = [
      { key_hash: '', allowed_models: [] },
      { key_hash: HASH },
      { key_hash: HASH, allowed_models: [''] },
      { key_hash: HASH, allowed_models: [1] },
      { key_hash: HASH, allowed_models: 'gpt' },
      { key_hash: 7, allowed_models: [] },
      { key_hash: HASH, allowed_models: [], display_name: null },
      { key_hash: HASH, allowed_models: [], display_name: 5 },
      { key_hash: HASH, allowed_models: [], disabled: 'yes' },
      { key_hash: HASH, allowed_models: [], id: 'other' },
      { key_hash: HASH, allowed_models: [], expires_at: '2030-01-01T00:00:00Z' },
      { key_hash: HASH, allowed_models: [], extra: 1 },
      { key_hash: HASH, allowed_models: [], mcp_access: { mode: 'x', allow: null } },
      JSON.parse('{"key_hash":"h","allowed_models":[],"__proto__":{"disabled":true}}'),
    ];
    for (const doc of others) assert.equal(isPlainApiKey(doc), false, JSON.stringify(doc));
    const r = readApiKey('k', { key_hash: '', allowed_models: [''] }, 'lenient');
    assert.deepEqual(r, {
      ok: false,
      errorKind: 'schema_failed',
      error: 'key_hash: must not be empty; allowed_models[0]: Too small: expected string to have >=1 characters',
    });
  });

  test('the hashes read the text made again: SHA-256 over the docs/etcd.md lines, whatever the input size', async () => {
    for (const n of [3, 5000]) {
      const rows = new Map<string, RowValue>();
      const keys: string[] = [];
      const lines: string[] = [];
      for (let i = 0; i < n; i++) {
        const key = `/aisix/api_keys/k${String(i).padStart(6, '0')}`;
        const doc = { display_name: `user-\u00e9-${i}`, key_hash: `${HASH}${i}`, allowed_models: ['gpt-test'] };
        if (i % 7 === 0) Object.assign(doc, { disabled: i % 2 === 0 });
        const raw = JSON.stringify(doc);
        keys.push(key);
        rows.set(key, rowValue('/aisix', key, raw, { rev: i + 1 }));
        lines.push(`${key}\0${canonicalJson(JSON.parse(raw))}\n`);
      }
      const want = createHash('sha256').update(lines.join('')).digest('hex');
      assert.equal(await hashRows(keys, rows), want, `${n} rows`);
    }
  });
});

const CHOICES: Record<string, unknown[]> = {
  display_name: [undefined, 'user-1', '', null, 5],
  key_hash: [undefined, 'a'.repeat(64), '', null, 7],
  allowed_models: [undefined, ['m'], [], ['m', 'n'], [''], ['*'], 'm', [1], null],
  disabled: [undefined, true, false, 'no', null],
  expires_at: [undefined, '2030-01-01T00:00:00Z'],
  team_id: [undefined, 't'],
};

/** Every combination of the members above. */
function* combinations(): Generator<Record<string, unknown>> {
  const names = Object.keys(CHOICES);
  const pick = (i: number, row: Record<string, unknown>): Generator<Record<string, unknown>> =>
    (function* () {
      if (i === names.length) return yield { ...row };
      for (const v of CHOICES[names[i]!]!) {
        const next = { ...row };
        if (v !== undefined) next[names[i]!] = v;
        yield* pick(i + 1, next);
      }
    })();
  yield* pick(0, {});
}

describe('plain api key documents, every combination of members', () => {
  test('every row taken: what the strict schema reads, members in order; the rest left to the schema', () => {
    let read = 0;
    let total = 0;
    for (const row of combinations()) {
      total++;
      if (!isPlainApiKey(row)) continue;
      read++;
      const plain = plainApiKey('ID', structuredClone(row));
      const schema = ApiKeySchema.safeParse(structuredClone(row));
      assert.ok(schema.success, `${JSON.stringify(row)}: the schema refuses what the plain read accepted`);
      const resource = withId('ID', schema.data).resource;
      assert.equal(JSON.stringify(plain), JSON.stringify(resource), JSON.stringify(row));
      assert.deepEqual(plain, resource);
    }
    assert.ok(read >= 8 && read < total, `${read} of ${total} rows read without the schema`);
  });

  test("the registry's strict read takes it, and a row it leaves gets the schema's error", () => {
    const row = { display_name: 'u', key_hash: 'h', allowed_models: ['m'] };
    assert.deepEqual(parseDocument('api_keys', 'ID', { ...row }, 'strict'), {
      ok: true,
      resource: plainApiKey('ID', { ...row }),
      ignored: [],
    });
    assert.deepEqual(parseDocument('api_keys', 'ID', { ...row, disabled: 'no' }, 'strict'), {
      ok: false,
      errorKind: 'schema_failed',
      error: 'disabled: Invalid input: expected boolean, received string',
    });
  });

  test('isSamePlainApiKey: true only where plainApiKey would make an equal resource', () => {
    for (const doc of PLAIN) {
      const kept = plainApiKey('k1', structuredClone(doc));
      assert.equal(isSamePlainApiKey(kept, structuredClone(doc)), true, JSON.stringify(doc));
      assert.equal(isSamePlainApiKey(bySchema('k1', doc), structuredClone(doc)), true, JSON.stringify(doc));
    }
    const doc = { display_name: 'u', key_hash: HASH, allowed_models: ['a', 'b'] };
    const kept = plainApiKey('k1', { ...doc });
    const differs: Record<string, unknown>[] = [
      { ...doc, display_name: 'v' },
      { key_hash: HASH, allowed_models: ['a', 'b'] },
      { ...doc, key_hash: 'b'.repeat(64) },
      { ...doc, allowed_models: ['a'] },
      { ...doc, allowed_models: ['b', 'a'] },
      { ...doc, disabled: true },
      { ...doc, team_id: 't' },
    ];
    for (const d of differs) assert.equal(isSamePlainApiKey(kept, d), false, JSON.stringify(d));
    assert.equal(isSamePlainApiKey(kept, { ...doc, disabled: false }), true, 'disabled: false is the default');
    const richer = bySchema('k1', { ...doc, team_id: 't' });
    assert.equal(isSamePlainApiKey(richer, { ...doc }), false, 'a resource with more members');
  });
});
