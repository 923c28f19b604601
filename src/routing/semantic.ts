// Semantic routing (docs/routing.md "Semantic routing"): embed the request's last user text through the
// router's embedding model, score it against each route's examples (max cosine), and pick one target — the
// best route at or above its threshold, else `default` — through the members' gates. The examples' vectors
// are embedded on first use and kept per snapshot, so a steady request costs one embedding of its prompt.
// A router with a `classifier` decides by one call to a hosted decision model instead
// (src/routing/semantic-classifier.ts); the gates and the failure policy after the pick are the same.
import type { UpstreamFetch } from '../platform.ts';
import type { DirectModel, Model, RoutingModel } from '../resources/schema.ts';
import type { Semantic } from '../resources/semantic-schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { ipAllowed } from '../util/cidr.ts';
import type { ModelHealth } from './health.ts';
import { classifyRoute } from './semantic-classifier.ts';

/** The vectors of `input` from `model`, in input order, within `timeoutMs` (0: none); rejects on any failure. */
export type EmbedTexts = (
  req: { snapshot: Snapshot; model: DirectModel; input: string[]; dimensions: number; timeoutMs: number },
) => Promise<number[][]>;

export interface SemanticDeps {
  embed: EmbedTexts;
  /** The gateway's upstream transport, for the classifier's call. */
  upstream: UpstreamFetch;
  health: Pick<ModelHealth, 'state'>;
  /** The deployment's deadline when neither the router nor the embedding model sets one. */
  upstreamTimeoutMs: number;
  /** A failed or unusable decision (embedding or classifier), which the router's failure policy then answers. */
  warn(message: string, fields: Record<string, unknown>): void;
}

/** A router model: a routing model read from a row with a `semantic` block. */
export type SemanticModel = RoutingModel & { semantic: Semantic };

/** Where the request goes, or why it goes nowhere. */
export type SemanticChoice =
  /** `route` is set only when a route served (AISIX's `x-aisix-route`), not on a fall-through to a default. */
  | { kind: 'target'; target: string; route?: string }
  | { kind: 'ip_restricted' }
  /** `on_embedding_failure: fail` after a failed embedding (`classifier.on_failure: fail` after a failed call). */
  | { kind: 'unavailable' }
  | { kind: 'unknown_target'; target: string };

export function isSemantic(m: Model): m is SemanticModel {
  return m.kind === 'routing' && m.semantic !== undefined;
}

export class SemanticRouter {
  /** Per snapshot: `<embedding model id>\0<dimensions>\0<text>` → unit vector. */
  private readonly vectors = new WeakMap<Snapshot, Map<string, Float32Array>>();

  constructor(private readonly d: SemanticDeps) {}

  async choose(
    snapshot: Snapshot,
    router: SemanticModel,
    body: Record<string, unknown>,
    clientIp: string | undefined,
  ): Promise<SemanticChoice> {
    const s = router.semantic;
    const gate = (primary: string, fallback?: string) => this.select(snapshot, clientIp, primary, fallback);
    const prompt = lastUserText(body.messages);
    // Nothing to classify: no decision on an empty string, which could match a route by accident.
    if (prompt.trim() === '') return gate(s.default);
    const decided = s.classifier
      ? await this.classify(snapshot, router, prompt)
      : await this.match(snapshot, router, prompt);
    if (decided === 'failed') {
      const f = s.classifier ? s.classifier.on_failure : s.on_embedding_failure;
      if (f === 'fail') return { kind: 'unavailable' };
      return gate(f === 'default' ? s.default : f.target);
    }
    const winner = decided;
    if (winner === undefined) return gate(s.default);
    const route = s.routes[winner]!;
    const chosen = gate(route.target, s.default);
    // A winner displaced by its gates is a fall-through to `default`, not a served route.
    if (chosen.kind !== 'target' || chosen.target !== route.target) return chosen;
    return { ...chosen, route: route.name };
  }

  /** The embedding match: the winning route, undefined when none clears its threshold, or a failed embedding. */
  private async match(
    snapshot: Snapshot,
    router: SemanticModel,
    prompt: string,
  ): Promise<number | undefined | 'failed'> {
    const scores = await this.scores(snapshot, router, prompt);
    return scores ? bestRoute(router.semantic, scores) : 'failed';
  }

  /** The classifier's pick, undefined when its confidence is under `min_confidence`, or a failed call. */
  private async classify(
    snapshot: Snapshot,
    router: SemanticModel,
    prompt: string,
  ): Promise<number | undefined | 'failed'> {
    const s = router.semantic;
    const classifier = s.classifier!;
    try {
      const pick = await classifyRoute(this.d.upstream, snapshot, s.routes, classifier, prompt);
      return pick.confidence >= classifier.min_confidence ? pick.route : undefined;
    } catch (err) {
      this.d.warn('semantic classifier call failed; applying classifier.on_failure', {
        router: router.display_name,
        error: String((err as Error)?.message ?? err),
      });
      return 'failed';
    }
  }

  /**
   * The member gates (AISIX's `select_eligible`): a candidate whose `allowed_cidrs` exclude the caller is
   * dropped (none left: the router's own 403, naming no member); among the rest the first healthy one serves,
   * else the first (health only prefers: the semantically right target beats failing the request).
   */
  private select(snapshot: Snapshot, ip: string | undefined, primary: string, fallback?: string): SemanticChoice {
    const main = snapshot.modelByName(primary);
    if (!main) return { kind: 'unknown_target', target: primary };
    const candidates: Model[] = [main];
    const second = fallback !== undefined && fallback !== primary ? snapshot.modelByName(fallback) : undefined;
    if (second) candidates.push(second);
    const allowed = candidates.filter((m) => ipAllowed(m.allowed_cidrs, ip));
    const first = allowed[0];
    if (!first) return { kind: 'ip_restricted' };
    const served = allowed.find((m) => this.d.health.state(m) === 'healthy') ?? first;
    return { kind: 'target', target: served.display_name };
  }

  /** Each route's score, or undefined when the embedding could not be had. */
  private async scores(snapshot: Snapshot, router: SemanticModel, prompt: string): Promise<number[] | undefined> {
    const s = router.semantic;
    const em = snapshot.modelByName(s.embedding_model);
    if (em?.kind !== 'direct' || !em.embedding) {
      this.d.warn('semantic router references a missing or non-embedding embedding_model', {
        router: router.display_name,
        embedding_model: s.embedding_model,
      });
      return undefined;
    }
    const dims = em.embedding.dimensions;
    let cache = this.vectors.get(snapshot);
    if (!cache) this.vectors.set(snapshot, cache = new Map());
    const keyOf = (text: string) => `${em.id}\0${dims}\0${text}`;
    const pending = [...new Set(s.routes.flatMap((r) => r.examples))].filter((t) => !cache.has(keyOf(t)));
    const input = [prompt, ...pending];
    // The router's own deadline, else the embedding model's `timeout`, else the deployment's (0: none).
    const timeoutMs = positive(s.embedding_timeout_ms) ?? em.timeout ?? this.d.upstreamTimeoutMs;
    let vectors: number[][];
    try {
      vectors = await this.d.embed({ snapshot, model: em, input, dimensions: dims, timeoutMs });
      if (vectors.length !== input.length) {
        throw new Error(`embedding endpoint returned ${vectors.length} vectors for ${input.length} inputs`);
      }
      const wrong = vectors.find((v) => v.length !== dims);
      if (wrong) throw new Error(`embedding endpoint returned a ${wrong.length}-dim vector; expected ${dims}`);
    } catch (err) {
      this.d.warn('semantic embedding call failed; applying on_embedding_failure', {
        router: router.display_name,
        error: String((err as Error)?.message ?? err),
      });
      return undefined;
    }
    pending.forEach((text, i) => cache.set(keyOf(text), unit(vectors[i + 1]!)));
    const p = unit(vectors[0]!);
    return s.routes.map((r) => {
      let best = 0;
      for (const ex of r.examples) {
        const v = cache.get(keyOf(ex));
        if (v) best = Math.max(best, dot(p, v));
      }
      return best;
    });
  }
}

/** The highest-scoring route at or above its threshold (the route's, else the router's); the first on a tie. */
export function bestRoute(s: Semantic, scores: readonly number[]): number | undefined {
  let winner: number | undefined;
  let best = -Infinity;
  s.routes.forEach((r, i) => {
    const score = scores[i] ?? 0;
    if (score >= (r.threshold ?? s.match.threshold) && score > best) {
      best = score;
      winner = i;
    }
  });
  return winner;
}

/** The last `user` message's text: a string content, or its content parts' text joined by newlines. */
export function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (!Array.isArray(m.content)) return '';
    return m.content
      .filter((p): p is { type: 'text'; text: string } => p?.type === 'text' && typeof p.text === 'string')
      .map((p) => p.text)
      .join('\n');
  }
  return '';
}

const positive = (ms: number | undefined): number | undefined => (ms !== undefined && ms > 0 ? ms : undefined);

/** `v` scaled to unit length (a zero vector stays zero and scores 0 against everything). */
function unit(v: readonly number[]): Float32Array {
  const out = Float32Array.from(v);
  let n = 0;
  for (const x of out) n += x * x;
  n = Math.sqrt(n);
  if (n > 0) out.forEach((x, i) => out[i] = x / n);
  return out;
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  a.forEach((x, i) => s += x * (b[i] ?? 0));
  return s;
}
