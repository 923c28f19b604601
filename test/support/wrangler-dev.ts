// `wrangler dev --local` (workerd, offline) as a black-box gateway for process tests: started in its own
// process group on a free loopback port, ready once `/livez` answers, its console lines kept and parsed.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from './process.ts';
import { parseLogLine } from './log-line.ts';
import { until } from './until.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const WORKERD = join(ROOT, 'node_modules/.bin/workerd');
export const START_TIMEOUT_MS = 60_000;
/** The bound of one request to the Worker: a hang fails naming the request instead of stalling the file. */
export const REQUEST_TIMEOUT_MS = 30_000;

/** Offline: no telemetry; NODE_ENV=test makes wrangler 3's miniflare skip fetching the `Request.cf` data. */
const OFFLINE_ENV = {
  WRANGLER_SEND_METRICS: 'false',
  CLOUDFLARE_CF_FETCH_ENABLED: 'false',
  NODE_ENV: 'test',
  NO_COLOR: '1',
  CI: 'true',
};

export interface WranglerDev {
  base: string;
  /** `fetch(base + path)`, failing after `timeoutMs` (default REQUEST_TIMEOUT_MS) with the Worker's output. */
  fetch(path: string, init?: RequestInit, timeoutMs?: number): Promise<Response>;
  /** Worker console lines that parsed as JSON (the gateway's logs). */
  logs: Record<string, unknown>[];
  output: string[];
  /** The first log line matching `test`, waiting for it (bounded): the Worker's output arrives asynchronously. */
  waitForLog(test: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** A port found free was bound by another process before workerd could bind it. */
class PortTaken extends Error {}
const START_ATTEMPTS = 3;

/** `wrangler dev --local` on a free loopback port in `cwd`, with `args`; resolves once `/livez` answers 200. */
export async function startWranglerDev(args: string[], cwd: string, persistTo: string): Promise<WranglerDev> {
  if (!existsSync(WRANGLER) || !existsSync(WORKERD)) {
    throw new Error(
      'wrangler (and the workerd binary it runs) is not installed: run `npm ci` (wrangler is a devDependency)',
    );
  }
  // Files run two at a time, each picking free ports: one can be taken between the probe and workerd's bind.
  for (let attempt = 1;; attempt++) {
    try {
      return await startOnce(args, cwd, persistTo);
    } catch (e) {
      if (!(e instanceof PortTaken) || attempt === START_ATTEMPTS) throw e;
    }
  }
}

async function startOnce(args: string[], cwd: string, persistTo: string): Promise<WranglerDev> {
  const port = await freePort();
  // detached: its own process group, so stop() ends wrangler, its esbuild and its workerd together.
  const proc: ChildProcess = spawn(WRANGLER, [
    'dev',
    ...args,
    '--local',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--inspector-port',
    String(await freePort()),
    '--persist-to',
    persistTo,
  ], {
    cwd,
    env: { ...process.env, ...OFFLINE_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const output: string[] = [];
  const logs: Record<string, unknown>[] = [];
  let exited: number | null | undefined;
  const exitedP = new Promise<void>((r) =>
    proc.once('exit', (code) => {
      exited = code;
      r();
    })
  );
  for (const stream of [proc.stdout!, proc.stderr!]) {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        output.push(line);
        const parsed = parseLogLine(line); // text or JSON; anything else is not a log line
        if (parsed) logs.push(parsed);
      }
    });
  }
  const stop = async () => {
    if (exited !== undefined) return;
    try {
      process.kill(-proc.pid!, 'SIGTERM');
    } catch {
      return;
    }
    const killed = setTimeout(() => {
      try {
        process.kill(-proc.pid!, 'SIGKILL');
      } catch { /* gone */ }
    }, 5000);
    await exitedP;
    clearTimeout(killed);
    // wrangler can exit on SIGTERM before its workerd child does (seen: workerd orphaned at 30% CPU for an
    // hour): whatever is left of the group goes now.
    try {
      process.kill(-proc.pid!, 'SIGKILL');
    } catch { /* the group is gone */ }
  };
  const waitForLog = async (test: (l: Record<string, unknown>) => boolean, timeoutMs = 5000) => {
    await until(() => logs.some(test), timeoutMs, () => `a matching log line:\n${output.join('\n')}`, 25);
    return logs.find(test)!;
  };
  const base = `http://127.0.0.1:${port}`;
  const get = (path: string, init?: RequestInit, timeoutMs = REQUEST_TIMEOUT_MS) =>
    boundedFetch(`${base}${path}`, init, timeoutMs, () => output.join('\n'));
  const handle = { base, fetch: get, logs, output, waitForLog, stop };
  // A hard bound on the whole start, whatever step hangs: the group is ended and the output reported.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('late')), START_TIMEOUT_MS);
  });
  try {
    await Promise.race([untilLive(get, () => exited, output), late]);
    return handle;
  } catch (e) {
    await stop();
    if (e instanceof Error && e.message === 'late') {
      throw new Error(`wrangler dev: /livez not 200 within ${START_TIMEOUT_MS} ms:\n${output.join('\n')}`);
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `/livez` until 200; fails if wrangler exits first (PortTaken when workerd could not bind). */
async function untilLive(
  get: (path: string, init?: RequestInit, timeoutMs?: number) => Promise<Response>,
  exited: () => number | null | undefined,
  output: string[],
): Promise<void> {
  for (;;) {
    const code = exited();
    if (code !== undefined) {
      const message = `wrangler dev exited (${code}) before /livez answered:\n${output.join('\n')}`;
      throw output.some((l) => l.includes('Address already in use')) ? new PortTaken(message) : new Error(message);
    }
    try {
      const r = await get('/livez', undefined, 2000);
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `fetch` whose bound covers the headers and the body; the error names the URL and `context()`. */
async function boundedFetch(url: string, init: RequestInit | undefined, ms: number, context: () => string) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no answer within ${ms} ms`)), ms);
  try {
    const res = await fetch(url, { ...init, signal: ac.signal });
    // The body is read here so the bound covers it; the caller gets a complete Response.
    const body = await res.arrayBuffer();
    return new Response(res.status === 204 || res.status === 304 ? null : body, res);
  } catch (e) {
    throw new Error(`${init?.method ?? 'GET'} ${url}: ${(e as Error).message}; the Worker's output:\n${context()}`);
  } finally {
    clearTimeout(timer);
  }
}
