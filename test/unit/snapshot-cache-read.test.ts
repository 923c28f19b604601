// The snapshot cache's read at scale (src/sources/cache.ts `decodeCache`, src/sources/etcd/cache-rows.ts
// `RestoredRows`; docs/performance.md "Configuration at scale"): the rows are parsed as they are taken, a piece of
// the bytes at a time, to the same values `JSON.parse` finds in any layout; a malformed document is refused with
// the reason the whole parse gave; and a large document's rows are validated with the event loop turning.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CACHE_FORMAT,
  CACHE_VERSION,
  CacheCorrupt,
  type CacheHeader,
  decodeCache,
  encodeCache,
  SnapshotCache,
} from '../../src/sources/cache.ts';
import { RestoredRows } from '../../src/sources/etcd/cache-rows.ts';
import { hashRowSet } from '../../src/sources/etcd/row-hash.ts';
import { rowValue } from '../../src/sources/etcd/rows.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { Pacer } from '../../src/resources/pace.ts';

const P = '/p';
const PIN = {
  since: '2026-12-06T00:00:00Z',
  resource_kind: 'api_keys',
  resource_id: 'k1',
  last_error_kind: 'non_json',
  last_error: 'not JSON: "{ broken" \\ ü',
  first_seen_at: '2026-12-06T00:00:00Z',
  last_seen_at: '2026-12-06T00:00:01Z',
};
const header = (pins: CacheHeader['pins'] = {}): CacheHeader => ({
  format: CACHE_FORMAT,
  version: CACHE_VERSION,
  prefix: P,
  revision: 7,
  written_at: '2026-12-06T00:00:00Z',
  config_hash: 'a'.repeat(64),
  pins,
});

/** `n` api-key rows with every kind of character, as `[key, value JSON]` in etcd order. */
function rows(n: number): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < n; i++) {
    const doc = { display_name: `ü-${i} "q" \\ 🙂 ${'x'.repeat(i % 97)}`, key_hash: `h${i}`, allowed_models: [] };
    out.push([`${P}/api_keys/k${String(i).padStart(6, '0')}-é`, JSON.stringify(doc)]);
  }
  return out;
}

const bytesOf = (text: string) => new TextEncoder().encode(text);
const encoded = (h: CacheHeader, r: [string, string][]) => encodeCache(h, r.map(([k, v]) => [k, JSON.stringify(v)]));

/** The rows `decodeCache` yields, or the reason it refuses the document. */
function decoded(bytes: Uint8Array): [string, string][] | string {
  const r = decodeCache(bytes, P);
  if (!r.ok) return r.reason;
  try {
    return [...r.doc.rows];
  } catch (e) {
    assert.ok(e instanceof CacheCorrupt, String(e));
    return e.message;
  }
}

describe('the cache document read a piece at a time', () => {
  test('the rows JSON.parse finds, in order, across pieces, for documents of 0 to 40,000 rows', () => {
    for (const n of [0, 1, 3, 40_000]) {
      const r = rows(n);
      const bytes = encoded(header(n > 1 ? { [r[1]![0]]: PIN } : {}), r);
      assert.deepEqual(decoded(bytes), r, `${n} rows`);
      assert.deepEqual(Object.entries(JSON.parse(new TextDecoder().decode(bytes)).rows), r, `${n} rows: JSON.parse`);
    }
  });

  test('any other layout JSON allows: rows first, spaces and new lines, members after the rows', () => {
    const r = rows(50);
    const doc = { ...header({ [r[2]![0]]: PIN }), rows: Object.fromEntries(r) };
    const { rows: _rows, ...rest } = doc;
    const layouts = {
      'rows first': JSON.stringify({ rows: doc.rows, ...rest }),
      'indented': JSON.stringify(doc, null, 2),
      'a member after the rows': JSON.stringify({ ...doc, note: { rows: 'x' } }),
    };
    for (const [what, text] of Object.entries(layouts)) assert.deepEqual(decoded(bytesOf(text)), r, what);
  });

  test('a malformed document is refused with the reason the whole parse gave, wherever the fault is', () => {
    const r = rows(3000);
    const pinned = r[5]![0];
    const good = new TextDecoder().decode(encoded(header({ [pinned]: PIN }), r));
    const row2000 = `"${r[2000]![0]}":${JSON.stringify(r[2000]![1])}`;
    const notJson = 'corrupt: not a JSON document';
    const cases: [string, Uint8Array, string][] = [
      ['cut inside the rows', bytesOf(good.slice(0, Math.floor(good.length * 0.6))), notJson],
      ['cut inside the header', bytesOf(good.slice(0, 40)), notJson],
      ['two documents', bytesOf(`${good}{}`), notJson],
      ['a value that is no string', bytesOf(good.replace(row2000, `"${r[2000]![0]}":{}`)), 'corrupt: bad row'],
      ['a row outside the prefix', bytesOf(good.replace(row2000, `"/q/k":"{}"`)), 'corrupt: bad row'],
      [
        'a pin without its row',
        bytesOf(good.replace(`"${pinned}":"`, `"${P}/api_keys/other":"`)),
        'corrupt: a pin without its row',
      ],
      [
        'the wrong prefix',
        bytesOf(good.replace(`"prefix":"${P}"`, '"prefix":"/q"')),
        'foreign: written for etcd prefix "/q", this gateway reads "/p"',
      ],
    ];
    const invalid = bytesOf(good);
    invalid[Math.floor(invalid.length * 0.7)] = 0xff;
    cases.push(['a byte that is no UTF-8', invalid, notJson]);
    for (const [what, bytes, reason] of cases) {
      assert.equal(decoded(bytes), reason, what);
      if (reason !== notJson) continue;
      assert.throws(
        () => JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)),
        `${what}: JSON.parse refuses it too`,
      );
    }
  });
});

describe('a large cache restored with the event loop turning', () => {
  test("the rows are validated between the loop's turns, and the document verifies", async () => {
    const r = rows(30_000);
    const values = new Map(r.map(([k, v]) => [k, rowValue(P, k, v)]));
    const hash = await hashRowSet(r.map(([k]) => k), (k) => values.get(k));
    const bytes = encoded({ ...header(), config_hash: hash }, r);
    const files = { read: () => Promise.resolve(bytes), writeAtomic: () => Promise.resolve() };
    const cache = new SnapshotCache(
      files,
      '/c.json',
      createLogger({ level: 'error', format: 'json', write: () => {} }),
    );
    const restored = new RestoredRows(P, new Pacer(1, 32));
    // What the loop saw between its turns: the rows validated so far.
    const seen: number[] = [];
    let reading = true;
    const tick = (): void => {
      seen.push(restored.values.size);
      if (reading) setTimeout(tick, 0);
    };
    setTimeout(tick, 0);
    const doc = await cache.read(P, (d) => restored.verify(d));
    reading = false;
    assert.ok(doc, 'the document verifies');
    assert.equal(restored.values.size, 30_000);
    assert.deepEqual(restored.keys, r.map(([k]) => k));
    const between = seen.filter((n) => n > 0 && n < 30_000);
    assert.ok(between.length >= 5, `turns while rows were validated: ${between.length} (${seen.length} in all)`);
  });
});
