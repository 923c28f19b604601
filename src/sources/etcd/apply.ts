// The etcd source's per-key state (docs/etcd.md "Per-row validation", "Hashes and status"): every key's
// latest value and the value it serves (its latest, or a pinned last-known-good). Each row is judged alone,
// so a delivery re-judges only the keys it touched. Api keys change in place in the served key index
// (docs/performance.md "Configuration at scale"): a SaaS has a key per user, and one key's change must not
// rebuild a million; any other kind's change rebuilds the snapshot's other indexes around the same key
// index. The hashes then re-digest the buckets of the keys that changed (row-hash.ts) and every fact is
// applied as one load. Used by the watch source (source.ts) and by range polling (poll.ts).
import { type RejectedRow, rfc3339 } from '../../config-facts.ts';
import { MSG } from '../../observability/messages.ts';
import { ApiKeyIndex } from '../../resources/api-key-index.ts';
import { BULK_SLICE_MS, Pacer, SLICE_MS } from '../../resources/pace.ts';
import type { ApiKey } from '../../resources/schema.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import { ShardedMap } from '../../util/sharded-map.ts';
import type { SourceSink } from '../source.ts';
import { encodeServed, type RestoredRows } from './cache-rows.ts';
import type { EtcdKv } from './client.ts';
import { BucketHashes } from './row-hash.ts';
import {
  compareKeys,
  judgeKey,
  PartialCounts,
  type Problem,
  resourceSetPaced,
  type RowValue,
  rowValue,
  sameValue,
  servedOf,
  type ServedValue,
} from './rows.ts';
import { SortedKeys } from './sorted-keys.ts';
import { PartialWarnings, rejectedRows } from './status.ts';
import type { EtcdEventBatch, EtcdSnapshot } from './supervisor.ts';

/** What one apply of the facts covers. */
interface Publish {
  revision: number;
  /** How many keys' served value changed (their partial-compatibility WARNs are logged as they change). */
  changed: number;
  touched: { has(key: string): boolean };
  allSeen: boolean;
  /** Recompute `source_hash` (over every observed row). */
  hashSource: boolean;
  counted: boolean;
  writeCache: boolean;
  logLevel: 'info' | 'debug';
}

/**
 * What served when a cache document began, for the document made in slices while rows change: `before`
 * holds each key's value from then, for the keys changed since (undefined: it served nothing).
 */
interface ServedView {
  served: ReadonlyMap<string, ServedValue>;
  before: Map<string, ServedValue | undefined>;
}

/**
 * key → a row's value. Sharded (`ShardedMap`) for a range's rows: a Map of a million keys grows by copying
 * every entry in one `set`, which held the loop as a range was read; a restored one is the cache's, sharded too.
 */
interface RowMap<V> extends ReadonlyMap<string, V> {
  set(key: string, value: V): unknown;
  delete(key: string): boolean;
}

/** A set of keys that grows without copying all of them at once (see `RowMap`). */
class KeySet implements Iterable<string> {
  private readonly map = new ShardedMap<true>();
  get size(): number {
    return this.map.size;
  }
  add(key: string): void {
    this.map.set(key, true);
  }
  has(key: string): boolean {
    return this.map.has(key);
  }
  [Symbol.iterator](): Iterator<string> {
    return this.map.keys();
  }
}

/** A range's rows are cheaper than reading the clock: it is read once per this many. */
const RANGE_CLOCK_EVERY = 32;

/** More changed api keys than this in one delivery: the key index is rebuilt rather than changed key by key. */
const IN_PLACE_MAX = 4096;

/** A full range as judged: its keys in etcd order and the rows it changed, in the order they came. */
interface FullRange {
  keys: readonly string[];
  rows: readonly RowValue[];
  /** The rows came in etcd order (each key once). */
  ordered: boolean;
  /** No row was observed or served before the range. */
  fresh: boolean;
  release: () => void;
  /** Set once every row has been judged. */
  judged?: boolean;
}

/** The changes of what serves, as a commit judges its keys. */
interface Judging {
  /** Key → the value it served before, for the first `IN_PLACE_MAX` + 1 changes. */
  changed: Map<string, ServedValue | undefined>;
  changes: number;
  /** Each key's buckets are touched as it is judged (else every key is put in them anew). */
  oneByOne: boolean;
}

/** A full range read a page at a time, all pages at one revision (client.ts `rangePaged`), or one page. */
export interface PagedRange {
  revision: number;
  pages: AsyncIterable<EtcdKv[]> | Iterable<EtcdKv[]>;
}

export class EtcdRows {
  /** key → latest observed value. */
  private readonly observed: RowMap<RowValue> = new ShardedMap();
  /** The keys `observed` or `served` hold, in etcd order. */
  private keys = new SortedKeys();
  /** key → the value it serves (latest or pinned); changed in place by each commit. */
  private served: RowMap<ServedValue> = new ShardedMap();
  /** key → why its latest value does not serve. */
  private problems = new Map<string, Problem>();
  /** Keys observed to change and not judged yet: kept across a range that failed half way. */
  private pending = new KeySet();
  private readonly warnings: PartialWarnings;
  private partial = new PartialCounts();
  private rejected = new Map<string, RejectedRow>();
  /** The snapshot last applied to the sink. */
  private snapshot: Snapshot | undefined;
  /** What serves after the latest delivery (its key index is the applied one's, changed in place). */
  private serving: Promise<Snapshot> | undefined;
  /** A key changed in place since the last apply: the next one applies a new snapshot object. */
  private keysChanged = false;
  private want: Publish | undefined;
  private publishing: Promise<void> | undefined;
  /** Full ranges read so far (marks each observed row a range held). */
  private ranges = 0;
  /** `config_hash` (over `served`) and `source_hash` (over `observed`) by bucket of keys. */
  private readonly buckets = new BucketHashes(
    [(k) => this.served.get(k), (k) => this.observed.get(k)],
    () => this.differing === 0,
  );
  /** While a range or a restore changes rows in slices: the hashes wait for it, never taking half of one. */
  private judging: Promise<void> | undefined;
  /**
   * How many keys serve another value than their latest observed one (or only one of the two): none, and the
   * hashes take `source_hash` to be `config_hash` without comparing the rows bucket by bucket.
   */
  private differing = 0;
  /**
   * What each key of `keys` serves, in its order, while neither has changed since (`version`): the snapshot of a
   * range or a restore is built from it, without a lookup per row.
   */
  private inOrder: { keys: SortedKeys; version: number; values: readonly (ServedValue | undefined)[] } | undefined;
  /** Why an apply of a watch batch failed, for the next delivery to throw. */
  private failure: unknown;
  private configHash: string | undefined;
  private appliedRevision = 0;
  /** Moves with every change of `served`; `published` is its value when the config hash was last computed. */
  private version = 0;
  private published = -1;
  private readonly apiKeysRoot: string;
  /** The cache documents being made (one at a time in practice: the cache serialises its writes). */
  private readonly views = new Set<ServedView>();
  /** The size of the last cache document: the next one is about as large. */
  private cacheBytes = 0;

  /** `onPublished(writeCache)`: after every apply, whether what serves should be written to the cache. */
  constructor(
    private readonly sink: SourceSink,
    readonly prefix: string,
    private readonly onPublished: (writeCache: boolean) => void,
  ) {
    this.warnings = new PartialWarnings(sink.log);
    this.apiKeysRoot = `${prefix}/api_keys/`;
  }

  /** A full range: every key not in it is gone. */
  async applyRange(s: EtcdSnapshot): Promise<void> {
    await this.applyPages({ revision: s.revision, pages: [s.kvs] });
  }

  /**
   * A full range, a page at a time: each page's rows are judged as they arrive (a prefix of a million keys
   * is never held as one response), then every key not seen is gone and one load is applied.
   */
  async applyPages(range: PagedRange): Promise<void> {
    this.rethrow();
    const release = this.hold();
    // The rows whose value the range changed, in its order: carried to the judging and the snapshot beside their
    // keys, not looked up again in Maps of a million keys (docs/performance.md "Configuration at scale").
    const changed: RowValue[] = [];
    let full: FullRange | undefined;
    try {
      const pass = ++this.ranges;
      // etcd returns a range in key order: the range's keys are the order `keys` keeps, unsorted (checked as
      // they arrive: a pass over a million keys afterwards held the loop).
      const keys: string[] = [];
      let ordered = true;
      // The first range (nothing observed or served): while its keys arrive in order, none is in either Map.
      const fresh = this.observed.size === 0 && this.served.size === 0;
      const pacer = new Pacer(BULK_SLICE_MS, RANGE_CLOCK_EVERY);
      for await (const page of range.pages) {
        for (const kv of page) {
          if (ordered && keys.length > 0 && compareKeys(keys[keys.length - 1]!, kv.key) >= 0) ordered = false;
          keys.push(kv.key);
          this.observe(kv, changed, fresh && ordered).seen = pass;
          const p = pacer.pace();
          if (p) await p;
        }
      }
      // Keys in order are distinct, and each is observed: when there are as many as observed keys, none vanished.
      if (!ordered || this.observed.size !== keys.length) {
        for (const [key, v] of this.observed) {
          if (v.seen !== pass) this.unobserve(key, v);
          const p = pacer.pace();
          if (p) await p;
        }
      }
      // A restored row the range does not hold is gone as well (it was served, never observed).
      if (this.served.size > 0) {
        for (const key of this.served.keys()) {
          if (!this.observed.has(key)) this.pending.add(key);
          const p = pacer.pace();
          if (p) await p;
        }
      }
      full = {
        keys: ordered ? keys : keys.sort(compareKeys),
        rows: changed,
        ordered,
        fresh: fresh && ordered,
        release,
      };
      await this.commit(range.revision, full, pacer);
    } catch (e) {
      // What a range that failed half way changed is observed now: those keys' buckets are digested again.
      if (full?.judged !== true) { for (const v of changed) this.pending.add(v.key); }
      const pacer = new Pacer(BULK_SLICE_MS, RANGE_CLOCK_EVERY);
      for (const key of this.pending) {
        this.member(key);
        const p = pacer.pace();
        if (p) await p;
      }
      throw e;
    } finally {
      release();
    }
  }

  /**
   * A watch batch: only the keys it names change. Resolves once what serves has changed; the facts and the
   * hashes follow (`publish`), so a burst of batches is not held behind one digest of every row each.
   */
  async applyEvents(b: EtcdEventBatch): Promise<void> {
    this.rethrow();
    for (const ev of b.events) {
      this.pending.add(ev.key);
      if (ev.type === 'put') this.observe(ev);
      else {
        const v = this.observed.get(ev.key);
        if (v !== undefined) this.unobserve(ev.key, v);
      }
    }
    this.commit(b.revision, undefined, new Pacer()).catch((e: unknown) => {
      // Handed to the next delivery, which fails with it: the supervisor then reads the whole range again.
      this.failure ??= e;
    });
  }

  /** Throws what an apply that nobody awaited failed with, once. */
  private rethrow(): void {
    const e = this.failure;
    this.failure = undefined;
    if (e !== undefined) throw e;
  }

  /** Boot: the rows of a usable snapshot cache serve before etcd is read, with the pins it recorded. */
  async applyRestored(restored: RestoredRows, doc: Parameters<RestoredRows['pins']>[0]): Promise<void> {
    const { problems, rejected } = restored.pins(doc);
    this.rejected = rejected;
    this.served = restored.values;
    this.differing = this.observed.size === 0 ? restored.values.size : this.countDiffering();
    this.problems = problems;
    this.partial = new PartialCounts();
    this.version++;
    const release = this.hold();
    const pacer = new Pacer(BULK_SLICE_MS, RANGE_CLOCK_EVERY);
    try {
      for (const v of restored.rows ?? restored.values.values()) {
        this.partial.add(v);
        this.warnings.warn(v);
        const p = pacer.pace();
        if (p) await p;
      }
      this.keys = SortedKeys.from(restored.keys);
      // The rows were digested by bucket to check the document: `config_hash` is not taken over them again.
      if (restored.buckets !== undefined && this.observed.size === 0) this.buckets.adopt(restored.buckets);
      else await this.rebucket(restored.keys, pacer);
    } finally {
      release();
    }
    if (restored.rows !== undefined) this.inOrder = { keys: this.keys, version: this.version, values: restored.rows };
    this.serving = this.rebuild(new Pacer());
    await this.serving;
    await this.requestPublish({
      revision: doc.revision,
      changed: restored.values.size,
      touched: NO_KEYS,
      allSeen: false,
      hashSource: false,
      counted: false,
      writeCache: false,
      logLevel: 'debug',
    });
  }

  /**
   * The snapshot cache's bytes for what serves now (undefined while a change is still being applied), made in
   * slices: the rows are those of this moment, however they change before the document is done. `pace`: what
   * is awaited between rows (tests change rows there).
   */
  async cacheDocument(
    pace?: () => Promise<void> | undefined,
  ): Promise<Uint8Array | undefined> {
    if (this.published !== this.version) return undefined; // the next apply schedules the write again
    const view: ServedView = { served: this.served, before: new Map() };
    this.views.add(view);
    const { served, before } = view;
    // Short slices, unlike a range's: the document is background work while the gateway serves, and every
    // request and key change that arrives meanwhile waits for the slice to end.
    const pacer = new Pacer(SLICE_MS, RANGE_CLOCK_EVERY);
    pace ??= () => pacer.pace();
    try {
      const bytes = await encodeServed(
        {
          prefix: this.prefix,
          revision: this.appliedRevision,
          configHash: this.configHash,
          order: this.keys.view(),
          served: {
            get: (key) => before.has(key) ? before.get(key) : served.get(key),
            has: (key) => before.has(key) ? before.get(key) !== undefined : served.has(key),
          },
          rejected: this.rejected,
          writtenAt: rfc3339(new Date(this.sink.clock())),
        },
        pace,
        this.cacheBytes,
      );
      this.cacheBytes = bytes.length;
      return bytes;
    } finally {
      this.views.delete(view);
    }
  }

  /** `key` is about to serve another value than `before`: the cache documents being made keep `before`. */
  private keepForViews(key: string, before: ServedValue | undefined): void {
    for (const v of this.views) if (v.served === this.served && !v.before.has(key)) v.before.set(key, before);
  }

  /**
   * Records a put; parses only when the value changed. Returns the key's value now. `changed`: where a changed
   * value goes (else its key goes to `pending`); `absent`: the caller knows the key is in neither Map.
   */
  private observe(kv: EtcdKv, changed?: RowValue[], absent = false): RowValue {
    const old = absent ? undefined : this.observed.get(kv.key);
    if (old && !kv.invalidUtf8 && sameValue(old, kv.value)) {
      old.modRev = kv.modRevision;
      return old;
    }
    if (changed === undefined) this.pending.add(kv.key);
    const serving = absent ? undefined : this.served.get(kv.key);
    const value = serving && !kv.invalidUtf8 && sameValue(serving, kv.value)
      ? serving
      : rowValue(this.prefix, kv.key, kv.value, {
        ...(kv.invalidUtf8 ? { invalidUtf8: true } : {}),
        rev: kv.modRevision,
      });
    value.modRev = kv.modRevision;
    this.observed.set(kv.key, value);
    this.differing += Number(value !== serving) - Number(old !== serving);
    changed?.push(value);
    return value;
  }

  /** `key` (observed as `v`) is gone from etcd: its judging is pending. */
  private unobserve(key: string, v: RowValue): void {
    const serving = this.served.get(key);
    this.observed.delete(key);
    this.pending.add(key);
    this.differing += Number(serving !== undefined) - Number(v !== serving);
  }

  /** `differing` counted over every row (a restore's rows replace what served). */
  private countDiffering(): number {
    let n = 0;
    for (const [key, v] of this.served) if (this.observed.get(key) !== v) n++;
    for (const key of this.observed.keys()) if (!this.served.has(key)) n++;
    return n;
  }

  /** While the returned function is not called, the hashes wait (rows change in slices meanwhile). */
  private hold(): () => void {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    this.judging = held;
    return () => {
      if (this.judging === held) this.judging = undefined;
      release();
    };
  }

  /** After `key` changed in `observed` or `served`: its place in `keys` and in the hash buckets. */
  private member(key: string): void {
    const present = this.observed.has(key) || this.served.has(key);
    if (present) this.keys.add(key);
    else this.keys.delete(key);
    this.buckets.touch(key, present);
  }

  /**
   * Every key of the buckets anew, from `keys` in etcd order (a range or a restore changes most rows); `values`:
   * what each serves, when known (the digests then do not look it up).
   */
  private async rebucket(
    keys: readonly string[],
    pacer: Pacer,
    values?: readonly (ServedValue | undefined)[],
  ): Promise<void> {
    this.buckets.clear();
    for (let i = 0; i < keys.length; i++) {
      if (values !== undefined) this.buckets.appendWith(keys[i]!, values[i]);
      else this.buckets.append(keys[i]!);
      const p = pacer.pace();
      if (p) await p;
    }
  }

  /**
   * Judges the touched keys and changes what serves; then the facts follow (`publish`). Resolves once they
   * have been applied; the part up to the change of what serves runs before any other delivery's. `full`: a
   * full range.
   */
  private async commit(
    revision: number,
    full: FullRange | undefined,
    pacer: Pacer,
  ): Promise<void> {
    const fullRead = full !== undefined;
    // Each row is judged alone: only the touched keys can change.
    const touched = this.pending;
    this.pending = new KeySet();
    const rows = full?.rows ?? [];
    const j: Judging = {
      changed: new Map(),
      changes: 0,
      // A range that touched most keys puts every key in the buckets anew: cheaper than one key at a time.
      oneByOne: !fullRead || touched.size + rows.length <= IN_PLACE_MAX,
    };
    // What each key of a range that changed every key serves, in its order: the snapshot is built from it.
    const values: (ServedValue | undefined)[] | undefined = full?.ordered === true && rows.length === full.keys.length
      ? new Array(rows.length)
      : undefined;
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!;
      const after = this.judge(row.key, row, full!.fresh ? undefined : this.served.get(row.key), j);
      if (values !== undefined) values[i] = after;
      // Only a full range, which no other delivery overlaps, is judged in slices.
      const p = pacer.pace();
      if (p) await p;
    }
    // A key a failed range left pending may be among the rows: judged again, it keeps what it serves.
    for (const key of touched) {
      this.judge(key, this.observed.get(key), this.served.get(key), j);
      // A batch's change of what serves must start before the next batch's: judged at once.
      const p = fullRead ? pacer.pace() : undefined;
      if (p) await p;
    }
    if (full !== undefined) {
      full.judged = true;
      if (!j.oneByOne) {
        // What a range leaves: the keys it held (every other one is gone, restored ones included).
        this.keys = SortedKeys.from(full.keys);
        await this.rebucket(full.keys, pacer, values);
        if (values !== undefined) this.inOrder = { keys: this.keys, version: this.version, values };
      }
      full.release();
    }
    const served = this.serve(j.changed, j.changes, pacer);
    this.serving = served;
    await served;
    await this.requestPublish({
      revision,
      changed: j.changes,
      touched,
      allSeen: fullRead,
      hashSource: true,
      counted: fullRead,
      writeCache: true,
      logLevel: fullRead ? 'info' : 'debug',
    });
  }

  /** Judges `key`, observed as `now`, serving `before`: changes what it serves, its problem and its facts. */
  private judge(
    key: string,
    now: RowValue | undefined,
    before: ServedValue | undefined,
    j: Judging,
  ): ServedValue | undefined {
    const { served: after, problem } = judgeKey(now, before);
    this.version++;
    if (after !== before) {
      this.keepForViews(key, before);
      if (after) this.served.set(key, after);
      else this.served.delete(key);
      this.differing += Number(after !== now) - Number(before !== now);
      // Key → the value it served before, for the first `IN_PLACE_MAX` + 1 changes: beyond, the snapshot is
      // rebuilt (`serve`) and only their count matters.
      if (j.changes++ <= IN_PLACE_MAX) j.changed.set(key, before);
      this.partial.remove(before);
      this.partial.add(after);
      this.warnings.warn(after);
    }
    if (problem) this.problems.set(key, problem);
    else if (this.problems.size > 0) this.problems.delete(key);
    if (j.oneByOne) this.member(key);
    return after;
  }

  /**
   * What serves after `changed` (key → the value it served before): api keys change in place in the served
   * key index, so requests see a key's change at once; anything else rebuilds the other indexes around it.
   * Deliveries are serialised here: each starts from what the one before made.
   */
  private async serve(
    changed: ReadonlyMap<string, ServedValue | undefined>,
    changes: number,
    pacer: Pacer,
  ): Promise<Snapshot> {
    const current = await this.serving;
    if (current === undefined || changes > IN_PLACE_MAX) return this.rebuild(pacer);
    if (changes === 0) return current;
    const keys: ServedValue[] = [];
    let others = false;
    for (const [key, before] of changed) {
      if (!key.startsWith(this.apiKeysRoot)) {
        others = true;
        continue;
      }
      const after = this.served.get(key);
      if (after) keys.push(after);
      else if (before) current.apiKeys.remove(before.parsed.id);
    }
    keys.sort((a, b) => a.rev - b.rev); // the index keeps write order: the row written last wins a hash
    for (const v of keys) current.apiKeys.put(v.parsed.resource as ApiKey);
    this.keysChanged ||= keys.length > 0 || changed.size > 0;
    return others ? this.rebuild(pacer, current.apiKeys) : current;
  }

  /**
   * The snapshot of `served`, built in slices; `apiKeys`: the key index to keep (else one is built). The rows
   * of the api keys are skipped when the index is kept: they are one block of the sorted keys.
   */
  private async rebuild(pacer: Pacer, apiKeys?: ApiKeyIndex): Promise<Snapshot> {
    const keys = this.keys;
    const known = this.inOrder;
    this.inOrder = undefined;
    const rows: Iterable<ServedValue | undefined> =
      apiKeys === undefined && known?.keys === keys && known.version === this.version ? known.values : servedOf(
        apiKeys === undefined ? keys : [
          ...keys.between(undefined, this.apiKeysRoot),
          ...keys.between(`${this.prefix}/api_keys0`), // '0' follows '/': past every api key
        ],
        this.served,
      );
    const set = await resourceSetPaced(rows, () => pacer.pace());
    const snapshot = await Snapshot.build(set, () => pacer.pace(), apiKeys);
    snapshot.revisions = {
      get: (kindAndId) => {
        const key = `${this.prefix}/${kindAndId}`;
        return this.served.has(key) ? this.observed.get(key)?.modRev : undefined;
      },
    };
    return snapshot;
  }

  /**
   * Asks for the facts of what serves now to be applied; resolves once an apply that includes this request
   * has. Applies run one at a time, and requests that arrive while one runs are merged into the next.
   */
  private requestPublish(w: Publish): Promise<void> {
    this.want = this.want === undefined ? w : merged(this.want, w);
    return this.publishing ??= this.drainPublishes();
  }

  private async drainPublishes(): Promise<void> {
    try {
      while (this.want !== undefined) {
        const w = this.want;
        this.want = undefined;
        await this.publish(w).finally(() => letGo(w));
      }
    } finally {
      this.publishing = undefined;
    }
  }

  /**
   * Hashes first (the only awaits), then every fact and the snapshot in one synchronous step, so
   * `/status/config` never shows half of an apply.
   */
  private async publish(o: Publish): Promise<void> {
    let snapshot = await this.serving!; // set before any publish is requested
    const changed = !this.snapshot || this.configHash === undefined || o.changed > 0;
    const { version, hashes } = await this.settledHashes(o.hashSource ? [0, 1] : [0]);
    const [configHash, sourceHash] = hashes as [string, string?];
    const serving = this.serving!;
    snapshot = await serving;
    // A snapshot whose keys changed in place is served as a new one: what is derived once per snapshot
    // (e.g. the budgets' view) is derived again.
    if (this.keysChanged) {
      snapshot = snapshot.derive();
      this.keysChanged = false;
      // Unless a later delivery already builds on what it serves.
      if (this.serving === serving) this.serving = Promise.resolve(snapshot);
    }
    const now = rfc3339(new Date(this.sink.clock()));
    const rejected = rejectedRows(this.sink.log, this.problems, this.rejected, {
      touched: o.touched,
      allSeen: o.allSeen,
      now,
    });

    // Synchronous from here on.
    const { record, log } = this.sink;
    if (changed) {
      const pc = this.partial.result();
      record.partiallyCompatible(pc.fields, pc.rows);
    }
    this.rejected = rejected;
    record.rejected([...rejected].sort(([a], [b]) => compareKeys(a, b)).map(([, r]) => r));
    if (sourceHash !== undefined) record.observed({ sourceHash, revision: o.revision, at: now });
    this.snapshot = snapshot;
    this.configHash = configHash;
    this.published = version;
    this.appliedRevision = o.revision;
    this.sink.apply(snapshot, { configHash, revision: o.revision, counted: o.counted });
    log.log(o.logLevel, MSG.etcdApplied, {
      revision: o.revision,
      apply_seq: this.sink.facts.applied?.apply_seq,
      resources: snapshot.size,
      rejected: rejected.size,
      config_hash: configHash,
    });
    this.onPublished(o.writeCache);
  }

  /**
   * The hashes of `views` (0: what serves, 1: every observed row) and the `version` of the rows they are of:
   * the buckets whose rows changed are digested a batch at a time (again if they change meanwhile) until none is
   * left and no range or restore is changing rows; then the hashes' input is taken in the same step.
   */
  private async settledHashes(views: number[]): Promise<{ version: number; hashes: string[] }> {
    for (;;) {
      while (this.judging !== undefined) await this.judging;
      if (this.buckets.pending === 0) {
        const version = this.version;
        const hashes = this.buckets.hashes(views);
        return { version, hashes: await hashes };
      }
      await this.buckets.digestSome();
    }
  }

  /** Rows digested for the hashes so far: one key's change costs its bucket's rows, not every row's. */
  get rowsDigested(): number {
    return this.buckets.rowsDigested;
  }
}

/**
 * Drops what an applied request names. A full read's are every key (a set of a million entries), and on
 * JavaScriptCore (Bun) the compiled code of an apply keeps its closures' scope, and the request in it, alive
 * after the apply ends.
 */
function letGo(w: Publish): void {
  w.touched = NO_KEYS;
}

const NO_KEYS: ReadonlySet<string> = new Set();

/** Two requests to publish as one: every key either touched, the latest revision, the stronger of each choice. */
function merged(a: Publish, b: Publish): Publish {
  return {
    revision: Math.max(a.revision, b.revision),
    changed: a.changed + b.changed,
    // Not copied: a full range's are every key, and a copy of a million held the loop.
    touched: { has: (key) => a.touched.has(key) || b.touched.has(key) },
    allSeen: a.allSeen || b.allSeen,
    hashSource: a.hashSource || b.hashSource,
    counted: a.counted || b.counted,
    writeCache: a.writeCache || b.writeCache,
    logLevel: a.logLevel === 'info' || b.logLevel === 'info' ? 'info' : 'debug',
  };
}
