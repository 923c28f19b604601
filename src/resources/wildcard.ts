// Wildcard models (docs/routing.md "Wildcard models"): a direct model whose `display_name` holds exactly one `*`
// serves every name the glob covers, as that one row. Here because the snapshot's index uses it and
// src/resources imports nothing above it; the request path reaches it through `Snapshot.resolveModel`.

/** One wildcard row, split at its `*`. */
export interface WildcardRow<M> {
  readonly prefix: string;
  readonly suffix: string;
  /** The pattern's literal length in UTF-8 bytes (AISIX's specificity): the most specific row wins. */
  readonly specificity: number;
  readonly model: M;
}

const utf8 = new TextEncoder();

/** Whether `name` is a single-`*` pattern (a name with two or more is a plain name, as in AISIX). */
export function isWildcardName(name: string): boolean {
  const star = name.indexOf('*');
  return star >= 0 && name.indexOf('*', star + 1) < 0;
}

/**
 * The row `m` makes, when it is one: a direct model (a routing model has no upstream id to fill) whose name has
 * one `*`.
 */
export function wildcardRow<M extends { kind: string; display_name: string }>(m: M): WildcardRow<M> | undefined {
  if (m.kind !== 'direct' || !isWildcardName(m.display_name)) return undefined;
  const star = m.display_name.indexOf('*');
  const prefix = m.display_name.slice(0, star);
  const suffix = m.display_name.slice(star + 1);
  return { prefix, suffix, specificity: utf8.encode(prefix + suffix).length, model: m };
}

/** Most specific first; equally specific rows keep the source's order (the first wins). */
export function rankWildcards<M>(rows: WildcardRow<M>[]): WildcardRow<M>[] {
  return rows.sort((a, b) => b.specificity - a.specificity);
}

/** What the `*` binds in `name` (possibly empty), or undefined when the row does not cover `name`. */
export function captureOf(row: WildcardRow<unknown>, name: string): string | undefined {
  const { prefix, suffix } = row;
  if (name.length < prefix.length + suffix.length || !name.startsWith(prefix) || !name.endsWith(suffix)) {
    return undefined;
  }
  return name.slice(prefix.length, name.length - suffix.length);
}

/**
 * The upstream id for a hit: the capture in the first `*` of `model_name`; a `model_name` without `*` as it is
 * (one upstream for every name). A row written without `model_name` reads `*` (the capture itself).
 */
export function upstreamModelOf(template: string, capture: string): string {
  const star = template.indexOf('*');
  return star < 0 ? template : template.slice(0, star) + capture + template.slice(star + 1);
}
