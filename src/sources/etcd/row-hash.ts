// `config_hash` and `source_hash` of the etcd source, kept as rows change (docs/etcd.md "Hashes and status"):
// rows fall into a fixed number of buckets by their key, each bucket's SHA-256 is kept until one of its rows
// changes, and the hash is SHA-256 over the bucket digests in bucket order. One key's change re-digests its
// bucket (about n / 4096 rows) and the top, not every row; the value depends only on the set of rows.
// Digests run on Web Crypto: several times faster than SHA-256 in JavaScript, and off the event loop on Node.
import { sha256Hex } from '../../util/crypto.ts';
import { rowLines, type RowValue } from './rows.ts';
import { lowerBound } from './sorted-keys.ts';

/** How many buckets the rows are spread over: a million keys make buckets of about 244 rows. */
export const BUCKETS = 4096;
const BUCKET_BITS = 12;

/**
 * The bucket of an etcd key: the top 12 bits of the 32-bit FNV-1a of its UTF-8 bytes. Only spreads the keys (the
 * strength is the SHA-256 over them); a digest of a million keys at a range must cost far less than the rows'.
 */
export function bucketOf(key: string): number {
  let h = 0x811c9dc5;
  const byte = (b: number) => {
    h = Math.imul(h ^ b, 0x01000193);
  };
  for (let i = 0; i < key.length; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      h = Math.imul(h ^ c, 0x01000193);
      continue;
    }
    if (c < 0x800) {
      byte(0xc0 | (c >> 6));
      byte(0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c < 0xe000) {
      const d = key.charCodeAt(i + 1);
      if (c < 0xdc00 && d >= 0xdc00 && d < 0xe000) {
        i++;
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        byte(0xf0 | (c >> 18));
        byte(0x80 | ((c >> 12) & 0x3f));
        byte(0x80 | ((c >> 6) & 0x3f));
        byte(0x80 | (c & 0x3f));
        continue;
      }
      c = 0xfffd; // a lone surrogate is encoded as U+FFFD, as TextEncoder does
    }
    byte(0xe0 | (c >> 12));
    byte(0x80 | ((c >> 6) & 0x3f));
    byte(0x80 | (c & 0x3f));
  }
  return h >>> (32 - BUCKET_BITS);
}

/** One set of rows the hash is taken over (what serves, or every observed row). */
export type RowView = (key: string) => RowValue | undefined;

/** SHA-256 where the runtime runs it: Web Crypto, off the event loop where the runtime can (Node: the libuv pool). */
async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

/** Buckets whose rows are encoded before their digests are awaited, at most, and for at most this long. */
const BATCH_BUCKETS = 64;
const BATCH_MS = 2;

/**
 * The keys of every view by bucket, and each view's digest of each bucket, kept until a key of the bucket
 * changes. Changed buckets are digested once each however many of their keys changed (`digestChanged`).
 */
export class BucketHashes {
  /** Per bucket, its keys in etcd order: the keys any view holds. */
  private readonly members: string[][] = Array.from({ length: BUCKETS }, () => []);
  /** Per view, per bucket: the SHA-256 of its rows in that view (undefined: it has none). */
  private readonly digests: (Uint8Array | undefined)[][];
  /**
   * Per bucket, the first view's row of each of its keys as `appendWith` gave them, for its next digest only (a
   * lookup per row in a Map of a million misses the processor's caches); any change of the bucket drops them.
   */
  private readonly given: ((RowValue | undefined)[] | undefined)[] = new Array(BUCKETS);
  /** Per bucket, moved by each change: a digest taken before the latest change is not kept. */
  private readonly generation = new Uint32Array(BUCKETS);
  private readonly dirty = new Set<number>();
  /** Per view, the hash while no bucket changed. */
  private tops: (string | undefined)[];
  /** Rows encoded for digests so far (what a change costs, counted rather than timed). */
  rowsDigested = 0;

  /**
   * `same`: whether every view holds the first view's rows now (e.g. every observed row serves), known without
   * a look at each row; the views are then compared row by row only when it says no.
   */
  constructor(private readonly views: readonly RowView[], private readonly same: () => boolean = () => false) {
    this.digests = views.map(() => new Array<Uint8Array | undefined>(BUCKETS).fill(undefined));
    this.tops = views.map(() => undefined);
  }

  /** Buckets changed and not digested yet. */
  get pending(): number {
    return this.dirty.size;
  }

  /** After `key` changed in any view; `present`: whether any view holds it now. */
  touch(key: string, present: boolean): void {
    const b = bucketOf(key);
    const list = this.members[b]!;
    const i = lowerBound(list, key);
    if (list[i] === key) {
      if (!present) list.splice(i, 1);
    } else if (present) {
      list.splice(i, 0, key);
    }
    this.changed(b);
  }

  /**
   * Takes the keys and the first view's digests from `from` (over the same rows: a restore's check of its
   * document), so they are not digested again; every other view must hold no row (nothing observed yet).
   */
  adopt(from: BucketHashes): void {
    if (from.dirty.size > 0) throw new Error('BucketHashes.adopt: buckets changed and not digested');
    for (let b = 0; b < BUCKETS; b++) {
      this.members[b] = from.members[b]!;
      this.generation[b]!++;
      this.digests[0]![b] = from.digests[0]![b];
      for (let v = 1; v < this.views.length; v++) this.digests[v]![b] = undefined;
    }
    this.dirty.clear();
    this.tops = this.views.map((_, v) => v === 0 ? from.tops[0] : undefined);
  }

  /** Forgets every key: `append` then gives every key again; each bucket is digested again. */
  clear(): void {
    for (let b = 0; b < BUCKETS; b++) {
      this.members[b] = [];
      this.changed(b);
    }
  }

  /** After `clear`: adds `key`, which comes after every key appended before it in etcd order. */
  append(key: string): void {
    const b = bucketOf(key);
    this.members[b]!.push(key);
    this.given[b] = undefined;
  }

  /** `append`, with the first view's row of `key` now (the bucket's next digest does not look it up). */
  appendWith(key: string, row: RowValue | undefined): void {
    const b = bucketOf(key);
    const keys = this.members[b]!;
    const rows = this.given[b];
    if (rows !== undefined && rows.length === keys.length) rows.push(row);
    else if (keys.length === 0) this.given[b] = [row];
    keys.push(key);
  }

  /**
   * Digests changed buckets: their rows are encoded as they are now (for about `BATCH_MS`), then their digests
   * awaited together. Resolves when those are kept; a bucket changed meanwhile is changed again (`pending`).
   */
  async digestSome(): Promise<void> {
    const began = performance.now();
    const jobs: Promise<void>[] = [];
    for (const b of this.dirty) {
      this.dirty.delete(b);
      jobs.push(this.digest(b));
      if (jobs.length >= BATCH_BUCKETS || performance.now() - began >= BATCH_MS) break;
    }
    await Promise.all(jobs);
  }

  /**
   * The hashes (hex) of `views` over every bucket as they are now: call when nothing is `pending` (the inputs are
   * taken at once, so the hashes are of one state whatever changes while they are computed).
   */
  hashes(views: readonly number[]): Promise<string[]> {
    if (this.dirty.size > 0) throw new Error('BucketHashes.hashes: buckets changed and not digested');
    const first = this.digests[0]!;
    const firstTop = this.top(0);
    return Promise.all(views.map((view) => {
      // Every bucket digest the first view's (e.g. every observed row serves): the first view's hash.
      const same = view === 0 || this.digests[view]!.every((d, b) => d === first[b]);
      return same ? firstTop : this.top(view);
    }));
  }

  /** The hash of one view, its input taken now. */
  private async top(view: number): Promise<string> {
    const tops = this.tops;
    const cached = tops[view];
    if (cached !== undefined) return cached;
    const own = this.digests[view]!;
    let n = 0;
    for (let b = 0; b < BUCKETS; b++) if (own[b] !== undefined) n++;
    const all = new Uint8Array(n * 32);
    let at = 0;
    for (let b = 0; b < BUCKETS; b++) {
      const d = own[b];
      if (d === undefined) continue;
      all.set(d, at);
      at += 32;
    }
    // Kept in the array of when it began: `changed` replaces it.
    return tops[view] = await sha256Hex(all);
  }

  private changed(b: number): void {
    this.given[b] = undefined;
    this.dirty.add(b);
    this.generation[b]!++;
    this.tops = this.views.map(() => undefined);
  }

  private async digest(b: number): Promise<void> {
    const generation = this.generation[b];
    const keys = this.members[b]!;
    const first = this.views[0]!;
    const same = this.views.length > 1 && this.same();
    const given = this.given[b];
    this.given[b] = undefined;
    const rows = given !== undefined && given.length === keys.length ? given : keys.map(first);
    // A view with the same rows as the first (the same objects) has the same digest: not computed again.
    const inputs = this.views.map((view, v) =>
      v === 0
        ? rowLines(rows)
        : same || keys.every((k, i) => view(k) === rows[i])
        ? 'first' as const
        : rowLines(keys.map(view))
    );
    for (const i of inputs) if (typeof i === 'object') this.rowsDigested += i.rows;
    const digests = await Promise.all(inputs.map((i) => typeof i === 'object' ? sha256(i.bytes) : undefined));
    if (this.generation[b] !== generation) return; // changed while digested: digested again
    for (let v = 0; v < this.views.length; v++) {
      this.digests[v]![b] = inputs[v] === 'first' ? digests[0] : digests[v];
    }
  }
}

/**
 * The hash of one set of rows at once, `keys` in etcd order (a cache restore checks its document with it), with
 * `pace()` awaited between keys.
 */
export async function hashRowSet(
  keys: Iterable<string>,
  row: RowView,
  pace: () => Promise<void> | undefined = () => undefined,
): Promise<string> {
  return (await rowSetHashes(Array.isArray(keys) ? keys : [...keys], row, pace)).hash;
}

/**
 * `hashRowSet`, with the buckets it digested (a restore keeps them: `BucketHashes.adopt`); `rows`: the row of each
 * of `keys`, in their order, when the caller has them.
 */
export async function rowSetHashes(
  keys: readonly string[],
  row: RowView,
  pace: () => Promise<void> | undefined = () => undefined,
  rows?: readonly (RowValue | undefined)[],
): Promise<{ hash: string; buckets: BucketHashes }> {
  const h = new BucketHashes([row]);
  h.clear();
  for (let i = 0; i < keys.length; i++) {
    if (rows !== undefined) h.appendWith(keys[i]!, rows[i]);
    else h.append(keys[i]!);
    const p = pace();
    if (p) await p;
  }
  while (h.pending > 0) await h.digestSome();
  return { hash: (await h.hashes([0]))[0]!, buckets: h };
}
