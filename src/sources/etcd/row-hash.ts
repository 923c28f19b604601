// `config_hash` and `source_hash` of the etcd source, kept as rows change (docs/etcd.md "Hashes and status"):
// rows fall into a fixed number of buckets by their key, each bucket's SHA-256 is kept until one of its rows
// changes, and the hash is SHA-256 over the bucket digests in bucket order. One key's change re-digests its
// bucket (about n / 4096 rows) and the top, not every row; the value depends only on the set of rows.
import { sha256 } from '@noble/hashes/sha2.js';
import { digestRows, type RowValue } from './rows.ts';
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

function hex(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += bytes[i]!.toString(16).padStart(2, '0');
  return out;
}

/**
 * The keys of every view by bucket, and each view's digest of each bucket, kept until a key of the bucket
 * changes. Changed buckets are digested once each however many of their keys changed (`digestNext`).
 */
export class BucketHashes {
  /** Per bucket, its keys in etcd order: the keys any view holds. */
  private readonly members: string[][] = Array.from({ length: BUCKETS }, () => []);
  /** Per view, per bucket: the SHA-256 of its rows in that view (undefined: it has none). */
  private readonly digests: (Uint8Array | undefined)[][];
  private readonly tops: (string | undefined)[];
  private readonly dirty = new Set<number>();
  /** Rows digested so far (what a change costs, counted rather than timed). */
  rowsDigested = 0;

  constructor(private readonly views: readonly RowView[]) {
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

  /** Forgets every key: `append` then gives every key again; each bucket is digested again. */
  clear(): void {
    for (let b = 0; b < BUCKETS; b++) {
      this.members[b] = [];
      this.changed(b);
    }
  }

  /** After `clear`: adds `key`, which comes after every key appended before it in etcd order. */
  append(key: string): void {
    this.members[bucketOf(key)]!.push(key);
  }

  /** Digests one changed bucket in every view; false when none is left. */
  digestNext(): boolean {
    for (const b of this.dirty) {
      this.dirty.delete(b);
      this.digest(b);
      return true;
    }
    return false;
  }

  /** The hash (hex) of view `view` over every bucket; each changed bucket is digested first. */
  hash(view: number): string {
    while (this.digestNext());
    const cached = this.tops[view];
    if (cached !== undefined) return cached;
    const own = this.digests[view]!;
    // A view whose every bucket digest is the first view's has its hash (e.g. every observed row serves).
    const first = this.digests[0]!;
    if (view > 0 && own.every((d, b) => d === first[b]) && this.tops[0] !== undefined) {
      return this.tops[view] = this.tops[0];
    }
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
    return this.tops[view] = hex(sha256(all));
  }

  private changed(b: number): void {
    this.dirty.add(b);
    this.tops.fill(undefined);
  }

  private digest(b: number): void {
    const keys = this.members[b]!;
    const first = this.views[0]!;
    for (let v = 0; v < this.views.length; v++) {
      const view = this.views[v]!;
      // The same rows as the first view (the same objects): the same digest, not computed again.
      if (v > 0 && keys.every((k) => view(k) === first(k))) {
        this.digests[v]![b] = this.digests[0]![b];
        continue;
      }
      const d = digestRows(keys, view);
      this.digests[v]![b] = d?.digest;
      this.rowsDigested += d?.rows ?? 0;
    }
  }
}

/** The hash of one set of rows at once, `keys` in etcd order (a cache restore checks its document with it). */
export function hashRowSet(keys: Iterable<string>, row: RowView): string {
  const h = new BucketHashes([row]);
  h.clear();
  for (const key of keys) h.append(key);
  return h.hash(0);
}
