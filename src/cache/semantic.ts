// The semantic layer's memory index (docs/cache.md "Semantic layer"): per policy, the prompt vectors of
// answers held by the exact layer, scanned by brute-force cosine. A candidate must share the request's
// partition (scope, parameters, embedding model); the best at or above the threshold (and above 0) wins.
// Per policy at most `max_entries` vectors, the oldest evicted first; a new purge generation clears the
// policy's vectors on its next store; the same exact request replaces its vector.
import type { DirectModel } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Clock } from '../util/clock.ts';

/**
 * The embedding call the proxy app provides: the vector of `input` from `model` (of `snapshot`), within
 * `timeoutMs`; rejects on any failure.
 */
export type Embed = (
  req: { snapshot: Snapshot; model: DirectModel; input: string; timeoutMs: number },
) => Promise<ArrayLike<number>>;

interface Vector {
  partition: string;
  /** Unit length. */
  v: Float32Array;
  expiresAt: number;
}

interface PolicyIndex {
  generation: number;
  /** Exact fingerprint → vector; insertion order is age order. */
  vectors: Map<string, Vector>;
}

export interface SemanticMatch {
  /** The exact fingerprint whose answer serves. */
  key: string;
  similarity: number;
  expiresAt: number;
}

/** `v` scaled to unit length (a zero vector stays zero: it matches nothing). */
export function unit(v: ArrayLike<number>): Float32Array {
  const out = new Float32Array(v.length);
  let sq = 0;
  for (let i = 0; i < v.length; i++) sq += v[i]! * v[i]!;
  const norm = Math.sqrt(sq);
  if (norm === 0 || !Number.isFinite(norm)) return out;
  for (let i = 0; i < v.length; i++) out[i] = v[i]! / norm;
  return out;
}

function dot(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

export class SemanticIndex {
  private readonly policies = new Map<string, PolicyIndex>();

  constructor(private readonly clock: Clock) {}

  /** The closest live vector of the partition with cosine ≥ `threshold` and > 0. `query` is unit length. */
  search(policyId: string, partition: string, query: Float32Array, threshold: number): SemanticMatch | undefined {
    const idx = this.policies.get(policyId);
    if (!idx) return undefined;
    const now = this.clock();
    let best: SemanticMatch | undefined;
    for (const [key, e] of idx.vectors) {
      if (e.partition !== partition) continue;
      if (e.expiresAt <= now) {
        idx.vectors.delete(key);
        continue;
      }
      const s = dot(query, e.v);
      if (s > 0 && s >= threshold && (!best || s > best.similarity)) {
        best = { key, similarity: s, expiresAt: e.expiresAt };
      }
    }
    return best;
  }

  store(
    policy: { id: string; generation: number; maxEntries: number },
    key: string,
    partition: string,
    v: Float32Array,
    expiresAt: number,
  ): void {
    let idx = this.policies.get(policy.id);
    if (!idx || idx.generation !== policy.generation) {
      idx = { generation: policy.generation, vectors: new Map() };
      this.policies.set(policy.id, idx);
    }
    idx.vectors.delete(key);
    while (idx.vectors.size >= policy.maxEntries) {
      const oldest = idx.vectors.keys().next().value as string;
      idx.vectors.delete(oldest);
    }
    idx.vectors.set(key, { partition, v, expiresAt });
  }

  /** Forget a vector whose answer is gone from the exact layer. */
  drop(policyId: string, key: string): void {
    this.policies.get(policyId)?.vectors.delete(key);
  }

  /** Vectors held for a policy (tests, the status page). */
  size(policyId: string): number {
    return this.policies.get(policyId)?.vectors.size ?? 0;
  }
}
