// `kind: semantic`, AISIX's local-model kind (docs/guardrails.md "semantic"), without its model: per
// category, candidate patterns find spans; hotword groups near a span raise its score and negative patterns
// lower it; a score of 2 or more masks, -1 or less releases. The band between is the embedding model's in
// AISIX; Sluice loads no model, so a span there is released and counted as AISIX counts a span its failed
// engine could not judge; a row that asks for the model is refused.
import type { Built } from './keyword.ts';
import { maskToken } from './pii.ts';
import { compilePattern, type Pattern } from './regex.ts';
import type { SemanticRow } from './schema.ts';
import { ALLOW, type CheckContext, type Hook, type Outcome, type Segment } from './types.ts';

/** Characters each side of a span where hotwords count (AISIX's window, also its model's context). */
const PROXIMITY = 50;
/** A hotword this close to the span (characters between) is decisive evidence. */
const ADJACENT_GAP = 8;
const ADJACENT_SCORE = 2;
const WINDOW_SCORE = 1;
const NEGATIVE_SCORE = -4;
export const MASK_SCORE = 2;
export const PASS_SCORE = -1;
/** A candidate longer than this (UTF-8 bytes) is not a span; past this many spans a text's tail is released. */
const MAX_SPAN_BYTES = 64;
const MAX_SPANS = 4096;

const WORD_CLASS = '[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]';
const WORD = /[\p{L}\p{M}\p{Nd}\p{Pc}]/u;

interface Group {
  substrings: string[];
  words: RegExp[];
}
interface Negative {
  re: Pattern;
  /** `$`-anchored: also tried on the text before the span; `^`-anchored: on the text after it. */
  prefix: boolean;
  suffix: boolean;
}
interface Category {
  name: string;
  token: string;
  candidates: Pattern[];
  groups: Group[];
  negatives: Negative[];
  /**
   * Whether a span of this category has reached the model band since the row was built: AISIX then finds its
   * engine unavailable once (`engine_failed`) and the category's description unembeddable on every span.
   */
  engineTried: boolean;
}
export interface Span {
  start: number;
  end: number;
}

export type SemanticCheck = (segments: readonly Segment[], hook: Hook, ctx?: CheckContext) => Outcome;

export function buildSemantic(row: SemanticRow): Built<SemanticCheck> {
  if (!row.fail_open) return { ok: false, error: 'fail_open: must be true for kind semantic (it masks, never blocks)' };
  const names = new Set<string>();
  const categories: Category[] = [];
  for (let i = 0; i < row.categories.length; i++) {
    const c = row.categories[i]!;
    const at = `categories[${i}]`;
    if (names.has(c.name)) return { ok: false, error: `${at}.name: "${c.name}" is used by an earlier category` };
    names.add(c.name);
    if (c.threshold !== undefined) {
      return {
        ok: false,
        error: `${at}.threshold: sets the embedding model's similarity threshold, but Sluice loads no guardrail ` +
          'model on any runtime (Node, Bun, Deno or Workers) and never downloads one; remove threshold to run ' +
          "the category's rule layer only (spans the rules cannot decide are released)",
      };
    }
    const candidates: Pattern[] = [];
    for (let j = 0; j < c.candidate_patterns.length; j++) {
      const p = compilePattern(c.candidate_patterns[j]!);
      if (!p.ok) return { ok: false, error: `${at}.candidate_patterns[${j}]: invalid regex: ${p.error}` };
      candidates.push(p.pattern);
    }
    const negatives: Negative[] = [];
    for (let j = 0; j < c.negative_patterns.length; j++) {
      const src = c.negative_patterns[j]!;
      const p = compilePattern(src);
      if (!p.ok) return { ok: false, error: `${at}.negative_patterns[${j}]: invalid regex: ${p.error}` };
      negatives.push({ re: p.pattern, prefix: src.endsWith('$'), suffix: src.startsWith('^') });
    }
    categories.push({
      name: c.name,
      token: c.replacement ?? maskToken(c.name),
      candidates,
      negatives,
      groups: c.hotword_groups.map((g) => groupOf(g.terms)),
      engineTried: false,
    });
  }
  return {
    ok: true,
    value: (segments, _hook, ctx) => {
      const counts: Record<string, number> = {};
      let changed = false;
      const texts = segments.map((s) => {
        let t = s.text;
        for (const c of categories) {
          const spans: Span[] = [];
          for (const sp of candidateSpans(c, t)) {
            const n = score(c, t, sp);
            if (n >= MASK_SCORE) spans.push(sp);
            else if (n > PASS_SCORE) modelBand(c, ctx);
          }
          if (spans.length === 0) continue;
          t = rewrite(t, spans, c.token);
          counts[c.name] = (counts[c.name] ?? 0) + spans.length;
          changed = true;
        }
        return t;
      });
      return changed ? { kind: 'mask', texts, counts } : ALLOW;
    },
  };
}

/** A span only the model could decide: released, and counted as AISIX counts it with no engine. */
function modelBand(c: Category, ctx: CheckContext | undefined): void {
  if (!c.engineTried) {
    c.engineTried = true;
    ctx?.degraded?.('engine_failed');
  }
  ctx?.degraded?.('prototype_unavailable');
}

/**
 * Non-ASCII terms match as substrings (CJK has no word boundaries); ASCII ones case-insensitively on
 * Unicode word boundaries, running on into a digit (`INNOVUS211`).
 */
function groupOf(terms: readonly string[]): Group {
  const g: Group = { substrings: [], words: [] };
  for (const t of terms) {
    if (t === '') continue;
    // deno-lint-ignore no-control-regex
    if (!/^[\x00-\x7f]*$/.test(t)) {
      g.substrings.push(t);
      continue;
    }
    const escaped = t.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
    const left = WORD.test(t[0]!) ? `(?<!${WORD_CLASS})` : `(?<=${WORD_CLASS})`;
    const right = WORD.test(t[t.length - 1]!) ? `(?:[0-9]|(?!${WORD_CLASS}))` : `(?:[0-9]|(?=${WORD_CLASS}))`;
    g.words.push(new RegExp(`${left}${escaped}${right}`, 'giu'));
  }
  return g;
}

/** The category's spans in `text`: leftmost first, overlaps dropped, long ones skipped, at most 4096. */
export function candidateSpans(c: Pick<Category, 'candidates'>, text: string): Span[] {
  const all: Span[] = [];
  for (const p of c.candidates) {
    if (!p.test(text)) continue;
    for (const m of p.matches(text)) if (m.end > m.start) all.push({ start: m.start, end: m.end });
  }
  all.sort((a, b) => a.start - b.start || b.end - a.end);
  const out: Span[] = [];
  let last = -1;
  for (const s of all) {
    if (s.start < last) continue;
    last = s.end;
    if (utf8Length(text.slice(s.start, s.end)) > MAX_SPAN_BYTES) continue;
    out.push(s);
    if (out.length === MAX_SPANS) break;
  }
  return out;
}

/** The rule score of one span (AISIX's layer ②). */
export function score(c: Pick<Category, 'groups' | 'negatives'>, text: string, span: Span): number {
  const wStart = back(text, span.start, PROXIMITY);
  const wEnd = forward(text, span.end, PROXIMITY);
  const win = text.slice(wStart, wEnd);
  // A word match flush with a clipped window edge may be half a word (`conversion` cut to `version`).
  const clippedStart = wStart > 0;
  const clippedEnd = wEnd < text.length;
  let adjacentGroups = 0;
  let windowOnly = false;
  for (const g of c.groups) {
    let any = false;
    let adjacent = false;
    const seen = (start: number, end: number) => {
      any = true;
      if (gap(text, span, start + wStart, end + wStart) <= ADJACENT_GAP) adjacent = true;
    };
    for (const term of g.substrings) {
      for (let i = win.indexOf(term); i >= 0 && !adjacent; i = win.indexOf(term, i + 1)) seen(i, i + term.length);
    }
    for (const re of g.words) {
      if (adjacent) break;
      for (const m of win.matchAll(re)) {
        const end = m.index + m[0].length;
        if ((clippedStart && m.index === 0) || (clippedEnd && end === win.length)) continue;
        seen(m.index, end);
        if (adjacent) break;
      }
    }
    if (adjacent) adjacentGroups++;
    else if (any) windowOnly = true;
  }
  let total = adjacentGroups * ADJACENT_SCORE;
  if (adjacentGroups === 0 && windowOnly) total += WINDOW_SCORE;
  for (const n of c.negatives) {
    const hit = n.re.test(text.slice(span.start, span.end)) ||
      (n.prefix && n.re.test(text.slice(0, span.start))) ||
      (n.suffix && n.re.test(text.slice(span.end)));
    if (hit) total += NEGATIVE_SCORE;
  }
  return total;
}

/** Characters (code points) between a hotword at `[start, end)` and the span; 0 when they touch or overlap. */
function gap(text: string, span: Span, start: number, end: number): number {
  if (end <= span.start) return codePoints(text.slice(end, span.start));
  if (start >= span.end) return codePoints(text.slice(span.end, start));
  return 0;
}

function back(text: string, i: number, n: number): number {
  while (n-- > 0 && i > 0) i -= isLowSurrogate(text, i - 1) && i > 1 ? 2 : 1;
  return i;
}

function forward(text: string, i: number, n: number): number {
  while (n-- > 0 && i < text.length) i += isHighSurrogate(text, i) && i + 1 < text.length ? 2 : 1;
  return i;
}

function isHighSurrogate(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return c >= 0xdc00 && c <= 0xdfff;
}

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

function rewrite(text: string, spans: readonly Span[], token: string): string {
  let out = '';
  let at = 0;
  for (const s of spans) {
    out += text.slice(at, s.start) + token;
    at = s.end;
  }
  return out + text.slice(at);
}
