// AISIX's patterns are Rust `regex` syntax; Sluice runs them on re2js, a linear-time engine (no catastrophic
// backtracking on any pattern or prompt). docs/guardrails.md "Patterns" says what is translated and what is
// refused. RE2's syntax is Rust's except where Rust is Unicode-aware and RE2 is ASCII (`\d`, `\w`, `\s`,
// `\b`), and the class set operations and flags RE2 lacks.
import { RE2JS } from 're2js';

/** A compiled pattern: unanchored search, UTF-16 indices. */
export interface Pattern {
  readonly source: string;
  /** The pattern has a capture group (masks and validators then use group 1 only). */
  readonly hasGroup: boolean;
  /** Whether the pattern matches anywhere in `text`. */
  test(text: string): boolean;
  /** Every non-overlapping match, leftmost-first: `[start, end)` of the whole match and of group 1. */
  matches(text: string): Match[];
}

export interface Match {
  start: number;
  end: number;
  /** Group 1's span, when the pattern has a group (undefined: the group did not take part). */
  group?: { start: number; end: number } | undefined;
  hasGroup: boolean;
}

export type Compiled = { ok: true; pattern: Pattern } | { ok: false; error: string };

// Rust's Unicode classes in RE2 syntax (`\w` = alphabetic, marks, decimal digits, connector punctuation).
const WORD = '\\p{L}\\p{M}\\p{Nd}\\p{Pc}';
const SPACE =
  '\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}';
const OUTSIDE: Record<string, string> = {
  d: '\\p{Nd}',
  D: '\\P{Nd}',
  w: `[${WORD}]`,
  W: `[^${WORD}]`,
  s: `[${SPACE}]`,
  S: `[^${SPACE}]`,
};
const INSIDE: Record<string, string> = { d: '\\p{Nd}', D: '\\P{Nd}', w: WORD, s: SPACE };

const UNICODE_WORD = /[\p{L}\p{M}\p{Nd}\p{Pc}]/u;

/**
 * Rust syntax → RE2 syntax, or the reason it is refused. Walks the pattern once, tracking escapes and
 * character classes.
 */
export function translate(src: string): { ok: true; source: string } | { ok: false; error: string } {
  let out = '';
  let depth = 0; // character class nesting
  let classStart = false; // just after `[` or `[^` (a `]` there is literal)
  for (let i = 0; i < src.length; i++) {
    const ch = src[i]!;
    if (ch === '\\') {
      const next = src[i + 1];
      if (next === undefined) return { ok: false, error: 'trailing backslash' };
      i++;
      classStart = false;
      const table = depth > 0 ? INSIDE : OUTSIDE;
      const mapped = table[next];
      if (mapped !== undefined) out += mapped;
      else if (next >= '1' && next <= '9') {
        return { ok: false, error: 'backreferences are not supported (Rust regex has none either)' };
      } else if (depth > 0 && (next === 'W' || next === 'S')) {
        return { ok: false, error: `\\${next} inside a character class is not supported (write the class out)` };
      } else if (next === 'b' && depth === 0 && src[i + 1] === '{') {
        return { ok: false, error: 'word-boundary assertions `\\b{…}` are not supported' };
      } else if (next === '<' || next === '>') {
        return { ok: false, error: `\\${next} word-boundary assertions are not supported` };
      } else out += `\\${next}`;
      continue;
    }
    if (depth > 0) {
      if (ch === '[' && src[i + 1] === ':') {
        const close = src.indexOf(':]', i + 2);
        if (close > 0) {
          out += src.slice(i, close + 2);
          i = close + 1;
          continue;
        }
      }
      if ((ch === '&' || ch === '-' || ch === '~') && src[i + 1] === ch && !classStart) {
        const op = ch + ch;
        if (!(ch === '-' && src[i + 2] === ']')) {
          return { ok: false, error: `character class set operation \`${op}\` is not supported` };
        }
      }
      if (ch === '[' && !classStart) {
        return { ok: false, error: 'nested character classes are not supported' };
      }
      if (ch === ']' && !classStart) depth--;
      classStart = ch === '^' && src[i - 1] === '[' ? true : false;
      out += ch;
      continue;
    }
    if (ch === '[') {
      depth++;
      classStart = true;
      out += ch;
      if (src[i + 1] === '^') {
        out += '^';
        i++;
      }
      continue;
    }
    if (ch === '(' && src[i + 1] === '?') {
      if (/^\(\?<?[=!]/.test(src.slice(i, i + 4))) {
        return { ok: false, error: 'look-around assertions are not supported (Rust regex has none either)' };
      }
      const flags = /^\(\?([a-zA-Z-]*)[:)]/.exec(src.slice(i));
      if (flags) {
        const bad = flags[1]!.replace(/[imsU-]/g, '');
        if (bad !== '') {
          return { ok: false, error: `inline flag \`${bad[0]}\` is not supported (only i, m, s, U)` };
        }
      }
    }
    out += ch;
  }
  return { ok: true, source: out };
}

/** Whether `source` starts / ends with a top-level `\b` (the boundaries the Unicode check repairs). */
function edgeBoundaries(source: string): { start: boolean; end: boolean } {
  const body = source.replace(/^\(\?[imsU]+\)/, '');
  const end = body.endsWith('\\b') && !body.endsWith('\\\\b');
  return { start: body.startsWith('\\b'), end };
}

/**
 * Compiles a Rust-syntax pattern. RE2's `\b` sees only ASCII word characters; where the pattern starts or
 * ends with `\b`, a match next to another Unicode word character (e.g. Chinese text glued to digits) is
 * dropped, as Rust's Unicode boundary would not match there.
 */
export function compilePattern(src: string): Compiled {
  const t = translate(src);
  if (!t.ok) return t;
  let re: RE2JS;
  try {
    re = RE2JS.compile(t.source);
  } catch (e) {
    return { ok: false, error: (e as Error).message.replace(/^error parsing regexp: /, '') };
  }
  const edges = edgeBoundaries(src);
  const repair = edges.start || edges.end;
  const hasGroup = re.groupCount() > 0;
  const unicodeBoundaryOk = (text: string, start: number, end: number) =>
    (!edges.start || !isWordBefore(text, start)) && (!edges.end || !isWordAt(text, end));
  // A `\b` keeps re2js off its DFA; the pattern without its edge `\b`s matches wherever the pattern does, so
  // it rules out a text at DFA speed first.
  const probe = repair ? probeOf(t.source, edges) : re;
  const accepted = function* (text: string): Generator<Match> {
    if (!probe.test(text)) return;
    const m = re.matcher(text);
    while (m.find()) {
      const start = m.start();
      const end = m.end();
      if (repair && !unicodeBoundaryOk(text, start, end)) continue;
      const gs = hasGroup ? m.start(1) : -1;
      yield { start, end, group: gs >= 0 ? { start: gs, end: m.end(1) } : undefined, hasGroup };
    }
  };
  return {
    ok: true,
    pattern: {
      source: src,
      hasGroup,
      test(text) {
        if (!repair) return re.test(text);
        for (const _ of accepted(text)) return true;
        return false;
      },
      matches: (text) => [...accepted(text)],
    },
  };
}

function probeOf(source: string, edges: { start: boolean; end: boolean }): RE2JS {
  const flags = /^\(\?[imsU]+\)/.exec(source)?.[0] ?? '';
  let body = source.slice(flags.length);
  if (edges.start && body.startsWith('\\b')) body = body.slice(2);
  if (edges.end && body.endsWith('\\b')) body = body.slice(0, -2);
  try {
    return RE2JS.compile(flags + body);
  } catch {
    return RE2JS.compile(source);
  }
}

function isWordBefore(text: string, i: number): boolean {
  if (i <= 0) return false;
  const cp = text.codePointAt(i - 1)!;
  // A low surrogate: look at the whole code point.
  const ch = cp >= 0xdc00 && cp <= 0xdfff && i >= 2 ? String.fromCodePoint(text.codePointAt(i - 2)!) : text[i - 1]!;
  return UNICODE_WORD.test(ch);
}

function isWordAt(text: string, i: number): boolean {
  if (i >= text.length) return false;
  return UNICODE_WORD.test(String.fromCodePoint(text.codePointAt(i)!));
}
