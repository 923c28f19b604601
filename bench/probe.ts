// Low-rate latency probe: GET a URL every `intervalMs` on a fresh connection each time (as an orchestrator's
// HTTP probe does), for `durationMs`, and summarise the latencies (ms). The harness runs it against
// `/readyz` while wrk saturates the same proxy listener.
//
//   node --import tsx bench/probe.ts --url http://127.0.0.1:18100/readyz [--interval 10] [--duration 5]
import { getOnce, sleep } from './proc.ts';
import { summarize, type Summary } from './stats.ts';

export interface ProbeResult {
  probes: number;
  failures: number;
  latency: Summary;
  firstFailure?: string;
}

export async function runProbe(
  o: { url: string; intervalMs: number; durationMs: number; timeoutMs?: number },
): Promise<ProbeResult> {
  const lat: number[] = [];
  let failures = 0;
  let firstFailure: string | undefined;
  const end = performance.now() + o.durationMs;
  while (performance.now() < end) {
    const t0 = performance.now();
    try {
      const r = await getOnce(o.url, o.timeoutMs ?? 5000);
      const ms = performance.now() - t0;
      if (r.status === 200) lat.push(ms);
      else {
        failures++;
        firstFailure ??= `status ${r.status}`;
      }
    } catch (e) {
      failures++;
      firstFailure ??= (e as Error).message;
    }
    const left = o.intervalMs - (performance.now() - t0);
    if (left > 0) await sleep(left);
  }
  return { probes: lat.length + failures, failures, latency: summarize(lat), firstFailure };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const get = (name: string) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const url = get('url');
  if (!url) {
    process.stderr.write('usage: bench/probe.ts --url <url> [--interval ms] [--duration s]\n');
    process.exit(2);
  }
  const r = await runProbe({
    url,
    intervalMs: Number(get('interval') ?? 10),
    durationMs: Number(get('duration') ?? 5) * 1000,
  });
  process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
}
