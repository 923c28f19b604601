// Maps of string keys for a million entries (docs/performance.md "Configuration at scale"). A Map grows by
// copying every entry into a table twice its size in one call: at a million entries that single `set` held the
// event loop long enough to stall requests, twice per Map a reload builds. Spread over `SHARDS` Maps, each copy
// is an eighth of that. `HashKeyedMap`, for values that name their key, keys its Maps by a number made from the
// string: V8 (as Deno ships it) puts a string that keys a Map, or is looked up in one, in its string table, which
// each full collection walks in its pause. Iteration follows the shards, not insertion: for lookups, not listings.

/**
 * How many Maps the entries are spread over: with 64, a reload's requests on Node waited longer than with one
 * (docs/performance.md "Configuration at scale"); 8 kept Bun's gain and Node's figures.
 */
const SHARDS = 8;
const SHARD_BITS = 3;

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

/** Characters hashed at each end of a longer key: a hash, a UUID or a name is hashed whole. */
const HEAD = 16;
const TAIL = 48;

/**
 * A 32-bit hash of the key (of its length, first 16 and last 48 characters when longer): the low bits pick the
 * shard, the rest is the number that keys it, small enough to be held unboxed.
 */
export function hashOf(key: string): number {
  const n = key.length;
  let h = n;
  const head = n <= HEAD + TAIL ? n : HEAD;
  for (let i = 0; i < head; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  for (let i = Math.max(head, n - TAIL); i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** Whether `keyedMap` makes HashKeyedMaps (`keyMapsByString`). */
let byNumberDefault = true;

/**
 * `keyedMap` makes ShardedMaps from now on: for an engine whose collections do not walk a table of a Map's string
 * keys as Deno's V8 does (Node 20's V8; Bun's JavaScriptCore, whose string handling is its own), where the numbers
 * only add the hash computed in JavaScript (docs/performance.md "Configuration at scale"). Called once, at start.
 */
export function keyMapsByString(): void {
  byNumberDefault = false;
}

/** What a map of a million string keys offers; `h`, where given, is `hashOf(key)` (a ShardedMap ignores it). */
export interface KeyedMap<V> extends ReadonlyMap<string, V> {
  get(key: string, h?: number): V | undefined;
  set(key: string, value: V): unknown;
  delete(key: string): boolean;
}

/**
 * A map for a million string keys whose values name them (`keyOf`): a HashKeyedMap, or a ShardedMap where
 * `keyMapsByString` was called.
 */
export function keyedMap<V>(keyOf: (value: V) => string, byNumber = byNumberDefault): KeyedMap<V> {
  return byNumber ? new HashKeyedMap(keyOf) : new ShardedMap<V>();
}

/** One shard of a `HashKeyedMap`: number → value, and the numbers whose first key was not the only one. */
interface Shard<V> {
  readonly values: Map<number, V>;
  spilled: Set<number> | undefined;
}

/**
 * A ShardedMap whose values name their key (`keyOf`, read at every lookup, so a value's key must not change
 * while it is held) and are never undefined: each shard is keyed by the key's number, no string held as a key. A
 * key whose number another key holds goes to `spill`, the one Map looked up by string (rare: 29 bits per shard).
 */
export class HashKeyedMap<V> implements KeyedMap<V> {
  private readonly shards: (Shard<V> | undefined)[] = new Array(SHARDS);
  private readonly spill = new Map<string, V>();
  private count = 0;

  constructor(private readonly keyOf: (value: V) => string) {}

  get size(): number {
    return this.count;
  }

  /** `h`: `hashOf(key)`, when the caller keeps it (a key looked up on every request). */
  get(key: string, h: number = hashOf(key)): V | undefined {
    const shard = this.shards[h & (SHARDS - 1)];
    if (shard === undefined) return undefined;
    const n = h >>> SHARD_BITS;
    const v = shard.values.get(n);
    if (v !== undefined && this.keyOf(v) === key) return v;
    return shard.spilled?.has(n) ? this.spill.get(key) : undefined;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** `value` must name `key` (`keyOf(value) === key`). */
  set(key: string, value: V): this {
    const h = hashOf(key);
    const shard = this.shards[h & (SHARDS - 1)] ??= { values: new Map(), spilled: undefined };
    const n = h >>> SHARD_BITS;
    const held = shard.values.get(n);
    if (held !== undefined && this.keyOf(held) === key) {
      shard.values.set(n, value);
    } else if (held === undefined && !(shard.spilled?.has(n) === true && this.spill.has(key))) {
      shard.values.set(n, value);
      this.count++;
    } else {
      (shard.spilled ??= new Set()).add(n);
      const before = this.spill.size;
      this.spill.set(key, value);
      this.count += this.spill.size - before;
    }
    return this;
  }

  delete(key: string): boolean {
    const h = hashOf(key);
    const shard = this.shards[h & (SHARDS - 1)];
    if (shard === undefined) return false;
    const n = h >>> SHARD_BITS;
    const held = shard.values.get(n);
    if (held !== undefined && this.keyOf(held) === key) shard.values.delete(n);
    else if (!(shard.spilled?.has(n) === true && this.spill.delete(key))) return false;
    this.count--;
    return true;
  }

  *values(): Generator<V, undefined> {
    for (const shard of this.shards) if (shard) yield* shard.values.values();
    yield* this.spill.values();
  }

  *keys(): Generator<string, undefined> {
    for (const v of this.values()) yield this.keyOf(v);
  }

  *entries(): Generator<[string, V], undefined> {
    for (const v of this.values()) yield [this.keyOf(v), v];
  }

  [Symbol.iterator](): Generator<[string, V], undefined> {
    return this.entries();
  }

  forEach(fn: (value: V, key: string, map: ReadonlyMap<string, V>) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }
}
