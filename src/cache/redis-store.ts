// The exact layer on Redis (`cache.redis`; docs/cache.md "Redis"): AISIX's key layout
// `aisix:cache[:<env_id>]:<fingerprint>`, the answer's JSON as the value, `SET … EX <ttl>` (at least 1 s).
// Every command goes through the platform's Redis client as a one-line script (single, Cluster and Sentinel
// alike: one key per script). A failure is never the request's: the read is a miss, the write is skipped,
// one WARN per outage; while Redis fails, one request per second probes it and the others skip it.
import type { RedisClient } from '../platform.ts';
import type { Clock } from '../util/clock.ts';
import { CACHE_MSG } from './messages.ts';
import type { ExactStore, StoredAnswer } from './store.ts';

export const CACHE_KEY_PREFIX = 'aisix:cache';
/** While Redis fails, one request per this many ms tries it; the others skip it (a miss, no write). */
export const REDIS_RETRY_EVERY_MS = 1000;

const GET_LUA = `local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}`;
const SET_LUA = `redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1`;

/** `aisix:cache` or `aisix:cache:<env_id>`: two environments on one Redis never share entries. */
export function cacheKeyPrefix(envId: string | undefined): string {
  return envId ? `${CACHE_KEY_PREFIX}:${envId}` : CACHE_KEY_PREFIX;
}

export interface RedisStoreOptions {
  client: RedisClient;
  envId: string | undefined;
  clock: Clock;
  warn(msg: string, fields: Record<string, unknown>): void;
  info(msg: string, fields: Record<string, unknown>): void;
  /** Another store's key prefix (the env id still appended) and log lines; default the cache's. */
  prefix?: string;
  messages?: Record<'lookupFailed' | 'writeFailed' | 'redisRecovered', string>;
}

export class RedisExactStore implements ExactStore {
  readonly kind = 'redis';
  private readonly prefix: string;
  private readonly msg: Record<'lookupFailed' | 'writeFailed' | 'redisRecovered', string>;
  /** Unix ms of the failure that opened the current outage; undefined while Redis answers. */
  private failingSince: number | undefined;
  private lastTry = 0;

  constructor(private readonly o: RedisStoreOptions) {
    this.prefix = o.prefix === undefined ? cacheKeyPrefix(o.envId) : o.envId ? `${o.prefix}:${o.envId}` : o.prefix;
    this.msg = o.messages ?? CACHE_MSG;
  }

  /** The Redis key of a fingerprint. */
  key(fingerprint: string): string {
    return `${this.prefix}:${fingerprint}`;
  }

  /** Whether Redis is failing now (until one command succeeds again). */
  get failing(): boolean {
    return this.failingSince !== undefined;
  }

  async get(fingerprint: string): Promise<StoredAnswer | undefined> {
    if (!this.mayTry()) return undefined;
    try {
      const r = await this.o.client.evalScript(GET_LUA, [this.key(fingerprint)], []);
      this.succeeded();
      if (!Array.isArray(r) || typeof r[0] !== 'string') return undefined;
      const pttl = Number(r[1]);
      return { body: r[0], expiresAt: this.o.clock() + (pttl > 0 ? pttl : 0) };
    } catch (e) {
      this.failed(this.msg.lookupFailed, e);
      return undefined;
    }
  }

  async set(fingerprint: string, body: string, ttlMs: number): Promise<void> {
    if (!this.mayTry()) return;
    try {
      await this.o.client.evalScript(SET_LUA, [this.key(fingerprint)], [body, Math.max(1, Math.floor(ttlMs / 1000))]);
      this.succeeded();
    } catch (e) {
      this.failed(this.msg.writeFailed, e);
    }
  }

  private mayTry(): boolean {
    if (this.failingSince === undefined) return true;
    const now = this.o.clock();
    if (now - this.lastTry < REDIS_RETRY_EVERY_MS) return false;
    this.lastTry = now;
    return true;
  }

  private succeeded(): void {
    if (this.failingSince === undefined) return;
    this.o.info(this.msg.redisRecovered, { failing_for_ms: this.o.clock() - this.failingSince });
    this.failingSince = undefined;
  }

  private failed(msg: string, e: unknown): void {
    if (this.failingSince !== undefined) return;
    this.failingSince = this.lastTry = this.o.clock();
    this.o.warn(msg, {
      error: String((e as Error)?.message ?? e),
      detail: 'the request proceeds uncached; further Redis failures are not logged until it answers again',
    });
  }
}
