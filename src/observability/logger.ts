// One line per event to stderr (SPEC §10). `json`: {"time","level","msg",…fields}; `text`: human-readable.
// Logging never throws into the caller and never blocks on I/O beyond the platform's write.

export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
const RANK: Record<Level, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

export type Fields = Record<string, unknown>;

export interface Logger {
  enabled(level: Level): boolean;
  log(level: Level, msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

export interface LoggerOptions {
  level: Level;
  format: 'json' | 'text';
  write: (line: string) => void;
  now?: () => Date;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) ? JSON.stringify(v) : v;
  return JSON.stringify(v) ?? 'undefined';
}

/** The ISO time string, formatted once per millisecond (an access log writes many lines per ms). */
function isoClock(now: () => Date): () => string {
  let lastMs = -1;
  let last = '';
  return () => {
    const d = now();
    const ms = d.getTime();
    if (ms !== lastMs) {
      lastMs = ms;
      last = d.toISOString();
    }
    return last;
  };
}

const UPPER: Record<Level, string> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR' };

export function createLogger(opts: LoggerOptions): Logger {
  const min = RANK[opts.level];
  const time = isoClock(opts.now ?? (() => new Date()));
  const log = (level: Level, msg: string, fields?: Fields): void => {
    if (RANK[level] < min) return;
    let line: string;
    if (opts.format === 'json') {
      // `{"time","level","msg"` then the fields' own object body: no merged copy of the fields.
      const head = `{"time":"${time()}","level":"${UPPER[level]}","msg":${JSON.stringify(msg)}`;
      const rest = fields ? JSON.stringify(fields) : '{}';
      line = rest.length > 2 ? `${head},${rest.slice(1)}` : `${head}}`;
    } else {
      line = `${time()} ${UPPER[level].padEnd(5)} ${msg}`;
      if (fields) { for (const [k, v] of Object.entries(fields)) if (v !== undefined) line += ` ${k}=${textValue(v)}`; }
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
  };
}
