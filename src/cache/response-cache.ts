// The response cache (docs/cache.md): for a non-streaming chat completion whose caller a `cache_policies`
// document applies to, `lookup` answers from the exact layer, then from identical requests already upstream
// on this replica, then from the semantic layer; otherwise it hands back a miss whose `store` keeps the
// answer. The pipeline's "cache lookup" and "cache store" steps call it; it never fails a request — a store
// that fails is a miss, logged.
import type { CacheMetrics } from '../observability/cache-metrics.ts';
import type { CachePolicy } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Clock } from '../util/clock.ts';
import type { Sha256Stream } from '../util/crypto.ts';
import { exactFingerprint, scopeOf } from './fingerprint.ts';
import { CACHE_MSG } from './messages.ts';
import { type Directives, parseDirectives, policyTable } from './policy.ts';
import type { Embed } from './semantic.ts';
import { SemanticLayer, type SemanticLookup } from './semantic-layer.ts';
import { type Flight, SingleFlight } from './single-flight.ts';
import type { ExactStore, MemoryExactStore } from './store.ts';

/** What a request tells the cache. `body` is a chat completions body the caller sent (not streamed). */
export interface CacheRequest {
  snapshot: Snapshot;
  body: Record<string, unknown>;
  apiKeyId: string;
  /** The request's `Cache-Control` header. */
  cacheControl: string | null;
}

/** Tokens the stored answer reported: replayed on a hit, the usage fields' saved tokens. */
export interface StoredUsage {
  input: number;
  output: number;
}

export interface CacheHit {
  kind: 'hit';
  policy: CachePolicy;
  layer: 'exact' | 'semantic';
  /** Semantic hits: the cosine similarity of the matched prompt. */
  similarity?: number;
  /** An identical request on this replica was upstream and its answer serves this one too. */
  coalesced: boolean;
  /** The answer for this caller: the stored body with `model` = the name it sent and `created` = now. */
  body: string;
  usage: StoredUsage;
  headers: Record<string, string>;
}

export interface CacheMiss {
  kind: 'miss' | 'bypass';
  policy: CachePolicy;
  headers: Record<string, string>;
  /**
   * Keep a successful upstream answer (a chat completion's JSON text). Call `store` or `abandon` exactly
   * once for every miss: identical requests waiting on this one go on when it does.
   */
  store(body: string): Promise<void>;
  /** The answer is not to be kept (an error, a cut request): waiting identical requests go upstream. */
  abandon(): void;
}

export type CacheDecision = CacheHit | CacheMiss | undefined;

export interface ResponseCacheOptions {
  memory: MemoryExactStore;
  /** The `cache.redis` store; absent when not configured (or the runtime cannot open TCP sockets). */
  redis?: ExactStore;
  clock: Clock;
  metrics: CacheMetrics;
  embed?: Embed;
  /** `upstream.timeout_ms`: the embedding deadline when neither the policy nor the model sets one. */
  upstreamTimeoutMs: number;
  /** The platform's native SHA-256, for the fingerprints; absent: Web Crypto's. */
  sha256?: () => Sha256Stream;
  warn(msg: string, fields: Record<string, unknown>): void;
}

/** `x-aisix-cache-similarity`: the cosine to four decimals. */
export function similarityHeader(s: number): string {
  return s.toFixed(4);
}

export class ResponseCache {
  private readonly flights = new SingleFlight();
  private readonly semantic: SemanticLayer;
  private readonly warnedNoRedis = new Set<string>();

  constructor(private readonly o: ResponseCacheOptions) {
    this.semantic = new SemanticLayer({
      memory: o.memory,
      clock: o.clock,
      metrics: o.metrics,
      embed: o.embed,
      upstreamTimeoutMs: o.upstreamTimeoutMs,
      sha256: o.sha256,
      warn: o.warn,
    });
  }

  /** Whether any enabled policy exists in `snapshot` (the pipeline leaves the steps out otherwise). */
  applies(snapshot: Snapshot): boolean {
    return !policyTable(snapshot).empty;
  }

  /** Misses upstream now that identical requests may wait for (tests). */
  get flightsInProgress(): number {
    return this.flights.inFlight;
  }

  /** Requests waiting for an identical one upstream (tests). */
  get coalescing(): number {
    return this.flights.waiting;
  }

  /**
   * The cache's decision for a request: undefined when no enabled policy matches (or its backend does not
   * exist here) — no cache header then — else a hit to answer with or a miss to `store`/`abandon`.
   */
  async lookup(req: CacheRequest): Promise<CacheDecision> {
    if (req.body.stream === true) return undefined;
    const model = typeof req.body.model === 'string' ? req.body.model : '';
    const policy = policyTable(req.snapshot).match(model, req.apiKeyId);
    if (!policy) return undefined;
    const store = this.storeFor(policy);
    if (!store) return undefined;
    const directives = parseDirectives(req.cacheControl);
    const scope = scopeOf(policy, req.apiKeyId);
    const key = await exactFingerprint(req.body, scope, this.o.sha256);
    const name = policy.name;
    if (directives.noCache) {
      this.o.metrics.outcome(name, 'bypass');
      return this.miss('bypass', policy, store, key, directives, undefined, undefined);
    }
    const found = await store.get(key);
    if (found) {
      this.o.metrics.outcome(name, 'hit_exact');
      return this.hit(policy, 'exact', found.body, model, false);
    }
    // A request that may not store never leads: its followers would only wait to go upstream themselves.
    const flight = directives.noStore ? { follow: this.flights.follow(key) } : this.flights.join(key);
    let lead: Flight | undefined;
    if ('lead' in flight) lead = flight.lead;
    else if (flight.follow) {
      const body = await flight.follow;
      if (body !== undefined) {
        this.o.metrics.outcome(name, 'hit_exact');
        this.o.metrics.coalesced.inc([name]);
        return this.hit(policy, 'exact', body, model, true);
      }
      // The leader kept nothing: this one goes upstream on its own.
    }
    const sem = store.kind === 'memory'
      ? await this.semantic.lookup(req.snapshot, policy, req.body, scope, key)
      : undefined;
    if (sem?.match) {
      lead?.settle(sem.match.body);
      this.o.metrics.outcome(name, 'hit_semantic');
      return this.hit(policy, 'semantic', sem.match.body, model, false, sem.match.similarity);
    }
    this.o.metrics.outcome(name, 'miss');
    return this.miss('miss', policy, store, key, directives, lead, sem);
  }

  /** The policy's store; a `redis` policy without `cache.redis` caches nothing (WARN once per policy). */
  private storeFor(policy: CachePolicy): ExactStore | undefined {
    if (policy.backend === 'memory') return this.o.memory;
    if (this.o.redis) return this.o.redis;
    if (!this.warnedNoRedis.has(policy.id)) {
      this.warnedNoRedis.add(policy.id);
      this.o.warn(CACHE_MSG.noRedisBackend, { policy: policy.name, policy_id: policy.id });
    }
    return undefined;
  }

  private hit(
    policy: CachePolicy,
    layer: 'exact' | 'semantic',
    stored: string,
    model: string,
    coalesced: boolean,
    similarity?: number,
  ): CacheHit {
    const { body, usage } = renderHit(stored, model, Math.floor(this.o.clock() / 1000));
    const headers: Record<string, string> = { 'x-aisix-cache': 'hit', 'x-aisix-cache-layer': layer };
    if (similarity !== undefined) headers['x-aisix-cache-similarity'] = similarityHeader(similarity);
    return { kind: 'hit', policy, layer, similarity, coalesced, body, usage, headers };
  }

  private miss(
    kind: 'miss' | 'bypass',
    policy: CachePolicy,
    store: ExactStore,
    key: string,
    directives: Directives,
    lead: Flight | undefined,
    sem: SemanticLookup | undefined,
  ): CacheMiss {
    const ttlMs = policy.ttl_seconds * 1000;
    let done = false;
    return {
      kind,
      policy,
      headers: { 'x-aisix-cache': kind },
      store: async (body) => {
        if (done) return;
        done = true;
        const keep = !directives.noStore && storable(body);
        lead?.settle(keep ? body : undefined);
        if (!keep) return;
        await store.set(key, body, ttlMs);
        if (sem?.vector) this.semantic.store(policy, key, sem, this.o.clock() + ttlMs);
      },
      abandon: () => {
        if (done) return;
        done = true;
        lead?.settle(undefined);
      },
    };
  }
}

/** A chat completion the cache may keep: a JSON object with `choices` (an error body never is). */
function storable(body: string): boolean {
  try {
    const v = JSON.parse(body) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) &&
      Array.isArray((v as { choices?: unknown }).choices) &&
      (v as { error?: unknown }).error === undefined;
  } catch {
    return false;
  }
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** The stored body re-rendered for this caller: its `id` and `usage`, `model` as sent, `created` now. */
export function renderHit(stored: string, model: string, createdSecs: number): { body: string; usage: StoredUsage } {
  const v = JSON.parse(stored) as Record<string, unknown>;
  v.created = createdSecs;
  v.model = model;
  const u = (typeof v.usage === 'object' && v.usage !== null ? v.usage : {}) as Record<string, unknown>;
  return { body: JSON.stringify(v), usage: { input: count(u.prompt_tokens), output: count(u.completion_tokens) } };
}
