// The shared rate limiter's Redis client on Node, Bun and Deno: ioredis (single, Cluster, Sentinel). It opens
// TCP sockets, so it lives here and reaches the core through `platform.redis`. Tuned so the limiter never
// holds a request (docs/scaling.md "When Redis is unavailable"): no offline queue, no retry of a dropped
// command, the connection bounded by `timeoutMs` and every command by `commandTimeoutMs`; the connection
// reconnects in the background.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisClient, RedisClientOptions } from '../src/routing/rate-limit-redis.ts';

const RECONNECT_MAX_MS = 1000;

interface Job {
  lua: string;
  keys: readonly string[];
  args: readonly (string | number)[];
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

const isNoScript = (e: unknown) => String((e as Error)?.message).startsWith('NOSCRIPT');

function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url.includes('://') ? url : `redis://${url}`);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port ? Number(u.port) : defaultPort };
}

function tlsOptions(o: RedisClientOptions, secure: boolean): RedisOptions['tls'] {
  if (!o.tls && !secure) return undefined;
  // Read once at boot: TLS material that cannot be read ends the boot (nothing outside the process fixes it).
  const pem = (file: string | undefined, what: string) => {
    if (!file) return undefined;
    try {
      return readFileSync(file, 'utf8');
    } catch (e) {
      throw new Error(`${o.block ?? 'redis'}.tls.${what}: cannot read ${file}: ${(e as Error).message}`);
    }
  };
  return {
    ca: pem(o.tls?.caFile, 'ca_file'),
    cert: pem(o.tls?.certFile, 'client_cert_file'),
    key: pem(o.tls?.keyFile, 'client_key_file'),
    rejectUnauthorized: o.tls?.verify ?? true,
  };
}

export function ioredisClient(o: RedisClientOptions): RedisClient {
  const common: RedisOptions = {
    username: o.username,
    password: o.password,
    connectTimeout: o.timeoutMs,
    commandTimeout: o.commandTimeoutMs ?? o.timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: (times: number) => Math.min(times * 100, RECONNECT_MAX_MS),
  };
  let client: Redis | Cluster;
  if (o.mode === 'cluster') {
    const nodes = o.nodes.map((n) => hostPort(n, 6379));
    const secure = o.nodes.some((n) => n.startsWith('rediss://'));
    client = new Cluster(nodes, {
      enableOfflineQueue: false,
      clusterRetryStrategy: (times: number) => Math.min(times * 100, RECONNECT_MAX_MS),
      slotsRefreshTimeout: o.timeoutMs,
      redisOptions: {
        username: o.username,
        password: o.password,
        connectTimeout: o.timeoutMs,
        commandTimeout: o.commandTimeoutMs ?? o.timeoutMs,
        maxRetriesPerRequest: 0,
        tls: tlsOptions(o, secure),
      },
    });
  } else if (o.mode === 'sentinel') {
    const secure = o.sentinels.some((n) => n.startsWith('rediss://'));
    client = new Redis({
      ...common,
      sentinels: o.sentinels.map((n) => hostPort(n, 26379)),
      name: o.masterName,
      db: o.database,
      tls: tlsOptions(o, secure),
      sentinelMaxConnections: 1,
      sentinelRetryStrategy: (times: number) => Math.min(times * 100, RECONNECT_MAX_MS),
    });
  } else {
    const url = o.url ?? 'redis://127.0.0.1:6379';
    const u = new URL(url);
    client = new Redis(url, {
      ...common,
      // Explicit credentials override those in the URL (AISIX: "they override a credential embedded in the URL").
      username: o.username ?? (u.username ? decodeURIComponent(u.username) : undefined),
      password: o.password ?? (u.password ? decodeURIComponent(u.password) : undefined),
      ...(o.database !== undefined ? { db: o.database } : {}),
      tls: tlsOptions(o, u.protocol === 'rediss:'),
    });
  }
  // Without a listener ioredis prints every connection error; the limiter reports outages itself.
  client.on('error', () => {});
  const shas = new Map<string, string>();
  const sha = (lua: string) => {
    let s = shas.get(lua);
    if (!s) shas.set(lua, s = createHash('sha1').update(lua).digest('hex'));
    return s;
  };
  let ready = client.status === 'ready';
  const waiters = new Set<(ok: boolean) => void>();
  client.on('ready', () => {
    ready = true;
    for (const w of waiters) w(true);
    waiters.clear();
  });
  client.on('end', () => (ready = false));
  client.on('close', () => (ready = false));
  const evalOne = async (lua: string, keys: readonly string[], args: readonly (string | number)[]) => {
    try {
      return await client.evalsha(sha(lua), keys.length, ...keys, ...args);
    } catch (e) {
      if (!isNoScript(e)) throw e;
      return await client.eval(lua, keys.length, ...keys, ...args);
    }
  };
  // Batching without a price at low load: a command goes out at once when nothing else is waiting for Redis
  // (one connection: no added delay); while others are in flight, the commands of one event-loop turn are
  // queued and written together as one pipeline (many connections: one write and one read for many
  // requests). ioredis's own enableAutoPipelining defers every command to setImmediate, even a lone one.
  // Cluster mode sends each command on its own (a pipeline must stay within one slot).
  let inFlight = 0;
  let queue: Job[] = [];
  const flush = () => {
    const jobs = queue;
    queue = [];
    if (o.mode === 'cluster' || jobs.length === 1) {
      for (const j of jobs) void track(evalOne(j.lua, j.keys, j.args)).then(j.resolve, j.reject);
      return;
    }
    const p = client.pipeline();
    for (const j of jobs) p.evalsha(sha(j.lua), j.keys.length, ...j.keys, ...j.args);
    void track(p.exec()).then((results) => {
      jobs.forEach((j, i) => {
        const [err, value] = results?.[i] ?? [new Error('no reply in the pipeline')];
        if (!err) j.resolve(value);
        else if (isNoScript(err)) void track(evalOne(j.lua, j.keys, j.args)).then(j.resolve, j.reject);
        else j.reject(err);
      });
    }, (e: unknown) => jobs.forEach((j) => j.reject(e)));
  };
  const track = <T>(p: Promise<T>): Promise<T> => {
    inFlight++;
    return p.finally(() => inFlight--);
  };
  return {
    evalScript(lua, keys, args) {
      if (inFlight === 0 && queue.length === 0) return track(evalOne(lua, keys, args));
      return new Promise((resolve, reject) => {
        if (queue.push({ lua, keys, args, resolve, reject }) === 1) setImmediate(flush);
      });
    },
    waitReady(ms) {
      if (ready) return Promise.resolve(true);
      return new Promise((resolve) => {
        const done = (ok: boolean) => {
          clearTimeout(timer);
          waiters.delete(done);
          resolve(ok);
        };
        const timer = setTimeout(() => done(false), ms);
        waiters.add(done);
      });
    },
    async quit() {
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
