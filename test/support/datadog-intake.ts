// A real Datadog logs intake on a loopback socket, in the test process: it checks each POST the way Datadog's
// `/api/v2/logs` reads it (the path, `Content-Type: application/json`, `Content-Encoding: gzip`, a
// `DD-API-KEY`, a gzip body that holds one JSON array of objects) and keeps the logs. Scriptable: answer a
// status, fail the next N POSTs, or hang.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export interface IntakePost {
  headers: http.IncomingHttpHeaders;
  logs: Record<string, unknown>[];
}

export interface DatadogIntake {
  /** `127.0.0.1:<port>`: the exporter's `site`. */
  site: string;
  posts: IntakePost[];
  /** Every log of a POST answered 2xx. */
  logs: Record<string, unknown>[];
  /** POSTs that broke the intake's rules, each with why. */
  invalid: string[];
  attempts: number;
  setStatus(status: number): void;
  failNext(n: number, status?: number): void;
  hang(on: boolean): void;
  /** Resolves when at least `n` logs were accepted; fails after `ms`. */
  waitForLogs(n: number, ms?: number): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

export async function startDatadogIntake(): Promise<DatadogIntake> {
  let status = 202;
  let failing = 0;
  let failStatus = 503;
  let hanging = false;
  const waiters: (() => void)[] = [];
  const hung: http.ServerResponse[] = [];
  const intake = {
    posts: [] as IntakePost[],
    logs: [] as Record<string, unknown>[],
    invalid: [] as string[],
    attempts: 0,
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      intake.attempts++;
      if (hanging) return void hung.push(res);
      const why = check(req, Buffer.concat(parts));
      if (typeof why === 'string') {
        intake.invalid.push(why);
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [why] }));
        return;
      }
      if (failing > 0) {
        failing--;
        res.writeHead(failStatus, { 'content-type': 'application/json' })
          .end(JSON.stringify({ errors: ['intake unavailable'] }));
        return;
      }
      intake.posts.push({ headers: req.headers, logs: why });
      if (status >= 200 && status < 300) intake.logs.push(...why);
      res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      for (const w of waiters.splice(0)) w();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    site: `127.0.0.1:${port}`,
    get posts() {
      return intake.posts;
    },
    get logs() {
      return intake.logs;
    },
    get invalid() {
      return intake.invalid;
    },
    get attempts() {
      return intake.attempts;
    },
    setStatus: (s) => void (status = s),
    failNext: (n, s = 503) => {
      failing = n;
      failStatus = s;
    },
    hang: (on) => {
      hanging = on;
      if (!on) { for (const r of hung.splice(0)) r.writeHead(202).end('{}'); }
    },
    async waitForLogs(n, ms = 10_000) {
      const deadline = Date.now() + ms;
      while (intake.logs.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`waited ${ms} ms for ${n} logs; got ${intake.logs.length}`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, left);
          waiters.push(() => (clearTimeout(t), r()));
        });
      }
      return intake.logs;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const h of hung.splice(0)) h.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The logs of a POST the intake accepts, or why it refuses it. */
function check(req: http.IncomingMessage, body: Buffer): Record<string, unknown>[] | string {
  if (req.method !== 'POST' || req.url !== '/api/v2/logs') return `unexpected ${req.method} ${req.url}`;
  if (req.headers['content-type'] !== 'application/json') return `content-type ${req.headers['content-type']}`;
  if (req.headers['content-encoding'] !== 'gzip') return `content-encoding ${req.headers['content-encoding']}`;
  if (typeof req.headers['dd-api-key'] !== 'string') return 'no DD-API-KEY';
  let parsed: unknown;
  try {
    parsed = JSON.parse(gunzipSync(body).toString('utf8'));
  } catch (e) {
    return `body is not gzipped JSON: ${(e as Error).message}`;
  }
  if (!Array.isArray(parsed) || parsed.some((x) => typeof x !== 'object' || x === null || Array.isArray(x))) {
    return 'body is not a JSON array of objects';
  }
  if (parsed.length > 1000) return 'more than 1000 logs in one request';
  return parsed as Record<string, unknown>[];
}
