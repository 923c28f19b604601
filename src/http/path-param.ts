// A route's `:param` as the caller wrote it (docs/endpoints.md "Path parameters and upstream bases"): a value
// whose percent-encoding does not decode (a stray `%`, an escape of bytes that are not UTF-8) is AISIX's 400,
// answered after authentication so an unauthenticated caller still gets its 401 first. Hono decodes a
// parameter leniently (a malformed one is handed over as it is), so the raw value is checked here.
import { errors, type ProxyError } from './errors.ts';

/** AISIX's refusal of a path parameter that cannot be extracted. */
export const invalidPathParam = (): ProxyError =>
  errors.badRequest('request payload is invalid: invalid path parameter');

/** The decoded value of a raw path segment, or the 400 when its percent-encoding is malformed. */
export function decodePathParam(raw: string): string | ProxyError {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return invalidPathParam();
  }
}

/**
 * The raw segments of `path` that a route `template` (`/v1/files/:id/content`) names as parameters, decoded,
 * or the 400 for the first malformed one; undefined when the path does not have the template's shape.
 */
export function pathParams(template: string, path: string): Record<string, string> | ProxyError | undefined {
  const names = template.split('/');
  const parts = path.split('/');
  if (names.length !== parts.length) return undefined;
  const out: Record<string, string> = {};
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    if (!name.startsWith(':')) {
      if (name !== parts[i]) return undefined;
      continue;
    }
    const v = decodePathParam(parts[i]!);
    if (typeof v !== 'string') return v;
    out[name.slice(1)] = v;
  }
  return out;
}
