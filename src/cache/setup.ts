// The response cache built from `config.yaml` `cache` (docs/cache.md "config.yaml"): the memory store
// always, the Redis store when `cache.redis` is set and the runtime can open TCP sockets. Nothing of it runs
// per request until a `cache_policies` document applies.
import { redisClientOptions } from '../config/redis.ts';
import type { Config } from '../config/schema.ts';
import { CacheMetrics } from '../observability/cache-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { Registry } from '../observability/metrics.ts';
import type { Platform } from '../platform.ts';
import type { RedisClient } from '../platform.ts';
import type { Clock } from '../util/clock.ts';
import { CACHE_MSG } from './messages.ts';
import { RedisExactStore } from './redis-store.ts';
import { ResponseCache } from './response-cache.ts';
import type { Embed } from './semantic.ts';
import { MemoryExactStore } from './store.ts';

export interface CacheSetup {
  /**
   * The engine the pipeline's cache steps call, built on first use with the embedding call the proxy app
   * provides (the dispatcher lives there); later calls return the same engine.
   */
  engine(embed?: Embed): ResponseCache;
  memory: MemoryExactStore;
  redis?: RedisExactStore;
  /** Per policy that applied to a request since boot: requests and hits (the status page). */
  hitRatios(): { policy: string; lookups: number; hits: number }[];
  /**
   * Boot: resolves once `cache.redis` answers; rejects with AISIX's fatal boot error when it does not
   * within its timeout. Resolves at once without `cache.redis`.
   */
  connect(): Promise<void>;
  close(): Promise<void>;
}

export function createResponseCache(
  config: Config,
  platform: Pick<Platform, 'redis' | 'name' | 'sha256Stream'>,
  log: Logger,
  registry: Registry,
  opts: { clock: Clock },
): CacheSetup {
  const c = config.cache;
  const memory = new MemoryExactStore({
    maxEntries: c.memory.max_entries,
    maxBytes: c.memory.max_bytes,
    clock: opts.clock,
  });
  const metrics = new CacheMetrics(registry, () => ({ entries: memory.size, bytes: memory.bytes }));
  let client: RedisClient | undefined;
  let redis: RedisExactStore | undefined;
  const r = c.redis;
  if (r && platform.redis) {
    client = platform.redis(redisClientOptions(r, 'cache.redis'));
    redis = new RedisExactStore({
      client,
      envId: config.etcd.env_id,
      clock: opts.clock,
      warn: (m, f) => log.warn(m, f),
      info: (m, f) => log.info(m, f),
    });
    log.warn(CACHE_MSG.semanticOnRedis, { mode: r.mode });
  }
  let engine: ResponseCache | undefined;
  return {
    engine: (embed) =>
      engine ??= new ResponseCache({
        memory,
        redis,
        clock: opts.clock,
        metrics,
        embed,
        upstreamTimeoutMs: config.upstream.timeout_ms,
        sha256: platform.sha256Stream ? () => platform.sha256Stream!() : undefined,
        warn: (m, f) => log.warn(m, f),
      }),
    memory,
    redis,
    hitRatios: () => metrics.hitRatios(),
    async connect() {
      if (!client || !r) return;
      if (!(await client.waitReady(r.timeout_secs * 1000))) {
        throw new Error(`${CACHE_MSG.redisConnectFailed}: no answer within ${r.timeout_secs} s`);
      }
    },
    async close() {
      await client?.quit();
    },
  };
}
