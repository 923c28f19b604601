// Starts a real single-member etcd on free loopback ports with a temporary data dir.
// Never skips: a missing binary is an error telling how to install it.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './process.ts';

export interface EtcdServer {
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  readonly clientPort: number;
  readonly dataDir: string;
  /** SIGTERM, wait for exit, remove the data dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL, wait for exit; the data dir stays (for `restart()`). */
  kill(): Promise<void>;
  /** Stop (gracefully) if running, then start again on the same ports and data dir; resolves when ready. */
  restart(): Promise<void>;
  /** The last lines etcd printed (diagnostics). */
  logTail(): string;
}

export interface EtcdServerOptions {
  /** Extra etcd flags, e.g. `--experimental-watch-progress-notify-interval=1s`. */
  extraArgs?: string[];
  /** Bound on the wait for etcd to answer. Default 20 s. */
  readyTimeoutMs?: number;
}

const INSTALL_HINT = 'etcd binary not found on PATH: install it with `apt-get install -y etcd-server`';

function assertEtcdInstalled(): void {
  const r = spawnSync('etcd', ['--version'], { stdio: 'ignore' });
  if (r.error || r.status !== 0) throw new Error(INSTALL_HINT);
}

export { freePort };

// Every etcd this process started, killed synchronously when the process exits for any reason.
const live = new Set<ChildProcess>();
const dataDirs = new Set<string>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  const killAll = (): void => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
    });
  }
}

/**
 * A guardian shell holding a pipe from this process: if we die without running exit hooks (SIGKILL),
 * the pipe closes, `read` returns and the guardian kills etcd.
 */
function spawnGuardian(pid: number): ChildProcess {
  const g = spawn('sh', ['-c', `read _ignored; kill -9 ${pid} 2>/dev/null`], { stdio: ['pipe', 'ignore', 'ignore'] });
  g.unref();
  (g.stdin as unknown as { unref?: () => void } | null)?.unref?.(); // net.Socket under the hood: unref so it never holds the event loop
  return g;
}

async function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
}

export async function startEtcd(opts: EtcdServerOptions = {}): Promise<EtcdServer> {
  assertEtcdInstalled();
  installExitHook();
  const clientPort = await freePort();
  let peerPort = await freePort();
  while (peerPort === clientPort) peerPort = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-etcd-'));
  dataDirs.add(dataDir);
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name',
    'sluice-test',
    '--data-dir',
    join(dataDir, 'data'),
    '--listen-client-urls',
    endpoint,
    '--advertise-client-urls',
    endpoint,
    '--listen-peer-urls',
    peer,
    '--initial-advertise-peer-urls',
    peer,
    '--initial-cluster',
    `sluice-test=${peer}`,
    '--initial-cluster-state',
    'new',
    '--logger',
    'zap',
    '--log-level',
    'warn',
    ...(opts.extraArgs ?? []),
  ];
  const readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;
  let child: ChildProcess | undefined;
  let guardian: ChildProcess | undefined;
  let log = '';
  let removed = false;

  const launch = async (): Promise<void> => {
    const c = spawn('etcd', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    live.add(c);
    const onData = (d: Buffer): void => {
      log = (log + d.toString('utf8')).slice(-8000);
    };
    c.stdout?.on('data', onData);
    c.stderr?.on('data', onData);
    c.unref();
    (c.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (c.stderr as unknown as { unref?: () => void } | null)?.unref?.();
    let exited = false;
    c.once('exit', () => {
      exited = true;
      live.delete(c);
    });
    let spawnError: Error | undefined;
    c.once('error', (e) => {
      spawnError = e;
    });
    if (c.pid !== undefined) guardian = spawnGuardian(c.pid);
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (spawnError) throw new Error(`${INSTALL_HINT} (${spawnError.message})`);
      if (exited) throw new Error(`etcd exited before it was ready:\n${log}`);
      try {
        const res = await fetch(`${endpoint}/v3/maintenance/status`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(1000),
        });
        await res.text();
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        c.kill('SIGKILL');
        throw new Error(`etcd did not answer within ${readyTimeoutMs} ms:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const halt = async (signal: 'SIGTERM' | 'SIGKILL'): Promise<void> => {
    const c = child;
    if (!c) return;
    guardian?.kill('SIGKILL');
    guardian = undefined;
    if (c.exitCode === null && c.signalCode === null) {
      c.kill(signal);
      const t = setTimeout(() => c.kill('SIGKILL'), 10_000);
      await waitExit(c);
      clearTimeout(t);
    }
    child = undefined;
  };

  await launch();

  return {
    endpoint,
    clientPort,
    dataDir,
    async stop() {
      await halt('SIGTERM');
      if (!removed) {
        removed = true;
        dataDirs.delete(dataDir);
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    async kill() {
      await halt('SIGKILL');
    },
    async restart() {
      if (removed) throw new Error('etcd test server was stopped; cannot restart');
      await halt('SIGTERM');
      await launch();
    },
    logTail() {
      return log;
    },
  };
}
