// The api keys of a snapshot and their lookups (docs/performance.md "Configuration at scale"): by id, by
// current key hash, by a rotated-out hash. A SaaS issues a key per user, so this is the one kind that reaches
// millions of rows: a single key's change is applied in place (`put`, `remove`) in time independent of
// how many keys there are, and the rest of the snapshot is not rebuilt.
//
// The lookups are the snapshot's rules: a hash belongs to the key written LAST that carries it (AISIX's name
// index), any key's current hash wins over another's rotated-out one, and a rotated-out hash authenticates its
// key only until the earlier of the two expiries. The JWT bindings (`jwt_provider` + `jwt_subject`, docs/identity.md)
// are kept here too, so a JWT caller after a key's change finds its key without a pass over every key.
import { CHUNK, ChunkedList } from '../util/chunked-list.ts';
import { type KeyedMap, keyedMap, ShardedMap } from '../util/sharded-map.ts';
import type { ApiKey } from './schema.ts';

/** The key as its rotated-out hash authenticates it: the same key, expiring at the earlier of the two times. */
export function previousKeyOf(k: ApiKey, until: string): ApiKey {
  const expires_at = k.expires_at !== undefined && Date.parse(k.expires_at) < Date.parse(until) ? k.expires_at : until;
  return { ...k, expires_at };
}

/** One hash → key lookup where several keys may carry a hash (etcd rows are not checked against each other). */
class HashLookup {
  constructor(private readonly owner: KeyedMap<ApiKey>) {}

  /** Hash → how many keys besides its owner carry it; absent for the usual one. */
  private readonly others = new ShardedMap<number>();

  get(hash: string, h?: number): ApiKey | undefined {
    return this.owner.get(hash, h);
  }

  /** `key` carries `hash` and is the latest written of those that do. */
  add(hash: string, key: ApiKey): void {
    // One lookup, not two: the hash was carried already when the Map did not grow.
    const size = this.owner.size;
    this.owner.set(hash, key);
    if (this.owner.size === size) this.others.set(hash, (this.others.get(hash) ?? 0) + 1);
  }

  /**
   * The key of id `id` no longer carries `hash`. When it owned a hash that others carry too, the owner becomes
   * the latest written of them (`find`, a scan: only duplicates pay for it).
   */
  remove(hash: string, id: string, find: () => ApiKey | undefined): void {
    const others = this.others.get(hash) ?? 0;
    if (others > 1) this.others.set(hash, others - 1);
    else this.others.delete(hash);
    if (this.owner.get(hash)?.id !== id) return;
    this.owner.delete(hash);
    if (others === 0) return;
    const next = find();
    if (next !== undefined) this.owner.set(hash, next);
  }
}

/** The binding a key names, or undefined when it names none (both fields are needed). */
function bindingOf(k: ApiKey): string | undefined {
  return k.jwt_subject === undefined || k.jwt_provider === undefined
    ? undefined
    : `${k.jwt_provider}\u0000${k.jwt_subject}`;
}

export class ApiKeyIndex {
  /**
   * Id → the key's place in the write order (`order`). Sharded, and the order kept in chunks: one Map or array
   * of a million keys grows by a copy of all of them in one call, which held the loop while a reload built the
   * index (docs/performance.md "Configuration at scale"). A place is a number: no object per key.
   */
  private byId = this.places();
  /** The keys in write order, a removed key's place left empty (`holes` of them) until the order is compacted. */
  private order = new ChunkedList<ApiKey | undefined>();
  private holes = 0;
  private readonly current = new HashLookup(keyedMap<ApiKey>((k) => k.key_hash));
  /** Rotated-out hashes are few, and the key a lookup returns carries its current hash, not the one looked up. */
  private readonly previous = new HashLookup(new ShardedMap<ApiKey>());
  private listed: ApiKey[] | undefined;
  /** `provider`␀`subject` → the keys bound to it, in write order (more than one is an ambiguous binding). */
  private readonly bound = new ShardedMap<ApiKey[]>();
  /** How many keys carry budgets (the budgets step stays off a snapshot whose keys have none). */
  private budgeted = 0;

  get size(): number {
    return this.byId.size;
  }

  get(id: string): ApiKey | undefined {
    const at = this.byId.get(id);
    return at === undefined ? undefined : this.at(at);
  }

  /** The key at place `at` of the write order (a place `byId` holds is never a hole). */
  private at(at: number): ApiKey {
    return this.order.at(at)!;
  }

  /** Id → place, each place naming its key's id through the write order. */
  private places(): KeyedMap<number> {
    return keyedMap((at) => this.at(at).id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** The keys in write order. */
  *values(): Generator<ApiKey, undefined> {
    for (const k of this.order.values()) if (k !== undefined) yield k;
  }

  /** The keys in write order, as a list (built once per change, for the few callers that list them all). */
  list(): readonly ApiKey[] {
    return this.listed ??= [...this.values()];
  }

  /** Whether any key carries a budget, without a pass over every key. */
  anyBudgets(): boolean {
    return this.budgeted > 0;
  }

  /**
   * The key a presented credential's hash names: a current hash first, then a rotated-out one. `h`:
   * `hashOf(hash)` (src/util/sharded-map.ts), which a caller that keeps it need not have computed again.
   */
  byHash(hash: string, h?: number): ApiKey | undefined {
    return this.current.get(hash, h) ?? this.previous.get(hash);
  }

  /** The keys bound to `subject` of the provider named `provider`, in write order; undefined when none is. */
  boundTo(provider: string, subject: string): readonly ApiKey[] | undefined {
    return this.bound.get(`${provider}\u0000${subject}`);
  }

  /** `k` as the latest write of its id (a new key, or a new value of one). */
  put(k: ApiKey): void {
    this.remove(k.id);
    this.byId.set(k.id, this.order.push(k));
    this.lookupsOf(k);
  }

  /**
   * `k` as the latest write of its id, in an index being filled from a list of keys (a snapshot's build): one
   * lookup of its id where `put` makes two. An id already held is written over, which leaves the size as it was;
   * its earlier place is then found by a pass over the order (a file's ids are distinct) and `put` replaces it.
   */
  append(k: ApiKey): void {
    const size = this.byId.size;
    const at = this.order.push(k);
    this.byId.set(k.id, at);
    if (this.byId.size !== size) return this.lookupsOf(k);
    // The earlier place first: a map keyed by hash reads the key of the place it holds.
    this.byId.set(k.id, this.placeBefore(at, k.id));
    this.order.set(at, undefined);
    this.holes++;
    this.put(k);
  }

  /** The place before `end` of the key of id `id` (one there is: an id `byId` held). */
  private placeBefore(end: number, id: string): number {
    for (let at = end - 1; at >= 0; at--) if (this.order.at(at)?.id === id) return at;
    throw new Error(`api key ${id} is in no place`);
  }

  /** `k`'s budgets, binding and hashes, as the key of its id. */
  private lookupsOf(k: ApiKey): void {
    if ((k.budgets?.length ?? 0) > 0) this.budgeted++;
    const binding = bindingOf(k);
    if (binding !== undefined) {
      const list = this.bound.get(binding);
      if (list) list.push(k);
      else this.bound.set(binding, [k]);
    }
    this.current.add(k.key_hash, k);
    for (const p of k.previous_key_hashes ?? []) this.previous.add(p.key_hash, previousKeyOf(k, p.expires_at));
    this.listed = undefined;
  }

  remove(id: string): void {
    const at = this.byId.get(id);
    if (at === undefined) return;
    const k = this.at(at);
    this.byId.delete(id);
    this.order.set(at, undefined);
    if (++this.holes > CHUNK && this.holes > this.byId.size) this.compact();
    if ((k.budgets?.length ?? 0) > 0) this.budgeted--;
    this.listed = undefined;
    const binding = bindingOf(k);
    const list = binding === undefined ? undefined : this.bound.get(binding);
    if (list !== undefined) {
      // A list is one key but for an ambiguous binding: the search is over the few keys that share it.
      list.splice(list.indexOf(k), 1);
      if (list.length === 0) this.bound.delete(binding!);
    }
    this.current.remove(k.key_hash, id, () => this.lastWith((x) => x.key_hash === k.key_hash ? x : undefined));
    for (const p of k.previous_key_hashes ?? []) {
      this.previous.remove(p.key_hash, id, () =>
        this.lastWith((x) => {
          const q = x.previous_key_hashes?.findLast((q) => q.key_hash === p.key_hash);
          return q === undefined ? undefined : previousKeyOf(x, q.expires_at);
        }));
    }
  }

  /** What `pick` makes of the latest written key it accepts. */
  private lastWith(pick: (k: ApiKey) => ApiKey | undefined): ApiKey | undefined {
    let found: ApiKey | undefined;
    for (const k of this.values()) found = pick(k) ?? found;
    return found;
  }

  /**
   * The write order without its holes, once there are more holes than keys: the order's memory stays within
   * twice the keys', and the pass over every key is paid once per as many removals.
   */
  private compact(): void {
    const keys = [...this.values()];
    this.order = new ChunkedList();
    this.holes = 0;
    // Made anew: the places the old one holds name other keys in the new order.
    this.byId = this.places();
    for (const k of keys) this.byId.set(k.id, this.order.push(k));
  }
}
