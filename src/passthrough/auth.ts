// Who may use a passthrough route (docs/endpoints.md "Passthrough routes"): the api key its `auth_mode` found
// (src/proxy/passthrough.ts) must be granted the route by `allowed_routes`; `source_cidrs` gate the client.
import { ProxyError } from '../http/errors.ts';
import type { ApiKey } from '../resources/schema.ts';
import { globMatch } from '../resources/snapshot.ts';

/** Whether `key` may use the route: an `allowed_routes` glob names it (absent or empty: no route). */
export function routeAllowed(key: ApiKey, route: string): boolean {
  return (key.allowed_routes ?? []).some((p) => globMatch(p, route));
}

export const routeNotAllowed = (route: string) =>
  new ProxyError(403, 'permission_denied', `API key is not allowed to use passthrough route "${route}"`);

export const sourceRefused = () =>
  new ProxyError(
    403,
    'permission_denied',
    'Access denied: your client IP is not allowed to access this route',
    'ip_restricted',
  );
