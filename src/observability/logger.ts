// One line per event to stderr: AISIX's text line by default, JSON as an opt-in (docs/configuration.md
// `observability.log_format`, docs/aisix-compatibility.md "Logs"). Logging never throws into the caller and
// never blocks on I/O beyond the platform's write.

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
   * absent field), byte for byte, without the object: for a line written with the same fields every time.
   */
  logLine(level: Level, msg: string, layout: LineLayout, values: readonly unknown[]): void;
  /** The same sink and level, writing lines under another target (e.g. `aisix_obs::access_log`). */
  withTarget(target: string): Logger;
}

/** A line's field names, fixed, with each member's head preformatted for both formats. */
export class LineLayout {
  /** `,"name":` per field. */
  readonly json: readonly string[];
  /** ` name=` per field. */
  readonly text: readonly string[];
  constructor(readonly names: readonly string[]) {
    this.json = names.map((k) => `,${JSON.stringify(k)}:`);
    this.text = names.map((k) => ` ${k}=`);
  }
}

export interface LoggerOptions {
  level: Level;
  format: 'json' | 'text';
  write: (line: string) => void;
  now?: () => Date;
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
function clock(nowMs: () => number, suffix: string): () => string {
  let lastMs = NaN;
  let last = '';
  let second = NaN;
  let prefix = ''; // `2026-01-02T03:04:05.`
  return () => {
    const ms = nowMs();
    if (ms !== lastMs) {
      lastMs = ms;
      const s = Math.floor(ms / 1000) * 1000;
      if (s !== second) {
        second = s;
        prefix = new Date(s).toISOString().slice(0, -4); // a NaN time throws here, as toISOString does
      }
      const f = ms - s;
      last = `${prefix}${f < 10 ? '00' : f < 100 ? '0' : ''}${f}${suffix}`;
    }
    return last;
  };
}

// deno-lint-ignore no-control-regex
const JSON_ESCAPED = /["\\\x00-\x1f\ud800-\udfff]/;

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
  for (let i = 0; i < values.length; i++) {
    const s = jsonValue(values[i]);
    if (s === SKIP) continue;
    if (s === WHOLE) return spliced(head, layoutObject(layout, values));
    out += layout.json[i]! + s;
  }
  return `${out}}`;
}

function layoutObject(layout: LineLayout, values: readonly unknown[]): Fields {
  const o: Fields = {};
  for (let i = 0; i < values.length; i++) o[layout.names[i]!] = values[i];
  return o;
}

/** A member `JSON.stringify` leaves out. */
const SKIP = 0;
/** A value only `JSON.stringify` of the whole object writes right. */
const WHOLE = 1;
/** A member value as `JSON.stringify` writes it, for the primitives callers pass. */
function jsonValue(v: unknown): string | typeof SKIP | typeof WHOLE {
  if (typeof v === 'string') return JSON_ESCAPED.test(v) ? JSON.stringify(v) : `"${v}"`;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v === undefined || typeof v === 'function' || typeof v === 'symbol') return SKIP;
  if (v === null) return 'null';
  return WHOLE;
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
  const now = opts.now;
  const time = clock(now ? () => now().getTime() : Date.now, opts.format === 'json' ? 'Z' : '000Z');
  const make = (target: string): Logger => {
    const jsonTarget = JSON.stringify(target);
    const jsonHead = (level: Level, msg: string) =>
      `{"time":"${time()}","level":"${UPPER[level]}","target":${jsonTarget},"msg":${quotedMsg(msg)}`;
    const textHead = (level: Level, msg: string) => `${time()} ${PADDED[level]} ${target}: ${msg}`;
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
    const logLine = (level: Level, msg: string, layout: LineLayout, values: readonly unknown[]): void => {
      if (RANK[level] < min) return;
      let line: string;
      if (opts.format === 'json') line = jsonLayoutLine(jsonHead(level, msg), layout, values);
      else {
        line = textHead(level, msg);
        for (let i = 0; i < values.length; i++) {
          const v = values[i];
          if (v !== undefined && v !== null) line += layout.text[i]! + textValue(v);
        }
      }
      write(line);
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
