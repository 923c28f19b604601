// Black-box gateway processes: write a config folder, spawn a runtime's entrypoint as a real process,
// read its log lines (text or JSON) as they come, poll its ports, send it real signals.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type LogLine, parseLogLine } from './log-line.ts';
import { DENO_RUN_FLAGS } from '../../runtimes/deno-launch.ts';

export type RuntimeName = 'node' | 'bun' | 'deno';
const ROOT = resolve(import.meta.dirname, '../..');

/**
 * A port for another process to bind (a gateway, etcd, Redis), free a moment ago. Drawn at random below
 * Linux's ephemeral range (32768–60999): a port the kernel handed out for `listen(0)` could be taken, between
 * our close and the other process's bind, by any outgoing connection of the busy test run (seen as
 * EADDRINUSE in full runs); below the range only another test's pick can collide. Each pick is claimed for the
 * whole run across the test files' processes (they run two at a time), then checked.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !claim(port)) continue;
    handedOut.add(port);
    if (await bindable(port)) return port;
  }
  throw new Error('no free port found in 20000–31999 after 100 tries');
}

/** Ports this test process has claimed (each one is given once). */
const handedOut = new Set<number>();

/**
 * The ports claimed by any test process of this run: one file each, created only if absent, in a folder named
 * by the test runner's pid (the parent of every test file's process).
 */
const CLAIMS = join(tmpdir(), `sluice-test-ports-${process.ppid}`);

function claim(port: number): boolean {
  try {
    mkdirSync(CLAIMS, { recursive: true }); // again each time: an exiting process removes it when empty
    writeFileSync(join(CLAIMS, String(port)), '', { flag: 'wx' });
    return true;
  } catch {
    return false; // another test process of this run has it
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = net.createServer();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

/** `http://127.0.0.1:<port>` where nothing listens (a port that was free a moment ago). */
export async function deadEndpoint(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/** The environment the kernel holds for `pid` (what the process was started or re-executed with; Linux). */
export function environOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

export function runtimeCommand(runtime: RuntimeName, args: string[]): [string, string[]] {
  switch (runtime) {
    case 'node': {
      if (!existsSync(join(ROOT, 'dist/node.mjs'))) {
        throw new Error('dist/node.mjs is missing: run `npm run build` (the test command does)');
      }
      return [join(ROOT, 'bin/sluice'), args];
    }
    case 'bun': {
      const bin = join(ROOT, 'node_modules/.bin/bun');
      if (!existsSync(bin)) {
        throw new Error('bun is not installed: run `npm ci` (bun is a devDependency; its postinstall must be allowed)');
      }
      return [bin, [join(ROOT, 'runtimes/bun.ts'), ...args]];
    }
    case 'deno': {
      const bin = join(ROOT, 'node_modules/.bin/deno');
      if (!existsSync(bin)) {
        throw new Error(
          'deno is not installed: run `npm ci` (deno is a devDependency; its postinstall must be allowed)',
        );
      }
      return [bin, ['run', ...DENO_RUN_FLAGS, '--quiet', join(ROOT, 'runtimes/deno.ts'), ...args]];
    }
  }
}

export type { LogLine } from './log-line.ts';

export interface GatewayProcess {
  proc: ChildProcess;
  dir: string;
  ports: { proxy: number; status: number; admin: number };
  logs: LogLine[];
  /** stderr lines that are not log lines (reports, fatal errors). */
  rawErr: string[];
  url(path: string, listener?: 'proxy' | 'status' | 'admin'): string;
  waitForLog(msg: string | ((l: LogLine) => boolean), timeoutMs?: number): Promise<LogLine>;
  waitForExit(timeoutMs?: number): Promise<number | null>;
  /** Poll until `path` on `listener` answers 200 (bounded). */
  waitReady(path?: string, listener?: 'proxy' | 'status' | 'admin', timeoutMs?: number): Promise<void>;
  signal(sig: NodeJS.Signals): void;
  /** SIGTERM unless it already exited; resolves with the exit code (bounded wait). */
  stop(timeoutMs?: number): Promise<number | null>;
  kill(): void;
  exited: boolean;
  exitCode: number | null;
}

export interface SpawnOptions {
  runtime?: RuntimeName;
  /** config.yaml text; `{{proxy}}`, `{{status}}`, `{{admin}}` are replaced by free ports. */
  config: string;
  /** Other files in the config folder (resources.yaml, certificates …). */
  files?: Record<string, string>;
  env?: Record<string, string>;
  /** Arguments in place of `--config <dir>/config.yaml`; `{{dir}}` is replaced by the config folder. */
  args?: string[];
  /** An executable to run in place of a runtime's entrypoint (the standalone binary, podman). */
  executable?: string;
}

const live = new Set<ChildProcess>();
/** Every gateway's temp folder, removed when the test process ends (tests may read them after a stop). */
const dirs = new Set<string>();
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  // This process's gateways are gone: its ports are free again, and the folder goes with the last claim.
  for (const port of handedOut) rmSync(join(CLAIMS, String(port)), { force: true });
  try {
    rmdirSync(CLAIMS);
  } catch {
    // another test process still holds claims
  }
});

export async function spawnGateway(o: SpawnOptions): Promise<GatewayProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-test-'));
  dirs.add(dir);
  const ports = { proxy: await freePort(), status: await freePort(), admin: await freePort() };
  const config = o.config.replace(/\{\{(proxy|status|admin)\}\}/g, (_, k: keyof typeof ports) => String(ports[k]));
  writeFileSync(join(dir, 'config.yaml'), config);
  for (const [name, text] of Object.entries(o.files ?? {})) writeFileSync(join(dir, name), text);
  const argv = o.args?.map((a) => a.replaceAll('{{dir}}', dir)) ?? ['--config', join(dir, 'config.yaml')];
  const [cmd, args] = o.executable ? [o.executable, argv] : runtimeCommand(o.runtime ?? 'node', argv);
  const proc = spawn(cmd, args, {
    cwd: dir,
    env: { ...process.env, NO_COLOR: '1', ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(proc);
  const logs: LogLine[] = [];
  const rawErr: string[] = [];
  const logWaiters: { test: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  let buf = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const parsed = parseLogLine(line);
      if (!parsed) rawErr.push(line);
      else {
        logs.push(parsed);
        for (const w of [...logWaiters]) {
          if (w.test(parsed)) {
            logWaiters.splice(logWaiters.indexOf(w), 1);
            w.resolve(parsed);
          }
        }
      }
    }
  });
  proc.stdout!.resume();
  const g: GatewayProcess = {
    proc,
    dir,
    ports,
    logs,
    rawErr,
    exited: false,
    exitCode: null,
    url: (path, listener = 'proxy') => `http://127.0.0.1:${ports[listener]}${path}`,
    waitForLog(msg, timeoutMs = 10_000) {
      const test = typeof msg === 'string' ? (l: LogLine) => l.msg === msg : msg;
      const found = logs.find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () =>
            reject(
              new Error(
                `no log line ${typeof msg === 'string' ? `"${msg}"` : 'matching'} within ${timeoutMs} ms; got:\n${
                  logs.map((l) => JSON.stringify(l)).join('\n')
                }\n${rawErr.join('\n')}`,
              ),
            ),
          timeoutMs,
        );
        logWaiters.push({
          test,
          resolve: (l) => {
            clearTimeout(t);
            resolve(l);
          },
        });
      });
    },
    waitForExit(timeoutMs = 15_000) {
      if (g.exited) return Promise.resolve(g.exitCode);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`gateway did not exit within ${timeoutMs} ms`)), timeoutMs);
        proc.once('exit', (code) => {
          clearTimeout(t);
          resolve(code);
        });
      });
    },
    async waitReady(path = '/readyz', listener = 'proxy', timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      while (Date.now() < deadline) {
        if (g.exited) {
          throw new Error(
            `gateway exited (${g.exitCode}) before ${path} answered 200:\n${rawErr.join('\n')}\n${
              logs.map((l) => JSON.stringify(l)).join('\n')
            }`,
          );
        }
        try {
          const r = await fetch(g.url(path, listener), { signal: AbortSignal.timeout(1000) });
          await r.arrayBuffer();
          if (r.status === 200) return;
          last = `status ${r.status}`;
        } catch (e) {
          last = String((e as Error).cause ?? e);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`${path} on ${listener} not 200 within ${timeoutMs} ms (last: ${last})`);
    },
    signal: (sig) => {
      proc.kill(sig);
    },
    stop(timeoutMs = 15_000) {
      if (g.exited) return Promise.resolve(g.exitCode);
      proc.kill('SIGTERM');
      return g.waitForExit(timeoutMs);
    },
    kill: () => {
      proc.kill('SIGKILL');
    },
  };
  proc.once('exit', (code) => {
    g.exited = true;
    g.exitCode = code;
    live.delete(proc);
  });
  return g;
}

export function resourcesFor(upstreamBase: string, extra = ''): string {
  return `_format_version: "1"
provider_keys:
  - display_name: mock
    provider: openai
    api_key: sk-upstream-SECRET-value
    api_base: ${upstreamBase}
models:
  - display_name: gpt-test
    model_name: gpt-upstream
    provider_key: mock
api_keys:
  - display_name: caller
    key_env: CALLER_KEY
    allowed_models: ["*"]
${extra}`;
}

export const CALLER_KEY = 'sk-caller-test-key';

export function baseConfig(extra = ''): string {
  return `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
${extra}`;
}
