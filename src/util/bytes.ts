// Byte helpers for the stream paths that read or splice an answer's bytes without decoding them, and the
// small arrays those paths make per chunk.

const typedIndexOf = Uint8Array.prototype.indexOf;

/** The end of a chunk iterator: one result shared by every stream layer, never mutated. */
export const CHUNKS_DONE: IteratorResult<Uint8Array> = { done: true, value: undefined };

/**
 * The index of `byte` in `b` from `from`, or -1. Always the typed-array search: a Buffer's own `indexOf`
 * is a much slower JavaScript path on Deno, and upstream chunks arrive as Buffers there.
 */
export function indexOfByte(b: Uint8Array, byte: number, from = 0): number {
  return typedIndexOf.call(b, byte, from);
}

/** Whether `b` holds `prefix` at `at`. */
export function hasAt(b: Uint8Array, at: number, prefix: Uint8Array): boolean {
  if (at + prefix.length > b.length) return false;
  for (let i = 0; i < prefix.length; i++) if (b[at + i] !== prefix[i]) return false;
  return true;
}

// Small arrays are carved from shared slabs, as Node's Buffer pool does: an array of its own is an allocation
// of external memory, dear on Deno, on every chunk of every stream (docs/performance.md "The caller's model in
// streams, spliced as bytes"). A view keeps its slab alive, so only small arrays are pooled. Callers never
// transfer or detach what they get.
const SLAB_BYTES = 16 * 1024;
const MAX_POOLED = 2 * 1024;
let slab = new Uint8Array(SLAB_BYTES);
let used = 0;

/** `n` (≤ MAX_POOLED) free bytes at the slab's end, not yet taken. */
function room(n: number): Uint8Array {
  if (used + n > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES);
    used = 0;
  }
  return slab.subarray(used, used + n);
}

/** A new array of `n` bytes, pooled when small; its contents are not zeroed. */
function bytesOf(n: number): Uint8Array {
  if (n > MAX_POOLED) return new Uint8Array(n);
  const b = room(n);
  used += n;
  return b;
}

/** `parts` joined into one new array. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = bytesOf(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * `parts` joined into one array of its own (never pooled: a body or a whole answer is kept, sent or handed to a
 * `Blob`); `size`, when the caller counted it, saves a pass.
 */
export function joinBytes(parts: readonly Uint8Array[], size?: number): Uint8Array<ArrayBuffer> {
  let length = size ?? 0;
  if (size === undefined) { for (const p of parts) length += p.byteLength; }
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

const encoder = new TextEncoder();

/** `text` as UTF-8, pooled when small. */
export function encodeText(text: string): Uint8Array {
  if (text.length * 3 > MAX_POOLED) return encoder.encode(text);
  const b = room(text.length * 3);
  const { written } = encoder.encodeInto(text, b);
  used += written;
  return b.subarray(0, written);
}

/** Standard base64 of `bytes` (any length: the conversion goes in slices the call stack can take). */
export function base64Encode(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/** The bytes of standard base64 text; throws on text that is not base64. */
export function base64Decode(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
