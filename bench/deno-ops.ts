// Deno's ops per proxied request: Sluice on Deno against the bare proxy of its own pieces (node:http and undici),
// counted from `deno run --trace-ops`, which prints every op a process dispatches. An op is a call from JavaScript
// into Deno's Rust; the count tells whether Sluice's excess in Deno's binary comes from ops or from V8's own C++.
//
//   node --import tsx bench/deno-ops.ts [--requests 2000] [--warmup 3000] [--bare-flags "--listener node --client undici"]
//
// Each process serves `--warmup` uncounted requests, then `--requests` counted ones, four in flight; the ops
// dispatched between the two (until the output is quiet) are divided by the counted requests. Prints a table by op.
// Talks only to 127.0.0.1. What it found: bench/results/own-work-2026-12-07.md "Deno's ops per request".
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort } from '../test/support/process.ts';
import { BENCH_CHAT, sendChats } from './chat-post.ts';
import { denoRunFlags } from './deno-flags.ts';
import { flag } from './flags.ts';
import { benchGatewayEnv, startBenchMock, startUntil, stopAll } from './proc.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const DENO = path.join(ROOT, 'node_modules/.bin/deno');
const REQUESTS = Number(flag('requests', '2000'));
const WARMUP = Number(flag('warmup', '3000'));
const BARE_FLAGS = flag('bare-flags', '--listener node --client undici').split(/\s+/).filter(Boolean);
const IN_FLIGHT = 4;
const DISPATCHED = /\] (\S+)\s+: Dispatched/;

/** Counts `--trace-ops`' dispatch lines while `counting` is on. */
class OpCounter {
  counting = false;
  lastOutput = performance.now();
  readonly counts = new Map<string, number>();
  private rest = '';

  attach(p: ChildProcess): void {
    const take = (d: Buffer) => {
      this.lastOutput = performance.now();
      const lines = (this.rest + d.toString()).split('\n');
      this.rest = lines.pop()!;
      if (!this.counting) return;
      for (const line of lines) {
        const m = DISPATCHED.exec(line);
        if (m) this.counts.set(m[1]!, (this.counts.get(m[1]!) ?? 0) + 1);
      }
    };
    p.stdout!.on('data', take);
    p.stderr!.on('data', take);
  }

  /** Resolves once the process has printed nothing for `ms`. */
  async quiet(ms = 300): Promise<void> {
    while (performance.now() - this.lastOutput < ms) await new Promise((r) => setTimeout(r, ms / 3));
  }
}

async function count(which: 'sluice' | 'bare', mockPort: number): Promise<Map<string, number>> {
  const port = await freePort();
  const args = which === 'sluice'
    ? [
      'run',
      ...await denoRunFlags(ROOT),
      '--trace-ops',
      path.join(ROOT, 'runtimes/deno.ts'),
      '--config',
      'bench/config/config.yaml',
    ]
    : [
      'run',
      '-A',
      '--trace-ops',
      path.join(ROOT, 'bench/bare-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      `http://127.0.0.1:${mockPort}`,
      ...BARE_FLAGS,
    ];
  const env = await benchGatewayEnv(mockPort, port);
  const p = await startUntil(DENO, args, env, /"listening"|listening on|bare-proxy listening/);
  const ops = new OpCounter();
  ops.attach(p);
  await sendChats(port, WARMUP, IN_FLIGHT, BENCH_CHAT);
  await ops.quiet();
  ops.counting = true;
  await sendChats(port, REQUESTS, IN_FLIGHT, BENCH_CHAT);
  await ops.quiet();
  ops.counting = false;
  p.kill('SIGKILL');
  return ops.counts;
}

const mockPort = await startBenchMock();
try {
  const sluice = await count('sluice', mockPort);
  const bare = await count('bare', mockPort);
  const per = (m: Map<string, number>, op: string) => (m.get(op) ?? 0) / REQUESTS;
  const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0) / REQUESTS;
  const ops = [...new Set([...sluice.keys(), ...bare.keys()])]
    .sort((a, b) =>
      Math.abs(per(sluice, b) - per(bare, b)) - Math.abs(per(sluice, a) - per(bare, a)) || a.localeCompare(b)
    );
  const row = (name: string, s: number, b: number) =>
    `| ${name.padEnd(34)} | ${s.toFixed(3).padStart(9)} | ${b.toFixed(3).padStart(9)} | ${
      (s - b).toFixed(3).padStart(9)
    } |`;
  console.log(`Deno ops per request, ${REQUESTS} counted after ${WARMUP} (bare: ${BARE_FLAGS.join(' ')})\n`);
  console.log(`| ${'op'.padEnd(34)} | ${'Sluice'.padStart(9)} | ${'bare'.padStart(9)} | ${'Δ'.padStart(9)} |`);
  console.log(`| ${'-'.repeat(34)} | --------: | --------: | --------: |`);
  console.log(row('all ops', total(sluice), total(bare)));
  for (const op of ops) {
    if (per(sluice, op) >= 0.01 || per(bare, op) >= 0.01) console.log(row(op, per(sluice, op), per(bare, op)));
  }
} finally {
  await stopAll();
}
