// The etcd source's rows in and out of the snapshot cache (docs/etcd.md "The snapshot cache"): the document
// written after an apply, and the rows and pins a restore applies. The file handling is ../cache.ts.
import type { RejectedRow } from '../../config-facts.ts';
import {
  CACHE_FORMAT,
  CACHE_VERSION,
  type CacheDocument,
  type CachedPin,
  type CacheHeader,
  encodeCacheSliced,
} from '../cache.ts';
import { BULK_SLICE_MS, Pacer } from '../../resources/pace.ts';
import { ShardedMap } from '../../util/sharded-map.ts';
import { type BucketHashes, rowSetHashes } from './row-hash.ts';
import { compareKeys, hashRows, type Problem, rowValue, type ServedValue } from './rows.ts';

/** A restore's rows are cheaper than reading the clock: it is read once per this many. */
const ROWS_PER_CLOCK = 32;

/** What serves now, as the cache holds it. */
export interface ServedState {
  prefix: string;
  revision: number;
  configHash: string | undefined;
  /** Keys in etcd order (those that serve nothing are skipped). */
  order: Iterable<string>;
  served: { get(key: string): ServedValue | undefined; has(key: string): boolean };
  rejected: ReadonlyMap<string, RejectedRow>;
  writtenAt: string;
}

/**
 * The cache file's bytes, made in slices (`pace()` awaited between rows): `order` and `served` must not change
 * meanwhile. A row's JSON text is made anew each time, not kept: a million rows' texts would hold hundreds of
 * megabytes for good, and writes are spaced by their own duration (../cache.ts).
 */
export function encodeServed(
  s: ServedState,
  pace: () => Promise<void> | undefined,
  sizeHint?: number,
): Promise<Uint8Array> {
  const pins: Record<string, CachedPin> = {};
  const served = s.served;
  for (const [key, r] of s.rejected) {
    if (r.serving_stale_since === undefined || !served.has(key)) continue;
    pins[key] = {
      since: r.serving_stale_since,
      resource_kind: r.resource_kind,
      resource_id: r.resource_id,
      last_error_kind: r.last_error_kind,
      last_error: r.last_error,
      first_seen_at: r.first_seen_at,
      last_seen_at: r.last_seen_at,
    };
  }
  const header: CacheHeader = {
    format: CACHE_FORMAT,
    version: CACHE_VERSION,
    prefix: s.prefix,
    revision: s.revision,
    written_at: s.writtenAt,
    config_hash: s.configHash ?? '',
    pins,
  };
  const order = s.order;
  function* rows(): Generator<[string, string]> {
    for (const key of order) {
      const v = served.get(key);
      if (v) yield [key, JSON.stringify(v.text)];
    }
  }
  return encodeCacheSliced(header, rows(), pace, sizeHint);
}

/** A cache document's rows, parsed and sorted; filled by `verify` as the cache reader checks the document. */
export class RestoredRows {
  /** Sharded: one Map of a million rows holds the loop each time it doubles. */
  values = new ShardedMap<ServedValue>();
  keys: string[] = [];
  /** The value of each of `keys`, in their order (undefined when the document had to be sorted). */
  rows: ServedValue[] | undefined;
  /** The digests the check of `config_hash` took of the rows, by bucket: what serves is not digested again. */
  buckets: BucketHashes | undefined;

  /** `pacer`: a million rows are validated and hashed in slices, the status listener answering meanwhile. */
  constructor(private readonly prefix: string, private readonly pacer = new Pacer(BULK_SLICE_MS, ROWS_PER_CLOCK)) {}

  /** Why the document cannot be trusted (a row that does not validate, a hash that does not match), or undefined. */
  async verify(d: CacheDocument): Promise<string | undefined> {
    const values = this.values = new ShardedMap<ServedValue>();
    const keys: string[] = [];
    const rows: ServedValue[] = [];
    this.rows = undefined;
    this.buckets = undefined;
    let sorted = true;
    for (const [key, raw] of d.rows) {
      const v = rowValue(this.prefix, key, raw);
      if (!v.parsed.ok) return `corrupt: row ${key} does not validate (${v.parsed.error})`;
      // A key twice: JSON's last value wins, in the first one's place (a key is new when the Map grew).
      const size = values.size;
      values.set(key, v as ServedValue);
      if (values.size === size) sorted = false;
      else {
        if (sorted && keys.length > 0 && compareKeys(keys[keys.length - 1]!, key) >= 0) sorted = false;
        keys.push(key);
        rows.push(v as ServedValue);
      }
      const p = this.pacer.pace();
      if (p) await p;
    }
    // The cache writes its rows in etcd order: sorted again only when a document was written otherwise.
    this.keys = sorted ? keys : [...values.keys()].sort(compareKeys);
    const pace = () => this.pacer.pace();
    // Digested by bucket as what serves is (row-hash.ts): the restore keeps these digests for `config_hash`.
    const { hash, buckets } = await rowSetHashes(this.keys, (k) => values.get(k), pace, sorted ? rows : undefined);
    if (sorted) this.rows = rows;
    this.buckets = buckets;
    if (hash === d.config_hash) return undefined;
    // A cache written before `config_hash` was taken by bucket: its rows are as trustworthy under that definition.
    if (hashRows(this.keys, values) === d.config_hash) return undefined;
    return 'corrupt: config_hash does not match its rows';
  }

  /** A pinned key's latest value was rejected: it serves its cached value, with what the cache says about it. */
  pins(doc: CacheDocument): { problems: Map<string, Problem>; rejected: Map<string, RejectedRow> } {
    const problems = new Map<string, Problem>();
    const rejected = new Map<string, RejectedRow>();
    for (const [key, p] of Object.entries(doc.pins)) {
      if (!this.values.has(key)) continue;
      problems.set(key, {
        kind: p.resource_kind,
        id: p.resource_id,
        errorKind: p.last_error_kind as Problem['errorKind'],
        error: p.last_error,
        pinned: true,
      });
      rejected.set(key, {
        resource_kind: p.resource_kind,
        resource_id: p.resource_id,
        last_error_kind: p.last_error_kind,
        last_error: p.last_error,
        first_seen_at: p.first_seen_at,
        last_seen_at: p.last_seen_at,
        serving_stale_since: p.since,
      });
    }
    return { problems, rejected };
  }
}
