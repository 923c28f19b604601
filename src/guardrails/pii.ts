// `kind: pii` (docs/guardrails.md "pii"): AISIX's built-in detectors and the row's custom patterns, each
// masking or blocking. The block check runs first over the joined text; masks only when nothing blocks,
// rule after rule, each on the previous rule's output, per segment. Only detector names leave this file.
import type { Built } from './keyword.ts';
import { compilePattern, type Match, type Pattern } from './regex.ts';
import type { PiiDetectorType, PiiRow } from './schema.ts';
import { ALLOW, type Hook, joined, type Outcome, type Segment } from './types.ts';
import { paceSteps, runSteps } from '../util/steps.ts';

interface Rule {
  name: string;
  re: Pattern;
  action: 'mask' | 'block';
  validate: ((s: string) => boolean) | undefined;
  token: string;
  /** Matches never contain whitespace (the built-ins but `private_key`). */
  splittable: boolean;
  /** A cheap test every text with a match passes (built-ins). */
  needs?: (text: string) => boolean;
}

/** Every match of these contains a decimal digit (`\\d` is Unicode: any `Nd`). */
const DIGIT = /\p{Nd}/u;

/**
 * AISIX's built-in patterns (Rust syntax, translated like an operator's). `needs`: a cheap test every text
 * with a match passes, so most texts skip the engine.
 */
const BUILTIN: Record<
  PiiDetectorType,
  { source: string; needs: (s: string) => boolean; validate?: (s: string) => boolean }
> = {
  email: { source: '\\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}\\b', needs: (t) => t.includes('@') },
  china_mobile: { source: '\\b1[3-9]\\d{9}\\b', needs: (t) => DIGIT.test(t) },
  china_id_card: { source: '\\b\\d{17}[0-9Xx]\\b', needs: (t) => DIGIT.test(t), validate: chinaIdChecksum },
  bank_card: { source: '\\b\\d{13,19}\\b', needs: (t) => DIGIT.test(t), validate: luhn },
  us_ssn: { source: '\\b\\d{3}-\\d{2}-\\d{4}\\b', needs: (t) => t.includes('-') },
  ip_address: {
    source: '\\b(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\b',
    needs: (t) => t.includes('.'),
  },
  api_key: {
    source:
      '\\b(?:sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,}|xox[baprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})\\b',
    needs: (t) =>
      t.includes('sk-') || t.includes('AKIA') || t.includes('gh') || t.includes('xox') || t.includes('AIza'),
  },
  jwt: {
    source: '\\beyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\b',
    needs: (t) => t.includes('eyJ'),
  },
  private_key: {
    source: '(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----',
    needs: (t) => t.includes('-----BEGIN '),
  },
};

const compiledBuiltins = new Map<PiiDetectorType, Pattern>();
function builtin(type: PiiDetectorType): Pattern {
  let p = compiledBuiltins.get(type);
  if (!p) {
    const c = compilePattern(BUILTIN[type].source);
    if (!c.ok) throw new Error(`built-in pii detector ${type}: ${c.error}`);
    p = c.pattern;
    compiledBuiltins.set(type, p);
  }
  return p;
}

/** `[<NAME>_REDACTED]`: upper-cased, every character but ASCII letters and digits folded to `_`. */
export function maskToken(name: string): string {
  return `[${name.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}_REDACTED]`;
}

export type PiiCheck = (segments: readonly Segment[], hook: Hook) => Outcome | Promise<Outcome>;

/** Over this many characters a check gives the event loop a turn between pieces of work. */
const LARGE_TEXT = 65_536;
/** Built-in detectors never match across whitespace, so a large text is matched piece by piece. */
const PIECE = 16_384;

export function buildPii(row: PiiRow): Built<PiiCheck> {
  const rules: Rule[] = [];
  for (const d of row.detectors) {
    const action = d.action ?? row.default_action;
    const b = BUILTIN[d.type];
    rules.push({
      name: d.type,
      re: builtin(d.type),
      action,
      validate: b.validate,
      token: maskToken(d.type),
      splittable: d.type !== 'private_key',
      needs: b.needs,
    });
  }
  for (let i = 0; i < row.custom_patterns.length; i++) {
    const p = row.custom_patterns[i]!;
    const action = p.action ?? row.default_action;
    if (action === 'block' && p.replacement !== undefined) {
      return { ok: false, error: `custom_patterns[${i}].replacement: not allowed on a pattern whose action is block` };
    }
    const c = compilePattern(p.regex);
    if (!c.ok) return { ok: false, error: `custom_patterns[${i}].regex: invalid regex: ${c.error}` };
    rules.push({
      name: p.name,
      re: c.pattern,
      action,
      validate: undefined,
      token: p.replacement ?? maskToken(p.name),
      splittable: false,
    });
  }
  const blocks = rules.filter((r) => r.action === 'block');
  const masks = rules.filter((r) => r.action === 'mask');
  return {
    ok: true,
    value: (segments, hook) => {
      if (rules.length === 0) return ALLOW;
      let size = 0;
      for (const s of segments) size += s.text.length;
      const steps = evaluate(blocks, masks, segments, hook);
      return size > LARGE_TEXT ? paceSteps(steps, turn) : runSteps(steps);
    },
  };
}

/** A turn of the event loop at each of the check's pauses (large texts). */
const turn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/** The check, pausing (`yield`) between pieces of work. */
function* evaluate(
  blocks: readonly Rule[],
  masks: readonly Rule[],
  segments: readonly Segment[],
  hook: Hook,
): Generator<void, Outcome> {
  if (blocks.length > 0) {
    const text = joined(segments);
    for (const r of blocks) {
      for (const m of yield* matchesOf(r, text)) {
        if (accepts(r, text, m)) return { kind: 'block', reason: `${hook} blocked by pii detector '${r.name}'` };
      }
    }
  }
  if (masks.length === 0) return ALLOW;
  const counts: Record<string, number> = {};
  let changed = false;
  const texts: string[] = [];
  for (const s of segments) {
    let t = s.text;
    for (const r of masks) {
      const m = maskAll(r, t, yield* matchesOf(r, t));
      if (m.count > 0) {
        counts[r.name] = (counts[r.name] ?? 0) + m.count;
        t = m.text;
        changed = true;
      }
    }
    texts.push(t);
  }
  return changed ? { kind: 'mask', texts, counts } : ALLOW;
}

/** A rule's matches in `text`, piece by piece for a large text when the rule cannot span whitespace. */
function* matchesOf(r: Rule, text: string): Generator<void, Match[]> {
  if (r.needs && !r.needs(text)) return [];
  if (!r.splittable || text.length <= PIECE) {
    if (text.length > PIECE) yield;
    return r.re.test(text) ? r.re.matches(text) : [];
  }
  const out: Match[] = [];
  let at = 0;
  while (at < text.length) {
    let end = Math.min(text.length, at + PIECE);
    while (end < text.length && !/\s/.test(text[end]!)) end++;
    const piece = text.slice(at, end);
    if (r.re.test(piece)) {
      for (const m of r.re.matches(piece)) {
        const g = m.group && { start: m.group.start + at, end: m.group.end + at };
        out.push({ start: m.start + at, end: m.end + at, group: g, hasGroup: m.hasGroup });
      }
    }
    at = end;
    yield;
  }
  return out;
}

/** The span a rule validates and replaces: group 1 when the pattern has groups, else the whole match. */
function target(m: Match): { start: number; end: number } | undefined {
  return m.hasGroup ? m.group : m;
}

function accepts(r: Rule, text: string, m: Match): boolean {
  const t = target(m);
  return t !== undefined && (!r.validate || r.validate(text.slice(t.start, t.end)));
}

function maskAll(r: Rule, text: string, matches: readonly Match[]): { text: string; count: number } {
  let out = '';
  let at = 0;
  let count = 0;
  for (const m of matches) {
    if (!accepts(r, text, m)) continue;
    const t = target(m)!;
    out += text.slice(at, t.start) + r.token;
    at = t.end;
    count++;
  }
  return count === 0 ? { text, count } : { text: out + text.slice(at), count };
}

/** ISO 7064 MOD 11-2 check digit of an 18-character Chinese national id (ASCII digits only). */
export function chinaIdChecksum(s: string): boolean {
  if (s.length !== 18) return false;
  const weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
  let sum = 0;
  for (let i = 0; i < 17; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    sum += d * weights[i]!;
  }
  return s[17]!.toUpperCase() === '10X98765432'[sum % 11];
}

/** Luhn check of a card number (ASCII digits only). */
export function luhn(s: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = s.length - 1; i >= 0; i--) {
    let d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}
