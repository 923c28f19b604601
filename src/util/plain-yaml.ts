// A fast path for the YAML a resources file is usually written in (docs/performance.md "Configuration at
// scale"): block mappings and sequences of one-line scalars and one-line flow collections, read straight into
// plain values. It keeps no syntax tree, so a million rows cost what their values cost. Anything outside that
// subset, or anything the `yaml` package would refuse, makes it give up (`undefined`): the caller then parses
// with `yaml`, which reads the subset to the same values and words every error as it always has.

/** Gives up on the fast path: the caller parses the text with `yaml` instead. */
class GiveUp extends Error {}

const giveUp = (): never => {
  throw new GiveUp();
};

/** Characters the subset never has: tabs, CR, control characters, and the line breaks YAML 1.1 knew. */
// deno-lint-ignore no-control-regex -- control characters are what this looks for
const OUTSIDE = /[\u0000-\u0008\u000b-\u001f\u007f\t\r\u0085\u2028\u2029\ufeff]/;
/**
 * A plain key at the start of `line` (a word, then `:` and a space or the line's end): where its `:` is, or -1.
 * A scan rather than a regular expression: it runs once a line and allocates nothing.
 */
function keyEnd(line: string): number {
  const c0 = line.charCodeAt(0);
  if (!((c0 >= 65 && c0 <= 90) || (c0 >= 97 && c0 <= 122) || c0 === 95)) return -1;
  for (let i = 1; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 45 && c <= 57) || c === 95) continue; // `-./0-9`
    return c === 58 && (i + 1 === line.length || line.charCodeAt(i + 1) === 32) ? i : -1;
  }
  return -1;
}
/** Keys `yaml` reads as something other than the string itself, or that a plain object cannot hold. */
const SPECIAL_KEY = /^(?:[Nn]ull|NULL|[Tt]rue|TRUE|[Ff]alse|FALSE|__proto__)$/;
/** First characters a plain scalar never has (YAML's indicators); `-` only before a number. */
const INDICATOR_START = /^(?:[?:,\[\]{}#&*!|>'"%@`]|-(?![0-9.]))/;
/** The `yaml` package's core schema for plain scalars, in its order (src/schema/core/schema.ts). */
const NULL = /^(?:~|[Nn]ull|NULL)?$/;
const BOOL = /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/;
const INT_OCT = /^0o[0-7]+$/;
const INT = /^[-+]?[0-9]+$/;
const INT_HEX = /^0x[0-9a-fA-F]+$/;
const FLOAT_NAN = /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/;
const FLOAT_EXP = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/;
const FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/;
/** Only spaces, or a comment, after a quoted scalar or a flow collection. */
const REST_EMPTY = /^(?: *| +#.*)$/;

/** YAML's white space here is the space alone (tabs never reach this far); `trim` would take U+00A0 too. */
function trimSpacesEnd(s: string): string {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 32) end--;
  return end === s.length ? s : s.slice(0, end);
}

function trimSpacesStart(s: string): string {
  let at = 0;
  while (s.charCodeAt(at) === 32) at++;
  return at === 0 ? s : s.slice(at);
}

/** Shorter substrings are copies already: a JavaScript engine shares the text of longer ones. */
const SHARED_FROM = 13;

/**
 * `s` as a string of its own: a value that outlives the load (a key's hash) would otherwise keep the whole
 * file's text alive with it.
 */
const detach = (s: string): string => (s.length < SHARED_FROM ? s : JSON.parse(JSON.stringify(s)) as string);

/** A plain scalar as the core schema resolves it. */
function resolvePlain(s: string): unknown {
  if (NULL.test(s)) return null;
  if (BOOL.test(s)) return s[0] === 't' || s[0] === 'T';
  if (INT_OCT.test(s)) return parseInt(s.substring(2), 8);
  if (INT.test(s)) return parseInt(s, 10);
  if (INT_HEX.test(s)) return parseInt(s.substring(2), 16);
  if (FLOAT_NAN.test(s)) return s.slice(-3).toLowerCase() === 'nan' ? NaN : s[0] === '-' ? -Infinity : Infinity;
  if (FLOAT_EXP.test(s) || FLOAT.test(s)) return parseFloat(s);
  return detach(s);
}

/** A quoted scalar at the start of `s` (no escapes, one line): its value and what follows it. */
function quoted(s: string): [string, string] {
  const q = s[0]!;
  if (q === '"') {
    const end = s.indexOf('"', 1);
    if (end < 0) giveUp();
    const value = s.slice(1, end);
    if (value.includes('\\')) giveUp();
    return [detach(value), s.slice(end + 1)];
  }
  let value = '';
  let from = 1;
  for (;;) {
    const end = s.indexOf("'", from);
    if (end < 0) giveUp();
    value += s.slice(from, end);
    if (s[end + 1] !== "'") return [detach(value), s.slice(end + 1)];
    value += "'";
    from = end + 2;
  }
}

/**
 * `seq` in an array of its own length: an array grown by `push` keeps room for 17 elements, which a file of a
 * million rows of `allowed_models: [one]` pays in every row.
 */
const exactSize = (seq: unknown[]): unknown[] => (seq.length < 64 ? seq.slice() : seq);

/** What `flowCollection` holds in place of the kind of collection it is not reading (never written to). */
const NO_SEQ = Object.freeze([]) as unknown as unknown[];
const NO_MAP: Record<string, unknown> = Object.freeze({});

/** A flow key: a word, then `:` and a space. */
const FLOW_KEY = /^([A-Za-z_][A-Za-z0-9_.\-/]*): +/;

/**
 * A flow collection on one line (`[a, "b"]`, `{ rpm: 10, tags: [x] }`) at the start of `s`: its value and what
 * follows it. Implicit keys in a sequence, keys without values, empty or trailing entries and comments
 * inside are left to `yaml`.
 */
function flowCollection(s: string): [unknown, string] {
  const close = s[0] === '[' ? ']' : '}';
  // Only the one this is: a file of a million rows of `[model]` would make a million empty maps.
  const seq: unknown[] = close === ']' ? [] : NO_SEQ;
  const map: Record<string, unknown> = close === '}' ? {} : NO_MAP;
  let rest = trimSpacesStart(s.slice(1));
  if (rest[0] === close) return [close === ']' ? seq : map, rest.slice(1)];
  for (;;) {
    if (close === '}') {
      const m = FLOW_KEY.exec(rest) ?? giveUp();
      const key = m[1]!;
      if (key.length > 1000 || SPECIAL_KEY.test(key) || Object.hasOwn(map, key)) giveUp();
      let value: unknown;
      [value, rest] = flowValue(rest.slice(m[0].length));
      map[key] = value;
    } else {
      let value: unknown;
      [value, rest] = flowValue(rest);
      seq.push(value);
    }
    rest = trimSpacesStart(rest);
    if (rest[0] === close) return [close === ']' ? exactSize(seq) : map, rest.slice(1)];
    if (rest[0] !== ',') giveUp();
    rest = trimSpacesStart(rest.slice(1));
    if (rest[0] === ',' || rest[0] === ']' || rest[0] === '}') giveUp(); // an empty or trailing entry
  }
}

/** One entry's value inside a flow collection, and what follows it. */
function flowValue(s: string): [unknown, string] {
  const c = s[0];
  if (c === '"' || c === "'") return quoted(s);
  if (c === '[' || c === '{') return flowCollection(s);
  const end = s.search(/[,\]}]/);
  if (end < 0) giveUp();
  const plain = trimSpacesEnd(s.slice(0, end));
  if (plain === '' || INDICATOR_START.test(plain) || /[\[{#]|:(?: |$)/.test(plain)) giveUp();
  return [resolvePlain(plain), s.slice(end)];
}

/** A value written on its key's or its dash's line: a scalar or a one-line flow sequence. */
function inlineValue(s: string): unknown {
  const c = s[0];
  if (c === '"' || c === "'") {
    const [value, rest] = quoted(s);
    if (!REST_EMPTY.test(rest)) giveUp();
    return value;
  }
  if (c === '[' || c === '{') {
    const [value, rest] = flowCollection(s);
    if (!REST_EMPTY.test(rest)) giveUp();
    return value;
  }
  if (INDICATOR_START.test(s)) giveUp();
  const hash = s.indexOf(' #');
  const plain = trimSpacesEnd(hash < 0 ? s : s.slice(0, hash));
  if (plain.includes(': ') || plain.endsWith(':')) giveUp();
  return resolvePlain(plain);
}

interface MapFrame {
  map: Record<string, unknown>;
  seq?: undefined;
  indent: number;
}
interface SeqFrame {
  seq: unknown[];
  map?: undefined;
  indent: number;
  /** Puts the finished sequence where it belongs (at its exact size). */
  set?: (v: unknown) => void;
}
type Frame = MapFrame | SeqFrame;

/** A `key:` or `-` whose value starts on a later line: where it goes and the column it belongs to. */
interface Pending {
  set: (v: unknown) => void;
  indent: number;
  /** A map's key may take a sequence at its own column (`key:` then `- a`). */
  seqAtSameColumn: boolean;
}

const isSeqItem = (c: string): boolean => c[0] === '-' && (c.length === 1 || c[1] === ' ');

/** Characters scanned for `OUTSIDE` between two calls of `between`: a few milliseconds of work. */
const SCAN_CHARS = 1 << 20;

/**
 * Lines read between two calls of `between`: few enough that a slice ends near its time even while the
 * collector's marking slows every line (docs/performance.md "Configuration at scale").
 */
const LINES_PER_SLICE = 256;

/**
 * The text's value, or `undefined` when it is outside the subset (or not valid YAML): parse it with `yaml`
 * then. `text` may come as pieces, each ending just after a line break but the last (a large file's text is
 * never joined: building one string of a large file holds the event loop).
 * `between` is awaited every few thousand lines when it returns a promise, so a caller can let other work
 * run during a large parse.
 */
export async function parsePlainYaml(
  text: string | readonly string[],
  between?: () => Promise<void> | undefined,
): Promise<Record<string, unknown> | undefined> {
  const pieces = typeof text === 'string' ? [text] : text;
  for (const piece of pieces) {
    for (let from = 0; from < piece.length; from += SCAN_CHARS) {
      if (OUTSIDE.test(piece.slice(from, from + SCAN_CHARS))) return undefined;
      const p = between?.();
      if (p) await p;
    }
  }
  try {
    const lines = new PlainLines();
    for (const piece of pieces) await lines.read(piece, between);
    return lines.end();
  } catch (e) {
    if (e instanceof GiveUp) return undefined;
    throw e;
  }
}

/** The parse's state across the pieces of a text, each read whole lines at a time. */
class PlainLines {
  private readonly root: Record<string, unknown> = {};
  private readonly stack: Frame[] = [{ map: this.root, indent: 0 }];
  private pending: Pending | undefined;
  private lines = 0;
  private first = true;

  async read(text: string, between?: () => Promise<void> | undefined): Promise<void> {
    const { stack } = this;
    let pos = 0;
    while (pos < text.length) {
      if (++this.lines % LINES_PER_SLICE === 0) {
        const p = between?.();
        if (p) await p;
      }
      let end = text.indexOf('\n', pos);
      if (end < 0) end = text.length;
      let indent = pos;
      while (text.charCodeAt(indent) === 32) indent++;
      const line = trimSpacesEnd(text.slice(indent, end));
      indent -= pos;
      pos = end + 1;
      if (line === '' || line[0] === '#') continue;
      if (this.first) {
        // A document marker, a directive or a top level that is not a mapping at column 0: left to `yaml`.
        if (indent !== 0 || line.startsWith('---') || isSeqItem(line)) giveUp();
        this.first = false;
      }
      if (this.pending) {
        const p = this.pending;
        this.pending = undefined;
        if (indent > p.indent || (indent === p.indent && p.seqAtSameColumn && isSeqItem(line))) {
          const frame: Frame = isSeqItem(line) ? { seq: [], indent, set: p.set } : { map: {}, indent };
          p.set(frame.seq ?? frame.map);
          stack.push(frame);
        } else p.set(null);
      }
      let top = stack[stack.length - 1]!;
      while (top.indent > indent) {
        finish(stack.pop()!);
        top = stack[stack.length - 1]!;
      }
      // A sequence written at its key's column ends where the next key of that mapping starts.
      if (top.seq && top.indent === indent && !isSeqItem(line)) {
        finish(stack.pop()!);
        top = stack[stack.length - 1] ?? giveUp();
      }
      if (top.indent !== indent) giveUp();
      this.pending = readLine(stack, top, line);
    }
  }

  /** The value once every piece is read; `undefined` for a text of no lines but blank ones and comments. */
  end(): Record<string, unknown> | undefined {
    this.pending?.set(null);
    while (this.stack.length > 0) finish(this.stack.pop()!);
    return this.first ? undefined : this.root;
  }
}

/** A mapping or sequence that has ended: a sequence goes where it belongs at its exact size. */
function finish(frame: Frame): void {
  if (frame.seq && frame.set) frame.set(exactSize(frame.seq));
}

/** One line of the mapping or sequence `top` (at the line's column); a value still to come is returned. */
function readLine(stack: Frame[], top: Frame, line: string): Pending | undefined {
  if (top.map) return readEntry(top.map, top.indent, line);
  if (!isSeqItem(line)) giveUp();
  const seq = top.seq;
  let at = 1;
  while (line[at] === ' ') at++;
  const rest = line.slice(at);
  if (rest === '' || rest[0] === '#') {
    const i = seq.push(null) - 1;
    return { set: (v) => (seq[i] = v), indent: top.indent, seqAtSameColumn: false };
  }
  if (keyEnd(rest) > 0) {
    // `- key: value`: a mapping whose column is its first key's.
    const map: Record<string, unknown> = {};
    seq.push(map);
    const frame: MapFrame = { map, indent: top.indent + at };
    stack.push(frame);
    return readEntry(map, frame.indent, rest);
  }
  seq.push(inlineValue(rest));
  return undefined;
}

/** `key: value` or `key:` in `map`. */
function readEntry(map: Record<string, unknown>, indent: number, line: string): Pending | undefined {
  const colon = keyEnd(line);
  if (colon < 0) giveUp();
  const key = line.slice(0, colon);
  if (key.length > 1000 || SPECIAL_KEY.test(key) || Object.hasOwn(map, key)) giveUp(); // a duplicate is `yaml`'s error to word
  let from = colon + 1;
  while (line.charCodeAt(from) === 32) from++;
  const rest = line.slice(from);
  if (rest === '' || rest[0] === '#') {
    map[key] = null;
    return { set: (v) => (map[key] = v), indent, seqAtSameColumn: true };
  }
  map[key] = inlineValue(rest);
  return undefined;
}
