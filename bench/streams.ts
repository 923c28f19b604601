// Streams-at-scale client (scenario `sse512`): keeps `concurrency` chat-completion streams open at once, each
// replaced by a new one when it ends, for `durationMs`. The mock stamps every chunk of these streams with its
// wall-clock send time (`"user":"bench-scale:<delay>:<chunks>"` in the body, bench/mock-upstream.mjs), and
// this client measures, per chunk, its lag: receipt time minus send time (milliseconds). Against the mock
// directly the lag is the loopback's and this client's own; through a gateway it adds what the gateway held.
// The gateway's resident memory is sampled while every stream is open (`onSteady`).
import * as http from 'node:http';
import { summarize, type Summary } from './stats.ts';

export interface StreamsOptions {
  url: string;
  headers: Record<string, string>;
  /** The request body; it must carry the mock's `bench-scale` marker. */
  body: string;
  concurrency: number;
  durationMs: number;
  /** Called a few times while all streams are open (after the first stream of every slot has begun). */
  onSteady?: () => void;
}

export interface StreamsResult {
  streams: number;
  errors: number;
  /** Streams that ended without `data: [DONE]`. */
  incomplete: number;
  elapsedMs: number;
  /** The most streams open at the same moment. */
  maxOpen: number;
  chunks: number;
  lag: Summary;
  lagMax: number;
  /** Chunks that arrived more than 100 ms after the upstream sent them. */
  late: number;
  /** Of those, the ones that arrived after the run's first second (the ramp-up's are the rest). */
  lateAfterFirstS: number;
  ttfb: Summary;
  firstError?: string;
}

const wallMs = () => performance.timeOrigin + performance.now();
const FP = /fp_t(\d+(?:\.\d+)?)/g;
export const STALL_MS = 100;

export async function runStreams(o: StreamsOptions): Promise<StreamsResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
  const url = new URL(o.url);
  const body = Buffer.from(o.body);
  const headers = { ...o.headers, 'content-type': 'application/json', 'content-length': String(body.byteLength) };
  const lags: number[] = [];
  const ttfb: number[] = [];
  let lagMax = 0;
  let late = 0;
  let lateAfterFirstS = 0;
  let streams = 0;
  let errors = 0;
  let incomplete = 0;
  let open = 0;
  let maxOpen = 0;
  let started = 0;
  let firstError: string | undefined;
  const start = performance.now();
  const end = start + o.durationMs;

  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let tail = '';
      let first = true;
      open++;
      if (open > maxOpen) maxOpen = open;
      const done = () => {
        open--;
        resolve();
      };
      const fail = (e: unknown) => {
        errors++;
        firstError ??= String((e as Error)?.message ?? e);
        done();
      };
      const req = http.request(
        { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            res.on('end', () => fail(new Error(`status ${res.statusCode}`)));
            return;
          }
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            const now = wallMs();
            if (first) {
              first = false;
              ttfb.push(performance.now() - t0);
            }
            // A stamp can be cut across two reads: scan the carried tail with the new data.
            const text = tail + d;
            let cut = 0;
            for (const m of text.matchAll(FP)) {
              const lag = now - Number(m[1]);
              lags.push(lag);
              if (lag > lagMax) lagMax = lag;
              if (lag > STALL_MS) {
                late++;
                if (performance.now() - start > 1000) lateAfterFirstS++;
              }
              cut = m.index + m[0].length;
            }
            tail = text.slice(Math.max(cut, text.length - 64));
          });
          res.on('end', () => {
            streams++;
            if (!tail.includes('[DONE]')) incomplete++;
            done();
          });
          res.on('error', fail);
        },
      );
      req.on('error', fail);
      req.end(body);
    });

  let steady: ReturnType<typeof setInterval> | undefined;
  const slots = Array.from({ length: o.concurrency }, async () => {
    started++;
    if (started === o.concurrency && o.onSteady) {
      steady = setInterval(() => {
        if (open >= o.concurrency * 0.95) o.onSteady!();
      }, Math.max(200, o.durationMs / 6));
    }
    while (performance.now() < end) await one();
  });
  await Promise.all(slots);
  if (steady) clearInterval(steady);
  agent.destroy();
  return {
    streams,
    errors,
    incomplete,
    elapsedMs: performance.now() - start,
    maxOpen,
    chunks: lags.length,
    lag: summarize(lags),
    lagMax,
    late,
    lateAfterFirstS,
    ttfb: summarize(ttfb),
    firstError,
  };
}
