// The response cache's log lines, each in one place (AISIX's wording where AISIX logs the same event).
export const CACHE_MSG = {
  lookupFailed: 'cache lookup failed',
  writeFailed: 'cache write failed',
  redisRecovered: 'response cache Redis answers again',
  redisConnectFailed: 'redis cache connect failed (cache.redis)',
  noRedisBackend:
    'cache policy uses backend redis but this gateway has no cache.redis (or this runtime cannot open TCP sockets); matching requests are not cached',
  semanticOnRedis:
    'semantic cache on Redis needs vector search, which this gateway does not use; backend: redis policies with semantic use the exact layer only',
  badEmbeddingModel:
    'cache policy references a missing or non-embedding embedding_model; semantic lookups are skipped, exact caching continues',
  embeddingFailed: 'cache semantic embedding call failed; request proceeds uncached',
} as const;
