// The etcd source's keys in etcd order (docs/performance.md "Configuration at scale"): what a snapshot is built
// from and the cache written in. Held as sorted chunks, so one key's arrival or removal moves a chunk's worth of
// entries, never the whole list. A view (`view`) keeps the keys of one moment while they change: a chunk a view
// holds is copied before its first change, so taking one costs a copy of the list of chunks.
import { compareKeys } from './rows.ts';

/** Entries of a chunk once split: small enough that an insert's move is cheap, few enough chunks to search. */
const CHUNK = 1024;

/** Index of `key` in sorted `keys`, or of where it would be inserted. */
export function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(keys[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class SortedKeys implements Iterable<string> {
  /** Non-empty chunks, each sorted, every key of one before every key of the next. */
  private chunks: string[][] = [];
  private count = 0;
  /** Chunks some view holds: changed only as a copy. */
  private readonly shared = new WeakSet<string[]>();

  /** `sorted` must be in etcd order without repeats (a range's keys are); it is not kept. */
  static from(sorted: readonly string[]): SortedKeys {
    const s = new SortedKeys();
    for (let i = 0; i < sorted.length; i += CHUNK) s.chunks.push(sorted.slice(i, i + CHUNK));
    s.count = sorted.length;
    return s;
  }

  get size(): number {
    return this.count;
  }

  /** The keys as they are now, in order, whatever changes later (see the file's header). */
  view(): Iterable<string> {
    const chunks = this.chunks.slice();
    for (const chunk of chunks) this.shared.add(chunk);
    return {
      *[Symbol.iterator]() {
        for (const chunk of chunks) yield* chunk;
      },
    };
  }

  /** Adds `key`; false when it was there. */
  add(key: string): boolean {
    if (this.chunks.length === 0) {
      this.chunks.push([key]);
      this.count++;
      return true;
    }
    const c = Math.min(this.chunkOf(key), this.chunks.length - 1);
    const i = lowerBound(this.chunks[c]!, key);
    if (this.chunks[c]![i] === key) return false;
    const chunk = this.own(c);
    chunk.splice(i, 0, key);
    this.count++;
    if (chunk.length > 2 * CHUNK) this.chunks.splice(c + 1, 0, chunk.splice(CHUNK));
    return true;
  }

  /** Removes `key`; false when it was not there. */
  delete(key: string): boolean {
    const c = this.chunkOf(key);
    const chunk = this.chunks[c];
    if (chunk === undefined) return false;
    const i = lowerBound(chunk, key);
    if (chunk[i] !== key) return false;
    this.own(c).splice(i, 1);
    this.count--;
    if (this.chunks[c]!.length === 0) this.chunks.splice(c, 1);
    return true;
  }

  /** Chunk `c`, to change: a copy in its place when a view holds it. */
  private own(c: number): string[] {
    const chunk = this.chunks[c]!;
    if (!this.shared.has(chunk)) return chunk;
    const copy = chunk.slice();
    this.chunks[c] = copy;
    return copy;
  }

  *[Symbol.iterator](): Iterator<string> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /** The keys `k` with `from <= k < to` in order (either bound may be left open). */
  *between(from?: string, to?: string): Generator<string> {
    let c = from === undefined ? 0 : this.chunkOf(from);
    let i = from === undefined ? 0 : lowerBound(this.chunks[c] ?? [], from);
    for (; c < this.chunks.length; c++, i = 0) {
      const chunk = this.chunks[c]!;
      for (; i < chunk.length; i++) {
        const key = chunk[i]!;
        if (to !== undefined && compareKeys(key, to) >= 0) return;
        yield key;
      }
    }
  }

  /** The first chunk whose last key is not before `key` (`chunks.length` when every key is before it). */
  private chunkOf(key: string): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.chunks[mid]!;
      if (compareKeys(chunk[chunk.length - 1]!, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
