// What a million api keys hold, in process, on the runtime that runs this (docs/performance.md "Configuration at
// scale"): the etcd source fed the bench's documents a page at a time as `decodeKv` decodes them, or the file
// source loading and then reloading a file of N keys. After each stage a full collection, then the heap in use
// per key, RSS, and on Bun the heap's capacity and the object types that grew most; a 5 ms sampler keeps the peak
// RSS of each stage (with the heap's size at that moment) and the longest gap between its ticks.
//
// Run: node --expose-gc --import tsx bench/key-memory.ts [--keys 300000] [--source etcd|file]
//      bun bench/key-memory.ts [--keys 300000] [--source etcd|file] [--snapshot 1]
import { createHash } from 'node:crypto';
import { createGateway } from '../src/boot.ts';
import { ConfigFactsRecorder } from '../src/config-facts.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/observability/logger.ts';
import { EtcdRows } from '../src/sources/etcd/apply.ts';
import { decodeKv, encodeUtf8, type EtcdKv } from '../src/sources/etcd/client.ts';
import type { SourceSink } from '../src/sources/source.ts';
import { base64Encode } from '../src/util/bytes.ts';
import { testPlatform } from '../test/support/platform.ts';
import { nodeSha256Stream } from '../runtimes/node-sha256.ts';
import { flag } from './flags.ts';

const KEYS = Number(flag('keys', '300000'));
const SOURCE = flag('source', 'etcd');
const PAGE = 20_000;
/** On Bun: a heap snapshot after each stage, its bytes summed by class. */
const SNAPSHOT = flag('snapshot', '') !== '';
const MiB = 1048576;

interface Jsc {
  heapStats(): { heapSize: number; heapCapacity: number; objectTypeCounts: Record<string, number> };
  heapSize(): number;
}
const bun = (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun;
const jsc: Jsc | undefined = bun ? await import('bun:jsc' as string) as Jsc : undefined;

function collect(): void {
  // Twice on Bun: the first full collection may leave what its finalizers released.
  if (bun) bun.gc(true), bun.gc(true);
  else (globalThis as { gc?: () => void }).gc?.();
}

function heapUsed(): number {
  return jsc ? jsc.heapStats().heapSize : process.memoryUsage().heapUsed;
}

let counts: Record<string, number> = {};
let peak = 0;
let peakHeap = 0;
let lastTick = performance.now();
let maxGap = 0;
setInterval(() => {
  const now = performance.now();
  maxGap = Math.max(maxGap, now - lastTick);
  lastTick = now;
  const rss = process.memoryUsage().rss;
  if (rss > peak) {
    peak = rss;
    peakHeap = jsc ? jsc.heapSize() : process.memoryUsage().heapUsed;
  }
}, 5).unref?.();

const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
let cpuAt = cpuSeconds();

/** After a full collection: heap in use, per key, RSS, the peak since the last stage and, on Bun, what grew. */
function stage(name: string, base: number): number {
  collect();
  const used = heapUsed();
  const rss = process.memoryUsage().rss;
  const line = [
    `${name.padEnd(28)} heap ${(used / MiB).toFixed(1)} MiB`,
    `per key ${((used - base) / KEYS).toFixed(0)} B`,
    `rss ${(rss / MiB).toFixed(0)} MiB`,
    `peak rss ${(Math.max(peak, rss) / MiB).toFixed(0)} MiB (heap then ${(peakHeap / MiB).toFixed(0)})`,
    `longest timer gap ${maxGap.toFixed(0)} ms`,
    `cpu ${(cpuSeconds() - cpuAt).toFixed(1)} s`,
    ...(jsc ? [`capacity ${(jsc.heapStats().heapCapacity / MiB).toFixed(0)} MiB`] : []),
  ];
  console.log(line.join(', '));
  peak = 0;
  cpuAt = cpuSeconds();
  maxGap = 0;
  lastTick = performance.now();
  if (jsc) {
    const now = jsc.heapStats().objectTypeCounts;
    const grew = Object.entries(now).map(([t, n]) => [t, n - (counts[t] ?? 0)] as const)
      .filter(([, d]) => Math.abs(d) >= KEYS / 20).sort((a, b) => b[1] - a[1]);
    if (grew.length) console.log('  objects:', grew.map(([t, d]) => `${t} ${d > 0 ? '+' : ''}${d}`).join(', '));
    counts = now;
    if (SNAPSHOT) bySize();
  }
  return used;
}

/**
 * The classes that hold the most bytes in a JSC heap snapshot (nodes: id, size, class, flags; edges: from, to,
 * type, name), and what holds each cell over 5 MiB (a hash table's or an array's storage), five levels up.
 */
function bySize(): void {
  const snap = (bun as unknown as { generateHeapSnapshot(): { nodes: number[]; nodeClassNames: string[] } })
    .generateHeapSnapshot();
  const bytes = new Map<string, [number, number]>();
  for (let i = 0; i < snap.nodes.length; i += 4) {
    const name = snap.nodeClassNames[snap.nodes[i + 2]!]!;
    const [b, n] = bytes.get(name) ?? [0, 0];
    bytes.set(name, [b + snap.nodes[i + 1]!, n + 1]);
  }
  const full = snap as unknown as { edges: number[]; edgeNames: string[] };
  const cls = new Map<number, string>();
  const size = new Map<number, number>();
  for (let i = 0; i < snap.nodes.length; i += 4) {
    cls.set(snap.nodes[i]!, snap.nodeClassNames[snap.nodes[i + 2]!]!);
    size.set(snap.nodes[i]!, snap.nodes[i + 1]!);
  }
  const into = new Map<number, [number, string][]>();
  for (let i = 0; i < full.edges.length; i += 4) {
    const to = full.edges[i + 1]!;
    const list = into.get(to) ?? [];
    list.push([full.edges[i]!, full.edgeNames[full.edges[i + 3]!] ?? String(full.edges[i + 3])]);
    into.set(to, list);
  }
  const chain = (id: number, depth: number): string => {
    if (depth === 0) return '';
    const from = into.get(id) ?? [];
    return '[' + from.slice(0, 3).map(([f, n]) => `${cls.get(f)}.${n}${chain(f, depth - 1)}`).join(' | ') + ']';
  };
  for (const [id, b] of size) {
    if (b > 5 << 20) console.log('  retained', cls.get(id), (b / MiB).toFixed(1), 'MiB by', chain(id, 5));
  }
  const top = [...bytes].sort((a, b) => b[1][0] - a[1][0]).slice(0, 12);
  const large: [number, string][] = [];
  for (let i = 0; i < snap.nodes.length; i += 4) {
    if (snap.nodes[i + 1]! > 100_000) large.push([snap.nodes[i + 1]!, snap.nodeClassNames[snap.nodes[i + 2]!]!]);
  }
  large.sort((a, b) => b[0] - a[0]);
  console.log('  largest:', large.slice(0, 16).map(([b, c]) => `${c} ${(b / 1024).toFixed(0)} KiB`).join(', '));
  console.log('  bytes:', top.map(([c, [b, n]]) => `${c} ${(b / KEYS).toFixed(0)} B/key (${n})`).join(', '));
}

const hashOf = (plain: string): string => createHash('sha256').update(plain).digest('hex');

function sink(): SourceSink {
  const record = new ConfigFactsRecorder('etcd');
  return {
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    clock: Date.now,
    record,
    facts: record.view,
    apply: () => {},
    recordFailure: () => {},
  };
}

/** The pages of a range as the JSON gateway sends them, decoded as the client decodes them. */
async function* pages(): AsyncIterable<EtcdKv[]> {
  for (let from = 0; from < KEYS; from += PAGE) {
    const raw = [];
    for (let i = from; i < Math.min(KEYS, from + PAGE); i++) {
      const doc = JSON.stringify({
        display_name: `user-${i}`,
        key_hash: hashOf(`sk-scale-${i}`),
        allowed_models: ['gpt-test'],
      });
      raw.push({
        key: base64Encode(encodeUtf8(`/aisix/api_keys/k${i}`)),
        value: base64Encode(encodeUtf8(doc)),
        mod_revision: String(i + 2),
        create_revision: String(i + 2),
        version: '1',
      });
    }
    // As the client has it: the page's JSON text parsed, then each kv decoded.
    yield (JSON.parse(JSON.stringify(raw)) as unknown[]).map(decodeKv);
  }
}

async function etcd(): Promise<void> {
  const base = stage('start', 0);
  const rows = new EtcdRows(sink(), '/aisix', () => {});
  const t = performance.now();
  await rows.applyPages({ revision: KEYS + 2, pages: pages() });
  console.log(`applied in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  stage('etcd rows applied', base);
  (globalThis as { keep?: unknown }).keep = rows;
}

function file(salt: string): Uint8Array {
  const out = [
    '_format_version: "1"',
    'provider_keys:',
    '  - { display_name: pk, provider: openai, api_key: sk-x, api_base: "http://127.0.0.1:9" }',
    'models:',
    '  - { display_name: gpt-test, provider_key: pk, model_name: up }',
    'api_keys:',
  ];
  for (let i = 0; i < KEYS; i++) {
    out.push(
      `  - display_name: user-${salt}${i}`,
      `    key_hash: ${hashOf(`sk-scale-${i}`)}`,
      '    allowed_models: [gpt-test]',
    );
  }
  return new TextEncoder().encode(out.join('\n') + '\n');
}

async function fileSource(): Promise<void> {
  const base = stage('start', 0);
  let bytes: Uint8Array | undefined = file('a');
  console.log(`file of ${(bytes.length / MiB).toFixed(0)} MiB`);
  stage('file generated', base);
  const platform = testPlatform({});
  platform.files = { ...platform.files!, read: async () => bytes! };
  platform.sha256Stream = nodeSha256Stream; // as the runtimes' platforms hash the file
  const c = loadConfig(
    '/srv/config.yaml',
    'resources_file: /srv/resources.yaml\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n',
    {},
  );
  if (!c.ok) throw new Error(c.report.format());
  const g = createGateway(c.config, platform);
  let t = performance.now();
  const r = await g.source.load!();
  if (!r.ok) throw new Error(r.message);
  console.log(`load in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  bytes = undefined;
  stage('file loaded, bytes dropped', base);
  await new Promise((r) => setTimeout(r, 3000));
  stage('3 s later', base);
  bytes = file('b');
  stage('second file generated', base);
  t = performance.now();
  await g.source.reload!();
  console.log(`reload in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  bytes = undefined;
  stage('reloaded, bytes dropped', base);
  await new Promise((r) => setTimeout(r, 3000));
  stage('3 s later', base);
  (globalThis as { keep?: unknown }).keep = g;
}

console.log(`${bun ? 'bun' : 'node'}, ${KEYS} keys, ${SOURCE}`);
if (SOURCE === 'etcd') await etcd();
else await fileSource();
process.exit(0);
