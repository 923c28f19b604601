// `kind: keyword` (docs/guardrails.md "keyword"): literals match case-insensitively as substrings, regexes
// case-sensitively unless `(?i)`; the first matching pattern blocks. Never masks.
import { compilePattern, type Pattern } from './regex.ts';
import type { KeywordRow } from './schema.ts';
import { ALLOW, type Hook, joined, type Outcome, type Segment } from './types.ts';

type Rule = { kind: 'literal'; value: string; lower: string } | { kind: 'regex'; value: string; re: Pattern };

export type Built<T> = { ok: true; value: T } | { ok: false; error: string };

/** The rules of a row, or the first pattern that cannot be compiled (field named). */
export function buildKeyword(row: KeywordRow): Built<(segments: readonly Segment[], hook: Hook) => Outcome> {
  const rules: Rule[] = [];
  for (let i = 0; i < row.patterns.length; i++) {
    const p = row.patterns[i]!;
    if (p.kind === 'literal') {
      rules.push({ kind: 'literal', value: p.value, lower: p.value.toLowerCase() });
      continue;
    }
    const c = compilePattern(p.value);
    if (!c.ok) return { ok: false, error: `patterns[${i}].value: invalid regex: ${c.error}` };
    rules.push({ kind: 'regex', value: p.value, re: c.pattern });
  }
  return {
    ok: true,
    value: (segments, hook) => {
      if (rules.length === 0) return ALLOW;
      const text = joined(segments);
      let lower: string | undefined;
      for (const r of rules) {
        if (r.kind === 'literal') {
          lower ??= text.toLowerCase();
          if (lower.includes(r.lower)) return { kind: 'block', reason: `${hook} blocked by literal "${r.value}"` };
        } else if (r.re.test(text)) return { kind: 'block', reason: `${hook} blocked by regex /${r.value}/` };
      }
      return ALLOW;
    },
  };
}
