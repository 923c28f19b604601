// The etcd source's per-key state (docs/etcd.md "Per-row validation", "Hashes and status"): every key's
// latest value and the value it serves (its latest, or a pinned last-known-good). Each row is judged alone,
// so a delivery re-judges only the keys it touched. Api keys change in place in the served key index
// (docs/performance.md "Configuration at scale"): a SaaS has a key per user, and one key's change must not
// rebuild a million; any other kind's change rebuilds the snapshot's other indexes around the same key
// index. Both hashes are then recomputed and every fact applied as one load. Used by the watch source
// (source.ts) and by range polling (poll.ts).
import { type RejectedRow, rfc3339 } from '../../config-facts.ts';
import { MSG } from '../../observability/messages.ts';
import { ApiKeyIndex } from '../../resources/api-key-index.ts';
import { BULK_SLICE_MS, Pacer } from '../../resources/pace.ts';
import type { ApiKey } from '../../resources/schema.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import type { SourceSink } from '../source.ts';
import { encodeServed, type RestoredRows } from './cache-rows.ts';
import type { EtcdKv } from './client.ts';
import {
  compareKeys,
  hashRows,
  judgeKey,
  PartialCounts,
  type Problem,
  resourceSet,
  type RowValue,
  rowValue,
  sameValue,
  type ServedValue,
} from './rows.ts';
import { PartialWarnings, rejectedRows } from './status.ts';
import type { EtcdEventBatch, EtcdSnapshot } from './supervisor.ts';

/** What one apply of the facts covers. */
interface Publish {
  revision: number;
  /** Keys whose served value changed. */
  changedKeys: { readonly size: number; keys(): Iterable<string> };
  touched: ReadonlySet<string>;
  allSeen: boolean;
  /** Recompute `source_hash` (over every observed row). */
  hashSource: boolean;
  counted: boolean;
  writeCache: boolean;
  logLevel: 'info' | 'debug';
}

/** Index of `key` in sorted `keys`, or of where it would be inserted. */
function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(keys[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A range's rows are cheaper than reading the clock: it is read once per this many. */
const RANGE_CLOCK_EVERY = 32;

/** Whether `keys` is in etcd order already (a range's keys are). */
function sortedKeys(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (compareKeys(keys[i - 1]!, keys[i]!) >= 0) return false;
  return true;
}

/** More changed api keys than this in one delivery: the key index is rebuilt rather than changed key by key. */
const IN_PLACE_MAX = 4096;

/** A full range read a page at a time, all pages at one revision (client.ts `rangePaged`), or one page. */
export interface PagedRange {
  revision: number;
  pages: AsyncIterable<EtcdKv[]> | Iterable<EtcdKv[]>;
}

export class EtcdRows {
  /** key → latest observed value; `keys` is the same set in etcd key order. */
  private readonly observed = new Map<string, RowValue>();
  private keys: string[] = [];
  /** key → the value it serves (latest or pinned); changed in place by each commit. */
  private served = new Map<string, ServedValue>();
  /** key → why its latest value does not serve. */
  private problems = new Map<string, Problem>();
  /** Keys observed to change and not judged yet: kept across a range that failed half way. */
  private pending = new Set<string>();
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
  /** A cache restore's keys, in etcd order, until etcd is read. */
  private restoredOrder: readonly string[] | undefined;
  /** Full ranges read so far (marks each observed row a range held). */
  private ranges = 0;
  /** While a hash runs: each changed key's values when it began (`keep`). */
  private frozen:
    | { observed: Map<string, RowValue | undefined>; served: Map<string, ServedValue | undefined> }
    | undefined;
  /** Why an apply of a watch batch failed, for the next delivery to throw. */
  private failure: unknown;
  private configHash: string | undefined;
  private appliedRevision = 0;
  /** Moves with every change of `served`; `published` is its value when the config hash was last computed. */
  private version = 0;
  private published = -1;
  private readonly apiKeysRoot: string;

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
    const pass = ++this.ranges;
    // etcd returns a range in key order, the order `keys` keeps: the range's keys are that list unsorted.
    const keys: string[] = [];
    const pacer = new Pacer(BULK_SLICE_MS, RANGE_CLOCK_EVERY);
    for await (const page of range.pages) {
      for (const kv of page) {
        keys.push(kv.key);
        this.observe(kv).seen = pass;
        const p = pacer.pace();
        if (p) await p;
      }
    }
    for (const [key, v] of this.observed) {
      if (v.seen !== pass) {
        this.keep(key);
        this.observed.delete(key);
        this.pending.add(key);
      }
      const p = pacer.pace();
      if (p) await p;
    }
    // A restored row the range does not hold is gone as well (it was served, never observed).
    for (const key of this.served.keys()) if (!this.observed.has(key)) this.pending.add(key);
    this.restoredOrder = undefined;
    this.keys = sortedKeys(keys) ? keys : keys.sort(compareKeys);
    await this.commit(range.revision, true, pacer);
  }

  /**
   * A watch batch: only the keys it names change. Resolves once what serves has changed; the facts and the
   * hashes follow (`publish`), so a burst of batches is not held behind one digest of every row each.
   */
  async applyEvents(b: EtcdEventBatch): Promise<void> {
    this.rethrow();
    const membership: string[] = [];
    for (const ev of b.events) {
      this.pending.add(ev.key);
      if (ev.type === 'put') {
        if (!this.observed.has(ev.key)) membership.push(ev.key);
        this.observe(ev);
      } else if (this.keep(ev.key) && this.observed.delete(ev.key)) {
        membership.push(ev.key);
      }
    }
    this.reindex(membership);
    this.commit(b.revision, false, new Pacer()).catch((e: unknown) => {
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
    this.problems = problems;
    this.partial = new PartialCounts();
    for (const v of restored.values.values()) this.partial.add(v);
    this.version++;
    this.restoredOrder = restored.keys;
    this.serving = this.rebuild(restored.keys, new Pacer());
    await this.serving;
    await this.requestPublish({
      revision: doc.revision,
      changedKeys: new Set(restored.values.keys()),
      touched: new Set(),
      allSeen: false,
      hashSource: false,
      counted: false,
      writeCache: false,
      logLevel: 'debug',
    });
  }

  /** The snapshot cache's bytes for what serves now; undefined while a change is still being applied. */
  cacheDocument(): Uint8Array | undefined {
    if (this.published !== this.version) return undefined; // the next apply schedules the write again
    return encodeServed({
      prefix: this.prefix,
      revision: this.appliedRevision,
      configHash: this.configHash,
      order: this.order(),
      served: this.served,
      rejected: this.rejected,
      writtenAt: rfc3339(new Date(this.sink.clock())),
    });
  }

  /** Records a put; parses only when the value changed. Returns the key's value now. */
  private observe(kv: EtcdKv): RowValue {
    const old = this.observed.get(kv.key);
    if (old && !kv.invalidUtf8 && sameValue(old, kv.value)) {
      old.modRev = kv.modRevision;
      return old;
    }
    this.pending.add(kv.key);
    const serving = this.served.get(kv.key);
    const value = serving && !kv.invalidUtf8 && sameValue(serving, kv.value)
      ? serving
      : rowValue(this.prefix, kv.key, kv.value, {
        ...(kv.invalidUtf8 ? { invalidUtf8: true } : {}),
        rev: kv.modRevision,
      });
    value.modRev = kv.modRevision;
    this.keep(kv.key);
    this.observed.set(kv.key, value);
    return value;
  }

  /**
   * Before `key` changes in `observed` or `served`: while a hash runs, the values it had when the hash began are
   * kept for it (the hash reads rows as they were then, however long it takes). Returns true.
   */
  private keep(key: string): boolean {
    const f = this.frozen;
    if (f !== undefined && !f.observed.has(key)) {
      f.observed.set(key, this.observed.get(key));
      f.served.set(key, this.served.get(key));
    }
    return true;
  }

  /** Keeps `keys` sorted after membership changes of `changed` keys. */
  private reindex(changed: readonly string[]): void {
    if (changed.length > 64) {
      this.keys = [...this.observed.keys()].sort(compareKeys);
      return;
    }
    // A new list, never a change of the one a hash in progress reads.
    let keys: string[] | undefined;
    for (const key of changed) {
      const list = keys ?? this.keys;
      const i = lowerBound(list, key);
      const present = list[i] === key;
      if (this.observed.has(key) === present) continue;
      keys ??= this.keys.slice();
      if (present) keys.splice(i, 1);
      else keys.splice(i, 0, key);
    }
    if (keys) this.keys = keys;
  }

  /** The keys in etcd order: the observed ones, or a cache restore's before etcd was read. */
  private order(): readonly string[] {
    return this.observed.size > 0 || this.restoredOrder === undefined ? this.keys : this.restoredOrder;
  }

  /**
   * Judges the touched keys and changes what serves; then the facts follow (`publish`). Resolves once they
   * have been applied; the part up to the change of what serves runs before any other delivery's.
   */
  private async commit(revision: number, fullRead: boolean, pacer: Pacer): Promise<void> {
    // Each row is judged alone: only the touched keys can change.
    const touched = this.pending;
    this.pending = new Set();
    const changed = new Map<string, ServedValue | undefined>();
    for (const key of touched) {
      const before = this.served.get(key);
      const { served: after, problem } = judgeKey(this.observed.get(key), before);
      this.keep(key);
      if (after) this.served.set(key, after);
      else this.served.delete(key);
      if (problem) this.problems.set(key, problem);
      else this.problems.delete(key);
      if (after !== before) {
        changed.set(key, before);
        this.partial.remove(before);
        this.partial.add(after);
      }
      // Only a full range, which no other delivery overlaps, is judged in slices: a batch's change of what
      // serves must start before the next batch's.
      const p = fullRead ? pacer.pace() : undefined;
      if (p) await p;
    }
    if (touched.size > 0) this.version++;
    const served = this.serve(changed, pacer);
    this.serving = served;
    await served;
    await this.requestPublish({
      revision,
      changedKeys: changed, // its keys: not copied, a full range's are every key
      touched,
      allSeen: fullRead,
      hashSource: true,
      counted: fullRead,
      writeCache: true,
      logLevel: fullRead ? 'info' : 'debug',
    });
  }

  /**
   * What serves after `changed` (key → the value it served before): api keys change in place in the served
   * key index, so requests see a key's change at once; anything else rebuilds the other indexes around it.
   * Deliveries are serialised here: each starts from what the one before made.
   */
  private async serve(changed: ReadonlyMap<string, ServedValue | undefined>, pacer: Pacer): Promise<Snapshot> {
    const current = await this.serving;
    if (current === undefined || changed.size > IN_PLACE_MAX) return this.rebuild(this.keys, pacer);
    if (changed.size === 0) return current;
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
    return others ? this.rebuild(this.keys, pacer, current.apiKeys) : current;
  }

  /**
   * The snapshot of `served`, built in slices; `apiKeys`: the key index to keep (else one is built). The rows
   * of the api keys are skipped when the index is kept: they are one block of the sorted keys.
   */
  private async rebuild(order: readonly string[], pacer: Pacer, apiKeys?: ApiKeyIndex): Promise<Snapshot> {
    let rows: readonly string[] = order;
    if (apiKeys !== undefined) {
      const from = lowerBound(order, this.apiKeysRoot);
      const to = lowerBound(order, `${this.prefix}/api_keys0`); // '0' follows '/': past every api key
      rows = [...order.slice(0, from), ...order.slice(to)];
    }
    const set = resourceSet(rows, this.served);
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
   * Hashes first (the only awaits; redone when what serves changed meanwhile), then every fact and the
   * snapshot in one synchronous step, so `/status/config` never shows half of an apply.
   */
  private async publish(o: Publish): Promise<void> {
    const pacer = new Pacer();
    let snapshot = await this.serving!; // set before any publish is requested
    const changed = !this.snapshot || this.configHash === undefined || o.changedKeys.size > 0;
    // Hashed as the rows were when it began: what changes meanwhile keeps its earlier value for it (`keep`).
    const version = this.version;
    const hashes = await this.hashes(this.order(), changed, o.hashSource, pacer);
    const serving = this.serving!;
    snapshot = await serving;
    const { configHash, sourceHash } = hashes;
    // A snapshot whose keys changed in place is served as a new one: what is derived once per snapshot
    // (e.g. the budgets' and JWT bindings' views) is derived again.
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
      for (const key of o.changedKeys.keys()) this.warnings.warn(this.served.get(key));
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
   * `config_hash` over what serves (recomputed only when it changed) and `source_hash` over every observed
   * row; one digest serves both when every observed row serves its latest value.
   */
  private async hashes(
    order: readonly string[],
    changed: boolean,
    hashSource: boolean,
    pacer: Pacer,
  ): Promise<{ configHash: string; sourceHash: string | undefined }> {
    const pace = () => pacer.pace();
    const { served, observed } = this;
    const same = hashSource && this.problems.size === 0 && served.size === observed.size;
    const frozen = {
      observed: new Map<string, RowValue | undefined>(),
      served: new Map<string, ServedValue | undefined>(),
    };
    const then = <V>(now: ReadonlyMap<string, V>, kept: ReadonlyMap<string, V | undefined>) => ({
      get: (k: string) => (kept.has(k) ? kept.get(k) : now.get(k)),
    });
    this.frozen = frozen;
    try {
      const configHash = changed || this.configHash === undefined
        ? await hashRows(order, then(served, frozen.served), pace)
        : this.configHash;
      if (!hashSource) return { configHash, sourceHash: undefined };
      if (same) return { configHash, sourceHash: configHash };
      return { configHash, sourceHash: await hashRows(order, then(observed, frozen.observed), pace) };
    } finally {
      this.frozen = undefined;
    }
  }
}

/**
 * Drops what an applied request names. A full read's are every key (a set and a map of a million entries), and
 * on JavaScriptCore (Bun) the compiled code of an apply keeps its closures' scope, and the request in it, alive
 * after the apply ends.
 */
function letGo(w: Publish): void {
  w.changedKeys = NO_KEYS;
  w.touched = NO_KEYS;
}

const NO_KEYS: ReadonlySet<string> = new Set();

/** Two requests to publish as one: every key either touched, the latest revision, the stronger of each choice. */
function merged(a: Publish, b: Publish): Publish {
  return {
    revision: Math.max(a.revision, b.revision),
    changedKeys: new Set([...a.changedKeys.keys(), ...b.changedKeys.keys()]),
    touched: new Set([...a.touched, ...b.touched]),
    allSeen: a.allSeen || b.allSeen,
    hashSource: a.hashSource || b.hashSource,
    counted: a.counted || b.counted,
    writeCache: a.writeCache || b.writeCache,
    logLevel: a.logLevel === 'info' || b.logLevel === 'info' ? 'info' : 'debug',
  };
}
