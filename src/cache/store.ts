// The exact layer's storage contract, and the memory store (docs/cache.md "The memory bound"). The memory store is
// bounded twice — by entries and by bytes — so a few large answers cannot exhaust the heap; the least
// recently used entries go first. An entry lives `ttl` from its insert (reads do not extend it), measured on
// the injected clock.
import type { Clock } from '../util/clock.ts';

/** A cached answer: the upstream's JSON body (a chat completion) as text, and the usage it reported. */
export interface StoredAnswer {
  /** The normalized response body, JSON text. */
  body: string;
  /** Unix ms at which the entry stops serving. */
  expiresAt: number;
}

/** The exact layer's backend: a failure is the backend's to report; the caller treats it as a miss. */
export interface ExactStore {
  readonly kind: 'memory' | 'redis';
  get(key: string): Promise<StoredAnswer | undefined>;
  set(key: string, body: string, ttlMs: number): Promise<void>;
}

/** Bytes one entry is charged: its key and body as UTF-16 (what the heap holds), plus the map's overhead. */
export function entryBytes(key: string, body: string): number {
  return 2 * (key.length + body.length) + ENTRY_OVERHEAD_BYTES;
}
export const ENTRY_OVERHEAD_BYTES = 256;

export interface MemoryStoreOptions {
  maxEntries: number;
  maxBytes: number;
  clock: Clock;
}

/** An entry of the memory store, linked in recency order (`prev` toward the least recently used). */
interface Held extends StoredAnswer {
  readonly key: string;
  bytes: number;
  prev: Held | undefined;
  next: Held | undefined;
}

/**
 * Per replica, in-process. `get` and `set` never fail. Recency is a linked list beside the map, so a read's move
 * and an eviction cost the same at any size: taking the oldest from a `Map`'s front walks every entry deleted
 * before it, as many as the store holds (docs/performance.md "The memory stores' recency").
 */
export class MemoryExactStore implements ExactStore {
  readonly kind = 'memory';
  private readonly entries = new Map<string, Held>();
  /** The least and the most recently used entries. */
  private oldest: Held | undefined;
  private newest: Held | undefined;
  private used = 0;

  constructor(private readonly o: MemoryStoreOptions) {}

  get size(): number {
    return this.entries.size;
  }

  /** Bytes charged to the entries held now (never above `maxBytes`). */
  get bytes(): number {
    return this.used;
  }

  getSync(key: string): StoredAnswer | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= this.o.clock()) {
      this.remove(e);
      return undefined;
    }
    this.unlink(e);
    this.append(e);
    return e;
  }

  get(key: string): Promise<StoredAnswer | undefined> {
    return Promise.resolve(this.getSync(key));
  }

  /** An answer larger than the whole byte bound is not kept. */
  setSync(key: string, body: string, ttlMs: number): void {
    const bytes = entryBytes(key, body);
    const old = this.entries.get(key);
    if (old) this.remove(old);
    if (bytes > this.o.maxBytes) return;
    this.evict(bytes);
    const e: Held = { key, body, expiresAt: this.o.clock() + ttlMs, bytes, prev: undefined, next: undefined };
    this.entries.set(key, e);
    this.append(e);
    this.used += bytes;
  }

  set(key: string, body: string, ttlMs: number): Promise<void> {
    this.setSync(key, body, ttlMs);
    return Promise.resolve();
  }

  /** Makes room for `incoming` bytes and one entry, taking the least recently used first. */
  private evict(incoming: number): void {
    while (this.oldest && (this.entries.size >= this.o.maxEntries || this.used + incoming > this.o.maxBytes)) {
      this.remove(this.oldest);
    }
  }

  private remove(e: Held): void {
    this.entries.delete(e.key);
    this.unlink(e);
    this.used -= e.bytes;
  }

  private append(e: Held): void {
    e.prev = this.newest;
    e.next = undefined;
    if (this.newest) this.newest.next = e;
    else this.oldest = e;
    this.newest = e;
  }

  private unlink(e: Held): void {
    if (e.prev) e.prev.next = e.next;
    else this.oldest = e.next;
    if (e.next) e.next.prev = e.prev;
    else this.newest = e.prev;
    e.prev = e.next = undefined;
  }
}
