// The caller's address, for `allowed_cidrs` (a model's client-IP allowlist) and `hash_on: client_ip`: the
// connection's peer, or — when `proxy.real_ip.trusted_proxies` is set and the peer is one of them — the
// address found in the forwarded header, as nginx's `set_real_ip_from` + `real_ip_recursive` (and AISIX)
// resolve it:
//   - an untrusted peer IS the client (the header is ignored);
//   - recursive: walk the header right to left, the first untrusted address is the client; every entry
//     trusted (or none) → the leftmost entry, else the peer;
//   - not recursive: the rightmost entry, else the peer.
// Every instance of the header counts, in order, so an extra spoofed field cannot hide entries; tokens that
// are not addresses are skipped; `:port` and `[v6]:port` are stripped.
import type { Config } from '../config/schema.ts';
import { type Cidr, cidrContains, type Ip, parseCidr, parseIp, stripPort } from '../util/cidr.ts';

type RealIp = Config['proxy']['real_ip'];

function formatIp(ip: Ip, original: string): string {
  return ip.v6 ? original : original.includes(':') ? v4String(ip.n) : original;
}

function v4String(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
}

/** One forwarded-header token as an address: bare, `[v6]`, `[v6]:port` or `v4:port`. */
function token(t: string): { ip: Ip; text: string } | undefined {
  if (t === '') return undefined;
  let text = t;
  if (t.startsWith('[')) text = t.slice(1, t.indexOf(']') < 0 ? t.length : t.indexOf(']'));
  else if ((t.match(/:/g) ?? []).length === 1) text = t.slice(0, t.indexOf(':'));
  const ip = parseIp(text);
  return ip ? { ip, text } : undefined;
}

/** Distinct peers remembered; past this the cache starts over (a scan of many ports cannot grow it). */
const PEER_CACHE_SIZE = 4096;

/** `(peer, headers) → client address` under `proxy.real_ip`; undefined when the peer is unknown. */
export function clientIpResolver(cfg: RealIp): (peer: string | undefined, headers: Headers) => string | undefined {
  const trusted: Cidr[] = cfg.trusted_proxies.map((c) => parseCidr(c)).filter((c): c is Cidr => c !== undefined);
  // A peer's address is a pure function of its `host:port` string, and a gateway sees few distinct peers
  // (pooled connections): parsing it (BigInt arithmetic) once per connection instead of once per request.
  const seen = new Map<string, string>();
  const peerAddress = (peer: string | undefined): string | undefined => {
    if (!peer) return undefined;
    let address = seen.get(peer);
    if (address === undefined) {
      const text = stripPort(peer);
      const ip = parseIp(text);
      address = ip ? formatIp(ip, text) : text;
      if (seen.size >= PEER_CACHE_SIZE) seen.clear();
      seen.set(peer, address);
    }
    return address;
  };
  if (trusted.length === 0) return peerAddress;
  const isTrusted = (ip: Ip) => trusted.some((c) => cidrContains(c, ip));
  return (peer, headers) => {
    const text = peer ? stripPort(peer) : undefined;
    const ip = text ? parseIp(text) : undefined;
    if (!ip || !text) return peerAddress(peer);
    if (!isTrusted(ip)) return formatIp(ip, text);
    // Headers.get joins repeated fields with ", " in arrival order.
    const raw = headers.get(cfg.header) ?? '';
    const list = raw.split(',').map((t) => token(t.trim())).filter((x) => x !== undefined);
    let chosen: { ip: Ip; text: string } | undefined;
    if (cfg.recursive) {
      for (let i = list.length - 1; i >= 0 && !chosen; i--) if (!isTrusted(list[i]!.ip)) chosen = list[i];
      chosen ??= list[0];
    } else chosen = list[list.length - 1];
    return chosen ? formatIp(chosen.ip, chosen.text) : formatIp(ip, text);
  };
}
