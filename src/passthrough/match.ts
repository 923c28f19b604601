// Which passthrough route serves a request (docs/endpoints.md "Passthrough routes"), AISIX's matching: every
// dimension a route sets must match; a host match beats a path-only one, then the longer `path_prefix`, then
// the smaller id, so replicas agree. Pure.
import type { PassthroughRoute } from '../resources/passthrough-route-schema.ts';

/** A route and what of the path goes to its target. */
export interface MatchedRoute {
  route: PassthroughRoute;
  /** The path with the route's prefix taken off (a `target_url` mount), else the whole path. Empty or `/…`. */
  remainder: string;
  /** The prefix was taken off: the `/v1` de-duplication of target.ts applies. */
  mounted: boolean;
  /** The inbound host, when the request has one (a `preserve_host` route's target). */
  host: string | undefined;
}

/**
 * The request's host: `Host`, else the URL's authority; lower-cased, a `:port` of digits only removed (an IPv6
 * literal keeps its colons), a trailing dot removed.
 */
export function inboundHost(hostHeader: string | null, url: string): string | undefined {
  let h = hostHeader?.trim();
  if (!h) {
    try {
      h = new URL(url).host;
    } catch {
      return undefined;
    }
  }
  h = h.toLowerCase();
  const colon = h.lastIndexOf(':');
  if (colon >= 0 && /^\d+$/.test(h.slice(colon + 1)) && (!h.includes(']') || h.lastIndexOf(']') < colon)) {
    h = h.slice(0, colon);
  }
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h === '' ? undefined : h;
}

/** `*.x.y` matches exactly one more label; anything else matches itself (both lower-cased already). */
export function hostMatches(pattern: string, host: string): boolean {
  if (!pattern.startsWith('*.')) return pattern === host;
  const suffix = pattern.slice(1); // `.x.y`
  if (!host.endsWith(suffix)) return false;
  const label = host.slice(0, -suffix.length);
  return label !== '' && !label.includes('.');
}

/** `/copilot` covers `/copilot` and `/copilot/x`, never `/copilotx`. */
function underPrefix(path: string, prefix: string): boolean {
  return path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/');
}

function hostMatched(route: PassthroughRoute, host: string | undefined): boolean {
  return host !== undefined && (route.hosts ?? []).some((p) => hostMatches(p, host));
}

/** Whether an enabled route lists `host`: such a request is relayed whatever its path (before the typed routes). */
export function claimsHost(routes: readonly PassthroughRoute[], host: string | undefined): boolean {
  return host !== undefined && routes.some((r) => r.enabled && hostMatched(r, host));
}

interface Ranked {
  byHost: boolean;
  prefixLength: number;
  route: PassthroughRoute;
}

/** A host match first, then the longer prefix, then the smaller id. */
function ranksAbove(a: Ranked, b: Ranked): boolean {
  if (a.byHost !== b.byHost) return a.byHost;
  if (a.prefixLength !== b.prefixLength) return a.prefixLength > b.prefixLength;
  return a.route.id < b.route.id;
}

/** The route serving `host` and `path` (the raw, percent-encoded path), or undefined. */
export function matchRoute(
  routes: readonly PassthroughRoute[],
  host: string | undefined,
  path: string,
): MatchedRoute | undefined {
  let best: Ranked | undefined;
  for (const route of routes) {
    if (!route.enabled) continue;
    if (route.hosts === undefined && route.path_prefix === undefined) continue; // the schema refuses such a row
    const byHost = route.hosts !== undefined;
    if (byHost && !hostMatched(route, host)) continue;
    if (route.path_prefix !== undefined && !underPrefix(path, route.path_prefix)) continue;
    const prefixLength = route.path_prefix?.length ?? 0;
    const candidate = { byHost, prefixLength, route };
    if (!best || ranksAbove(candidate, best)) best = candidate;
  }
  if (!best) return undefined;
  // A `preserve_host` route mirrors an upstream's own paths: its prefix selects, it is not a mount.
  const mounted = best.prefixLength > 0 && best.route.preserve_host !== true;
  return {
    route: best.route,
    remainder: mounted ? path.slice(best.prefixLength) : path,
    mounted,
    host,
  };
}
