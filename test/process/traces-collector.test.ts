// A collector that hangs, refuses connections, answers 500 or answers 400 (docs/operations.md "Tracing"):
// under load the gateway's latency and memory stay where a healthy collector leaves them, and every span
// not delivered is counted in aisix_otlp_fanout_drops_total with its reason.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_TRACE_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node', 'bun', 'deno'];
/** Enough requests to overflow one exporter's queue (1024 records) plus its batch in flight. */
const REQUESTS = 1400;
const CONCURRENCY = 16;

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

for (const runtime of RUNTIMES) {
  describe(`a misbehaving collector on ${runtime}`, { concurrency: false, timeout: 300_000 }, () => {
    let mock: MockUpstream;
    let rx: OtlpReceiver;
    let gw: GatewayProcess;

    before(async () => {
      mock = await startMockUpstream();
      rx = await startOtlpReceiver();
      gw = await spawnGateway({
        runtime,
        config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`,
        files: {
          'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: "${mock.base}" }
models:
  - { display_name: m, model_name: up, provider_key: mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
observability_exporters:
  - { name: col, kind: otlp_http, endpoint: "${rx.url}" }
`,
        },
        env: { CALLER_KEY },
      });
      await gw.waitReady();
    });
    after(async () => {
      gw?.kill();
      await Promise.all([mock?.close(), rx?.close()]);
    });

    /** `REQUESTS` chat calls, `CONCURRENCY` at a time; each one's latency in ms. */
    const load = async (): Promise<number[]> => {
      const latencies: number[] = [];
      let next = 0;
      const worker = async () => {
        while (next < REQUESTS) {
          next++;
          const t0 = performance.now();
          const res = await fetch(gw.url('/v1/chat/completions'), {
            method: 'POST',
            headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
          });
          await res.text();
          assert.equal(res.status, 200);
          latencies.push(performance.now() - t0);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      return latencies;
    };
    const drops = async (reason: string) =>
      sumSamples(await (await fetch(gw.url('/metrics', 'status'))).text(), 'aisix_otlp_fanout_drops_total', {
        exporter: 'col',
        reason,
      }) ?? 0;

    let baselineRss = 0;

    test('a healthy collector: every span delivered, none dropped', async () => {
      await load(); // warm-up
      baselineRss = rssKiB(gw.proc.pid!);
      await until(() => rx.spans.length >= REQUESTS * 3, 20_000, () => `every span delivered (${rx.spans.length})`);
      assert.equal(await drops('queue_full'), 0);
    });

    const cases: [string, () => Promise<void> | void, string][] = [
      ['hangs', () => rx.setMode({ kind: 'hang' }), 'queue_full'],
      ['answers 500', () => rx.setMode({ kind: 'status', status: 500 }), 'retries_exhausted'],
      ['answers 400', () => rx.setMode({ kind: 'status', status: 400 }), 'rejected'],
      ['refuses connections', () => rx.refuse(), 'retries_exhausted'],
    ];
    for (const [what, set, reason] of cases) {
      test(`a collector that ${what}: latency and memory within noise, drops counted (${reason})`, async () => {
        // The baseline right before, against a healthy collector: the machine's load drifts between runs.
        rx.setMode({ kind: 'ok' });
        const baseline = median(await load());
        await set();
        const before = await drops(reason);
        const m = median(await load());
        const rss = rssKiB(gw.proc.pid!);
        // A collector that stalled the request path would add its timeout, seconds, to every request. What
        // is allowed: the machine's noise plus the CPU the exporter's own retries take on the gateway's one
        // event loop (Bun's median has been 2-3.5 times its baseline against a collector answering 500;
        // docs/operations.md "Tracing").
        assert.ok(
          m <= Math.max(4 * baseline, baseline + 60),
          `median ${m.toFixed(1)} ms vs baseline ${baseline.toFixed(1)} ms`,
        );
        // The bound: one queue of 1024 records (3 spans each) and a batch in flight, a few MiB, plus what the
        // runtime's heap grows by under load alone (Deno's has grown by 64 MiB on this machine).
        assert.ok(rss - baselineRss < 128 * 1024, `RSS grew ${((rss - baselineRss) / 1024).toFixed(1)} MiB`);
        await until(async () => (await drops(reason)) > before, 30_000, `drops with reason ${reason}`);
      });
    }
  });
}
