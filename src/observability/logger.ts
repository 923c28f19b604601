// One line per event to stderr (SPEC §10). `text` (the default) is AISIX's line — tracing-subscriber's "full"
// format without colour: `<RFC 3339 µs timestamp> <LEVEL padded to 5> <target>: <message> key=value …`, string
// values double-quoted with Rust's Debug escaping, numbers and booleans bare, absent (undefined/null) fields omitted.
// `json` (opt-in): {"time","level","target","msg",…fields}. Logging never throws into the caller and never
// blocks on I/O beyond the platform's write.

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
  /** The same sink and level, writing lines under another target (e.g. `aisix_obs::access_log`). */
  withTarget(target: string): Logger;
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

/** `2026-01-02T03:04:05.678000Z`: tracing-subscriber's SystemTime timer prints microseconds. */
function rfc3339Micros(d: Date): string {
  const iso = d.toISOString(); // …T03:04:05.678Z
  return `${iso.slice(0, -1)}000Z`;
}

/** The time string, formatted once per millisecond (an access log writes many lines per ms). */
function clock(now: () => Date, format: (d: Date) => string): () => string {
  let lastMs = -1;
  let last = '';
  return () => {
    const d = now();
    const ms = d.getTime();
    if (ms !== lastMs) {
      lastMs = ms;
      last = format(d);
    }
    return last;
  };
}

const UPPER: Record<Level, string> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR' };
/** tracing's level column: right-aligned to 5. */
const PADDED: Record<Level, string> = { trace: 'TRACE', debug: 'DEBUG', info: ' INFO', warn: ' WARN', error: 'ERROR' };

export function createLogger(opts: LoggerOptions): Logger {
  const min = RANK[opts.level];
  const now = opts.now ?? (() => new Date());
  const time = opts.format === 'json' ? clock(now, (d) => d.toISOString()) : clock(now, rfc3339Micros);
  const make = (target: string): Logger => {
    const jsonTarget = JSON.stringify(target);
    const log = (level: Level, msg: string, fields?: Fields): void => {
      if (RANK[level] < min) return;
      let line: string;
      if (opts.format === 'json') {
        // `{"time","level","target","msg"` then the fields' own object body: no merged copy of the fields.
        const head = `{"time":"${time()}","level":"${UPPER[level]}","target":${jsonTarget},"msg":${
          JSON.stringify(msg)
        }`;
        const rest = fields ? JSON.stringify(fields) : '{}';
        line = rest.length > 2 ? `${head},${rest.slice(1)}` : `${head}}`;
      } else {
        line = `${time()} ${PADDED[level]} ${target}: ${msg}`;
        if (fields) {
          for (const k in fields) {
            const v = fields[k];
            if (v !== undefined && v !== null) line += ` ${k}=${textValue(v)}`;
          }
        }
      }
      try {
        opts.write(line);
      } catch {
        // A closed stderr must not take a request down with it.
      }
    };
    return {
      enabled: (level) => RANK[level] >= min,
      log,
      debug: (m, f) => log('debug', m, f),
      info: (m, f) => log('info', m, f),
      warn: (m, f) => log('warn', m, f),
      error: (m, f) => log('error', m, f),
      withTarget: (t) => make(t),
    };
  };
  return make(opts.target ?? DEFAULT_TARGET);
}
