// Streaming client for the SSE scenarios: keeps `concurrency` chat-completion streams open back to back for
// `durationMs` and measures, per stream (milliseconds):
//   headers  request sent → response headers
//   ttfb     request sent → first body byte (the first SSE chunk: the mock sends headers at once and its
//            first chunk one inter-chunk delay later)
//   total    request sent → last byte
//   forward  how long the first chunk took from the upstream's write to this client: the mock stamps chunk
//            0 with its wall-clock send time (`"system_fingerprint":"fp_t<ms>"`), this client subtracts it
//            from its own wall clock on receipt. Against the upstream directly it is the loopback cost;
//            through a gateway, minus the direct value, it is how long the gateway held the chunk.
// wrk only sees whole responses; this is what sees the first byte.
//
//   node --import tsx bench/ttfb.ts --url http://127.0.0.1:18100/v1/chat/completions \
//     --header 'authorization: Bearer sk-sluice-bench' [--concurrency 4] [--duration 5] [--body '{…}']
import * as http from 'node:http';
import { summarize, type Summary } from './stats.ts';

export interface TtfbOptions {
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  durationMs: number;
}

export interface TtfbResult {
  streams: number;
  errors: number;
  /** Streams that ended without `data: [DONE]`. */
  incomplete: number;
  elapsedMs: number;
  headers: Summary;
  ttfb: Summary;
  total: Summary;
  forward: Summary;
  firstError?: string;
}

const wallMs = () => performance.timeOrigin + performance.now();
const FP = /fp_t(\d+(?:\.\d+)?)/;

export async function runTtfb(o: TtfbOptions): Promise<TtfbResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
  const url = new URL(o.url);
  const body = Buffer.from(o.body);
  const headers = { ...o.headers, 'content-type': 'application/json', 'content-length': String(body.byteLength) };
  const hdr: number[] = [];
  const ttfb: number[] = [];
  const total: number[] = [];
  const forward: number[] = [];
  let errors = 0;
  let incomplete = 0;
  let firstError: string | undefined;
  const start = performance.now();
  const end = start + o.durationMs;

  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let tFirst = -1;
      let text = '';
      let sawStamp = false;
      const fail = (e: unknown) => {
        errors++;
        firstError ??= String((e as Error)?.message ?? e);
        resolve();
      };
      const req = http.request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers,
      }, (res) => {
        hdr.push(performance.now() - t0);
        if (res.statusCode !== 200) {
          res.resume();
          res.on('end', () => fail(new Error(`status ${res.statusCode}`)));
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          const now = performance.now();
          if (tFirst < 0) {
            tFirst = now;
            ttfb.push(now - t0);
          }
          if (!sawStamp) {
            text += d;
            const m = FP.exec(text);
            if (m) {
              sawStamp = true;
              forward.push(wallMs() - Number(m[1]));
            }
          } // Keep only a tail, enough to see `[DONE]` arrive across chunk boundaries.
          else text = (text + d).slice(-64);
        });
        res.on('end', () => {
          total.push(performance.now() - t0);
          if (!text.includes('[DONE]')) incomplete++;
          resolve();
        });
        res.on('error', fail);
      });
      req.on('error', fail);
      req.end(body);
    });

  await Promise.all(Array.from({ length: o.concurrency }, async () => {
    while (performance.now() < end) await one();
  }));
  agent.destroy();
  return {
    streams: total.length,
    errors,
    incomplete,
    elapsedMs: performance.now() - start,
    headers: summarize(hdr),
    ttfb: summarize(ttfb),
    total: summarize(total),
    forward: summarize(forward),
    firstError,
  };
}

// CLI
if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const get = (name: string) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const headers: Record<string, string> = {};
  args.forEach((a, i) => {
    if (a === '--header' && args[i + 1]) {
      const [k, ...v] = args[i + 1]!.split(':');
      headers[k!.trim().toLowerCase()] = v.join(':').trim();
    }
  });
  const url = get('url');
  if (!url) {
    process.stderr.write(
      'usage: bench/ttfb.ts --url <chat completions URL> [--header "k: v"]… [--concurrency 4] [--duration 5] [--body JSON]\n',
    );
    process.exit(2);
  }
  const r = await runTtfb({
    url,
    headers,
    body: get('body') ?? '{"model":"bench-route","stream":true,"messages":[{"role":"user","content":"hi"}]}',
    concurrency: Number(get('concurrency') ?? 4),
    durationMs: Number(get('duration') ?? 5) * 1000,
  });
  process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
}
