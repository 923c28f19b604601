// Aggregate a V8 .cpuprofile (from `node --cpu-prof`) by self time: per function+file, and per file/package.
// Frames in an esbuild bundle (dist/node.mjs) are mapped back to their original source file through the
// bundle's source map (dist/node.mjs.map, or `<url>.map` next to any profiled file), so `src/proxy/app.ts`
// and `node_modules/hono/…` show up instead of one big dist/node.mjs.
//
//   node --import tsx bench/profile-summary.ts <file.cpuprofile> [--top 15] [--json] [--callers NAME [--depth 3]]
// `--callers writev` also lists the JavaScript call paths (3 frames, innermost first) under which the
// named function spent its self time: where a native or runtime cost comes from.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface Row {
  fn: string;
  file: string;
  line: number;
  selfMs: number;
  pct: number;
  totalMs: number;
  totalPct: number;
}
export interface Summary {
  totalMs: number;
  sampledMs: number;
  idleMs: number;
  byFunction: Row[];
  byFile: { file: string; selfMs: number; pct: number }[];
  /** Functions of this project (src/, runtimes/) by inclusive time: what each step costs with its callees. */
  projectInclusive: Row[];
}

// ---------------------------------------------------------------------------------------- source maps
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_INDEX = new Map([...B64].map((c, i) => [c, i]));

/** Generated line → sorted segments [genCol, sourceIndex, origLine]. */
type Segments = Int32Array[];

function decodeMappings(mappings: string): Segments[] {
  const lines: Segments[] = [];
  let src = 0, origLine = 0, origCol = 0;
  for (const lineText of mappings.split(';')) {
    const segs: Segments = [];
    let genCol = 0;
    if (lineText) {
      for (const seg of lineText.split(',')) {
        const vals: number[] = [];
        let value = 0, shift = 0;
        for (const ch of seg) {
          const digit = B64_INDEX.get(ch)!;
          value += (digit & 31) << shift;
          if (digit & 32) shift += 5;
          else {
            vals.push(value & 1 ? -(value >>> 1) : value >>> 1);
            value = 0;
            shift = 0;
          }
        }
        genCol += vals[0]!;
        if (vals.length >= 4) {
          src += vals[1]!;
          origLine += vals[2]!;
          origCol += vals[3]!;
          segs.push(Int32Array.of(genCol, src, origLine));
        }
      }
    }
    lines.push(segs);
  }
  return lines;
}

class SourceMap {
  private readonly lines: Segments[];
  private readonly sources: string[];
  constructor(mapFile: string) {
    const map = JSON.parse(readFileSync(mapFile, 'utf8')) as {
      sources: string[];
      sourceRoot?: string;
      mappings: string;
    };
    const root = path.dirname(mapFile);
    this.sources = map.sources.map((s) => path.relative(process.cwd(), path.resolve(root, map.sourceRoot ?? '', s)));
    this.lines = decodeMappings(map.mappings);
  }
  /** 0-based generated position → original file and 1-based line, if mapped. */
  lookup(line: number, col: number): { file: string; line: number } | undefined {
    const segs = this.lines[line];
    if (!segs || segs.length === 0) return undefined;
    let lo = 0, hi = segs.length - 1, best = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (segs[mid]![0]! <= col) {
        best = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const s = segs[best < 0 ? 0 : best]!;
    return { file: this.sources[s[1]!]!, line: s[2]! + 1 };
  }
}

const maps = new Map<string, SourceMap | null>();
function mapFor(url: string): SourceMap | null {
  if (maps.has(url)) return maps.get(url)!;
  let sm: SourceMap | null = null;
  try {
    const file = url.startsWith('file://') ? fileURLToPath(url) : url;
    if (file && existsSync(`${file}.map`)) sm = new SourceMap(`${file}.map`);
  } catch {
    sm = null;
  }
  maps.set(url, sm);
  return sm;
}

function shortFile(url: string): string {
  if (!url) return '';
  let f = url.startsWith('file://') ? fileURLToPath(url) : url;
  if (path.isAbsolute(f)) f = path.relative(process.cwd(), f);
  return f;
}

/** A file's bucket for the per-file rollup: a package name for node_modules, else the file itself. */
function bucketOf(file: string): string {
  const nm = file.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = file.slice(nm + 'node_modules/'.length).split('/');
    return `${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]} (npm)`;
  }
  return file || '(native / V8)';
}

// ------------------------------------------------------------------------------------------- summary
export function summarizeProfile(profile: CpuProfile, top = 15): Summary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    // timeDeltas[i] is the time since the previous sample; attribute the next delta to this sample.
    const dt = profile.timeDeltas[i + 1] ?? 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, dt));
  }
  const fnAgg = new Map<string, Row>();
  const fileAgg = new Map<string, number>();
  const keyOf = new Map<number, { key: string; fn: string; file: string; line: number }>();
  const ident = (id: number) => {
    let k = keyOf.get(id);
    if (k) return k;
    const cf = byId.get(id)!.callFrame;
    let file = shortFile(cf.url);
    let line = cf.lineNumber + 1;
    const sm = cf.url ? mapFor(cf.url) : null;
    if (sm && cf.lineNumber >= 0) {
      const o = sm.lookup(cf.lineNumber, cf.columnNumber);
      if (o) {
        file = o.file;
        line = o.line;
      }
    }
    const fn = cf.functionName || '(anonymous)';
    k = { key: `${fn}\u0000${file}\u0000${line}`, fn, file, line };
    keyOf.set(id, k);
    return k;
  };
  const rowOf = (id: number) => {
    const k = ident(id);
    let row = fnAgg.get(k.key);
    if (!row) {
      fnAgg.set(k.key, row = { fn: k.fn, file: k.file, line: k.line, selfMs: 0, pct: 0, totalMs: 0, totalPct: 0 });
    }
    return row;
  };
  let total = 0, idle = 0;
  for (const [id, us] of selfUs) {
    const { fn, file } = ident(id);
    total += us;
    if (fn === '(idle)') {
      idle += us;
      continue;
    }
    rowOf(id).selfMs += us / 1000;
    const b = fn.startsWith('(') && !file ? fn : bucketOf(file);
    fileAgg.set(b, (fileAgg.get(b) ?? 0) + us / 1000);
  }
  // Inclusive ("total") time: every distinct function on a sample's stack gets the sample once.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = Math.max(0, profile.timeDeltas[i + 1] ?? 0);
    let id: number | undefined = profile.samples[i]!;
    if (ident(id).fn === '(idle)') continue;
    const seen = new Set<string>();
    while (id !== undefined) {
      const k = ident(id);
      if (!seen.has(k.key) && k.fn !== '(root)') {
        seen.add(k.key);
        rowOf(id).totalMs += dt / 1000;
      }
      id = parent.get(id);
    }
  }
  const busyMs = (total - idle) / 1000;
  const rows = [...fnAgg.values()].filter((r) => r.selfMs > 0).sort((a, b) => b.selfMs - a.selfMs);
  for (const r of fnAgg.values()) {
    r.pct = (100 * r.selfMs) / busyMs;
    r.totalPct = (100 * r.totalMs) / busyMs;
  }
  const files = [...fileAgg].map(([file, selfMs]) => ({ file, selfMs, pct: (100 * selfMs) / busyMs })).sort((a, b) =>
    b.selfMs - a.selfMs
  );
  const inclusive = [...fnAgg.values()].filter((r) => r.file.startsWith('src/') || r.file.startsWith('runtimes/')).sort(
    (a, b) => b.totalMs - a.totalMs,
  );
  return {
    totalMs: (profile.endTime - profile.startTime) / 1000,
    sampledMs: total / 1000,
    idleMs: idle / 1000,
    byFunction: rows.slice(0, top),
    byFile: files.slice(0, top),
    projectInclusive: inclusive.slice(0, top),
  };
}

/** Self time of frames named `name`, by their nearest `depth` JavaScript callers. */
export function callersOf(
  profile: CpuProfile,
  name: string,
  depth = 3,
  top = 10,
): { path: string; selfMs: number; pct: number }[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n: ProfileNode) => {
    const cf = n.callFrame;
    let where = shortFile(cf.url);
    const sm = cf.url ? mapFor(cf.url) : null;
    const o = sm && cf.lineNumber >= 0 ? sm.lookup(cf.lineNumber, cf.columnNumber) : undefined;
    if (o) where = `${o.file}:${o.line}`;
    return `${cf.functionName || '(anonymous)'}${where ? ` (${where})` : ''}`;
  };
  const agg = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = Math.max(0, profile.timeDeltas[i + 1] ?? 0);
    const node = byId.get(profile.samples[i]!)!;
    if (node.callFrame.functionName !== '(idle)') total += dt;
    if (node.callFrame.functionName !== name) continue;
    const chain: string[] = [];
    let id = parent.get(node.id);
    while (id !== undefined && chain.length < depth) {
      const p = byId.get(id)!;
      if (p.callFrame.url && p.callFrame.functionName !== '(root)') chain.push(label(p));
      id = parent.get(id);
    }
    const key = chain.join(' ← ') || '(no JavaScript caller)';
    agg.set(key, (agg.get(key) ?? 0) + dt);
  }
  return [...agg].map(([p, us]) => ({ path: p, selfMs: us / 1000, pct: (100 * us) / total })).sort((a, b) =>
    b.selfMs - a.selfMs
  ).slice(0, top);
}

export function formatSummary(s: Summary): string {
  const busy = s.sampledMs - s.idleMs;
  const out: string[] = [];
  out.push(
    `profile: ${(s.totalMs / 1000).toFixed(1)} s wall, ${(busy / 1000).toFixed(2)} s on-CPU (main thread), ${
      (s.idleMs / 1000).toFixed(2)
    } s idle; percentages are of on-CPU time`,
  );
  out.push('');
  out.push('| # | self ms | self % | total % | function | source |');
  out.push('|---:|---:|---:|---:|---|---|');
  s.byFunction.forEach((r, i) =>
    out.push(
      `| ${i + 1} | ${r.selfMs.toFixed(0)} | ${r.pct.toFixed(1)} | ${r.totalPct.toFixed(1)} | \`${r.fn}\` | ${
        r.file ? `${r.file}:${r.line}` : ''
      } |`,
    )
  );
  out.push('');
  out.push('| self by file / package | self ms | self % |');
  out.push('|---|---:|---:|');
  for (const f of s.byFile) out.push(`| ${f.file} | ${f.selfMs.toFixed(0)} | ${f.pct.toFixed(1)} |`);
  if (s.projectInclusive.length) {
    out.push('');
    out.push('| project function (src/, runtimes/) | total ms | total % | self % | source |');
    out.push('|---|---:|---:|---:|---|');
    for (const r of s.projectInclusive) {
      out.push(
        `| \`${r.fn}\` | ${r.totalMs.toFixed(0)} | ${r.totalPct.toFixed(1)} | ${
          r.pct.toFixed(1)
        } | ${r.file}:${r.line} |`,
      );
    }
  }
  return out.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: bench/profile-summary.ts <file.cpuprofile> [--top 15] [--json]\n');
    process.exit(2);
  }
  const ti = args.indexOf('--top');
  const ci = args.indexOf('--callers');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const s = summarizeProfile(profile, ti >= 0 ? Number(args[ti + 1]) : 15);
  process.stdout.write(args.includes('--json') ? `${JSON.stringify(s, null, 2)}\n` : `${formatSummary(s)}\n`);
  if (ci >= 0 && args[ci + 1]) {
    const name = args[ci + 1]!;
    process.stdout.write(`\n| callers of \`${name}\` (innermost first) | self ms | % of on-CPU |\n|---|---:|---:|\n`);
    const di = args.indexOf('--depth');
    for (const r of callersOf(profile, name, di >= 0 ? Number(args[di + 1]) : 3)) {
      process.stdout.write(`| ${r.path} | ${r.selfMs.toFixed(0)} | ${r.pct.toFixed(1)} |\n`);
    }
  }
}
