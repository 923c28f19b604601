// Real Redis servers for the tests: a single server, or a Cluster of three masters made with
// `redis-cli --cluster create`, on free loopback ports with temporary folders; no persistence.
// Never skips: a missing binary is an error telling how to install it.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { RedisClient } from '../../src/platform.ts';
import { freePort } from './process.ts';

const INSTALL_HINT = 'redis-server / redis-cli not found on PATH: install them with `apt-get install -y redis-server`';

export function assertRedisInstalled(): void {
  for (const bin of ['redis-server', 'redis-cli']) {
    const r = spawnSync(bin, ['--version'], { stdio: 'ignore' });
    if (r.error || r.status !== 0) throw new Error(INSTALL_HINT);
  }
}

const live = new Set<ChildProcess>();
const dirs = new Set<string>();
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** `DEBUG SLEEP secs` on the server at `port` (started with the debug command enabled); resolves when it is over. */
export function redisSleep(port: number, secs: number): Promise<void> {
  const cli = spawn('redis-cli', ['-p', String(port), 'DEBUG', 'SLEEP', String(secs)], { stdio: 'ignore' });
  live.add(cli);
  return new Promise((resolve, reject) => {
    cli.once('exit', (code) => {
      live.delete(cli);
      if (code === 0) resolve();
      else reject(new Error(`redis-cli DEBUG SLEEP ${secs} exited ${code}`));
    });
  });
}

/** Run redis-cli against `port` and return its output (throws on failure). */
export function redisCli(port: number, ...args: string[]): string {
  const r = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 10_000 });
  if (r.error || r.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${r.error ?? r.stderr}`);
  return r.stdout.trim();
}

export interface RedisNode {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** SIGTERM and wait; the port stays reserved for `start()`. */
  stop(): Promise<void>;
  /** Start again on the same port (empty: no persistence); resolves when it answers PING. */
  start(): Promise<void>;
}

async function startNode(dir: string, port: number, extra: string[]): Promise<{ proc: ChildProcess }> {
  const proc = spawn('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...extra,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  proc.stdout!.resume();
  proc.stderr!.resume();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = spawnSync('redis-cli', ['-p', String(port), 'PING'], { encoding: 'utf8', timeout: 2000 });
    if (r.stdout?.trim() === 'PONG') return { proc };
    if (proc.exitCode !== null) throw new Error(`redis-server on port ${port} exited (${proc.exitCode})`);
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING within 10 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function makeNode(dir: string, port: number, extra: string[]): RedisNode & { begin(): Promise<void> } {
  let proc: ChildProcess | undefined;
  const node = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async begin() {
      proc = (await startNode(dir, port, extra)).proc;
    },
    async start() {
      if (proc && proc.exitCode === null) return;
      await node.begin();
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (p.exitCode === null) p.kill('SIGKILL');
    },
  };
  return node;
}

export interface RedisServer extends RedisNode {
  /** Stop and remove the folder. */
  close(): Promise<void>;
}

/** `extra`: more redis-server arguments, e.g. `['--enable-debug-command', 'yes']` for `DEBUG SLEEP`. */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  assertRedisInstalled();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  dirs.add(dir);
  const node = makeNode(dir, await freePort(), extra);
  await node.begin();
  return Object.assign(node, {
    async close() {
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
      dirs.delete(dir);
    },
  });
}

export interface RedisCluster {
  readonly nodes: RedisNode[];
  /** `redis://127.0.0.1:<port>` of every master. */
  readonly urls: string[];
  close(): Promise<void>;
}

/** Three masters, no replicas, every slot assigned; resolves when `cluster_state:ok` on every node. */
export async function startRedisCluster(): Promise<RedisCluster> {
  assertRedisInstalled();
  const nodes: (RedisNode & { begin(): Promise<void> })[] = [];
  const nodeDirs: string[] = [];
  for (let i = 0; i < 3; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-cluster-'));
    dirs.add(dir);
    nodeDirs.push(dir);
    const port = await freeClusterPort();
    nodes.push(makeNode(dir, port, ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf')]));
  }
  try {
    await formCluster(nodes);
  } catch (e) {
    // Nodes left running would hold the test process open until the runner's timeout.
    await Promise.all(nodes.map((n) => n.stop()));
    throw e;
  }
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    async close() {
      await Promise.all(nodes.map((n) => n.stop()));
      for (const d of nodeDirs) {
        rmSync(d, { recursive: true, force: true });
        dirs.delete(d);
      }
    },
  };
}

/** A free port whose cluster bus port (port + 10000, Redis's rule) is free too. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 <= 65_535 && await canBind(port + 10_000)) return port;
  }
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

async function formCluster(nodes: (RedisNode & { begin(): Promise<void> })[]): Promise<void> {
  // Settled, not raced: every node is up or failed before the caller stops them all.
  const started = await Promise.allSettled(nodes.map((n) => n.begin()));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  const create = spawnSync('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ], { encoding: 'utf8', timeout: 30_000 });
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}\n${create.stderr}`);
  const deadline = Date.now() + 15_000;
  while (!nodes.every((n) => redisCli(n.port, 'CLUSTER', 'INFO').includes('cluster_state:ok'))) {
    if (Date.now() > deadline) throw new Error('the Redis cluster did not reach cluster_state:ok within 15 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface RedisSentinel {
  /** The master the sentinel watches. */
  readonly master: RedisServer;
  readonly sentinelPort: number;
  /** `redis://127.0.0.1:<sentinel port>` */
  readonly sentinelUrl: string;
  readonly masterName: string;
  close(): Promise<void>;
}

/** A master and one sentinel watching it as `mymaster` (quorum 1); resolves when the sentinel knows it. */
export async function startRedisSentinel(): Promise<RedisSentinel> {
  const master = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-sentinel-'));
  dirs.add(dir);
  const port = await freePort();
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(conf, `port ${port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 ${master.port} 1\n`);
  const proc = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  proc.stdout!.resume();
  proc.stderr!.resume();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = spawnSync('redis-cli', ['-p', String(port), 'SENTINEL', 'get-master-addr-by-name', 'mymaster'], {
      encoding: 'utf8',
      timeout: 2000,
    });
    if (r.stdout?.includes(String(master.port))) break;
    if (proc.exitCode !== null) throw new Error(`redis sentinel on port ${port} exited (${proc.exitCode})`);
    if (Date.now() > deadline) throw new Error(`redis sentinel on port ${port} did not know its master within 10 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    master,
    sentinelPort: port,
    sentinelUrl: `redis://127.0.0.1:${port}`,
    masterName: 'mymaster',
    async close() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      }
      await master.close();
      rmSync(dir, { recursive: true, force: true });
      dirs.delete(dir);
    },
  };
}

/**
 * A Redis client whose scripts read `clock()` instead of the server's `TIME` (the only clock the limiter's
 * scripts use), so a test steps a real Redis through windows without waiting for them. Everything else —
 * keys, counters, expiry arithmetic — is the real server's.
 */
export function fixedClockRedis(client: RedisClient, clock: () => number): RedisClient {
  return {
    evalScript(lua, keys, args) {
      const ms = clock();
      const time = `{'${Math.floor(ms / 1000)}', '${(ms % 1000) * 1000}'}`;
      return client.evalScript(lua.replaceAll("redis.call('TIME')", time), keys, args);
    },
    waitReady: (ms) => client.waitReady(ms),
    quit: () => client.quit(),
  };
}
