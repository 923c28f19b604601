// The victim-latency and RSS harness of the process tests that measure what one kind of traffic costs the
// other callers of an instance (test/process/stream-long-line, stream-not-sse, upstream-limits,
// reload-latency): a timed chat request, a steady stream of them, a victim sampled while attackers run,
// percentiles, an upstream body written with backpressure, and a process's resident set read from /proc.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type * as http from 'node:http';
import { CALLER_KEY, type GatewayProcess } from './process.ts';
import { sleep } from './until.ts';

export interface TimedChat {
  status: number;
  contentType: string | null;
  retryAfter: string | null;
  body: string;
  /** From sending the request to the end of its body. */
  ms: number;
}

/** One chat request for `gpt-test` whose user message is `content`, timed until its body was read. */
export async function timedChat(
  g: GatewayProcess,
  content: string,
  opts: { stream?: boolean; model?: string } = {},
): Promise<TimedChat> {
  const t = performance.now();
  const r = await fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: opts.model ?? 'gpt-test',
      messages: [{ role: 'user', content }],
      ...(opts.stream === undefined ? {} : { stream: opts.stream }),
    }),
    signal: AbortSignal.timeout(60_000),
  });
  const body = await r.text();
  return {
    status: r.status,
    contentType: r.headers.get('content-type'),
    retryAfter: r.headers.get('retry-after'),
    body,
    ms: performance.now() - t,
  };
}

export const median = (xs: number[]): number => percentile(xs, 0.5);

/** The `p` quantile (0..1) of `xs`, by rank. */
export function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/**
 * A steady stream of the victim's plain requests, back to back, until `done()` holds after at least `min`
 * of them; every one must answer 200. Resolves with their latencies.
 */
export async function victimStream(
  g: GatewayProcess,
  min: number,
  done: () => boolean = () => true,
): Promise<number[]> {
  const out: number[] = [];
  while (out.length < min || !done()) {
    const v = await timedChat(g, 'victim', { stream: false });
    if (v.status !== 200) throw new Error(`victim request answered ${v.status}: ${v.body.slice(0, 300)}`);
    out.push(v.ms);
  }
  return out;
}

/**
 * The victim's latency before and while `attackers` callers each repeat `attack`, pausing `pauseMs` between
 * theirs: 20 warm-up requests (each 200), `samples` before, then at least `samples` during and until
 * `minAttacks` attacks ended (each 200). Resolves with both series and every attack's outcome.
 */
export async function victimUnderAttack<T>(
  g: GatewayProcess,
  o: { samples: number; attackers: number; pauseMs: number; minAttacks: number; attack: () => Promise<T> },
): Promise<{ before: number[]; during: number[]; attacks: T[] }> {
  for (let i = 0; i < 20; i++) assert.equal((await timedChat(g, 'warm', { stream: false })).status, 200);
  const before: number[] = [];
  for (let i = 0; i < o.samples; i++) before.push((await timedChat(g, 'victim', { stream: false })).ms);
  let stop = false;
  const attacks: T[] = [];
  const attackers = [...Array(o.attackers)].map(async () => {
    while (!stop) {
      attacks.push(await o.attack());
      await sleep(o.pauseMs);
    }
  });
  const during: number[] = [];
  while (during.length < o.samples || attacks.length < o.minAttacks) {
    const v = await timedChat(g, 'victim', { stream: false });
    assert.equal(v.status, 200);
    during.push(v.ms);
  }
  stop = true;
  await Promise.all(attackers);
  return { before, during, attacks };
}

/**
 * An open-loop stream of the victim's plain requests: one every `everyMs`, whatever the earlier ones are
 * doing, until `done()` holds after at least `min` were sent, so a stall shows as every request sent during
 * it (a back-to-back caller would count it once). Resolves with every latency; each must answer 200.
 */
export async function steadyStream(
  g: GatewayProcess,
  everyMs: number,
  min: number,
  done: () => boolean = () => true,
): Promise<number[]> {
  const sent: Promise<TimedChat>[] = [];
  let next = performance.now();
  while (sent.length < min || !done()) {
    sent.push(timedChat(g, 'victim', { stream: false }));
    next += everyMs;
    await sleep(Math.max(0, next - performance.now()));
  }
  const answers = await Promise.all(sent);
  for (const a of answers) assert.equal(a.status, 200, a.body.slice(0, 300));
  return answers.map((a) => a.ms);
}

/** Writes `payload` to `res` in 256 KiB steps, waiting for `drain`; `progress` sees the bytes written so far. */
export async function writeWithBackpressure(
  res: http.ServerResponse,
  payload: Buffer,
  progress: (written: number) => void = () => {},
): Promise<void> {
  const step = 256 * 1024;
  for (let off = 0; off < payload.length && !res.destroyed; off += step) {
    const ok = res.write(payload.subarray(off, Math.min(payload.length, off + step)));
    progress(Math.min(payload.length, off + step));
    if (!ok) {
      // One listener pair per wait, both removed (racing two `once()` left one behind each time).
      await new Promise<void>((r) => {
        const done = (): void => {
          res.off('drain', done).off('close', done);
          r();
        };
        res.on('drain', done).on('close', done);
      });
    }
  }
  if (!res.destroyed) res.end();
}

/** The process's resident set, in MiB (Linux /proc). */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

/** The highest RSS of `pid` sampled every `everyMs` from now until `stop()`, starting at `from`. */
export function rssPeak(pid: number, from: number, everyMs = 50): { readonly peak: number; stop(): void } {
  let peak = from;
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), everyMs);
  return {
    get peak() {
      return peak;
    },
    stop: () => clearInterval(timer),
  };
}

/** The lowest RSS of `pid` over `ms` (sampled every 250 ms): what stays once freed memory was returned. */
export async function settledRssMiB(pid: number, ms = 5000): Promise<number> {
  let rss = rssMiB(pid);
  for (const end = Date.now() + ms; Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 250));
    rss = Math.min(rss, rssMiB(pid));
  }
  return rss;
}
