// Two built trees' Node gateways measured at the same time: each under its own wrk at JSON/50's load split in two,
// CPU per request read from /proc around each window, and the ratio per window. On a shared machine whose
// neighbours move one gateway's cost by half between two runs, both gateways then see the same neighbours.
//
//   node --import tsx bench/pair.ts --a DIR --b DIR [--windows 10] [--seconds 8] [--warmup 15] [--connections 25]
//     [--a-flags "NODE FLAGS"] [--b-flags "NODE FLAGS"]
//
// Each DIR is a tree with `dist/node.mjs` built (`node build.mjs`). The same tree as --a and --b gives the
// method's own spread; run each pair both ways round, since the first gateway started can fare differently.
// Prints each window and the median ratio A/B. Talks only to 127.0.0.1. Figures: bench/results/own-work-2026-12-07.md
// "Telemetry batched per event-loop turn, a prototype".
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../test/support/process.ts';
import { flag } from './flags.ts';
import { benchGatewayEnv, cpuSeconds, launch, startBenchMock, stopAll, wrkPost } from './proc.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const TREES = [path.resolve(flag('a')), path.resolve(flag('b'))] as const;
const WINDOWS = Number(flag('windows', '10'));
const SECONDS = Number(flag('seconds', '8'));
const WARMUP = Number(flag('warmup', '15'));
const CONNECTIONS = Number(flag('connections', '25'));
/** Node flags each gateway runs under (V8's among them), space-separated: the same tree under two sets of flags. */
const FLAGS = [flag('a-flags', ''), flag('b-flags', '')].map((f) => f.split(/\s+/).filter(Boolean));

interface Gateway {
  pid: number;
  port: number;
  log: string;
}

async function start(tree: string, flags: string[], mockPort: number, name: string): Promise<Gateway> {
  const port = await freePort();
  const log = path.join(tmpdir(), `sluice-pair-${process.pid}-${name}.log`);
  const env = await benchGatewayEnv(mockPort, port);
  const p = launch(process.execPath, [
    ...flags,
    path.join(tree, 'bin/sluice'),
    '--config',
    path.join(ROOT, 'bench/config/config.yaml'),
  ], {
    env,
    logFile: log,
  });
  const deadline = performance.now() + 30_000;
  while (!(existsSync(log) && /"listening"|listening on/.test(readFileSync(log, 'utf8')))) {
    if (performance.now() > deadline) throw new Error(`${tree}: no "listening" line within 30 s (${log})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { pid: p.pid, port, log };
}

/** One wrk run at `port`; resolves with the requests it completed (every one a 200, or it throws). */
async function wrk(port: number, seconds: number): Promise<number> {
  const r = await wrkPost(`http://127.0.0.1:${port}/v1/chat/completions`, {
    connections: CONNECTIONS,
    seconds,
    headers: 'authorization: Bearer sk-sluice-bench',
    body: '{"model":"bench-route","messages":[{"role":"user","content":"hi"}]}',
  });
  if (r.errors.status) throw new Error(`${r.errors.status} answers were not 200`);
  return r.requests;
}

const mockPort = await startBenchMock();
const gateways: Gateway[] = [];
try {
  gateways.push(await start(TREES[0], FLAGS[0]!, mockPort, 'a'), await start(TREES[1], FLAGS[1]!, mockPort, 'b'));
  await Promise.all(gateways.map((g) => wrk(g.port, WARMUP)));
  console.log(`A ${TREES[0]} ${FLAGS[0]!.join(' ')}\nB ${TREES[1]} ${FLAGS[1]!.join(' ')}\n`);
  console.log('| window | A µs/request (requests) | B µs/request (requests) | A/B |\n| ---: | ---: | ---: | ---: |');
  const ratios: number[] = [];
  for (let w = 1; w <= WINDOWS; w++) {
    const before = gateways.map((g) => cpuSeconds(g.pid));
    const served = await Promise.all(gateways.map((g) => wrk(g.port, SECONDS)));
    const us = gateways.map((g, i) => ((cpuSeconds(g.pid) - before[i]!) * 1e6) / served[i]!);
    ratios.push(us[0]! / us[1]!);
    console.log(
      `| ${w} | ${us[0]!.toFixed(1)} (${served[0]}) | ${us[1]!.toFixed(1)} (${served[1]}) | ${
        ratios.at(-1)!.toFixed(3)
      } |`,
    );
  }
  const sorted = [...ratios].sort((x, y) => x - y);
  console.log(
    `\nmedian A/B ${sorted[Math.floor((sorted.length - 1) / 2)]!.toFixed(3)}; range ${sorted[0]!.toFixed(3)}–${
      sorted.at(-1)!.toFixed(3)
    }; A cheaper in ${ratios.filter((r) => r < 1).length} of ${ratios.length} windows`,
  );
} finally {
  await stopAll();
  for (const g of gateways) rmSync(g.log, { force: true });
}
