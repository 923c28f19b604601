// IPv4/IPv6 addresses and CIDR blocks as bigints, for `allowed_cidrs` and `proxy.real_ip.trusted_proxies`.
// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, what a dual-stack listener reports) is read as its IPv4.

export interface Ip {
  v6: boolean;
  n: bigint;
}

export interface Cidr {
  v6: boolean;
  net: bigint;
  bits: number;
}

function parseV4(s: string): bigint | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = (n << 8n) | BigInt(v);
  }
  return n;
}

function parseV6(s: string): bigint | undefined {
  let text = s;
  let tail: bigint[] = [];
  // A trailing dotted quad: the last 32 bits.
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const v4 = parseV4(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    tail = [v4 >> 16n, v4 & 0xffffn];
    const prefix = text.slice(0, lastColon + 1);
    text = prefix.endsWith('::') ? prefix : prefix.slice(0, -1);
    if (text === '') return undefined;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const group = (g: string): bigint | undefined => (/^[0-9a-fA-F]{1,4}$/.test(g) ? BigInt(`0x${g}`) : undefined);
  const read = (h: string): bigint[] | undefined => {
    if (h === '') return [];
    const out: bigint[] = [];
    for (const g of h.split(':')) {
      const v = group(g);
      if (v === undefined) return undefined;
      out.push(v);
    }
    return out;
  };
  const head = read(halves[0]!);
  const rest = halves.length === 2 ? read(halves[1]!) : [];
  if (!head || !rest) return undefined;
  const given = head.length + rest.length + tail.length;
  let groups: bigint[];
  if (halves.length === 2) {
    if (given > 7) return undefined;
    groups = [...head, ...new Array<bigint>(8 - given).fill(0n), ...rest, ...tail];
  } else {
    if (given !== 8) return undefined;
    groups = [...head, ...tail];
  }
  return groups.reduce((n, g) => (n << 16n) | g, 0n);
}

const MAPPED_PREFIX = 0xffffn << 32n;

/** An IP address (v4, v6, `[v6]`, with an optional `%zone`), or undefined. */
export function parseIp(input: string): Ip | undefined {
  let s = input.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (!s.includes(':')) {
    const n = parseV4(s);
    return n === undefined ? undefined : { v6: false, n };
  }
  const n = parseV6(s);
  if (n === undefined) return undefined;
  if (n >> 32n === 0xffffn && (n & ~0xffffffffn) === MAPPED_PREFIX) return { v6: false, n: n & 0xffffffffn };
  return { v6: true, n };
}

/** `a.b.c.d/n`, `v6/n`, or a bare address (a /32 or /128). */
export function parseCidr(input: string): Cidr | undefined {
  const s = input.trim();
  const slash = s.indexOf('/');
  const ip = parseIp(slash < 0 ? s : s.slice(0, slash));
  if (!ip) return undefined;
  const max = ip.v6 ? 128 : 32;
  let bits = max;
  if (slash >= 0) {
    const b = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(b) || Number(b) > max) return undefined;
    bits = Number(b);
  }
  const shift = BigInt(max - bits);
  return { v6: ip.v6, net: (ip.n >> shift) << shift, bits };
}

export function cidrContains(c: Cidr, ip: Ip): boolean {
  if (c.v6 !== ip.v6) return false;
  const shift = BigInt((c.v6 ? 128 : 32) - c.bits);
  return (ip.n >> shift) << shift === c.net;
}

/** The address part of a `host:port` / `[v6]:port` / bare address peer string. */
export function stripPort(peer: string): string {
  const s = peer.trim();
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    return end > 0 ? s.slice(1, end) : s;
  }
  const colons = s.split(':').length - 1;
  if (colons === 1) return s.slice(0, s.indexOf(':'));
  return s; // bare v4, or bare v6 (several colons)
}

/** Parsed `allowed_cidrs` lists, per (snapshot-owned, immutable) array. */
const parsedLists = new WeakMap<readonly string[], Cidr[]>();

/**
 * Whether `ip` may use a model with this `allowed_cidrs`: absent or empty lets everyone in; an address that
 * is unknown or not an IP is refused (never fail open); an entry that is not a CIDR matches nothing.
 */
export function ipAllowed(allowed: readonly string[] | undefined, ip: string | undefined): boolean {
  if (!allowed || allowed.length === 0) return true;
  const addr = ip === undefined ? undefined : parseIp(ip);
  if (!addr) return false;
  let list = parsedLists.get(allowed);
  if (!list) {
    list = allowed.map((c) => parseCidr(c)).filter((c): c is Cidr => c !== undefined);
    parsedLists.set(allowed, list);
  }
  return list.some((c) => cidrContains(c, addr));
}
