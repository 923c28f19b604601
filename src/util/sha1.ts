// SHA-1 (FIPS 180-4) for the resource ids' UUIDv5 (src/util/crypto.ts): a resources file derives one id per
// row, so the digest works in place, in one reused buffer of words, and allocates nothing per call.

/** The message schedule, reused by every call (a digest never yields). */
const W = new Int32Array(80);
/** The last one or two blocks: the message's tail, the 0x80 marker and the length. */
const TAIL = new Uint8Array(128);
const H = new Int32Array(5);

/** One 64-byte block of `bytes` at `at` into `H`. */
function block(bytes: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++, at += 4) {
    W[i] = (bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!;
  }
  for (let i = 16; i < 80; i++) {
    const x = W[i - 3]! ^ W[i - 8]! ^ W[i - 14]! ^ W[i - 16]!;
    W[i] = (x << 1) | (x >>> 31);
  }
  let a = H[0]!, b = H[1]!, c = H[2]!, d = H[3]!, e = H[4]!;
  for (let i = 0; i < 80; i++) {
    let f: number;
    let k: number;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    const t = (((a << 5) | (a >>> 27)) + f + e + k + W[i]!) | 0;
    e = d;
    d = c;
    c = (b << 30) | (b >>> 2);
    b = a;
    a = t;
  }
  H[0] = (H[0]! + a) | 0;
  H[1] = (H[1]! + b) | 0;
  H[2] = (H[2]! + c) | 0;
  H[3] = (H[3]! + d) | 0;
  H[4] = (H[4]! + e) | 0;
}

/** The SHA-1 digest of `bytes`, written into `out` (20 bytes); `out` is returned. */
export function sha1Into(bytes: Uint8Array, out: Uint8Array): Uint8Array {
  H[0] = 0x67452301;
  H[1] = 0xefcdab89 | 0;
  H[2] = 0x98badcfe | 0;
  H[3] = 0x10325476;
  H[4] = 0xc3d2e1f0 | 0;
  const n = bytes.length;
  const full = n - (n % 64);
  for (let at = 0; at < full; at += 64) block(bytes, at);
  const rest = n - full;
  TAIL.fill(0);
  TAIL.set(bytes.subarray(full), 0);
  TAIL[rest] = 0x80;
  const blocks = rest < 56 ? 1 : 2;
  const end = blocks * 64;
  // The length in bits, big-endian in the last 8 bytes (a name never reaches 2^32 bits).
  const bits = n * 8;
  TAIL[end - 5] = Math.floor(bits / 2 ** 32) & 0xff;
  TAIL[end - 4] = (bits >>> 24) & 0xff;
  TAIL[end - 3] = (bits >>> 16) & 0xff;
  TAIL[end - 2] = (bits >>> 8) & 0xff;
  TAIL[end - 1] = bits & 0xff;
  for (let at = 0; at < end; at += 64) block(TAIL, at);
  for (let i = 0; i < 5; i++) {
    const h = H[i]!;
    out[i * 4] = h >>> 24;
    out[i * 4 + 1] = (h >>> 16) & 0xff;
    out[i * 4 + 2] = (h >>> 8) & 0xff;
    out[i * 4 + 3] = h & 0xff;
  }
  return out;
}
