// Hashing through Web Crypto, which every runtime (Node, Bun, Deno, Workers) provides as `crypto.subtle`, or
// through the platform's native hasher where a request hashes a short text and has one; the ids' SHA-1 through
// @noble/hashes, synchronous and pure JavaScript.

import { sha1 } from '@noble/hashes/legacy.js';

const encoder = new TextEncoder();
/** Each byte's two hex digits. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

function toHex(buf: ArrayBuffer): string {
  return hexOf(new Uint8Array(buf));
}

/** Lowercase hex of `bytes`, two digits a byte. */
export function hexOf(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i]!];
  return out;
}

/** An incremental SHA-256 (`Platform.sha256Stream`, @noble/hashes' `sha256.create()`). */
export interface Sha256Stream {
  update(bytes: Uint8Array): void;
  /** The 32 bytes of the digest; the stream is spent. */
  digest(): Uint8Array;
}

/**
 * The SHA-256 hex of `text`: synchronously through `native` (the platform's hasher) when given, else Web Crypto's.
 * For a short text hashed on the request path, where Web Crypto's `digest` cost tens of microseconds of CPU per
 * call on Node, Bun and Deno (docs/performance.md "The cache's fingerprints").
 */
export function sha256HexOf(text: string, native: (() => Sha256Stream) | undefined): string | Promise<string> {
  if (!native) return sha256Hex(text);
  const h = native();
  h.update(encoder.encode(text));
  return hexOf(h.digest());
}

export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === 'string' ? encoder.encode(data) : data;
  return toHex(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}

/** Fixed namespace for Sluice's deterministic resource ids (UUIDv5 of `<kind>/<identity>`). */
export const RESOURCE_ID_NAMESPACE = '6f1c3a52-9d0e-5b7a-8c41-2e5f0d9b7a13';

const uuidBytes = (uuid: string): Uint8Array => {
  const hex = uuid.replace(/-/g, '');
  const out = new Uint8Array(16);
  for (let i = 0; i < 16; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
};
const DEFAULT_NAMESPACE = uuidBytes(RESOURCE_ID_NAMESPACE);

/** Room for the namespace and a name of up to 496 bytes; longer names get an array of their own. */
const SCRATCH = new Uint8Array(512);
const SCRATCH_NAME = SCRATCH.subarray(16);
const DIGITS = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
/**
 * A SHA-1 hasher in its initial state, copied into `HASHER` before each id (noble's `_cloneInto`, what its
 * `clone()` is made of), and the digest's bytes: an id makes no hasher, buffer or view of its own, and a load
 * derives one id per row (docs/performance.md "Configuration at scale").
 */
const PRISTINE = sha1.create();
const HASHER = sha1.create();
const DIGEST = new Uint8Array(20);
/** Where each of the 16 bytes' two hex digits go in the 36 characters; the rest are dashes. */
const SLOTS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
/** The id being formatted, as character codes: one buffer serves every call, since uuidV5 never yields. */
const CODES = new Array<number>(36).fill(45);

/**
 * RFC 9562 UUID version 5 (SHA-1, name-based). Synchronous and with few allocations: a reload derives one
 * per row, and Web Crypto's promise per digest cost more than the digest (docs/performance.md "Reloads under a
 * steady request stream").
 */
export function uuidV5(name: string, namespace = RESOURCE_ID_NAMESPACE): string {
  const ns = namespace === RESOURCE_ID_NAMESPACE ? DEFAULT_NAMESPACE : uuidBytes(namespace);
  let input: Uint8Array;
  const { read, written } = encoder.encodeInto(name, SCRATCH_NAME);
  if (read === name.length) {
    SCRATCH.set(ns, 0);
    input = SCRATCH.subarray(0, 16 + written);
  } else {
    const nameBytes = encoder.encode(name);
    input = new Uint8Array(16 + nameBytes.length);
    input.set(ns, 0);
    input.set(nameBytes, 16);
  }
  PRISTINE._cloneInto(HASHER);
  HASHER.update(input).digestInto(DIGEST);
  DIGEST[6] = (DIGEST[6]! & 0x0f) | 0x50;
  DIGEST[8] = (DIGEST[8]! & 0x3f) | 0x80;
  for (let i = 0; i < 16; i++) {
    CODES[SLOTS[i]!] = DIGITS[DIGEST[i]! >> 4]!;
    CODES[SLOTS[i]! + 1] = DIGITS[DIGEST[i]! & 15]!;
  }
  return String.fromCharCode.apply(null, CODES);
}

/** JSON with object keys sorted and no whitespace: the canonical form hashed in etcd mode (docs/etcd.md). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}
