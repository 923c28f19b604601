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
// wrk only sees whole responses; this is what sees the first byte. With `pair`, every worker alternates a
// stream to a second destination (the upstream directly) with each of its own, and reports both.
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
  /**
   * Another destination (the upstream directly) whose streams alternate with these, one each in turn on every
   * worker: both sets meet the same seconds of the machine, so their difference is not another moment's noise.
   */
  pair?: { url: string; headers: Record<string, string>; body: string };
}

export interface TtfbResult {
  streams: number;
  errors: number;
  /** Streams that ended without `data: [DONE]`. */
  incomplete: number;
  elapsedMs: number;
  /** The streams' time summed, from request to end or failure: with `pair`, this destination's share. */
  busyMs: number;
  headers: Summary;
  ttfb: Summary;
  total: Summary;
  forward: Summary;
  firstError?: string;
  /** The `pair` destination's streams, measured alike. */
  paired?: TtfbResult;
}

const wallMs = () => performance.timeOrigin + performance.now();
const FP = /fp_t(\d+(?:\.\d+)?)/;

/** One destination: its request, its keep-alive connections, and what its streams measured. */
class Tally {
  readonly agent: http.Agent;
  readonly url: URL;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
  readonly hdr: number[] = [];
  readonly ttfb: number[] = [];
  readonly total: number[] = [];
  readonly forward: number[] = [];
  errors = 0;
  incomplete = 0;
  busyMs = 0;
  firstError: string | undefined;

  constructor(d: { url: string; headers: Record<string, string>; body: string }, concurrency: number) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    this.url = new URL(d.url);
    this.body = Buffer.from(d.body);
    this.headers = { ...d.headers, 'content-type': 'application/json', 'content-length': String(this.body.byteLength) };
  }

  result(elapsedMs: number): TtfbResult {
    return {
      streams: this.total.length,
      errors: this.errors,
      incomplete: this.incomplete,
      elapsedMs,
      busyMs: this.busyMs,
      headers: summarize(this.hdr),
      ttfb: summarize(this.ttfb),
      total: summarize(this.total),
      forward: summarize(this.forward),
      firstError: this.firstError,
    };
  }
}

/** One stream to `t`'s destination, timed into `t`. */
function oneStream(t: Tally): Promise<void> {
  const t0 = performance.now();
  return new Promise<void>((resolve) => {
    let tFirst = -1;
    let text = '';
    let sawStamp = false;
    const fail = (e: unknown) => {
      t.errors++;
      t.firstError ??= String((e as Error)?.message ?? e);
      resolve();
    };
    const req = http.request({
      host: t.url.hostname,
      port: t.url.port,
      path: t.url.pathname,
      method: 'POST',
      agent: t.agent,
      headers: t.headers,
    }, (res) => {
      t.hdr.push(performance.now() - t0);
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
          t.ttfb.push(now - t0);
        }
        if (!sawStamp) {
          text += d;
          const m = FP.exec(text);
          if (m) {
            sawStamp = true;
            t.forward.push(wallMs() - Number(m[1]));
          }
        } // Keep only a tail, enough to see `[DONE]` arrive across chunk boundaries.
        else text = (text + d).slice(-64);
      });
      res.on('end', () => {
        t.total.push(performance.now() - t0);
        if (!text.includes('[DONE]')) t.incomplete++;
        resolve();
      });
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(t.body);
  }).then(() => {
    t.busyMs += performance.now() - t0;
  });
}

export async function runTtfb(o: TtfbOptions): Promise<TtfbResult> {
  const main = new Tally(o, o.concurrency);
  const pair = o.pair ? new Tally(o.pair, o.concurrency) : undefined;
  const start = performance.now();
  const end = start + o.durationMs;
  await Promise.all(Array.from({ length: o.concurrency }, async () => {
    while (performance.now() < end) {
      await oneStream(main);
      if (pair) await oneStream(pair);
    }
  }));
  main.agent.destroy();
  pair?.agent.destroy();
  const elapsedMs = performance.now() - start;
  return { ...main.result(elapsedMs), ...(pair ? { paired: pair.result(elapsedMs) } : {}) };
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
