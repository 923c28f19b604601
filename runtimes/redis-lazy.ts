// `platform.redis` for Node, Bun and Deno: the ioredis client (redis-ioredis.ts), loaded only when a
// configuration asks for `ratelimit.backend: redis`. Loading ioredis costs every process memory whether it
// is used or not (26 MiB of RSS on Deno, measured with `Deno.memoryUsage()` around the import); most
// gateways count their limits in memory. The import starts at once, so the connection is opened at boot as
// before; commands wait for it. The TLS files the client reads were already checked by the boot
// (src/boot.ts), so nothing that could fail the boot moves into the lazy part.
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
