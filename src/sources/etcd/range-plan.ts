// Where each request of a paged range asks etcd to look (docs/etcd.md "How it reads"). etcd 3.4 answers a range
// with a `limit` after collecting the revision of every key in [key, range_end) (it needs them for `count`), so a
// page asked over the whole rest of a prefix costs as much as the rest, and a million keys read that way cost
// the square of the pages. The plan bounds each request's range_end instead, by the key density the answers so
// far showed, so a request walks a few pages' keys and the read is near-linear.
//
// Keys are placed on a line as mixed-radix numbers: at each byte position, the bytes seen there so far are the
// digits (a key that ended before the position is the digit 0). So a sparse alphabet (digits, hex, base64)
// leaves no gaps on the line for a bound to fall into, and a key with a byte never seen places like the next
// parent. Nothing here decides what is read, only how it is split: every key in [start, end) is in exactly one
// answer, in order, whatever the estimates are.

/** Keys one bounded request aims to hold, in pages: enough that one page's estimate error is absorbed. */
export const TARGET_PAGES = 2;
/** Bounded ranges that came back empty, after the first, widen the next by this factor each. */
export const EMPTY_GROWTH = 2n;
/** One that came back with fewer keys than it aimed at widens the next by at most this factor. */
export const SPARSE_GROWTH = 2n;
/** Every this many keys of an answer tell which bytes each position holds (with its first and last). */
export const SAMPLE_EVERY = 16;

/** One request: keys in [key, end). */
export interface RangeAsk {
  key: Uint8Array;
  end: Uint8Array;
}

/** What an answer to an ask showed. */
export interface RangeAnswer {
  /** Keys in the answer. */
  n: number;
  /** Its last key (absent when it held none). */
  last?: Uint8Array;
  /** Its keys 0, `SAMPLE_EVERY`, 2·`SAMPLE_EVERY` … and its last: the alphabet, and the density near its end. */
  sample: readonly Uint8Array[];
  /** etcd's `count`: keys in the whole asked range at the read's revision. */
  count: number;
  /** etcd's `more`: keys after `last` in the asked range. */
  more: boolean;
}

/** -1, 0, 1 as etcd orders keys (bytewise). */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

/** The key just after `key` in etcd's order: `key` + a zero byte. */
export function keyAfter(key: Uint8Array): Uint8Array {
  const out = new Uint8Array(key.length + 1);
  out.set(key);
  return out;
}

/** A measured density: `keys` keys lay in [from, to]. */
interface Measure {
  from: Uint8Array;
  to: Uint8Array;
  keys: number;
}

/** One position's digits: `bytes[d - 1]` is digit d's byte, `digit[b]` byte b's digit. */
interface Digits {
  bytes: number[];
  digit: Uint16Array;
  radix: bigint;
}

/** The bytes seen at each position, as sorted digit tables. */
class Alphabet {
  /** Per position: a 256-bit set of the bytes seen. */
  private readonly seen: Uint32Array[] = [];
  /** Per position, built on demand: the sorted bytes, and each byte's digit (1 + bytes below it). */
  private tables: (Digits | undefined)[] = [];

  add(key: Uint8Array): void {
    for (let i = 0; i < key.length; i++) {
      const set = (this.seen[i] ??= new Uint32Array(8));
      const b = key[i]!;
      const bit = 1 << (b & 31);
      if ((set[b >>> 5]! & bit) === 0) {
        set[b >>> 5]! |= bit;
        this.tables = [];
      }
    }
  }

  /**
   * Position `i`'s digits: 0 = the key ended before it, then the bytes seen there or at any later position (the
   * position a read advances through has shown few of its bytes yet; the ones after it show the alphabet),
   * then (unless 0xff was seen) one for every byte above them, written as the byte just above the highest.
   */
  table(i: number): Digits {
    let t = this.tables[i];
    if (t) return t;
    const set = new Uint32Array(8);
    for (let j = i; j < this.seen.length; j++) {
      const s = this.seen[j];
      if (s) { for (let w = 0; w < 8; w++) set[w]! |= s[w]!; }
    }
    const bytes: number[] = [];
    const digit = new Uint16Array(256);
    for (let b = 0; b < 256; b++) {
      digit[b] = bytes.length + 1; // an unseen byte places with the next seen one, or above them all
      if ((set[b >>> 5]! & (1 << (b & 31))) !== 0) bytes.push(b);
    }
    const top = bytes.length === 0 ? 0 : bytes[bytes.length - 1]!;
    if (top < 0xff) bytes.push(top + 1);
    t = { bytes, digit, radix: BigInt(bytes.length + 1) };
    this.tables[i] = t;
    return t;
  }
}

/**
 * Plans the requests of one paged range over [start, end) (`end` = [0] for "every key from start"): `first()`,
 * then `next(ask, answer)` after each answer until it returns undefined. Pure: no I/O, no clock.
 */
export class RangePlan {
  private readonly alphabet = new Alphabet();
  /** Positions on the line: one more than the longest key seen. */
  private width: number;
  private measure: Measure | undefined;
  /** Bounded ranges in a row that held nothing (after the first) widen the next by `EMPTY_GROWTH` each. */
  private boost = 1n;
  private empties = 0;
  /** Keys in the range not read yet: the first answer's count is the whole range's. */
  private left: number | undefined;
  private readonly target: number;

  constructor(private readonly start: Uint8Array, private readonly end: Uint8Array, private readonly limit: number) {
    this.width = start.length + 1;
    this.target = TARGET_PAGES * limit;
    this.alphabet.add(start);
  }

  /** The first request: the whole range (a range of fewer keys than a page is one request). */
  first(): RangeAsk {
    return { key: this.start, end: this.end };
  }

  /** The request after `ask` was answered with `answer`, or undefined when the range is read. */
  next(ask: RangeAsk, answer: RangeAnswer): RangeAsk | undefined {
    for (const k of answer.sample) {
      this.alphabet.add(k);
      if (k.length + 1 > this.width) this.width = k.length + 1;
    }
    this.left = (this.left ?? answer.count) - answer.n;
    const from = answer.more && answer.last ? keyAfter(answer.last) : ask.end;
    if (!answer.more && this.isEnd(ask.end)) return undefined;
    // The last few keys (or none, by the counts): one request to the end walks no more than they are.
    if (this.left <= this.target) return { key: from, end: this.end };
    if (answer.more && answer.last) {
      this.measure = this.measureTail(ask, answer, answer.last);
      this.boost = 1n;
      const rest = answer.count - answer.n;
      // Less than a page left in this ask: the next one reaches on past it, so its page is full.
      if (rest < this.limit) {
        const further = this.bound(from, this.end);
        return { key: from, end: this.isEnd(ask.end) || compareBytes(further, ask.end) > 0 ? further : ask.end };
      }
      // What is left of this ask is small enough to walk again: keep its end.
      if (rest <= this.target) return { key: from, end: ask.end };
      return { key: from, end: this.bound(from, ask.end) };
    }
    this.measureDone(ask, answer.count);
    return { key: from, end: this.bound(from, this.end) };
  }

  /**
   * A full page: its second half tells how tightly keys lie where the read goes on (a page that began in another
   * kind of key, or after a gap, would say they lie far apart).
   */
  private measureTail(ask: RangeAsk, answer: RangeAnswer, last: Uint8Array): Measure {
    const j = Math.floor((answer.sample.length - 1) / 2);
    const keys = answer.n - 1 - j * SAMPLE_EVERY;
    if (keys >= 1) return { from: answer.sample[j]!, to: last, keys };
    return { from: ask.key, to: last, keys: answer.n };
  }

  /** Whether `end` is the end of the whole range. */
  private isEnd(end: Uint8Array): boolean {
    if (this.isOpen(end)) return true;
    return !this.isOpen(this.end) && compareBytes(end, this.end) >= 0;
  }

  private isOpen(end: Uint8Array): boolean {
    return end.length === 1 && end[0] === 0;
  }

  /** A bounded ask read to its end: its keys over its whole width, or, when it held none, a wider one next. */
  private measureDone(ask: RangeAsk, count: number): void {
    // The first empty one is most often the end of a run of keys (the line keeps a digit above the bytes seen):
    // only the ones after it widen the next.
    if (count === 0) {
      if (this.empties++ > 0) this.boost *= EMPTY_GROWTH;
      return;
    }
    this.empties = 0;
    const measure = { from: ask.key, to: ask.end, keys: count };
    // A sparse range (often the tail of a run of keys) says little about the next: each one in a row widens the
    // span by `SPARSE_GROWTH`, up to what it measured.
    const before = this.measure;
    if (before && this.spanOf(measure) > this.spanOf(before) * this.boost * SPARSE_GROWTH) {
      this.boost *= SPARSE_GROWTH;
      return;
    }
    this.measure = measure;
    this.boost = 1n;
  }

  /** `key`'s place on the line. */
  private place(key: Uint8Array): bigint {
    let at = 0n;
    for (let i = 0; i < this.width; i++) {
      const t = this.alphabet.table(i);
      const digit = i < key.length ? t.digit[key[i]!]! : 0;
      at = at * t.radix + BigInt(digit);
    }
    return at;
  }

  /** The smallest key at or after place `at` (digits past a 0 round up, so the key is never before `at`). */
  private keyAt(at: bigint): Uint8Array | undefined {
    const digits: number[] = new Array(this.width);
    let rest = at;
    for (let i = this.width - 1; i >= 0; i--) {
      const radix = this.alphabet.table(i).radix;
      digits[i] = Number(rest % radix);
      rest /= radix;
    }
    if (rest > 0n) return undefined; // past the line's end
    let last = digits.length;
    while (last > 0 && digits[last - 1] === 0) last--;
    const out = new Uint8Array(last);
    for (let i = 0; i < last; i++) out[i] = this.alphabet.table(i).bytes[Math.max(1, digits[i]!) - 1]!;
    return out;
  }

  /** Units of the line expected to hold `target` keys, by `m`. */
  private spanOf(m: Measure): bigint {
    const units = this.place(m.to) - this.place(m.from);
    const span = (units * BigInt(this.target)) / BigInt(Math.max(1, m.keys));
    return span > 0n ? span : 1n;
  }

  /** `from` + the span, but never past `limit`. */
  private bound(from: Uint8Array, limit: Uint8Array): Uint8Array {
    if (!this.measure) return limit;
    const end = this.keyAt(this.place(from) + this.spanOf(this.measure) * this.boost);
    if (end === undefined || compareBytes(end, from) <= 0) return limit;
    return this.isOpen(limit) || compareBytes(end, limit) < 0 ? end : limit;
  }
}
