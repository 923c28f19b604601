// One line per event to stderr: AISIX's text line by default, JSON as an opt-in (docs/configuration.md
// `observability.log_format`, docs/aisix-compatibility.md "Logs"). Logging never throws into the caller and
// never blocks on I/O beyond the platform's write.
import { jsonText } from '../util/json-text.ts';

export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
const RANK: Record<Level, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

export type Fields = Record<string, unknown>;

/** The target of a line that names none: Sluice's own lines (AISIX's are its Rust module paths). */
export const DEFAULT_TARGET = 'sluice';

export interface Logger {
  enabled(level: Level): boolean;
  log(level: Level, msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  /**
   * The line `log` writes for the object of `layout`'s names and `values` (in that order, `undefined` for an
   * absent field), byte for byte, without the object: for a line written with the same fields every time. `at`:
   * the line's time, when the caller has just read the logger's clock; else read here.
   */
  logLine(level: Level, msg: string, layout: LineLayout, values: readonly unknown[], at?: number): void;
  /** The same sink and level, writing lines under another target (e.g. `aisix_obs::access_log`). */
  withTarget(target: string): Logger;
}

/**
 * A line's field names, fixed, with each member's head preformatted for both formats. A string member's head
 * carries its opening quote and the next head the closing one (`","next":`), so a plain string adds one piece to
 * the line instead of three: flattening a line of many small pieces was most of a log write's cost.
 */
export class LineLayout {
  /** `,"name":` per field. */
  readonly json: readonly string[];
  /** ` name=` per field. */
  readonly text: readonly string[];
  /** Per field: the head after an open string (`","name":`), for a string (`,"name":"`), and both (`","name":"`). */
  readonly jsonQ: readonly string[];
  readonly jsonS: readonly string[];
  readonly jsonQS: readonly string[];
  /** The same for the text line (`" name=`, ` name="`, `" name="`). */
  readonly textQ: readonly string[];
  readonly textS: readonly string[];
  readonly textQS: readonly string[];
  /** Each field's slot in `PLAIN`, shared by every layout with that field name. */
  readonly slots: readonly number[];
  constructor(readonly names: readonly string[]) {
    this.json = names.map((k) => `,${JSON.stringify(k)}:`);
    this.text = names.map((k) => ` ${k}=`);
    this.jsonQ = this.json.map((h) => `"${h}`);
    this.jsonS = this.json.map((h) => `${h}"`);
    this.jsonQS = this.json.map((h) => `"${h}"`);
    this.textQ = this.text.map((h) => `"${h}`);
    this.textS = this.text.map((h) => `${h}"`);
    this.textQS = this.text.map((h) => `"${h}"`);
    this.slots = names.map((k) => {
      let slot = PLAIN_SLOTS.get(k);
      if (slot === undefined) PLAIN_SLOTS.set(k, slot = PLAIN_SLOTS.size);
      return slot;
    });
  }
}

/** A slot per field name of any layout (a few constants). */
const PLAIN_SLOTS = new Map<string, number>();
/**
 * Per slot, the last string found to need no escape in either format: a line's values are mostly the same
 * strings request after request (method, model, key id), and the two lines of a request share their ids.
 */
const PLAIN: (string | undefined)[] = [];
// deno-lint-ignore no-control-regex
const ESCAPED_IN_EITHER = /["\\\x00-\x1f\x7f\ud800-\udfff]/;

/** Whether `v`, a layout's value in slot `slot`, is written between quotes as it is in both formats. */
function plain(v: string, slot: number): boolean {
  if (v === PLAIN[slot]) return true;
  if (ESCAPED_IN_EITHER.test(v)) return false;
  PLAIN[slot] = v;
  return true;
}

export interface LoggerOptions {
  level: Level;
  format: 'json' | 'text';
  write: (line: string) => void;
  /** The time lines carry, in ms since the epoch (`Date.now` when absent). */
  clock?: () => number;
  target?: string;
}

/** Rust's `<str as Debug>`: quoted, with `\"`, `\\`, `\n`, `\r`, `\t`, `\0` and `\u{…}` for other controls. */
export function debugQuote(s: string): string {
  // deno-lint-ignore no-control-regex
  if (!/["\\\x00-\x1f\x7f]/.test(s)) return `"${s}"`;
  let out = '"';
  for (const ch of s) {
    switch (ch) {
      case '"':
        out += '\\"';
        break;
      case '\\':
        out += '\\\\';
        break;
      case '\n':
        out += '\\n';
        break;
      case '\r':
        out += '\\r';
        break;
      case '\t':
        out += '\\t';
        break;
      case '\0':
        out += '\\0';
        break;
      default: {
        const c = ch.charCodeAt(0);
        out += c < 0x20 || c === 0x7f ? `\\u{${c.toString(16)}}` : ch;
      }
    }
  }
  return `${out}"`;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return debugQuote(v);
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : debugQuote(String(v));
  if (typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  // Arrays and objects: compact JSON (no spaces outside strings, so the line stays splittable on ' ').
  return JSON.stringify(v) ?? debugQuote(String(v));
}

/**
 * The time string, `2026-01-02T03:04:05.678` then `suffix` (`Z` for JSON's `toISOString`, `000Z` for the text
 * format: tracing-subscriber's SystemTime timer prints microseconds). Formatted once per millisecond (an access
 * log writes many lines per ms), and the part up to the seconds once per second: a new millisecond only puts
 * three digits after the cached prefix instead of allocating a `Date` and formatting it all again.
 */
function clock(nowMs: () => number, suffix: string): (at?: number) => string {
  let lastMs = NaN;
  let last = '';
  let second = NaN;
  let prefix = ''; // `2026-01-02T03:04:05.`
  const millis = millisWith(suffix);
  return (at) => {
    const ms = at ?? nowMs();
    if (ms !== lastMs) {
      lastMs = ms;
      const s = Math.floor(ms / 1000) * 1000;
      if (s !== second) {
        second = s;
        prefix = new Date(s).toISOString().slice(0, -4); // a NaN time throws here, as toISOString does
      }
      last = prefix + millis[ms - s]!;
    }
    return last;
  };
}

/** `000${suffix}` to `999${suffix}`, made once per suffix: a time string is then two pieces, not five. */
const MILLIS = new Map<string, readonly string[]>();
function millisWith(suffix: string): readonly string[] {
  let m = MILLIS.get(suffix);
  if (m === undefined) {
    MILLIS.set(suffix, m = Array.from({ length: 1000 }, (_, f) => `${String(f).padStart(3, '0')}${suffix}`));
  }
  return m;
}

/**
 * `head` (an object's opening without its closing brace) followed by the members of `JSON.stringify(fields)`, byte
 * for byte, for the plain objects of primitives callers pass: strings without a character JSON escapes (the usual
 * case) are quoted as they are, finite numbers printed with `String`. A string JSON escapes (or with a surrogate)
 * goes through `JSON.stringify` itself; any other value (an object, an array, a bigint, a non-finite number…) and
 * any object that is not plain hand the whole object to `JSON.stringify`. Less CPU than `JSON.stringify` and
 * splicing its output on an access-log line (docs/performance.md "Decisions on the hot path").
 */
function jsonLine(head: string, fields: Fields): string {
  if (Object.getPrototypeOf(fields) !== Object.prototype || 'toJSON' in fields) return spliced(head, fields);
  let out = head;
  for (const k in fields) {
    const s = jsonValue(fields[k]);
    if (s === SKIP) continue;
    if (s === WHOLE) return spliced(head, fields);
    out += memberHead(k) + s;
  }
  return `${out}}`;
}

/** `jsonLine` for a layout's values: the same bytes as for the object of those names and values. */
function jsonLayoutLine(head: string, layout: LineLayout, values: readonly unknown[]): string {
  let out = head;
  let open = false; // the last member is a string whose closing quote the next piece carries
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string' && plain(v, layout.slots[i]!)) {
      out += (open ? layout.jsonQS[i]! : layout.jsonS[i]!) + v;
      open = true;
      continue;
    }
    const s = jsonValue(v);
    if (s === SKIP) continue;
    const text = s === WHOLE ? memberText(layout.names[i]!, v) : s;
    if (text === undefined) continue;
    out += (open ? layout.jsonQ[i]! : layout.json[i]!) + text;
    open = false;
  }
  return out + (open ? '"}' : '}');
}

/**
 * `JSON.stringify`'s text of member `name` holding `v` (an array, an object…) as it is inside an object, a `toJSON`
 * given its key; undefined where the member is left out. One member's object, not the line's whole object.
 */
function memberText(name: string, v: unknown): string | undefined {
  const whole = JSON.stringify({ [name]: v });
  return whole.length > 2 ? whole.slice(JSON.stringify(name).length + 2, -1) : undefined;
}

/** The text line's fields for a layout's values, as `log` writes them for the object of those names and values. */
function textLayoutFields(line: string, layout: LineLayout, values: readonly unknown[]): string {
  let open = false;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === undefined || v === null) continue;
    if (typeof v === 'string' && plain(v, layout.slots[i]!)) {
      line += (open ? layout.textQS[i]! : layout.textS[i]!) + v;
      open = true;
    } else {
      line += (open ? layout.textQ[i]! : layout.text[i]!) + textValue(v);
      open = false;
    }
  }
  return open ? `${line}"` : line;
}

/** A member `JSON.stringify` leaves out. */
const SKIP = 0;
/** A value only `JSON.stringify` writes right (an array, an object, a bigint…). */
const WHOLE = 1;
/** A member value as `JSON.stringify` writes it, for the primitives callers pass. */
function jsonValue(v: unknown): string | typeof SKIP | typeof WHOLE {
  if (v === undefined || typeof v === 'function' || typeof v === 'symbol') return SKIP;
  if ((typeof v === 'object' && v !== null) || typeof v === 'bigint') return WHOLE;
  return jsonText(v)!;
}

/** Field names are a few constants: `,"name":` is built once per name (bounded: a caller's odd names are not kept). */
const MEMBER_HEADS = new Map<string, string>();
function memberHead(k: string): string {
  let h = MEMBER_HEADS.get(k);
  if (h === undefined) {
    h = `,${JSON.stringify(k)}:`;
    if (MEMBER_HEADS.size < 256) MEMBER_HEADS.set(k, h);
  }
  return h;
}

/** Messages are constants too (docs/aisix-compatibility.md "Logs"): each is quoted once (bounded, as above). */
const QUOTED_MSGS = new Map<string, string>();
function quotedMsg(msg: string): string {
  let q = QUOTED_MSGS.get(msg);
  if (q === undefined) {
    q = JSON.stringify(msg);
    if (QUOTED_MSGS.size < 256) QUOTED_MSGS.set(msg, q);
  }
  return q;
}

/** `head` and the members of `JSON.stringify(fields)`: the general case of `jsonLine`. */
function spliced(head: string, fields: Fields): string {
  const rest = JSON.stringify(fields);
  return rest.length > 2 ? `${head},${rest.slice(1)}` : `${head}}`;
}

const UPPER: Record<Level, string> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR' };
/** tracing's level column: right-aligned to 5. */
const PADDED: Record<Level, string> = { trace: 'TRACE', debug: 'DEBUG', info: ' INFO', warn: ' WARN', error: 'ERROR' };

export function createLogger(opts: LoggerOptions): Logger {
  const min = RANK[opts.level];
  const write = (line: string) => {
    try {
      opts.write(line);
    } catch {
      // A closed stderr must not take a request down with it.
    }
  };
  const time = clock(opts.clock ?? Date.now, opts.format === 'json' ? 'Z' : '000Z');
  const make = (target: string): Logger => {
    const jsonTarget = JSON.stringify(target);
    // What follows the time, per level and message (constants: bounded as `quotedMsg`), made once.
    const tails: Record<Level, Map<string, string>> = {
      trace: new Map(),
      debug: new Map(),
      info: new Map(),
      warn: new Map(),
      error: new Map(),
    };
    const tail = (level: Level, msg: string): string => {
      const byMsg = tails[level];
      let t = byMsg.get(msg);
      if (t === undefined) {
        t = opts.format === 'json'
          ? `","level":"${UPPER[level]}","target":${jsonTarget},"msg":${quotedMsg(msg)}`
          : ` ${PADDED[level]} ${target}: ${msg}`;
        if (byMsg.size < 256) byMsg.set(msg, t);
      }
      return t;
    };
    const jsonHead = (level: Level, msg: string, at?: number) => '{"time":"' + time(at) + tail(level, msg);
    const textHead = (level: Level, msg: string, at?: number) => time(at) + tail(level, msg);
    const log = (level: Level, msg: string, fields?: Fields): void => {
      if (RANK[level] < min) return;
      let line: string;
      if (opts.format === 'json') {
        // `{"time","level","target","msg"` then the fields' own object body: no merged copy of the fields.
        const head = jsonHead(level, msg);
        line = fields ? jsonLine(head, fields) : `${head}}`;
      } else {
        line = textHead(level, msg);
        if (fields) {
          for (const k in fields) {
            const v = fields[k];
            if (v !== undefined && v !== null) line += ` ${k}=${textValue(v)}`;
          }
        }
      }
      write(line);
    };
    const logLine = (level: Level, msg: string, layout: LineLayout, values: readonly unknown[], at?: number) => {
      if (RANK[level] < min) return;
      write(
        opts.format === 'json'
          ? jsonLayoutLine(jsonHead(level, msg, at), layout, values)
          : textLayoutFields(textHead(level, msg, at), layout, values),
      );
    };
    return {
      enabled: (level) => RANK[level] >= min,
      log,
      logLine,
      debug: (m, f) => log('debug', m, f),
      info: (m, f) => log('info', m, f),
      warn: (m, f) => log('warn', m, f),
      error: (m, f) => log('error', m, f),
      withTarget: (t) => make(t),
    };
  };
  return make(opts.target ?? DEFAULT_TARGET);
}
