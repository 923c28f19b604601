// `platform.redis` for Node, Bun and Deno: the ioredis client (redis-ioredis.ts), loaded only when a
// configuration asks for `ratelimit.backend: redis`, since loading it costs every process memory
// (docs/performance.md) and most gateways count their limits in memory. The import starts at once, so the
// connection is opened at boot; commands wait for it. The boot has checked the TLS files the client reads,
// so nothing that could fail the boot happens in the lazy part.
import type { RedisClient, RedisClientOptions } from '../src/routing/rate-limit-redis.ts';

export function lazyRedisClient(o: RedisClientOptions): RedisClient {
  const client = import('./redis-ioredis.ts').then((m) => m.ioredisClient(o));
  // Never an unhandled rejection: each command below reports the failure to its caller.
  client.catch(() => {});
  return {
    evalScript: (lua, keys, args) => client.then((c) => c.evalScript(lua, keys, args)),
    waitReady: (ms) => client.then((c) => c.waitReady(ms), () => false),
    quit: () => client.then((c) => c.quit(), () => {}),
  };
}
