// Where a passthrough request goes (docs/endpoints.md "Passthrough routes"): the route's `target_url` (or
// `https://<inbound host>` for `preserve_host`) joined with the path's remainder and the caller's raw query,
// AISIX's rules. The URL is then checked to stay on the target's origin and under its path, so no remainder
// (`%2e%2e`, a backslash) takes the injected credential elsewhere.
import type { MatchedRoute } from './match.ts';

/** The URL to send to, or why none can be built (the caller's 400). */
export function targetUrl(m: MatchedRoute, rawQuery: string): { url: string } | { refused: string } {
  const base = m.route.preserve_host ? (m.host ? `https://${m.host}` : undefined) : m.route.target_url;
  if (base === undefined) {
    return { refused: `passthrough route "${m.route.name}" preserves the host but the request carries none` };
  }
  const root = base.replace(/\/+$/, '');
  let rest = m.remainder.replace(/^\/+/, '');
  // A mount whose target ends in `/vN` drops a leading `vN` of the remainder once (`/v2` never eats `v1/`).
  const version = m.mounted ? /\/(v\d+)$/.exec(root)?.[1] : undefined;
  if (version !== undefined && (rest === version || rest.startsWith(`${version}/`))) {
    rest = rest.slice(version.length).replace(/^\//, '');
  }
  const path = rest === '' ? root : `${root}/${rest}`;
  const text = rawQuery === '' ? path : `${path}?${rawQuery}`;
  return stays(root, text) ? { url: text } : {
    refused: `passthrough route "${m.route.name}": the request path would leave the route's target`,
  };
}

/** Whether URL parsing keeps `text` as written: the origin of `root`, the path and query unchanged. */
function stays(root: string, text: string): boolean {
  let built: URL;
  let base: URL;
  try {
    built = new URL(text);
    base = new URL(root);
  } catch {
    return false;
  }
  const written = text.slice(root.length);
  if (written !== '' && !written.startsWith('/') && !written.startsWith('?')) return false;
  let expected = `${base.pathname.replace(/\/+$/, '')}${written}`;
  if (!expected.startsWith('/')) expected = `/${expected}`; // a bare host's path is `/`
  return built.origin === base.origin && `${built.pathname}${built.search}` === expected;
}
