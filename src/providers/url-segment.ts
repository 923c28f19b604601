// Values that travel in an upstream URL's path (a model id, a deployment, a project, a region, a tenant):
// each is checked as exactly one path segment of its provider's grammar, after decoding, then encoded, and
// the URL built from them is checked to still sit under the provider's fixed prefix. Every adapter builds
// its URLs through here (docs/security.md "Upstream URLs and credentials").
import { invalidConfig } from './failures.ts';
import type { ProviderResult } from './types.ts';

/** One kind of value and the grammar its provider gives it. */
export interface SegmentRule {
  /** What the operator or caller sets, in their words: `model id`, `api_key.region`. */
  field: string;
  /** The whole value must match (anchored). */
  grammar: RegExp;
  /** The grammar in words, for the refusal. */
  shape: string;
  /** The operator's value (a project, a tenant): the refusal does not repeat it to the caller. */
  quiet?: true;
}

/** Rounds of percent-decoding tried: a value still changing after this many is refused as it is. */
const MAX_DECODES = 4;

/** An escape of `.`, `/` or `\`: what WHATWG parsing, or a server that decodes once more, reads as a path step. */
const PATH_ESCAPE = /%(?:2e|2f|5c)/i;

/**
 * Why `value` cannot be one path segment under `grammar`, or undefined. WHATWG URL parsing reads `\` as `/`
 * and `%2e%2e` as `..`, and an upstream or a proxy in between may decode `%252f` once more, so every
 * decoding of the value is checked, not only the value. Pure.
 */
export function segmentProblem(value: string, grammar: RegExp): string | undefined {
  if (value === '') return 'is empty';
  let cur = value;
  for (let round = 0;; round++) {
    if (cur.includes('\\')) return 'holds a "\\" (URL parsers read it as "/")';
    if (PATH_ESCAPE.test(cur)) return 'holds a percent-escape of ".", "/" or "\\"';
    if (cur.includes('..')) return 'holds ".."';
    if (cur === '.') return 'is "."';
    if (!cur.includes('%')) break;
    if (round === MAX_DECODES) return 'holds percent-escapes nested too deep';
    let next: string;
    try {
      next = decodeURIComponent(cur);
    } catch {
      return 'holds a "%" that is not an escape';
    }
    if (next === cur) break;
    cur = next;
  }
  return grammar.test(value) ? undefined : 'is outside the grammar';
}

/** `value` as one path segment: percent-encoded, but for `@`, which a path segment may hold as it is. */
export function encodeSegment(value: string): string {
  return encodeURIComponent(value).replace(/%40/g, '@');
}

/** A value shortened for an error message (a caller's model name can be long). */
function shown(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}

/**
 * `value` checked under `rule` and encoded as one path segment, or the 400 that refuses the call (nothing
 * is sent) naming the field.
 */
export function pathSegment(provider: string, rule: SegmentRule, value: string): string | ProviderResult {
  const problem = segmentProblem(value, rule.grammar);
  if (!problem) return encodeSegment(value);
  const what = rule.quiet ? rule.field : `${rule.field} ${shown(value)}`;
  return invalidConfig(`${provider} ${what} ${problem}; it must be ${rule.shape}`);
}

/**
 * `base` + `prefix` + `rest` as it is sent, or the 400 that refuses the call (nothing is sent) when URL
 * parsing would change it: another origin, or a path or query other than the one built. `prefix` is the
 * provider's fixed part, `rest` the encoded segments and what follows them. The last guard after
 * `pathSegment`: a value that slipped through still cannot change where the credential goes. The refusal
 * names no part of the URL (it can hold a project or a resource name).
 */
export function urlUnder(provider: string, base: string, prefix: string, rest: string): string | ProviderResult {
  const text = `${base.replace(/\/+$/, '')}${prefix}${rest}`;
  const refused = invalidConfig(`${provider} upstream URL would not stay under its fixed prefix`);
  let built: URL;
  let root: URL;
  try {
    built = new URL(text);
    root = new URL(base);
  } catch {
    return refused;
  }
  const expected = `${root.pathname.replace(/\/+$/, '')}${prefix}${rest}`;
  if (built.origin !== root.origin || `${built.pathname}${built.search}` !== expected) return refused;
  return text;
}
