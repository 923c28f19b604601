// The response cache's metric families (docs/cache.md "Metrics"): AISIX's `aisix_cache_*` names, labels and
// meaning, plus Sluice's own for what AISIX does not have (coalesced misses, the memory store's fill).
// `policy` is the policy's `name`. Registered into the gateway's registry only when the cache exists.
import { Counter, Gauge, Histogram, type Registry } from './metrics.ts';

export type CacheOutcome = 'hit_exact' | 'hit_semantic' | 'miss' | 'bypass';

/** Embedding calls are quick or failed: finer buckets than the request families'. */
const EMBEDDING_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class CacheMetrics {
  readonly requests: Counter;
  readonly embeddingFailures: Counter;
  readonly storeFailures: Counter;
  readonly embeddingSeconds: Histogram;
  readonly coalesced: Counter;

  constructor(r: Registry, memory: () => { entries: number; bytes: number }) {
    this.requests = r.register(
      new Counter(
        'aisix_cache_requests_total',
        'Requests a cache policy applied to, by outcome (hit_exact, hit_semantic, miss, bypass).',
        ['policy', 'outcome'],
      ),
    );
    this.embeddingFailures = r.register(
      new Counter(
        'aisix_cache_semantic_embedding_failures_total',
        'Semantic lookups skipped: the embedding model did not resolve (resolve) or its call failed (embed).',
        ['policy', 'cause'],
      ),
    );
    this.storeFailures = r.register(
      new Counter(
        'aisix_cache_semantic_store_failures_total',
        'Semantic store operations that failed (op: lookup, store).',
        ['policy', 'op'],
      ),
    );
    this.embeddingSeconds = r.register(
      new Histogram(
        'aisix_cache_semantic_embedding_seconds',
        'Duration of the successful embedding calls of the semantic cache.',
        ['policy'],
        EMBEDDING_BUCKETS,
      ),
    );
    this.coalesced = r.register(
      new Counter(
        'sluice_cache_coalesced_requests_total',
        'Misses answered by an identical request already upstream on this replica (no upstream call of their own).',
        ['policy'],
      ),
    );
    r.register(
      new Gauge('sluice_cache_memory_entries', 'Answers held by the memory cache store.', [], (g) => {
        g.set([], memory().entries);
      }),
    );
    r.register(
      new Gauge(
        'sluice_cache_memory_bytes',
        'Bytes charged to the answers held by the memory cache store.',
        [],
        (g) => {
          g.set([], memory().bytes);
        },
      ),
    );
  }

  /** Per policy name: requests it applied to and those answered from the cache (the status page's ratio). */
  private readonly tally = new Map<string, { lookups: number; hits: number }>();

  outcome(policy: string, outcome: CacheOutcome): void {
    this.requests.inc([policy, outcome]);
    let t = this.tally.get(policy);
    if (!t) this.tally.set(policy, t = { lookups: 0, hits: 0 });
    t.lookups++;
    if (outcome === 'hit_exact' || outcome === 'hit_semantic') t.hits++;
  }

  /** Every policy that applied to a request since boot, by name. */
  hitRatios(): { policy: string; lookups: number; hits: number }[] {
    return [...this.tally].map(([policy, t]) => ({ policy, ...t }));
  }
}
