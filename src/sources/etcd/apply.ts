// The etcd source's per-key state (docs/etcd.md "Per-row validation", "Hashes and status"): every key's
// latest value and the value it serves (its latest, or a pinned last-known-good). Each row is judged alone,
// so a delivery re-judges only the keys it touched, then the Snapshot and both hashes are rebuilt from
// memory and applied as one load. Used by the watch source (source.ts) and by range polling (poll.ts).
import { type RejectedRow, rfc3339 } from '../../config-facts.ts';
import { MSG } from '../../observability/messages.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import type { SourceSink } from '../source.ts';
import { encodeServed, type RestoredRows } from './cache-rows.ts';
import type { EtcdKv } from './client.ts';
import {
  compareKeys,
  hashLines,
  judgeKey,
  partialCompatibility,
  type Problem,
  resourceSet,
  type RowValue,
  rowValue,
  type ServedValue,
} from './rows.ts';
import { PartialWarnings, rejectedRows } from './status.ts';
import type { EtcdEventBatch, EtcdSnapshot } from './supervisor.ts';

interface PublishOptions {
  touched: ReadonlySet<string>;
  allSeen: boolean;
  sourceLines?: Uint8Array[];
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

export class EtcdRows {
  /** key → latest observed value; `keys` is the same set in etcd key order. */
  private readonly observed = new Map<string, RowValue>();
  /** key → its latest mod_revision (the admin lists' `revision`); entries of deleted keys are never read. */
  private readonly modRevisions = new Map<string, number>();
  private keys: string[] = [];
  /** key → the value it serves (latest or pinned). */
  private served = new Map<string, ServedValue>();
  /** key → why its latest value does not serve. */
  private problems = new Map<string, Problem>();
  private readonly warnings: PartialWarnings;
  /** Keys in the order `served` was decided over (equal to `keys` once etcd has been read). */
  private servedOrder: readonly string[] = [];
  private rejected = new Map<string, RejectedRow>();
  private snapshot: Snapshot | undefined;
  private configHash: string | undefined;
  private appliedRevision = 0;

  /** `onPublished(writeCache)`: after every apply, whether what serves should be written to the cache. */
  constructor(
    private readonly sink: SourceSink,
    readonly prefix: string,
    private readonly onPublished: (writeCache: boolean) => void,
  ) {
    this.warnings = new PartialWarnings(sink.log);
  }

  /** A full range: every key not in it is gone. */
  async applyRange(s: EtcdSnapshot): Promise<void> {
    const seen = new Set<string>();
    const touched = new Set<string>();
    const membership: string[] = [];
    for (const kv of s.kvs) {
      seen.add(kv.key);
      const before = this.observed.get(kv.key);
      if (this.observe(kv)) membership.push(kv.key);
      if (this.observed.get(kv.key) !== before) touched.add(kv.key);
    }
    for (const key of [...this.observed.keys()]) {
      if (seen.has(key)) continue;
      this.observed.delete(key);
      membership.push(key);
      touched.add(key);
    }
    this.reindex(membership);
    await this.commit(s.revision, touched, true);
  }

  /** A watch batch: only the keys it names change. */
  async applyEvents(b: EtcdEventBatch): Promise<void> {
    const touched = new Set<string>();
    const membership: string[] = [];
    for (const ev of b.events) {
      touched.add(ev.key);
      if (ev.type === 'put') {
        if (this.observe(ev)) membership.push(ev.key);
      } else if (this.observed.delete(ev.key)) {
        membership.push(ev.key);
      }
    }
    this.reindex(membership);
    await this.commit(b.revision, touched, false);
  }

  /** Boot: the rows of a usable snapshot cache serve before etcd is read, with the pins it recorded. */
  async applyRestored(restored: RestoredRows, doc: Parameters<RestoredRows['pins']>[0]): Promise<void> {
    const { problems, rejected } = restored.pins(doc);
    this.rejected = rejected;
    await this.publish(restored.values, problems, new Set(restored.values.keys()), restored.keys, doc.revision, {
      touched: new Set(),
      allSeen: false,
      counted: false,
      writeCache: false,
      logLevel: 'debug',
    });
  }

  /** The snapshot cache's bytes for what serves now. */
  cacheDocument(): Uint8Array {
    return encodeServed({
      prefix: this.prefix,
      revision: this.appliedRevision,
      configHash: this.configHash,
      order: this.servedOrder,
      served: this.served,
      rejected: this.rejected,
      writtenAt: rfc3339(new Date(this.sink.clock())),
    });
  }

  /** Records a put; parses only when the value changed. Returns whether the key is new. */
  private observe(kv: EtcdKv): boolean {
    this.modRevisions.set(kv.key, kv.modRevision);
    const old = this.observed.get(kv.key);
    if (old && old.raw === kv.value && !kv.invalidUtf8) return false;
    const serving = this.served.get(kv.key);
    const value = serving && serving.raw === kv.value && !kv.invalidUtf8
      ? serving
      : rowValue(this.prefix, kv.key, kv.value, {
        ...(kv.invalidUtf8 ? { invalidUtf8: true } : {}),
        rev: kv.modRevision,
      });
    this.observed.set(kv.key, value);
    return old === undefined;
  }

  /** Keeps `keys` sorted after membership changes of `changed` keys. */
  private reindex(changed: readonly string[]): void {
    if (changed.length > 64) {
      this.keys = [...this.observed.keys()].sort(compareKeys);
      return;
    }
    for (const key of changed) {
      const i = lowerBound(this.keys, key);
      const present = this.keys[i] === key;
      if (this.observed.has(key) && !present) this.keys.splice(i, 0, key);
      else if (!this.observed.has(key) && present) this.keys.splice(i, 1);
    }
  }

  private async commit(revision: number, touched: ReadonlySet<string>, fullRead: boolean): Promise<void> {
    // Each row is judged alone: only the touched keys can change.
    const served = new Map(this.served);
    const problems = new Map(this.problems);
    const changedKeys = new Set<string>();
    for (const key of touched) {
      const before = served.get(key);
      const { served: after, problem } = judgeKey(this.observed.get(key), before);
      if (after) served.set(key, after);
      else served.delete(key);
      if (problem) problems.set(key, problem);
      else problems.delete(key);
      if (after !== before) changedKeys.add(key);
    }
    await this.publish(served, problems, changedKeys, this.keys, revision, {
      touched,
      allSeen: fullRead,
      sourceLines: this.keys.map((k) => this.observed.get(k)!.line), // non-null: keys mirrors observed
      counted: fullRead,
      writeCache: true,
      logLevel: fullRead ? 'info' : 'debug',
    });
  }

  /** The snapshot and config hash of `served`: rebuilt only when something changed. */
  private async rebuild(
    served: ReadonlyMap<string, ServedValue>,
    order: readonly string[],
    changed: boolean,
    sourceLines: Uint8Array[] | undefined,
  ): Promise<{ snapshot: Snapshot; configHash: string; sourceHash: string | undefined }> {
    // Both digests run off the main thread where the runtime's Web Crypto does (Node: the libuv pool).
    const [sourceHash, newConfigHash] = await Promise.all([
      sourceLines ? hashLines(sourceLines) : undefined,
      changed ? hashLines(order.filter((k) => served.has(k)).map((k) => served.get(k)!.line)) : undefined,
    ]);
    if (!changed && this.snapshot && this.configHash !== undefined) {
      return { snapshot: this.snapshot, configHash: this.configHash, sourceHash };
    }
    const snapshot = new Snapshot(resourceSet(order, served));
    for (const [key, v] of served) {
      const rev = this.modRevisions.get(key);
      if (rev !== undefined) snapshot.revisions.set(`${v.parsed.kind}/${v.parsed.id}`, rev);
    }
    return { snapshot, configHash: newConfigHash!, sourceHash }; // non-null: computed whenever changed
  }

  /**
   * Swaps in what serves: hashes first (the only awaits), then every fact and the snapshot in one
   * synchronous step, so `/status/config` never shows half of an apply.
   */
  private async publish(
    served: Map<string, ServedValue>,
    problems: Map<string, Problem>,
    changedKeys: ReadonlySet<string>,
    order: readonly string[],
    revision: number,
    o: PublishOptions,
  ): Promise<void> {
    const changed = !this.snapshot || this.configHash === undefined || changedKeys.size > 0;
    const { snapshot, configHash, sourceHash } = await this.rebuild(served, order, changed, o.sourceLines);
    const now = rfc3339(new Date(this.sink.clock()));
    const rejected = rejectedRows(this.sink.log, problems, this.rejected, {
      touched: o.touched,
      allSeen: o.allSeen,
      now,
    });

    // Synchronous from here on.
    const { record, log } = this.sink;
    if (changed) {
      const pc = partialCompatibility(served.values());
      record.partiallyCompatible(pc.fields, pc.rows);
      for (const key of changedKeys) this.warnings.warn(served.get(key));
    }
    this.served = served;
    this.problems = problems;
    this.servedOrder = order;
    this.rejected = rejected;
    record.rejected([...rejected].sort(([a], [b]) => compareKeys(a, b)).map(([, r]) => r));
    if (sourceHash !== undefined) record.observed({ sourceHash, revision, at: now });
    this.snapshot = snapshot;
    this.configHash = configHash;
    this.appliedRevision = revision;
    this.sink.apply(snapshot, { configHash, revision, counted: o.counted });
    log.log(o.logLevel, MSG.etcdApplied, {
      revision,
      apply_seq: this.sink.facts.applied?.apply_seq,
      resources: snapshot.size,
      rejected: rejected.size,
      config_hash: configHash,
    });
    this.onPublished(o.writeCache);
  }
}
