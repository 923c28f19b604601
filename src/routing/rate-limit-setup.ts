// Build the caller rate limiter from `ratelimit` in config.yaml: the memory store, or the Redis store when
// `backend: redis` and the runtime can open TCP sockets. A runtime that cannot (Workers) says so at boot with
// a WARN and counts per isolate; its status and metric say the limits are not shared.
import { redisClientOptions } from '../config/redis.ts';
import type { Config } from '../config/schema.ts';
import type { Logger } from '../observability/logger.ts';
import type { Platform } from '../platform.ts';
import { MemoryRateLimitStore, RateLimiter, type RateLimiterOptions, type RateLimitStore } from './rate-limit.ts';
import { RedisRateLimitStore } from './rate-limit-redis.ts';

/** `/status/config` `rate_limit_store`. */
export interface RateLimitStoreStatus {
  backend: 'memory' | 'redis';
  /** Counts shared across replicas (true) or per replica (false). */
  shared: boolean;
  /** When `shared` last changed (redis backend only). */
  since?: string;
}

export const NO_TCP_WARNING =
  'ratelimit.backend is redis but this runtime cannot open TCP sockets; rate limits are counted per isolate, not shared';

export function createRateLimiter(
  config: Config,
  platform: Platform,
  log: Logger,
  opts: Pick<RateLimiterOptions, 'onRefused'> & {
    onStatus: (s: RateLimitStoreStatus) => void;
    /** The gateway's clock (Unix ms): memory-store windows and status timestamps. Default Date.now. */
    now?: () => number;
  },
): RateLimiter {
  const rl = config.ratelimit;
  const now = opts.now ?? Date.now;
  let store: RateLimitStore;
  if (rl.backend === 'redis' && rl.redis) {
    const r = rl.redis;
    if (!platform.redis) {
      log.warn(NO_TCP_WARNING, { runtime: platform.name, mode: r.mode });
      store = new MemoryRateLimitStore({ now });
      opts.onStatus({ backend: 'redis', shared: false, since: new Date(now()).toISOString() });
    } else {
      const timeoutMs = r.timeout_secs * 1000;
      const client = platform.redis(redisClientOptions(r, 'ratelimit.redis'));
      store = new RedisRateLimitStore({
        client,
        mode: r.mode,
        concurrencyTtlSecs: rl.concurrency_ttl_secs,
        ...(config.etcd.env_id ? { envId: config.etcd.env_id } : {}),
        timeoutMs,
        now,
        warn: (msg, fields) => log.warn(msg, fields),
        info: (msg, fields) => log.info(msg, fields),
        onState: (s) => opts.onStatus({ backend: 'redis', shared: s.shared, since: s.since }),
      });
    }
  } else {
    store = new MemoryRateLimitStore({ now });
    opts.onStatus({ backend: 'memory', shared: false });
  }
  return new RateLimiter({ store, onRefused: opts.onRefused });
}
