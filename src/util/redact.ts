// Redacting known secrets from a text, in each encoding an echo may use (docs/security.md "Secrets in
// answers and logs"). Pure: which secrets a scrubber knows is src/http/scrub.ts's business. A text that must
// be short is redacted whole first and cut after, so no cut can leave part of a secret behind.

export const REDACTED = '[redacted]';

/** Shorter strings are not redacted: they would redact ordinary words. */
export const MIN_SECRET_LENGTH = 6;

/** The forms searched for: `folded` ones (lower-cased) ignoring case, `exact` ones as they are. */
export interface Needles {
  readonly folded: readonly string[];
  readonly exact: readonly string[];
}

export const NO_NEEDLES: Needles = { folded: [], exact: [] };

/** Every form of every secret long enough to redact. */
export function needlesOf(secrets: Iterable<string>): Needles {
  const folded = new Set<string>();
  const exact = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SECRET_LENGTH) continue;
    for (const f of textCopies(s)) folded.add(fold(f));
    for (const e of base64Copies(s)) exact.add(e);
  }
  return { folded: [...folded], exact: [...exact] };
}

/** Header values, and the token after an auth scheme (`Bearer <token>`): an echo may quote either. */
export function headerSecrets(headers: Record<string, string>): string[] {
  const out: string[] = [];
  for (const v of Object.values(headers)) {
    out.push(v);
    const m = /^\S+\s+(\S+)$/.exec(v.trim());
    if (m) out.push(m[1]!);
  }
  return out;
}

/** Both lists' forms. */
export function joinNeedles(a: Needles, b: Needles): Needles {
  if (b.folded.length === 0 && b.exact.length === 0) return a;
  return { folded: a.folded.concat(b.folded), exact: a.exact.concat(b.exact) };
}

/**
 * The copies of a secret whose encoding ignores case or keeps the secret's letters: raw, JSON-escaped (with
 * and without `\/`), percent-encoded (`encodeURIComponent` and the form encoding). Matched ignoring case:
 * percent-escapes are case-insensitive, and an echo that lower-cased the secret still gives most of it away.
 */
function textCopies(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const form = new URLSearchParams([['', secret]]).toString().slice(1);
  return [secret, json, json.replace(/\//g, '\\/'), encodeURIComponent(secret), form];
}

const utf8 = new TextEncoder();

/**
 * Base64 (padded and not) and base64url (padded and not) of the secret's UTF-8 bytes (an upstream may echo a
 * credential it received encoded). Case matters in base64, so these are matched exactly. Only a copy of the
 * secret alone is found: one encoded inside a larger value (`user:secret`) has other characters.
 */
export function base64Copies(secret: string): string[] {
  let binary = '';
  for (const b of utf8.encode(secret)) binary += String.fromCharCode(b);
  const padded = btoa(binary);
  const bare = padded.replace(/=+$/, '');
  const url = bare.replace(/\+/g, '-').replace(/\//g, '_');
  return [padded, bare, url, url + padded.slice(bare.length)];
}

/**
 * `text` lower-cased, index for index. `toLowerCase` lengthens only a few characters (U+0130); a text with one
 * is folded a character at a time, leaving those as they are.
 */
function fold(text: string): string {
  const lower = text.toLowerCase();
  if (lower.length === text.length) return lower;
  let out = '';
  for (const ch of text) {
    const l = ch.toLowerCase();
    out += l.length === ch.length ? l : ch;
  }
  return out;
}

/**
 * `text` with every form of every secret redacted; with `maxChars`, then cut to that many characters, and a
 * tail the cut left that begins a secret (in any of its forms) dropped too.
 */
export function redactWith(text: string, n: Needles, maxChars?: number): string {
  const out = redact(text, n);
  return maxChars === undefined || out.length <= maxChars ? out : withoutSecretStart(out.slice(0, maxChars), n);
}

/** `redactWith` for a list of secrets used once. */
export function redactSecrets(text: string, secrets: Iterable<string>, maxChars?: number): string {
  return redactWith(text, needlesOf(secrets), maxChars);
}

/**
 * Every place any form occurs (overlapping ones too) is covered, and each covered run becomes one
 * `[redacted]`: which secret is found first, or whether two overlap, cannot leave a piece of one behind.
 */
function redact(text: string, n: Needles): string {
  const spans: number[] = [];
  const find = (hay: string, forms: readonly string[]) => {
    for (const f of forms) {
      for (let at = hay.indexOf(f); at >= 0; at = hay.indexOf(f, at + 1)) spans.push(at, at + f.length);
    }
  };
  if (n.folded.length > 0) find(fold(text), n.folded);
  find(text, n.exact);
  if (spans.length === 0) return text;
  const order = Array.from({ length: spans.length / 2 }, (_, i) => i).sort((a, b) => spans[2 * a]! - spans[2 * b]!);
  let out = '';
  let kept = 0; // the text before this index is written or covered
  for (const i of order) {
    const start = spans[2 * i]!;
    const end = spans[2 * i + 1]!;
    if (end <= kept) continue;
    if (start >= kept) out += text.slice(kept, start) + REDACTED;
    kept = end;
  }
  return out + text.slice(kept);
}

/**
 * `text` without a tail that begins some form of a secret: what a cut through an echoed secret (or through a
 * partial echo of one) left. Repeated until no tail begins one.
 */
function withoutSecretStart(text: string, n: Needles): string {
  let end = text.length;
  const folded = fold(text);
  for (let moved = true; moved && end > 0;) {
    moved = false;
    for (const [hay, forms] of [[folded, n.folded], [text, n.exact]] as const) {
      for (const f of forms) {
        for (let i = Math.max(0, end - f.length + 1); i < end; i++) {
          if (hay.charCodeAt(i) === f.charCodeAt(0) && f.startsWith(hay.slice(i, end))) {
            end = i;
            moved = true;
            break;
          }
        }
      }
    }
  }
  return text.slice(0, end);
}
