// Parse one gateway log line, in either format, into {time, level, target, msg, …fields}: the JSON format
// as is, and the default text format (AISIX's tracing line) field by field — quoted strings unescaped,
// bare integers/booleans typed, JSON arrays/objects parsed.
export interface LogLine {
  time?: string;
  level?: string;
  target?: string;
  msg?: string;
  [k: string]: unknown;
}

const HEAD = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z) {1,2}(TRACE|DEBUG|INFO|WARN|ERROR) (\S+): /;
const FIELD_START = / ([A-Za-z_][A-Za-z0-9_]*)=/;

/** Rust Debug-escaped body of a quoted string starting at `s[i] === '"'`; returns [value, index after]. */
function readQuoted(s: string, i: number): [string, number] {
  let out = '';
  let j = i + 1;
  while (j < s.length) {
    const c = s[j]!;
    if (c === '"') return [out, j + 1];
    if (c === '\\') {
      const n = s[j + 1];
      if (n === 'u' && s[j + 2] === '{') {
        const end = s.indexOf('}', j);
        out += String.fromCodePoint(parseInt(s.slice(j + 3, end), 16));
        j = end + 1;
        continue;
      }
      out += n === 'n' ? '\n' : n === 'r' ? '\r' : n === 't' ? '\t' : n === '0' ? '\0' : (n ?? '');
      j += 2;
      continue;
    }
    out += c;
    j++;
  }
  throw new Error(`unterminated string in log line: ${s}`);
}

/** A JSON array/object starting at `s[i]`; returns [value, index after]. */
function readJson(s: string, i: number): [unknown, number] {
  let depth = 0;
  let inStr = false;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (inStr) {
      if (c === '\\') j++;
      else if (c === '"') inStr = false;
    } else if (c === '"') inStr = true;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') {
      depth--;
      if (depth === 0) return [JSON.parse(s.slice(i, j + 1)), j + 1];
    }
  }
  throw new Error(`unterminated JSON value in log line: ${s}`);
}

export function parseTextLine(line: string): LogLine | undefined {
  const h = HEAD.exec(line);
  if (!h) return undefined;
  const out: LogLine = { time: h[1], level: h[2], target: h[3] };
  let rest = line.slice(h[0].length);
  const first = FIELD_START.exec(rest);
  out.msg = first ? rest.slice(0, first.index) : rest;
  rest = first ? rest.slice(first.index) : '';
  let i = 0;
  while (i < rest.length) {
    const m = /^ ([A-Za-z_][A-Za-z0-9_]*)=/.exec(rest.slice(i));
    if (!m) throw new Error(`unparseable field at ${i} in log line: ${line}`);
    const key = m[1]!;
    i += m[0].length;
    const c = rest[i];
    if (c === '"') {
      const [v, next] = readQuoted(rest, i);
      out[key] = v;
      i = next;
    } else if (c === '[' || c === '{') {
      const [v, next] = readJson(rest, i);
      out[key] = v;
      i = next;
    } else {
      let end = rest.indexOf(' ', i);
      if (end < 0) end = rest.length;
      const raw = rest.slice(i, end);
      out[key] = raw === 'true'
        ? true
        : raw === 'false'
        ? false
        : /^-?\d+(\.\d+)?(e[+-]?\d+)?$/.test(raw)
        ? Number(raw)
        : raw;
      i = end;
    }
  }
  return out;
}

/** A log line in either format, or undefined for anything else (reports, fatal errors). */
export function parseLogLine(line: string): LogLine | undefined {
  if (line.startsWith('{')) {
    try {
      const v = JSON.parse(line) as unknown;
      return typeof v === 'object' && v !== null ? v as LogLine : undefined;
    } catch {
      return undefined;
    }
  }
  return parseTextLine(line);
}
