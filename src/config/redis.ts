// A Redis connection's config (`ratelimit.redis`, `cache.redis`: docs/configuration.md) as the options
// `Platform.redis` takes; the one mapping both shared stores use.
import type { RedisClientOptions } from '../platform.ts';
import type { RedisConn } from './schema.ts';

export function redisClientOptions(
  r: RedisConn,
  block: 'ratelimit.redis' | 'cache.redis' | 'responses_store.redis' | 'budgets.redis',
): RedisClientOptions {
  return {
    block,
    mode: r.mode,
    url: r.url,
    nodes: r.nodes,
    sentinels: r.sentinels,
    masterName: r.master_name,
    username: r.username,
    password: r.password,
    database: r.database,
    tls: r.tls && {
      caFile: r.tls.ca_file,
      certFile: r.tls.client_cert_file,
      keyFile: r.tls.client_key_file,
      verify: r.tls.verify,
    },
    timeoutMs: r.timeout_secs * 1000,
    commandTimeoutMs: r.command_timeout_ms,
  };
}
