// The bytes of an Aliyun SLS PutLogs body (docs/usage-events.md "Aliyun SLS"): the `LogGroup` protobuf, LZ4's
// block format, and the MD5 the request is signed over. Written here because the web platform has neither
// LZ4 nor MD5 (WebCrypto has no MD5), and these three are small enough to own on every runtime.

/** One log: its time (unix seconds) and its key/value contents, in order. */
export interface SlsLog {
  time: number;
  contents: readonly (readonly [string, string])[];
}

/** `LogGroup { repeated Log Logs = 1 }`, `Log { uint32 Time = 1; repeated Content Contents = 2 }`, `Content { Key = 1; Value = 2 }`. */
export function encodeLogGroup(logs: readonly SlsLog[]): Uint8Array<ArrayBuffer> {
  const out = new Bytes();
  const enc = new TextEncoder();
  for (const log of logs) {
    const body = new Bytes();
    body.tag(1, 0);
    body.varint(log.time >>> 0);
    for (const [k, v] of log.contents) {
      const c = new Bytes();
      c.field(1, enc.encode(k));
      c.field(2, enc.encode(v));
      body.field(2, c.bytes());
    }
    out.field(1, body.bytes());
  }
  return out.bytes();
}

class Bytes {
  private parts: number[] = [];
  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }
  varint(n: number): void {
    while (n > 0x7f) {
      this.parts.push((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    this.parts.push(n);
  }
  /** A length-delimited field. */
  field(field: number, data: Uint8Array): void {
    this.tag(field, 2);
    this.varint(data.length);
    for (const b of data) this.parts.push(b);
  }
  bytes(): Uint8Array<ArrayBuffer> {
    return Uint8Array.from(this.parts);
  }
}

const MIN_MATCH = 4;
/** The format's end rules: the last match starts 12 bytes or more before the end; the last 5 bytes are literals. */
const MF_LIMIT = 12;
const LAST_LITERALS = 5;
const HASH_BITS = 16;

/** LZ4 block compression (greedy, one hash table): what SLS decompresses with `x-log-bodyrawsize`. */
export function lz4Block(src: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(src.length + Math.ceil(src.length / 255) + 16);
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  let op = 0;
  let anchor = 0;
  let ip = 0;
  const limit = src.length - MF_LIMIT;
  const lengthBytes = (n: number) => {
    while (n >= 255) {
      out[op++] = 255;
      n -= 255;
    }
    out[op++] = n;
  };
  while (ip < limit) {
    const seq = read32(src, ip);
    const h = Math.imul(seq, 2654435761) >>> (32 - HASH_BITS);
    const ref = table[h]!;
    table[h] = ip;
    if (ref < 0 || ip - ref > 65_535 || read32(src, ref) !== seq) {
      ip++;
      continue;
    }
    let len = MIN_MATCH;
    while (ip + len < src.length - LAST_LITERALS && src[ref + len] === src[ip + len]) len++;
    const lit = ip - anchor;
    const ml = len - MIN_MATCH;
    out[op++] = (Math.min(lit, 15) << 4) | Math.min(ml, 15);
    if (lit >= 15) lengthBytes(lit - 15);
    out.set(src.subarray(anchor, ip), op);
    op += lit;
    out[op++] = (ip - ref) & 0xff;
    out[op++] = (ip - ref) >> 8;
    if (ml >= 15) lengthBytes(ml - 15);
    ip += len;
    anchor = ip;
  }
  const lit = src.length - anchor;
  out[op++] = Math.min(lit, 15) << 4;
  if (lit >= 15) lengthBytes(lit - 15);
  out.set(src.subarray(anchor), op);
  op += lit;
  return out.slice(0, op);
}

function read32(b: Uint8Array, i: number): number {
  return (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> 0;
}

const S = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
const K = Array.from({ length: 64 }, (_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32) >>> 0);

/** MD5 (RFC 1321) of `data`, upper-case hex, as SLS's `Content-MD5` asks. */
export function md5Hex(data: Uint8Array): string {
  const n = data.length;
  const padded = new Uint8Array((((n + 8) >> 6) + 1) * 64);
  padded.set(data);
  padded[n] = 0x80;
  const bits = n * 8;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, bits >>> 0, true);
  view.setUint32(padded.length - 4, Math.floor(bits / 2 ** 32), true);
  let a0 = 0x67452301, b0 = 0xefcdab89, c0 = 0x98badcfe, d0 = 0x10325476;
  const m = new Uint32Array(16);
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) m[i] = view.getUint32(off + i * 4, true);
    let a = a0, b = b0, c = c0, d = d0;
    for (let i = 0; i < 64; i++) {
      let f: number;
      let g: number;
      if (i < 16) [f, g] = [(b & c) | (~b & d), i];
      else if (i < 32) [f, g] = [(d & b) | (~d & c), (5 * i + 1) % 16];
      else if (i < 48) [f, g] = [b ^ c ^ d, (3 * i + 5) % 16];
      else [f, g] = [c ^ (b | ~d), (7 * i) % 16];
      const s = S[(i >> 4) * 4 + (i % 4)]!;
      const sum = (a + f + K[i]! + m[g]!) >>> 0;
      a = d;
      d = c;
      c = b;
      b = (b + ((sum << s) | (sum >>> (32 - s)))) >>> 0;
    }
    a0 = (a0 + a) >>> 0;
    b0 = (b0 + b) >>> 0;
    c0 = (c0 + c) >>> 0;
    d0 = (d0 + d) >>> 0;
  }
  let hex = '';
  for (const w of [a0, b0, c0, d0]) {
    for (let i = 0; i < 4; i++) hex += ((w >>> (i * 8)) & 0xff).toString(16).padStart(2, '0');
  }
  return hex.toUpperCase();
}
