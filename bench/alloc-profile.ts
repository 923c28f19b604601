// Bytes allocated per proxied request by the Node gateway or the bare Hono proxy, by function: V8's sampling heap
// profiler over the inspector, with the objects the collector has taken kept in the samples (so it counts what was
// allocated, not what survived). Per run: the bench configuration, the mock upstream on Bun, `--warmup` requests
// uncounted, then `--requests` sampled, four in flight over keep-alive connections. The bundle's frames are named
// through its source map. Allocation does not depend on the machine's load (bench/results/own-work-2026-12-06.md).
// A sample names the outermost function of optimised code, so what the compilers inlined counts as its caller's;
// `--no-inline` turns their inlining off to name each allocating function (it allocates more: escape analysis
// needs inlining, so its totals are for attribution, not for comparing trees).
//
//   node --import tsx bench/alloc-profile.ts [--bare] [--tree DIR] [--requests 10000] [--warmup 20000] [--top 40]
//     [--no-inline] [--callers NAME [--depth 3]]
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { WebSocket } from 'undici';
import { freePort } from '../test/support/process.ts';
import { sendChats } from './chat-post.ts';
import { flag, has } from './flags.ts';
import { startBenchMock, startUntil } from './proc.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const BARE = has('bare');
const TREE = path.resolve(flag('tree', ROOT));
const REQUESTS = Number(flag('requests', '10000'));
const WARMUP = Number(flag('warmup', '20000'));
const TOP = Number(flag('top', '40'));
const IN_FLIGHT = 4;

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface SampleNode {
  callFrame: CallFrame;
  selfSize: number;
  children: SampleNode[];
}

/** One inspector session: `call` sends a method and resolves with its result. */
async function inspector(port: number) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise<void>((resolve) => ws.addEventListener('open', () => resolve()));
  const waiting = new Map<number, (m: { result?: unknown; error?: { message: string } }) => void>();
  ws.addEventListener('message', (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (m.id !== undefined) waiting.get(m.id)?.(m);
  });
  let next = 0;
  const call = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, (m) => m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result as T));
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { call, close: () => ws.close() };
}

const mockPort = await startBenchMock();
const port = await freePort();
const inspectPort = await freePort();
const inspect = `--inspect=127.0.0.1:${inspectPort}`;
const v8Flags = has('no-inline') ? ['--no-turbo-inlining', '--no-maglev-inlining'] : [];
const upstream = `http://127.0.0.1:${mockPort}`;
await startUntil(
  process.execPath,
  BARE
    ? [
      inspect,
      ...v8Flags,
      '--import',
      'tsx',
      path.join(ROOT, 'bench/bare-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      upstream,
    ]
    : [inspect, ...v8Flags, path.join(TREE, 'bin/sluice'), '--config', path.join(ROOT, 'bench/config/config.yaml')],
  {
    ...process.env,
    SLUICE_BENCH_UPSTREAM: `${upstream}/v1`,
    AISIX_PROXY__ADDR: `127.0.0.1:${port}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${await freePort()}`,
  },
  /"listener":"proxy"|bare-proxy listening/, // not the inspector's own "Debugger listening"
);
await sendChats(port, WARMUP, IN_FLIGHT);
const session = await inspector(inspectPort);
await session.call('HeapProfiler.enable');
await session.call('HeapProfiler.startSampling', {
  samplingInterval: 256,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
await sendChats(port, REQUESTS, IN_FLIGHT);
const { profile } = await session.call<{ profile: { head: SampleNode } }>('HeapProfiler.stopSampling');
session.close();

const map = BARE ? undefined : new SourceMap(JSON.parse(readFileSync(path.join(TREE, 'dist/node.mjs.map'), 'utf8')));
/** A frame as `function source:line`, the bundle's mapped back to its source. */
function where(f: CallFrame): string {
  const name = f.functionName || '(anonymous)';
  if (map && f.url.endsWith('/dist/node.mjs')) {
    const e = map.findEntry(f.lineNumber, f.columnNumber) as { originalSource?: string; originalLine?: number };
    const source = (e.originalSource ?? '?').replace(/^.*?\/(src|runtimes|node_modules)\//, '$1/');
    return `${name} ${source}:${(e.originalLine ?? 0) + 1}`;
  }
  return `${name} ${f.url.replace(/^.*\/node_modules\//, 'node_modules/')}:${f.lineNumber + 1}`;
}
const byFunction = new Map<string, number>();
let total = 0;
/** `--callers NAME`: the bytes of functions whose frame names NAME, by their `--depth` (3) nearest callers. */
const CALLERS = flag('callers', '');
const DEPTH = Number(flag('depth', '3'));
const byCallers = new Map<string, number>();
const walk = (n: SampleNode, stack: string[]) => {
  const w = where(n.callFrame);
  if (n.selfSize) {
    byFunction.set(w, (byFunction.get(w) ?? 0) + n.selfSize);
    total += n.selfSize;
    if (CALLERS && w.includes(CALLERS)) {
      const key = [w, ...stack.slice(-DEPTH).reverse()].join(' ← ');
      byCallers.set(key, (byCallers.get(key) ?? 0) + n.selfSize);
    }
  }
  stack.push(w);
  for (const c of n.children) walk(c, stack);
  stack.pop();
};
walk(profile.head, []);
const perRequest = (bytes: number) => Math.round(bytes / REQUESTS).toLocaleString('en');
console.log(
  `\n${BARE ? 'bare Hono proxy' : `Sluice (${TREE})`}: ${perRequest(total)} bytes allocated per request ` +
    `(${REQUESTS} sampled after ${WARMUP} uncounted, ${IN_FLIGHT} in flight)\n`,
);
console.log('| bytes per request | function (source:line of its start) |\n| ---: | --- |');
for (const [w, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
  console.log(`| ${perRequest(bytes)} | \`${w}\` |`);
}
if (CALLERS) {
  console.log(`\n| bytes per request | \`${CALLERS}\` ← its callers |\n| ---: | --- |`);
  for (const [w, bytes] of [...byCallers].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`| ${perRequest(bytes)} | ${w} |`);
  }
}
process.exit(0);
