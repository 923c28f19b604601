// The Redis connection options both shared stores build from config.yaml (src/config/redis.ts): a TLS file the
// client cannot read is reported under the block that named it (docs/configuration.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.ts';
import { redisClientOptions } from '../../src/config/redis.ts';
import { ioredisClient } from '../../runtimes/redis-ioredis.ts';

const CONFIG = `resources_file: r.yaml
proxy: { addr: "0.0.0.0:3000" }
admin: { admin_keys: [a] }
ratelimit: { backend: redis, redis: { url: "rediss://127.0.0.1:1", tls: { ca_file: /nonexistent/rl-ca.pem } } }
cache: { backend: redis, redis: { url: "rediss://127.0.0.1:1", tls: { ca_file: /nonexistent/cache-ca.pem } } }
`;

test('an unreadable Redis TLS file is named under its own block: ratelimit.redis or cache.redis', () => {
  const r = loadConfig('/c/config.yaml', CONFIG, {});
  if (!r.ok) assert.fail(r.report.format());
  const { ratelimit, cache } = r.config;
  assert.throws(
    () => ioredisClient(redisClientOptions(ratelimit.redis!, 'ratelimit.redis')),
    /^Error: ratelimit\.redis\.tls\.ca_file: cannot read \/nonexistent\/rl-ca\.pem: /,
  );
  assert.throws(
    () => ioredisClient(redisClientOptions(cache.redis!, 'cache.redis')),
    /^Error: cache\.redis\.tls\.ca_file: cannot read \/nonexistent\/cache-ca\.pem: /,
  );
});
