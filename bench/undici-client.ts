// The Node upstream client's own ceiling: undici's Agent `request` (one keep-alive Agent, as runtimes/node.ts has)
// driving N concurrent non-streamed chat completions at the mock upstream, with no server in between.
//
//   node --import tsx bench/undici-client.ts --url http://127.0.0.1:M/v1/chat/completions --connections 50 \
//     --warmup 1 --duration 5 --authorization 'Bearer …' --body '{…}'
//
// Runs `--warmup` seconds untimed, then `--duration` measured seconds, and prints one line
// `BENCH_CLIENT {"requests","errors","elapsedMs","p50","p99","cpuS","maxRssMb"}` (latencies in ms; CPU and
// RSS of this process over the measured seconds / its life).
import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import { flag } from './flags.ts';

const url = flag('url');
const { origin, pathname: path } = new URL(url);
const connections = Number(flag('connections', '50'));
const warmupS = Number(flag('warmup', '1'));
const durationS = Number(flag('duration', '5'));
const headers = { 'content-type': 'application/json', authorization: flag('authorization', '') };
const body = flag('body');

const agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0, connections });

async function drive(ms: number, lat?: number[]): Promise<{ requests: number; errors: number; elapsedMs: number }> {
  const t0 = performance.now();
  const end = t0 + ms;
  let requests = 0;
  let errors = 0;
  const worker = async () => {
    while (performance.now() < end) {
      const s = performance.now();
      try {
        const res = await agent.request({ origin, path, method: 'POST', headers, body });
        await res.body.arrayBuffer();
        if (res.statusCode === 200) requests++;
        else errors++;
      } catch {
        errors++;
      }
      lat?.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return { requests, errors, elapsedMs: performance.now() - t0 };
}

if (warmupS > 0) await drive(warmupS * 1000);
const lat: number[] = [];
const cpu0 = process.cpuUsage();
const r = await drive(durationS * 1000, lat);
const cpu = process.cpuUsage(cpu0);
lat.sort((a, b) => a - b);
const q = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! : NaN);
process.stdout.write(
  `BENCH_CLIENT ${
    JSON.stringify({
      ...r,
      p50: q(0.5),
      p99: q(0.99),
      cpuS: (cpu.user + cpu.system) / 1e6,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
    })
  }\n`,
);
await agent.close();
