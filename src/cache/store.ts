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

/** Per replica, in-process. `get` and `set` never fail. */
export class MemoryExactStore implements ExactStore {
  readonly kind = 'memory';
  /** Insertion order is recency order: a read moves its entry to the end, eviction takes from the front. */
  private readonly entries = new Map<string, StoredAnswer & { bytes: number }>();
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
      this.remove(key, e.bytes);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, e);
    return e;
  }

  get(key: string): Promise<StoredAnswer | undefined> {
    return Promise.resolve(this.getSync(key));
  }

  /** An answer larger than the whole byte bound is not kept. */
  setSync(key: string, body: string, ttlMs: number): void {
    const bytes = entryBytes(key, body);
    const old = this.entries.get(key);
    if (old) this.remove(key, old.bytes);
    if (bytes > this.o.maxBytes) return;
    this.evict(bytes);
    this.entries.set(key, { body, expiresAt: this.o.clock() + ttlMs, bytes });
    this.used += bytes;
  }

  set(key: string, body: string, ttlMs: number): Promise<void> {
    this.setSync(key, body, ttlMs);
    return Promise.resolve();
  }

  /** Makes room for `incoming` bytes and one entry, taking the least recently used first. */
  private evict(incoming: number): void {
    for (const [k, e] of this.entries) {
      if (this.entries.size < this.o.maxEntries && this.used + incoming <= this.o.maxBytes) return;
      this.remove(k, e.bytes);
    }
  }

  private remove(key: string, bytes: number): void {
    this.entries.delete(key);
    this.used -= bytes;
  }
}
