// Whose code a run's hot 64-byte lines are (bench/instructions.ts `--by-function`): a line in a binary is its
// object's (the node binary, libc, …); a line of V8's JIT code is named by V8's code map (`--perf-basic-prof`,
// /tmp/perf-<pid>.map) and, when that names a place in the Node bundle, placed in its source by the bundle's map
// (dist/node.mjs.map). Groups: a binary, `src/<dir>`, `runtimes`, a package of node_modules, Node's own JavaScript,
// V8's builtins and interpreter handlers.
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';

/** A hot line: `"<ob> <line index>"` (bench/instructions.ts `codeLines`), and callgrind's function at it. */
export interface HotLine {
  at: string;
  fn: string;
}

/** One function's hot lines, and the group it is counted in. */
export interface OwnedFunction {
  group: string;
  name: string;
  lines: number;
}

interface CodeEntry {
  start: number;
  end: number;
  name: string;
  /** Its line in the map: code written later over the same addresses (V8 reuses freed code space) is later. */
  order: number;
}

/** V8's code map, sorted by start, and its largest entry's size (how far back a lookup must look). */
function readPerfMap(file: string): { entries: CodeEntry[]; maxSize: number } {
  const entries: CodeEntry[] = [];
  let maxSize = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (!m) continue;
    const start = Number.parseInt(m[1]!, 16);
    const size = Number.parseInt(m[2]!, 16);
    maxSize = Math.max(maxSize, size);
    entries.push({ start, end: start + size, name: m[3]!, order: entries.length });
  }
  return { entries: entries.sort((a, b) => a.start - b.start), maxSize };
}

/**
 * The code at `addr` when the run ended: of the entries that hold it, the one written last (an earlier one was freed
 * and its space reused). By binary search, then back over the entries that start within `maxSize` before it.
 */
function entryAt(map: { entries: CodeEntry[]; maxSize: number }, addr: number): CodeEntry | undefined {
  const { entries, maxSize } = map;
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid]!.start <= addr) lo = mid + 1;
    else hi = mid - 1;
  }
  let found: CodeEntry | undefined;
  for (let i = hi; i >= 0 && entries[i]!.start > addr - maxSize; i--) {
    const e = entries[i]!;
    if (addr < e.end && (!found || e.order > found.order)) found = e;
  }
  return found;
}

/** A source path from `src/`, `runtimes/` or `node_modules/` on (`../src/proxy/record.ts` → `src/proxy/record.ts`). */
function ownPath(source: string): string | undefined {
  return /(?:^|\/)((?:src|runtimes|node_modules)\/.*)$/.exec(source)?.[1];
}

/** The group of such a path: `src/<dir>`, `runtimes`, a package; else the path itself. */
function sourceGroup(rel: string): string {
  const parts = rel.split('/');
  if (parts[0] === 'node_modules') return parts[1]!.startsWith('@') ? `${parts[1]}/${parts[2]}` : parts[1]!;
  if (parts[0] === 'src') return parts.length > 2 ? `src/${parts[1]}` : rel;
  return parts[0] === 'runtimes' ? 'runtimes' : rel;
}

/** A JIT entry's group and function, from its code-map name (`JS:*name file:///…:line:col`, `Builtin:…`). */
function jitOwner(name: string, maps: Map<string, SourceMap | null>): { group: string; fn: string } {
  const m = /^(?:\w+:)?[*~^]?(\S*) (?:file:\/\/)?(\S+):(\d+):(\d+)$/.exec(name);
  if (!m) {
    const kind = /^(\w+):/.exec(name)?.[1] ?? 'JIT';
    if (kind === 'Builtin' || kind === 'BytecodeHandler' || kind === 'Handler' || kind === 'Stub') {
      return { group: kind === 'Builtin' ? "V8's builtins" : "V8's interpreter and stubs", fn: name };
    }
    return { group: 'other JIT code', fn: name };
  }
  const [, fn, file, line, col] = m;
  if (file!.startsWith('node:')) return { group: "Node's JavaScript", fn: `${fn || '(anonymous)'} ${file}` };
  let map = maps.get(file!);
  if (map === undefined) {
    let payload: unknown;
    try {
      payload = JSON.parse(readFileSync(`${file}.map`, 'utf8'));
    } catch {
      payload = undefined;
    }
    map = payload ? new SourceMap(payload as ConstructorParameters<typeof SourceMap>[0]) : null;
    maps.set(file!, map);
  }
  const at = map?.findEntry(Number(line) - 1, Number(col) - 1);
  if (at && 'originalSource' in at && at.originalSource) {
    const src = ownPath(at.originalSource) ?? at.originalSource;
    return { group: sourceGroup(src), fn: `${fn || '(anonymous)'} ${src}:${at.originalLine + 1}` };
  }
  // No map (Deno runs the sources themselves): the place is the source's.
  const own = ownPath(file!);
  if (own) return { group: sourceGroup(own), fn: `${fn || '(anonymous)'} ${own}:${line}` };
  return { group: path.basename(file!), fn: `${fn || '(anonymous)'} ${path.basename(file!)}:${line}` };
}

/**
 * Every function that holds one of the `hot` lines, most lines first: JIT code (callgrind's object `???`) by V8's
 * code map, a binary's by callgrind's name, within the binary's group.
 */
export function codeOwners(hot: Iterable<HotLine>, perfMap: string): OwnedFunction[] {
  const map = readPerfMap(perfMap);
  const maps = new Map<string, SourceMap | null>();
  const byFn = new Map<string, OwnedFunction>();
  for (const { at: key, fn: native } of hot) {
    const space = key.lastIndexOf(' ');
    const ob = key.slice(0, space);
    const addr = Number(key.slice(space + 1)) * 64;
    let group: string;
    let fn: string;
    if (ob.includes('???')) {
      // A line may start in the padding before its function: its last byte is then in it.
      const e = entryAt(map, addr) ?? entryAt(map, addr + 63);
      ({ group, fn } = e ? jitOwner(e.name, maps) : { group: 'JIT code no map names', fn: '?' });
    } else {
      group = path.basename(ob.replace(/^\(\d+\) /, ''));
      fn = `${native.replace(/^\(\d+\) /, '')} (${group})`;
    }
    const k = `${group}\0${fn}`;
    const o = byFn.get(k) ?? byFn.set(k, { group, name: fn, lines: 0 }).get(k)!;
    o.lines++;
  }
  return [...byFn.values()].sort((a, b) => b.lines - a.lines);
}
