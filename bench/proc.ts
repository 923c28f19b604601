// Process plumbing for the benchmark harness: spawn and always clean up children, free ports, readiness
// polling, and the /proc readers behind the CPU-seconds and RSS columns (Linux only).
import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';

const children = new Set<ChildProcess>();
let cleanupInstalled = false;

/** Stop every child still running: SIGTERM, then SIGKILL after `graceMs`. Idempotent. */
export async function stopAll(graceMs = 3000): Promise<void> {
  await Promise.all([...children].map((c) => stop(c, graceMs)));
}

function installCleanup(): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  // Last resort on any exit path: synchronous SIGKILL of whatever is left.
  process.on('exit', () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        try {
          c.kill('SIGKILL');
        } catch { /* gone */ }
      }
    }
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      process.stderr.write(`\nbench: ${sig} — stopping ${children.size} child process(es)\n`);
      void stopAll(1500).finally(() => {
        for (const fn of interruptHooks) {
          try {
            fn();
          } catch { /* best effort */ }
        }
        process.exit(130);
      });
    });
  }
}

const interruptHooks: (() => void)[] = [];
/** Run `fn` (synchronously) when the harness is interrupted, after its children are stopped. */
export function onInterrupt(fn: () => void): void {
  interruptHooks.push(fn);
}

export interface Spawned {
  child: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | string>;
}

/**
 * Spawn a child that the harness owns: stdout/stderr go to `logFile` (or are ignored), and it is stopped
 * on exit, Ctrl-C or SIGTERM of the harness.
 */
export function launch(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; logFile?: string; stdout?: 'pipe' } = {},
): Spawned {
  installCleanup();
  const fd = opts.logFile ? openSync(opts.logFile, 'a') : 'ignore';
  const stdio: SpawnOptions['stdio'] = ['ignore', opts.stdout === 'pipe' ? 'pipe' : fd, fd];
  const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio });
  if (typeof fd === 'number') closeSync(fd);
  if (child.pid === undefined) throw new Error(`cannot start ${cmd}`);
  children.add(child);
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', () => {
      children.delete(child);
      resolve('spawn-error');
    });
  });
  return { child, pid: child.pid, exited };
}

/**
 * Spawn a child the harness owns with its output piped, and resolve once a line of that output (stdout or stderr)
 * matches `ready`; reject if it exits first.
 */
export function startUntil(cmd: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<ChildProcess> {
  installCleanup();
  const p = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(p);
  p.once('exit', () => children.delete(p));
  return new Promise((resolve, reject) => {
    let seen = '';
    const look = (d: Buffer) => {
      seen = (seen + d.toString()).slice(-4096);
      if (ready.test(seen)) resolve(p);
    };
    p.stdout!.on('data', look);
    p.stderr!.on('data', look);
    p.once('exit', (code) => reject(new Error(`${cmd} exited (${code}) before it was ready: ${seen}`)));
  });
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL. Only ever signals this one child, by its pid. */
export async function stop(c: ChildProcess | Spawned, graceMs = 3000): Promise<void> {
  const child = 'child' in c ? c.child : c;
  if (child.exitCode !== null || child.signalCode !== null) {
    children.delete(child);
    return;
  }
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const t = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }, graceMs);
  await done;
  clearTimeout(t);
  children.delete(child);
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** One GET on a fresh connection; resolves with the status, or rejects (refused, reset, timeout). */
export function getOnce(url: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/**
 * Poll `url` every `everyMs` until it answers 200; resolves with the milliseconds since `t0`
 * (performance.now() time). Rejects when the process exits first or after `timeoutMs`.
 */
export async function waitFor200(
  url: string,
  t0: number,
  o: { everyMs?: number; timeoutMs?: number; exited?: Promise<unknown> } = {},
): Promise<number> {
  const every = o.everyMs ?? 2;
  const deadline = t0 + (o.timeoutMs ?? 30_000);
  let gone = false;
  void o.exited?.then(() => {
    gone = true;
  });
  for (;;) {
    try {
      const r = await getOnce(url, 1000);
      if (r.status === 200) return performance.now() - t0;
    } catch { /* not listening yet */ }
    if (gone) throw new Error(`process exited before ${url} answered 200`);
    if (performance.now() > deadline) throw new Error(`${url} did not answer 200 within ${o.timeoutMs ?? 30_000} ms`);
    await sleep(every);
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------------------ /proc

const CLK_TCK = 100; // getconf CLK_TCK on Linux x86-64/arm64

/** utime + stime of the whole process (every thread), in seconds. */
export function cpuSeconds(pid: number): number {
  const { user, system } = userSystemSeconds(pid);
  return user + system;
}

/** utime and stime of the whole process (every thread), in seconds. */
export function userSystemSeconds(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime is field 14, stime field 15.
  return { user: Number(rest[11]) / CLK_TCK, system: Number(rest[12]) / CLK_TCK };
}

function statusKb(pid: number, key: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}
/** Resident set size now, MiB. */
export const rssMb = (pid: number) => statusKb(pid, 'VmRSS') / 1024;
/** Peak resident set size since start or since the last resetPeakRss, MiB. */
export const peakRssMb = (pid: number) => statusKb(pid, 'VmHWM') / 1024;

/**
 * Busy CPU seconds of the whole machine (every CPU) from /proc/stat: user, nice, system and steal. irq and
 * softirq are left out: on loopback most of the TCP work runs in softirq and is charged to no process, so
 * it would read as someone else's load.
 */
export function machineBusySeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user)
  return (f[0]! + f[1]! + f[2]! + f[7]!) / CLK_TCK;
}

/** CPU seconds of this process itself, and of its children that have exited and been reaped (wrk). */
export function selfAndReapedChildrenSeconds(): { self: number; children: number } {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields 14-17: utime stime cutime cstime
  return {
    self: (Number(rest[11]) + Number(rest[12])) / CLK_TCK,
    children: (Number(rest[13]) + Number(rest[14])) / CLK_TCK,
  };
}

/** Reset VmHWM to the current RSS (`echo 5 > /proc/<pid>/clear_refs`; needs owner or root). */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The bench's mock OpenAI upstream (bench/mock-upstream.mjs) on Bun, on a free port: its port once it listens. */
export async function startBenchMock(): Promise<number> {
  const root = path.resolve(import.meta.dirname, '..');
  const port = await freePort();
  await startUntil(
    path.join(root, 'node_modules/.bin/bun'),
    [path.join(root, 'bench/mock-upstream.mjs'), '--port', String(port)],
    process.env,
    /listening/,
  );
  return port;
}

/**
 * The environment of a Sluice gateway on bench/config/config.yaml: this process's, with the mock at `mockPort` as
 * its upstream, its proxy on `port` and its status listener on a free port.
 */
export async function benchGatewayEnv(mockPort: number, port: number): Promise<NodeJS.ProcessEnv> {
  return {
    ...process.env,
    SLUICE_BENCH_UPSTREAM: `http://127.0.0.1:${mockPort}/v1`,
    AISIX_PROXY__ADDR: `127.0.0.1:${port}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${await freePort()}`,
  };
}

/** What `bench/wrk/post.lua` prints as its `BENCH_WRK` line. */
export interface WrkSummary {
  requests: number;
  duration_us: number;
  latency_us: { p50: number; p99: number };
  errors: Record<string, number>;
}

/**
 * One `wrk -t1` run of `bench/wrk/post.lua` POSTing `body` with `headers` (`name: value`, `|` between) to `url`
 * (`timeoutS`: wrk's per-request timeout, else its 2 s); throws when wrk fails or prints no summary. Its errors are
 * the caller's to judge.
 */
export async function wrkPost(
  url: string,
  o: { connections: number; seconds: number; headers: string; body: string; timeoutS?: number },
): Promise<WrkSummary> {
  const wrkDir = path.join(import.meta.dirname, 'wrk');
  const timeout = o.timeoutS ? ['--timeout', `${o.timeoutS}s`] : [];
  const args = ['-t1', `-c${o.connections}`, `-d${o.seconds}s`, ...timeout, '-s', path.join(wrkDir, 'post.lua'), url];
  const p = launch('wrk', args, {
    env: { ...process.env, BENCH_WRK_DIR: wrkDir, BENCH_HEADERS: o.headers, BENCH_BODY: o.body },
    stdout: 'pipe',
  });
  let out = '';
  p.child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await p.exited;
  const line = out.split('\n').find((l) => l.startsWith('BENCH_WRK '));
  if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${out.slice(0, 300)}`);
  return JSON.parse(line.slice('BENCH_WRK '.length)) as WrkSummary;
}
