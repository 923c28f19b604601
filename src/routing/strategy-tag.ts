// Tag routing (docs/routing.md "Tag routing"): which of a routing model's targets a request's tags make
// eligible, before `allowed_cidrs`, health and the strategy see them. Pure; the admit step refuses a request no
// target is eligible for, and dispatch planning keeps only the eligible targets.
import type { RoutingTarget } from '../resources/schema.ts';
import type { HeaderReader } from './strategies.ts';

/** The request header that carries the caller's routing tags (AISIX's; never sent upstream). */
export const ROUTING_TAGS_HEADER = 'x-aisix-routing-tags';

/** The tag a target carries to be chosen when the request's tags match no target, or it sent none. */
export const DEFAULT_TAG = 'default';

/** The request's tags: the header split on `,`, each trimmed, empty ones dropped; compared exactly. */
export function requestTags(headers: HeaderReader | undefined): string[] {
  const raw = headers?.get(ROUTING_TAGS_HEADER);
  if (!raw) return [];
  return raw.split(',').map((t) => t.trim()).filter((t) => t !== '');
}

/** Whether any target carries a tag: when none does, every target is eligible and the request's tags are not read. */
export function anyTagged(targets: readonly Pick<RoutingTarget, 'tags'>[]): boolean {
  for (const t of targets) if ((t.tags?.length ?? 0) > 0) return true;
  return false;
}

/**
 * AISIX's eligibility: no target tagged → every target; tags sent → the targets sharing one, else the
 * `default`-tagged ones; no tags sent → the `default`-tagged ones, else every target. An empty result means the
 * request is refused (`noTagMatch`).
 */
export function tagEligible<T extends Pick<RoutingTarget, 'tags'>>(
  targets: readonly T[],
  tags: readonly string[],
): T[] {
  if (!targets.some((t) => (t.tags?.length ?? 0) > 0)) return [...targets];
  const defaults = targets.filter((t) => t.tags?.includes(DEFAULT_TAG) === true);
  if (tags.length === 0) return defaults.length > 0 ? defaults : [...targets];
  const matching = targets.filter((t) => t.tags?.some((x) => tags.includes(x)) === true);
  return matching.length > 0 ? matching : defaults;
}

/** AISIX's 400 message, the request's tags written as Rust's `{:?}` writes a list of strings. */
export function noTagMatch(tags: readonly string[]): string {
  return `request payload is invalid: no routing target matches request tags [${tags.map(rustDebug).join(', ')}]`;
}

/** A string as Rust's `Debug` quotes it: `"`, `\` and the usual control characters escaped. */
function rustDebug(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\u{${code.toString(16)}}`;
    else out += ch;
  }
  return `${out}"`;
}
