// A value as `JSON.stringify` writes it, for writers that build JSON text member by member (the log lines,
// the usage exporters' records): the same bytes, without building the object that holds the members.

/** A character `JSON.stringify` escapes in a string (a surrogate is tested whole, lone or not). */
// deno-lint-ignore no-control-regex
const JSON_ESCAPED = /["\\\x00-\x1f\ud800-\udfff]/;

/** `JSON.stringify(v)` for a member's value: undefined where it would leave the member out. */
export function jsonText(v: unknown): string | undefined {
  if (typeof v === 'string') return JSON_ESCAPED.test(v) ? JSON.stringify(v) : `"${v}"`;
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return JSON.stringify(v);
}
