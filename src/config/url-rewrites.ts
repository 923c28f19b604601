// `proxy.url_rewrites` (docs/routing.md "URL rewrites"): AISIX's rules, checked at boot with AISIX's words, and
// compiled once. src/routing/url-rewrite.ts applies them to each proxy request before its route is matched.
import { RE2JS } from 're2js';
import { z } from 'zod';
import { translate } from '../guardrails/regex.ts';

/** One part of a rewrite template: literal text, or a capture group by index or name. */
export type TemplatePart = { text: string } | { group: number | string };

/** A rule ready to run: its regex on re2js and its template, references checked. */
export interface CompiledRewrite {
  /** The rule's `name`, or `proxy.url_rewrites[i]`. */
  readonly label: string;
  readonly regex: RE2JS;
  readonly template: readonly TemplatePart[];
}

const RuleSchema = z.strictObject({
  name: z.string().optional(),
  match: z.string(),
  rewrite: z.string(),
});
export type UrlRewriteRule = z.infer<typeof RuleSchema>;

/**
 * The rules, as a list or as one JSON string holding the list (AISIX's form for `AISIX_PROXY__URL_REWRITES`; a
 * blank string is no rules). Each is compiled here so a mistake stops the boot, naming the rule.
 */
// The list's members are checked inside, so a bad rule is reported as itself rather than as a failed union; the
// JSON Schema still shows their shape.
const { $schema: _, ...ruleShape } = z.toJSONSchema(RuleSchema);
const ruleList = z.array(z.unknown()).meta({ items: ruleShape });
export const UrlRewritesSchema = z.union([ruleList, z.string()]).default([]).transform(
  (v, ctx): UrlRewriteRule[] => {
    let list: unknown = v;
    if (typeof v === 'string') {
      if (v.trim() === '') return [];
      try {
        list = JSON.parse(v);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `url_rewrites JSON string: ${(e as Error).message}` });
        return [];
      }
    }
    const rules = z.array(RuleSchema).safeParse(list);
    if (!rules.success) {
      for (const issue of rules.error.issues) {
        const from = typeof v === 'string' ? 'url_rewrites JSON string: ' : '';
        ctx.addIssue({ code: 'custom', path: issue.path, message: `${from}${issue.message}` });
      }
      return [];
    }
    rules.data.forEach((r, i) => {
      const c = compileRewrite(r, i);
      // The path already names an unnamed rule (`proxy.url_rewrites[i]`): the message does not repeat it.
      if (typeof c === 'string') {
        ctx.addIssue({ code: 'custom', path: [i], message: r.name === undefined ? c.replace(/^[^:]*: /, '') : c });
      }
    });
    return rules.data;
  },
);

/** Compiles rule `i`, or says why it cannot run, in AISIX's words. */
export function compileRewrite(rule: UrlRewriteRule, i: number): CompiledRewrite | string {
  const label = rule.name ?? `proxy.url_rewrites[${i}]`;
  const t = translate(rule.match);
  let regex: RE2JS;
  try {
    if (!t.ok) throw new Error(t.error);
    regex = RE2JS.compile(t.source);
  } catch (e) {
    return `${label}: invalid match regex: ${(e as Error).message.replace(/^error parsing regexp: /, '')}`;
  }
  // A pattern that matches the empty string would fire on every request and prepend the template to every path.
  if (regex.matcher('').find()) return `${label}: match must not match the empty string`;
  for (const ch of rule.rewrite) {
    if (ch === '?' || ch === '#' || /[\s\p{Cc}]/u.test(ch)) {
      return `${label}: rewrite must not contain ${
        rustChar(ch)
      } (the template is a path; the query string is preserved automatically)`;
    }
  }
  const template = parseTemplate(rule.rewrite, regex);
  if (typeof template === 'string') return `${label}: ${template}`;
  return { label, regex, template };
}

/**
 * Rust regex's replacement syntax: `$$` a literal `$`; `${name}` braced; a bare `$name` the longest run of
 * `[0-9A-Za-z_]` (so `$1x` is a group named `1x`); a `$` before anything else is literal. A reference to a
 * group the pattern lacks is refused (the engine would expand it to nothing).
 */
function parseTemplate(template: string, regex: RE2JS): TemplatePart[] | string {
  const names = regex.namedGroups();
  const groups = regex.groupCount();
  const resolve = (name: string): number | string | undefined => {
    if (/^[0-9]+$/.test(name)) return Number(name) <= groups ? Number(name) : undefined;
    return name in names ? name : undefined;
  };
  const parts: TemplatePart[] = [];
  let text = '';
  const flush = () => {
    if (text !== '') parts.push({ text });
    text = '';
  };
  for (let i = 0; i < template.length;) {
    const ch = template[i]!;
    if (ch !== '$') {
      text += ch;
      i++;
    } else if (template[i + 1] === '$') {
      text += '$';
      i += 2;
    } else if (template[i + 1] === '{') {
      const end = template.indexOf('}', i + 2);
      if (end < 0) return 'rewrite has an unterminated `${…}` group reference';
      const name = template.slice(i + 2, end);
      const group = name === '' ? undefined : resolve(name);
      if (group === undefined) return `rewrite references unknown capture group \`\${${name}}\``;
      flush();
      parts.push({ group });
      i = end + 1;
    } else {
      const name = /^[0-9A-Za-z_]*/.exec(template.slice(i + 1))![0];
      if (name === '') {
        text += '$';
        i++;
        continue;
      }
      const group = resolve(name);
      if (group === undefined) {
        return `rewrite references unknown capture group \`$${name}\` (write \`\${N}text\` to follow group N with literal text)`;
      }
      flush();
      parts.push({ group });
      i += 1 + name.length;
    }
  }
  flush();
  return parts;
}

/** A character as Rust's `{:?}` writes a `char`: `'?'`, `' '`, `'\n'`, `'\u{7}'`. */
function rustChar(ch: string): string {
  const escapes: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', "'": "\\'", '\\': '\\\\' };
  const esc = escapes[ch];
  if (esc !== undefined) return `'${esc}'`;
  if (/\p{Cc}/u.test(ch)) return `'\\u{${ch.codePointAt(0)!.toString(16)}}'`;
  return `'${ch}'`;
}
