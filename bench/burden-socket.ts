// What each kind of per-request work (bench/burden.ts) costs a proxy at the socket, against the time inside it:
// one bare Hono proxy on Node per burden, all on one mock upstream, JSON at 50 connections (wrk), the rounds
// alternating between the proxies; each proxy's CPU per request from /proc, less the `spin:0` proxy's (the same
// handler with nothing added), over the time spent inside the burden's calls in that proxy (bench/README.md "What
// a request's work costs at the socket").
//
//   node --import tsx bench/burden-socket.ts [--burdens spin:0,spin:8000,await:200,funcs:550,garbage:300,alloc:300]
//     [--seconds 5] [--rounds 3] [--warmup 12]
//
// The burden `contract` is the contract's floor instead (bench/contract-floor.ts), and `contract-no:logs+metrics`
// the floor without those parts, to price each part of the contract at the socket:
//
//   node --import tsx bench/burden-socket.ts --burdens spin:0,contract,contract-no:logs,contract-no:metrics
//
// Talks only to 127.0.0.1. Needs wrk (apt-get install -y wrk).
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { burden, type Spent } from './burden.ts';
import { flag } from './flags.ts';
import { freePort, getOnce, startBenchMock, startUntil, stopAll, userSystemSeconds, wrkPost } from './proc.ts';
import { median } from './stats.ts';

const BENCH = path.dirname(new URL(import.meta.url).pathname);
const BURDENS = flag('burdens', 'spin:0,spin:8000,await:200,funcs:550,garbage:300,alloc:300').split(',');
const SECONDS = Number(flag('seconds', '5'));
const ROUNDS = Number(flag('rounds', '3'));
const WARMUP_S = Number(flag('warmup', '12'));
// Sluice's bench key and model: the contract's floor checks them, the bare proxy forwards them to the mock as they are.
const BODY = JSON.stringify({ model: 'bench-route', messages: [{ role: 'user', content: 'Say hello.' }] });

/** The bare-proxy.ts flags of a spec: a burden, or the contract's floor less the parts after `contract-no:`. */
function proxyFlags(spec: string): string[] {
  if (spec === 'contract') return ['--contract'];
  if (spec.startsWith('contract-no:')) return ['--contract', '--contract-skip', spec.slice(12).replaceAll('+', ',')];
  burden(spec); // a malformed spec fails here, before anything starts
  return ['--burden', spec];
}
const isContract = (spec: string) => spec === 'contract' || spec.startsWith('contract-no:');

if (spawnSync('wrk', ['--version']).error) {
  console.error('bench/burden-socket.ts needs wrk: apt-get install -y wrk');
  process.exit(1);
}
if (BURDENS[0] !== 'spin:0') BURDENS.unshift('spin:0');

/** One wrk run at 50 connections: the requests it completed; throws on any error or non-2xx answer. */
async function load(port: number, seconds: number): Promise<number> {
  const r = await wrkPost(`http://127.0.0.1:${port}/v1/chat/completions`, {
    connections: 50,
    seconds,
    headers: 'authorization: Bearer sk-sluice-bench',
    body: BODY,
  });
  const errors = Object.values(r.errors).reduce((a, b) => a + b, 0);
  if (errors > 0) throw new Error(`wrk saw ${errors} errors or non-2xx answers: ${JSON.stringify(r.errors)}`);
  return r.requests;
}

/** What the proxy's burden has cost it so far, timed around each of its calls (the contract's floor: not timed). */
async function spent(port: number): Promise<Spent> {
  const r = await getOnce(`http://127.0.0.1:${port}/burden`);
  return (JSON.parse(r.body) as Spent | null) ?? { micros: NaN, calls: 1 };
}

/** A bare proxy with the burden on a free port, once it listens. */
async function startProxy(mockPort: number, spec: string): Promise<{ pid: number; port: number }> {
  const port = await freePort();
  const child = await startUntil(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(BENCH, 'bare-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      `http://127.0.0.1:${mockPort}`,
      ...proxyFlags(spec),
    ],
    process.env,
    /bare-proxy listening/,
  );
  return { pid: child.pid!, port };
}

async function main(): Promise<void> {
  for (const spec of BURDENS) proxyFlags(spec); // a malformed spec fails here, before anything starts
  const mockPort = await startBenchMock();
  const proxies = [];
  for (const spec of BURDENS) {
    proxies.push({
      spec,
      ...await startProxy(mockPort, spec),
      perRequest: [] as number[],
      user: [] as number[],
      system: [] as number[],
      inside: [] as number[],
    });
  }
  for (const p of proxies) await load(p.port, WARMUP_S);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const p of round % 2 ? proxies : [...proxies].reverse()) {
      const cpu0 = userSystemSeconds(p.pid);
      const spent0 = await spent(p.port);
      const requests = await load(p.port, SECONDS);
      const cpu1 = userSystemSeconds(p.pid);
      p.user.push((cpu1.user - cpu0.user) * 1e6 / requests);
      p.system.push((cpu1.system - cpu0.system) * 1e6 / requests);
      p.perRequest.push(p.user.at(-1)! + p.system.at(-1)!);
      const spent1 = await spent(p.port);
      p.inside.push((spent1.micros - spent0.micros) / (spent1.calls - spent0.calls));
      console.error(`burden: round ${round}/${ROUNDS} ${p.spec} ${p.perRequest.at(-1)!.toFixed(1)} µs per request`);
    }
  }
  const base = proxies[0]!;
  const diff = (xs: number[], ys: number[]) => median(xs.map((v, i) => v - ys[i]!));
  console.log(
    `\nJSON at 50 connections, ${SECONDS} s per proxy and round, ${ROUNDS} rounds after ${WARMUP_S} s of warm-up; ` +
      'µs per request, medians; "added" is the median of per-round differences from spin:0',
  );
  console.log(
    '| burden | inside the proxy | CPU per request (rounds) | median | added | of it user | of it system | added ÷ inside |',
  );
  console.log('| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const p of proxies) {
    const first = p === base;
    const added = diff(p.perRequest, base.perRequest);
    // Less spin:0's: the timing around the calls is in every proxy.
    const inside = median(p.inside) - median(base.inside);
    const cells = first ? ['—', '—', '—', '—'] : [
      added.toFixed(1),
      diff(p.user, base.user).toFixed(1),
      diff(p.system, base.system).toFixed(1),
      isContract(p.spec) ? '—' : (added / inside).toFixed(2),
    ];
    console.log(
      `| ${p.spec} | ${isContract(p.spec) ? '—' : median(p.inside).toFixed(2)} | ${
        p.perRequest.map((v) => v.toFixed(1)).join(', ')
      } | ${median(p.perRequest).toFixed(1)} | ${cells.join(' | ')} |`,
    );
  }
}

try {
  await main();
} finally {
  await stopAll();
}
