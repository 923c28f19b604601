// A Map of string keys spread over many small Maps (docs/performance.md "Configuration at scale"). A Map grows
// by copying every entry into a table twice its size in one call: at a million entries that single `set` held
// the event loop long enough to stall requests, twice per Map a reload builds. Spread over `SHARDS` Maps, each
// copy is an eighth of that. Iteration follows the shards, not insertion: for lookups, not listings.

/**
 * How many Maps the entries are spread over: with 64, a reload's requests on Node waited longer than with one
 * (docs/performance.md "Configuration at scale"); 8 kept Bun's gain and Node's figures.
 */
const SHARDS = 8;

/** The shard of `key`: its last eight characters (a hash's, a UUID's or a numbered name's vary most there), mixed. */
function shardOf(key: string): number {
  let h = key.length;
  for (let i = Math.max(0, key.length - 8); i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 15) ^ (h >>> 23)) & (SHARDS - 1);
}

export class ShardedMap<V> implements ReadonlyMap<string, V> {
  /** Created on first use: most maps of a small file touch a few shards. */
  private readonly shards: (Map<string, V> | undefined)[] = new Array(SHARDS);
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    return this.shards[shardOf(key)]?.get(key);
  }

  has(key: string): boolean {
    return this.shards[shardOf(key)]?.has(key) ?? false;
  }

  set(key: string, value: V): this {
    const i = shardOf(key);
    const shard = this.shards[i] ??= new Map();
    const before = shard.size;
    shard.set(key, value);
    this.count += shard.size - before;
    return this;
  }

  delete(key: string): boolean {
    const deleted = this.shards[shardOf(key)]?.delete(key) ?? false;
    if (deleted) this.count--;
    return deleted;
  }

  *entries(): Generator<[string, V], undefined> {
    for (const shard of this.shards) if (shard) yield* shard.entries();
  }

  *keys(): Generator<string, undefined> {
    for (const shard of this.shards) if (shard) yield* shard.keys();
  }

  *values(): Generator<V, undefined> {
    for (const shard of this.shards) if (shard) yield* shard.values();
  }

  [Symbol.iterator](): Generator<[string, V], undefined> {
    return this.entries();
  }

  forEach(fn: (value: V, key: string, map: ReadonlyMap<string, V>) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }
}
