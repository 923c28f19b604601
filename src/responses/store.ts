// The Responses state Sluice keeps for the answers it translates (docs/routing.md "Responses state"): each
// stored response (the input it was answered for, whole, and its output items) and each of its output items by
// id, on the cache's memory or Redis store, under the caller key's hash: one key never reads another's.
import { RedisExactStore } from '../cache/redis-store.ts';
import { type ExactStore, MemoryExactStore } from '../cache/store.ts';
import { redisClientOptions } from '../config/redis.ts';
import type { Config } from '../config/schema.ts';
import type { Logger } from '../observability/logger.ts';
import type { Platform, RedisClient } from '../platform.ts';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import type { Clock } from '../util/clock.ts';

/** One Responses input or output item, as JSON. */
export type Item = Record<string, unknown>;

/** What a later request continues from: the whole input the response answered, and its output. */
export interface StoredResponse {
  input: Item[];
  output: Item[];
}

/** The store's log lines, each in one place. */
export const RESPONSES_STORE_MSG = {
  lookupFailed: 'responses store lookup failed',
  writeFailed: 'responses store write failed',
  redisRecovered: 'responses store Redis answers again',
} as const;

/** Redis keys: `sluice:responses[:<env_id>]:<owner>:<id>`. */
export const RESPONSES_KEY_PREFIX = 'sluice:responses';

export interface ResponsesStoreOptions {
  store: ExactStore;
  ttlMs: number;
  /** A response whose entry is longer (JSON characters) is not kept. */
  maxEntryBytes: number;
}

/** Owners kept by key id: past this many the map starts again. */
const MAX_OWNERS = 4096;

export class ResponsesStore {
  private readonly owners = new Map<string, string>();

  constructor(private readonly o: ResponsesStoreOptions) {}

  get kind(): 'memory' | 'redis' {
    return this.o.store.kind;
  }

  /** Whether the backend is failing now (Redis, until a command succeeds again): a lookup then misses. */
  get failing(): boolean {
    return (this.o.store as { failing?: boolean }).failing === true;
  }

  /**
   * Whose entries a caller key reads and writes: a hash of its id, never the id itself. Synchronous, so a
   * memory write is done before the answer's last byte reaches the caller.
   */
  owner(keyId: string): string {
    let o = this.owners.get(keyId);
    if (o === undefined) {
      o = bytesToHex(sha256(encoder.encode(`responses\0${keyId}`))).slice(0, 32);
      // The callers' keys, hashed once each rather than on every call; bounded, as keys come and go.
      if (this.owners.size >= MAX_OWNERS) this.owners.clear();
      this.owners.set(keyId, o);
    }
    return o;
  }

  async response(owner: string, id: string): Promise<StoredResponse | undefined> {
    const v = parsed(await this.o.store.get(`${owner}:${id}`));
    if (!v || !Array.isArray(v.input) || !Array.isArray(v.output)) return undefined;
    return { input: v.input.filter(isItem), output: v.output.filter(isItem) };
  }

  async item(owner: string, id: string): Promise<Item | undefined> {
    return parsed(await this.o.store.get(`${owner}:${id}`));
  }

  /** Keeps a response and each output item that has an id; a response over the entry bound is not kept. */
  async put(owner: string, id: string, entry: StoredResponse): Promise<void> {
    const body = JSON.stringify(entry);
    if (body.length > this.o.maxEntryBytes) return;
    const writes = [this.o.store.set(`${owner}:${id}`, body, this.o.ttlMs)];
    for (const item of entry.output) {
      if (typeof item.id === 'string') {
        writes.push(this.o.store.set(`${owner}:${item.id}`, JSON.stringify(item), this.o.ttlMs));
      }
    }
    await Promise.all(writes);
  }
}

const encoder = new TextEncoder();

function isItem(v: unknown): v is Item {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parsed(v: { body: string } | undefined): Item | undefined {
  if (!v) return undefined;
  try {
    const j: unknown = JSON.parse(v.body);
    return isItem(j) ? j : undefined;
  } catch {
    return undefined;
  }
}

export interface ResponsesStoreSetup {
  store: ResponsesStore;
  close(): Promise<void>;
}

/**
 * The store of `config.yaml` `responses_store`: Redis when `backend: redis` and the runtime opens TCP sockets,
 * else memory (a WARN says so when Redis was asked for).
 */
export function createResponsesStore(
  config: Config,
  platform: Pick<Platform, 'redis'>,
  log: Logger,
  clock: Clock,
): ResponsesStoreSetup {
  const c = config.responses_store;
  let client: RedisClient | undefined;
  let backend: ExactStore;
  if (c.backend === 'redis' && c.redis && platform.redis) {
    client = platform.redis(redisClientOptions(c.redis, 'responses_store.redis'));
    backend = new RedisExactStore({
      client,
      envId: config.etcd.env_id,
      clock,
      prefix: RESPONSES_KEY_PREFIX,
      messages: RESPONSES_STORE_MSG,
      warn: (m, f) => log.warn(m, f),
      info: (m, f) => log.info(m, f),
    });
  } else {
    if (c.backend === 'redis') {
      log.warn(
        'responses_store.backend is redis but this runtime cannot open TCP sockets; responses are kept in memory',
      );
    }
    backend = new MemoryExactStore({ maxEntries: c.max_entries, maxBytes: c.max_bytes, clock });
  }
  return {
    store: new ResponsesStore({ store: backend, ttlMs: c.ttl_secs * 1000, maxEntryBytes: c.max_entry_bytes }),
    close: async () => {
      await client?.quit();
    },
  };
}
