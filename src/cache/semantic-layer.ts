// The semantic layer on the memory store (docs/cache.md "Semantic layer"): after an exact miss, a policy
// with `semantic` embeds the request's text through its embedding model and serves the answer of the
// closest earlier prompt at or above the threshold; the exact layer is back-filled for the request's own
// fingerprint. Any failure — the embedding model does not resolve, its call fails or times out — leaves the
// request to the exact layer, counted by cause.
import type { CacheMetrics } from '../observability/cache-metrics.ts';
import type { CachePolicy, DirectModel } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Clock } from '../util/clock.ts';
import type { Sha256Stream } from '../util/crypto.ts';
import { partitionFingerprint, semanticText } from './fingerprint.ts';
import { CACHE_MSG } from './messages.ts';
import { type Embed, SemanticIndex, unit } from './semantic.ts';
import type { MemoryExactStore } from './store.ts';

/** What a semantic lookup leaves for the store: the request's vector and partition, and a match if any. */
export interface SemanticLookup {
  vector?: Float32Array;
  partition?: string;
  match?: { body: string; similarity: number };
}

export interface SemanticLayerOptions {
  memory: MemoryExactStore;
  clock: Clock;
  metrics: CacheMetrics;
  embed?: Embed;
  upstreamTimeoutMs: number;
  /** The platform's native SHA-256, for the partition's fingerprint; absent: Web Crypto's. */
  sha256?: () => Sha256Stream;
  warn(msg: string, fields: Record<string, unknown>): void;
}

type Embedder = { model: DirectModel; dimensions: number };

export class SemanticLayer {
  readonly index: SemanticIndex;
  /** Policies whose embedding model did not resolve, warned once each. */
  private readonly warnedResolve = new Set<string>();
  /** Policies whose embedding calls fail now: one WARN until a call succeeds again. */
  private readonly failingEmbed = new Set<string>();

  constructor(private readonly o: SemanticLayerOptions) {
    this.index = new SemanticIndex(o.clock);
  }

  /** Undefined when the policy has no semantic block or the request is not plain text. */
  async lookup(
    snapshot: Snapshot,
    policy: CachePolicy,
    body: Record<string, unknown>,
    scope: readonly string[],
    /** The request's exact fingerprint: back-filled on a semantic hit. */
    own: string,
  ): Promise<SemanticLookup | undefined> {
    const sem = policy.semantic;
    if (!sem || !this.o.embed) return undefined;
    const text = semanticText(body.messages);
    if (text === undefined) return undefined;
    const embedder = this.resolve(snapshot, policy);
    if (!embedder) return undefined;
    const vector = await this.embed(snapshot, policy, embedder, text, sem.embedding_timeout_ms);
    if (!vector) return undefined;
    const partition = await partitionFingerprint(body, scope, {
      id: embedder.model.id,
      modelName: embedder.model.model_name,
      dimensions: embedder.dimensions,
    }, this.o.sha256);
    const found = this.index.search(policy.id, partition, vector, sem.threshold);
    if (!found) return { vector, partition };
    const answer = this.o.memory.getSync(found.key);
    if (!answer) {
      this.index.drop(policy.id, found.key);
      return { vector, partition };
    }
    // Back-fill the exact layer: the same request again is an exact hit, living no longer than its source.
    const ttl = Math.min(policy.ttl_seconds * 1000, answer.expiresAt - this.o.clock());
    if (ttl > 0) this.o.memory.setSync(own, answer.body, ttl);
    return { vector, partition, match: { body: answer.body, similarity: found.similarity } };
  }

  store(policy: CachePolicy, key: string, s: SemanticLookup, expiresAt: number): void {
    if (!policy.semantic || !s.vector || s.partition === undefined) return;
    const p = { id: policy.id, generation: policy.purge_generation, maxEntries: policy.semantic.max_entries };
    this.index.store(p, key, s.partition, s.vector, expiresAt);
  }

  /** The policy's embedding model: a direct model with an `embedding` block, by name (then by id). */
  private resolve(snapshot: Snapshot, policy: CachePolicy): Embedder | undefined {
    const name = policy.semantic!.embedding_model;
    const m = snapshot.modelByName(name) ?? snapshot.models.get(name);
    if (m && m.kind === 'direct' && m.embedding) return { model: m, dimensions: m.embedding.dimensions };
    this.o.metrics.embeddingFailures.inc([policy.name, 'resolve']);
    if (!this.warnedResolve.has(policy.id)) {
      this.warnedResolve.add(policy.id);
      this.o.warn(CACHE_MSG.badEmbeddingModel, { policy: policy.name, embedding_model: name });
    }
    return undefined;
  }

  /** The unit vector of `text`, or undefined (counted, warned) when the call fails, times out or is malformed. */
  private async embed(
    snapshot: Snapshot,
    policy: CachePolicy,
    e: Embedder,
    text: string,
    policyTimeoutMs: number | undefined,
  ): Promise<Float32Array | undefined> {
    const timeoutMs = policyTimeoutMs || e.model.timeout || this.o.upstreamTimeoutMs;
    const started = this.o.clock();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const deadline = new Promise<never>((_, reject) => {
        if (timeoutMs > 0) timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      });
      const v = await Promise.race([this.o.embed!({ snapshot, model: e.model, input: text, timeoutMs }), deadline]);
      if (v.length !== e.dimensions) {
        throw new Error(`the embedding has ${v.length} dimensions, the model declares ${e.dimensions}`);
      }
      this.o.metrics.embeddingSeconds.observe([policy.name], (this.o.clock() - started) / 1000);
      this.failingEmbed.delete(policy.id);
      return unit(v);
    } catch (err) {
      this.o.metrics.embeddingFailures.inc([policy.name, 'embed']);
      if (!this.failingEmbed.has(policy.id)) {
        this.failingEmbed.add(policy.id);
        this.o.warn(CACHE_MSG.embeddingFailed, { policy: policy.name, error: String((err as Error)?.message ?? err) });
      }
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
