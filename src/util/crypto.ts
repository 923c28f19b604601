// Hashing through Web Crypto, which every runtime (Node, Bun, Deno, Workers) provides as `crypto.subtle`.

const encoder = new TextEncoder();

function toHex(buf: ArrayBuffer): string {
  const bytes = new Uint8Array(buf);
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += bytes[i]!.toString(16).padStart(2, '0');
  return out;
}

export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === 'string' ? encoder.encode(data) : data;
  return toHex(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}

/** Fixed namespace for Sluice's deterministic resource ids (UUIDv5 of `<kind>/<identity>`). */
export const RESOURCE_ID_NAMESPACE = '6f1c3a52-9d0e-5b7a-8c41-2e5f0d9b7a13';

/** RFC 9562 UUID version 5 (SHA-1, name-based). */
export async function uuidV5(name: string, namespace = RESOURCE_ID_NAMESPACE): Promise<string> {
  const ns = namespace.replace(/-/g, '');
  const nsBytes = new Uint8Array(16);
  for (let i = 0; i < 16; i++) nsBytes[i] = parseInt(ns.slice(i * 2, i * 2 + 2), 16);
  const nameBytes = encoder.encode(name);
  const input = new Uint8Array(16 + nameBytes.length);
  input.set(nsBytes, 0);
  input.set(nameBytes, 16);
  const hash = new Uint8Array(await crypto.subtle.digest('SHA-1', input));
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = toHex(hash.slice(0, 16).buffer);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** JSON with object keys sorted and no whitespace: the canonical form hashed in etcd mode (docs/etcd.md). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}
