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

/** The process's CPU time so far (user + system), ms; /proc counts in ticks of 10 ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
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

    /** Chat calls answered so far (each one a record of 3 spans). */
    let sent = 0;
    /** `REQUESTS` chat calls, `CONCURRENCY` at a time; each one's latency in ms. */
    const load = async (): Promise<number[]> => {
      const latencies: number[] = [];
      let next = 0;
      const worker = async () => {
        while (next < REQUESTS) {
          next++;
          sent++;
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

    /** Every span made so far was delivered or dropped: the exporter holds nothing from an earlier case. */
    const settled = async () => {
      const text = await (await fetch(gw.url('/metrics', 'status'))).text();
      const delivered = sumSamples(text, 'sluice_otlp_delivered_spans_total', { exporter: 'col' }) ?? 0;
      const dropped = sumSamples(text, 'aisix_otlp_fanout_drops_total', { exporter: 'col' }) ?? 0;
      return delivered + dropped >= sent * 3;
    };

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
      test(`a collector that ${what}: latency and memory within noise, drops counted (${reason})`, async (t) => {
        // The baseline right before, against a healthy collector: the machine's load drifts between runs.
        // (and with the exporter delivering again: one still waiting on the last case's collector does no
        // export work, which would make the baseline cheaper than a healthy collector's).
        rx.setMode({ kind: 'ok' });
        await until(settled, 60_000, 'the exporter settled the earlier records');
        const pid = gw.proc.pid!;
        const cpu0 = cpuMs(pid);
        const baseline = median(await load());
        const baselineCpu = cpuMs(pid) - cpu0;
        await set();
        const before = await drops(reason);
        const cpu1 = cpuMs(pid);
        const m = median(await load());
        const cpu = cpuMs(pid) - cpu1;
        const rss = rssKiB(pid);
        const seen = `median ${m.toFixed(1)} ms vs baseline ${
          baseline.toFixed(1)
        } ms; gateway CPU ${cpu} vs ${baselineCpu} ms`;
        t.diagnostic(seen);
        // The gateway's own work for the same requests: what failed deliveries and their retries add (one
        // POST of an already serialized batch each) is small beside serving them; the allowance is the
        // /proc tick granularity and the machine's noise. docs/operations.md "Tracing".
        assert.ok(cpu <= 1.5 * baselineCpu + 200, seen);
        // A collector that stalled the request path would add its timeout, seconds, to every request. What
        // is allowed: the noise of a loaded machine, where the load generator, the upstream and the collector
        // share the test process.
        assert.ok(m <= Math.max(2.5 * baseline, baseline + 40), seen);
        // The bound: one queue of 1024 records (3 spans each) and a batch in flight, a few MiB, plus what the
        // runtime's heap grows by under load alone (Deno's has grown by 64 MiB on this machine).
        assert.ok(rss - baselineRss < 128 * 1024, `RSS grew ${((rss - baselineRss) / 1024).toFixed(1)} MiB`);
        await until(async () => (await drops(reason)) > before, 30_000, `drops with reason ${reason}`);
      });
    }
  });
}
