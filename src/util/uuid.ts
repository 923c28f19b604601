// Random (version 4) UUIDs for request ids, as `crypto.randomUUID()` makes them but built as one string: Node's
// joins 20 pieces, one string object each, on every request (docs/performance.md "Decisions on the hot path").
// The bytes come from `crypto.getRandomValues`, taken a batch at a time, as Node's own randomUUID does.

/** Ids per batch of random bytes. */
const BATCH = 256;
const pool = new Uint8Array(16 * BATCH);
let next = BATCH;

/** Per byte value, the char codes of its two lowercase hex digits. */
const HI = new Uint8Array(256);
const LO = new Uint8Array(256);
for (let b = 0; b < 256; b++) {
  HI[b] = '0123456789abcdef'.charCodeAt(b >> 4);
  LO[b] = '0123456789abcdef'.charCodeAt(b & 15);
}
const DASH = 45;

/** A fresh random UUID, lowercase: `xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx` (N one of 8, 9, a, b). */
export function randomUuid(): string {
  if (next === BATCH) {
    crypto.getRandomValues(pool);
    next = 0;
  }
  const p = pool;
  const o = 16 * next++;
  const b6 = (p[o + 6]! & 0x0f) | 0x40; // version 4
  const b8 = (p[o + 8]! & 0x3f) | 0x80; // the RFC 9562 variant
  // One call with every char code: the string is made once, flat, at its length.
  return String.fromCharCode(
    HI[p[o]!]!,
    LO[p[o]!]!,
    HI[p[o + 1]!]!,
    LO[p[o + 1]!]!,
    HI[p[o + 2]!]!,
    LO[p[o + 2]!]!,
    HI[p[o + 3]!]!,
    LO[p[o + 3]!]!,
    DASH,
    HI[p[o + 4]!]!,
    LO[p[o + 4]!]!,
    HI[p[o + 5]!]!,
    LO[p[o + 5]!]!,
    DASH,
    HI[b6]!,
    LO[b6]!,
    HI[p[o + 7]!]!,
    LO[p[o + 7]!]!,
    DASH,
    HI[b8]!,
    LO[b8]!,
    HI[p[o + 9]!]!,
    LO[p[o + 9]!]!,
    DASH,
    HI[p[o + 10]!]!,
    LO[p[o + 10]!]!,
    HI[p[o + 11]!]!,
    LO[p[o + 11]!]!,
    HI[p[o + 12]!]!,
    LO[p[o + 12]!]!,
    HI[p[o + 13]!]!,
    LO[p[o + 13]!]!,
    HI[p[o + 14]!]!,
    LO[p[o + 14]!]!,
    HI[p[o + 15]!]!,
    LO[p[o + 15]!]!,
  );
}
