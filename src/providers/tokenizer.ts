// The byte-pair encoders of the local token estimate (estimate.ts, `cl100k_base` and `o200k_base`): js-tiktoken's ranks and
// split pattern, and its merge rule, over a table of typed arrays. js-tiktoken's own encoder keeps its ranks
// as a Map of 100,000 strings built in one synchronous run, and every other caller of the instance waited
// through it and the collections after it (docs/security.md "One caller cannot stall the others"). This
// table holds no object per rank, and is filled in slices with a turn of the event loop between them.
import { Pacer } from '../resources/pace.ts';

export interface Encoder {
  /** The ranks of `text`'s tokens; the spelling of a special token counts as the plain text it is. */
  encode(text: string): number[];
}

/** Ranks by their bytes: an open-addressing hash table over one pool of every rank's bytes. */
class RankTable {
  private readonly pool: Uint8Array;
  private poolEnd = 0;
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  private readonly ranks: Int32Array;
  private count = 0;
  /** Entry index + 1 per slot; 0 = empty. A power of two, at least twice the entries. */
  private readonly slots: Int32Array;

  constructor(maxEntries: number, maxBytes: number) {
    this.pool = new Uint8Array(maxBytes);
    this.starts = new Int32Array(maxEntries);
    this.ends = new Int32Array(maxEntries);
    this.ranks = new Int32Array(maxEntries);
    let size = 1;
    while (size < maxEntries * 2) size *= 2;
    this.slots = new Int32Array(size);
  }

  get size(): number {
    return this.count;
  }

  /** The bytes of the base64 `text[at, end)` get `rank`; a later rank for the same bytes wins, as in a Map. */
  add(text: string, at: number, end: number, rank: number): void {
    const start = this.poolEnd;
    const length = decodeBase64(text, at, end, this.pool, start);
    const slot = this.find(this.pool, start, start + length);
    const held = this.slots[slot]!;
    if (held !== 0) {
      this.ranks[held - 1] = rank;
      return;
    }
    const entry = this.count++;
    this.starts[entry] = start;
    this.ends[entry] = start + length;
    this.ranks[entry] = rank;
    this.slots[slot] = entry + 1;
    this.poolEnd += length;
  }

  /** The rank of `b[from, to)`, or -1. */
  get(b: Uint8Array, from: number, to: number): number {
    const at = this.slots[this.find(b, from, to)]!;
    return at === 0 ? -1 : this.ranks[at - 1]!;
  }

  /** The slot holding `b[from, to)`, or the empty one where it would go. */
  private find(b: Uint8Array, from: number, to: number): number {
    let h = 0x811c9dc5; // FNV-1a
    for (let i = from; i < to; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
    const mask = this.slots.length - 1;
    for (let slot = h & mask;; slot = (slot + 1) & mask) {
      const at = this.slots[slot]!;
      if (at === 0 || this.equal(at - 1, b, from, to)) return slot;
    }
  }

  private equal(entry: number, b: Uint8Array, from: number, to: number): boolean {
    const start = this.starts[entry]!;
    if (this.ends[entry]! - start !== to - from) return false;
    for (let i = 0; i < to - from; i++) if (this.pool[start + i] !== b[from + i]) return false;
    return true;
  }
}

const utf8 = new TextEncoder();

/** js-tiktoken's `encode(text, [], [])`: each piece of the split pattern, whole when it is a rank, else merged. */
class BytePairEncoder implements Encoder {
  /** A piece's bytes, unless it needs more: then an array of its own, not kept. */
  private readonly buf = new Uint8Array(1024);

  constructor(private readonly table: RankTable, private readonly pattern: RegExp) {}

  encode(text: string): number[] {
    const out: number[] = [];
    for (const m of text.matchAll(this.pattern)) {
      const piece = m[0];
      const b = piece.length * 3 <= this.buf.length ? this.buf : new Uint8Array(piece.length * 3);
      const n = utf8.encodeInto(piece, b).written;
      const whole = this.table.get(b, 0, n);
      if (whole >= 0) out.push(whole);
      else this.merge(b, n, out);
    }
    return out;
  }

  /**
   * The piece `b[0, n)` from single bytes up: the adjacent pair whose joined bytes have the lowest rank (the
   * first of equals) is joined, until no pair has a rank; then each part's rank.
   */
  private merge(b: Uint8Array, n: number, out: number[]): void {
    const bounds: number[] = [];
    for (let i = 0; i <= n; i++) bounds.push(i);
    while (bounds.length > 2) {
      let min = -1;
      let at = -1;
      for (let i = 0; i < bounds.length - 2; i++) {
        const rank = this.table.get(b, bounds[i]!, bounds[i + 2]!);
        if (rank >= 0 && (min < 0 || rank < min)) {
          min = rank;
          at = i;
        }
      }
      if (at < 0) break;
      bounds.splice(at + 1, 1);
    }
    for (let i = 0; i < bounds.length - 1; i++) {
      const rank = this.table.get(b, bounds[i]!, bounds[i + 1]!);
      if (rank >= 0) out.push(rank);
    }
  }
}

/** Ranks decoded between two checks of the slice's time. */
const CHECK_EVERY = 256;

/** The encoder of `encoding`; its table is filled in slices with a turn of the event loop between them. */
export async function buildEncoder(encoding: 'cl100k_base' | 'o200k_base' = 'cl100k_base'): Promise<Encoder> {
  const ranks = encoding === 'o200k_base'
    ? (await import('js-tiktoken/ranks/o200k_base')).default
    : (await import('js-tiktoken/ranks/cl100k_base')).default;
  // `bpe_ranks`: lines of `<prefix> <first rank> <base64 token> <base64 token> …`, ranks counting up.
  const text = ranks.bpe_ranks;
  const pacer = new Pacer();
  let tokens = 0;
  for (let i = text.indexOf(' '); i >= 0; i = text.indexOf(' ', i + 1)) {
    if (++tokens % CHECK_EVERY === 0) await pacer.pace();
  }
  const table = new RankTable(tokens, Math.ceil((text.length * 3) / 4));
  for (let line = 0; line < text.length;) {
    const lineEnd = endOf(text, '\n', line);
    const afterPrefix = endOf(text, ' ', line) + 1;
    const tokensAt = Math.min(endOf(text, ' ', afterPrefix), lineEnd) + 1;
    let rank = Number.parseInt(text.slice(afterPrefix, tokensAt - 1), 10);
    for (let at = tokensAt; at < lineEnd; rank++) {
      const end = Math.min(endOf(text, ' ', at), lineEnd);
      table.add(text, at, end, rank);
      at = end + 1;
      if (rank % CHECK_EVERY === 0) await pacer.pace();
    }
    line = lineEnd + 1;
  }
  return new BytePairEncoder(table, new RegExp(ranks.pat_str, 'gu'));
}

/** Where the next `c` at or after `from` is, or the end of `text`. */
function endOf(text: string, c: string, from: number): number {
  const i = text.indexOf(c, from);
  return i < 0 ? text.length : i;
}

const SIXTET = new Uint8Array(128);
for (let i = 0; i < 64; i++) {
  SIXTET['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;
}

/** The base64 `text[at, end)` decoded into `into` from `offset`; how many bytes it gave. */
function decodeBase64(text: string, at: number, end: number, into: Uint8Array, offset: number): number {
  let n = offset;
  let bits = 0;
  let acc = 0;
  for (let i = at; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 61) break; // `=`: padding
    acc = ((acc << 6) | SIXTET[c]!) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      into[n++] = (acc >> bits) & 0xff;
    }
  }
  return n - offset;
}
