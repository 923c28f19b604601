// Which targets of a routing model to try, and in what order (docs/routing.md "Strategies", and step 3 of
// "One request, step by step" for tiers and health). One seam, `pickTargets`, over one small function per
// strategy; no I/O, no clock, no runtime, so each is a pure function to test.
import type { Routing, Strategy } from '../resources/schema.ts';
import type { HealthState } from './health.ts';

export type { HealthState };

/** One routing target as the strategies see it. Callers extend it with what they need back. */
export interface Candidate {
  /** The target's direct-model id: the key for round-robin weights, latency and in-flight counts. */
  readonly modelId: string;
  /** `routing.targets[i].weight` (≥ 0); round_robin and consistent_hash only. Weight 0 is never their first
   *  pick while a weighted target of the tier is usable (a fallback-only target). */
  readonly weight: number;
  /** `routing.targets[i].priority`; higher is tried first. */
  readonly priority: number;
  readonly health: HealthState;
  /** least_cost: the target model's `cost.input_per_1k + cost.output_per_1k`; undefined (no cost) ranks last. */
  readonly cost?: number;
}

/** A non-empty ordered list: what the caller tries, first to last. */
export type TargetOrder<C> = [C, ...C[]];

export type PickResult<C> =
  /** `pool` says which health class the order was drawn from (for logs): `unhealthy` only under try_anyway. */
  | { kind: 'ok'; order: TargetOrder<C>; pool: HealthState }
  /** Every target is unhealthy (or there are none) and `when_all_unavailable` is `fail`: answer 503. */
  | { kind: 'all_unavailable' };

/** Read-only view of request headers (a `Headers` object fits). */
export interface HeaderReader {
  get(name: string): string | null;
}

export interface PickContext {
  /** The routing model's id: round-robin state is kept per routing model. */
  routingModelId: string;
  /** Owned by the caller, one per process, kept across config reloads. */
  state: RoutingState;
  /** consistent_hash `hash_on` sources: the request headers (`header`, `cookie`), the caller's API key id
   *  (`api_key`) and the client's IP (`client_ip`). */
  headers?: HeaderReader;
  apiKeyId?: string;
  clientIp?: string;
}

/**
 * Mutable routing memory the caller owns: smooth-weighted-round-robin weights per routing model, and per
 * target model an EWMA of observed latency and the in-flight count. Keyed by resource id, so it survives a
 * config reload; `retain` forgets ids that disappeared.
 */
export class RoutingState {
  /** routing model id → (target key → current weight), nginx's `current_weight`. */
  readonly roundRobin = new Map<string, Map<string, number>>();
  private readonly latencyMs = new Map<string, number>();
  private readonly inFlightCount = new Map<string, number>();

  /** Smoothing of the latency EWMA: weight of the newest sample. */
  static readonly LATENCY_ALPHA = 0.3;

  /** Record one observed upstream latency (the proxy records successful attempts only). */
  observeLatency(modelId: string, ms: number): void {
    const prev = this.latencyMs.get(modelId);
    const alpha = RoutingState.LATENCY_ALPHA;
    this.latencyMs.set(modelId, prev === undefined ? ms : alpha * ms + (1 - alpha) * prev);
  }

  /** EWMA latency in ms, or undefined when nothing has been observed yet. */
  latency(modelId: string): number | undefined {
    return this.latencyMs.get(modelId);
  }

  /** One request to `modelId` starts; call the returned function (once; later calls do nothing) when it ends. */
  begin(modelId: string): () => void {
    this.inFlightCount.set(modelId, this.inFlight(modelId) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const n = this.inFlight(modelId) - 1;
      if (n > 0) this.inFlightCount.set(modelId, n);
      else this.inFlightCount.delete(modelId);
    };
  }

  inFlight(modelId: string): number {
    return this.inFlightCount.get(modelId) ?? 0;
  }

  /** After a config reload: forget every id (routing model or target model) `keep` lacks (the snapshot's `models`). */
  retain(keep: { has(id: string): boolean }): void {
    for (const map of [this.roundRobin, this.latencyMs]) {
      for (const id of map.keys()) if (!keep.has(id)) map.delete(id);
    }
    // In-flight counts are kept: their requests still finish and release.
  }
}

/** Orders one tier. `first` is true for the tier the first pick comes from (round robin advances only then). */
type TierOrder = <C extends Candidate>(tier: readonly C[], ctx: OrderContext, first: boolean) => C[];

/** What a tier order sees: the pick context plus the resolved consistent-hash key. */
export interface OrderContext extends PickContext {
  hashKey?: string;
}

/** failover: declaration order. */
export const orderFailover: TierOrder = (tier) => [...tier];

/**
 * round_robin: nginx's smooth weighted round robin, exact over a full cycle (weights 70/30 → exactly 70 and
 * 30 first picks in 100 requests). Weights are scaled to integers first, so 0.7/0.3 is exact too. The
 * fallbacks after the pick are the rest of the tier in declaration order, starting after the pick. In a
 * fallback tier nothing advances and the order is declaration order.
 */
export const orderRoundRobin: TierOrder = (tier, ctx, first) => {
  if (!first || tier.length === 1) return [...tier];
  const keys = tierKeys(tier);
  const weights = integerWeights(tier.map((c) => c.weight));
  let current = ctx.state.roundRobin.get(ctx.routingModelId);
  if (!current) ctx.state.roundRobin.set(ctx.routingModelId, current = new Map());
  let total = 0;
  let best = -1;
  let bestWeight = 0;
  for (let i = 0; i < tier.length; i++) {
    if (weights[i] === 0) continue;
    const w = (current.get(keys[i]!) ?? 0) + weights[i]!;
    current.set(keys[i]!, w);
    total += weights[i]!;
    if (best < 0 || w > bestWeight) {
      best = i;
      bestWeight = w;
    }
  }
  current.set(keys[best]!, bestWeight - total);
  return [...tier.slice(best), ...tier.slice(0, best)];
};

/**
 * consistent_hash: weighted rendezvous (highest-random-weight) hashing of the request key against each
 * target. The same key always ranks the targets the same way, so it sticks to one first target; removing a
 * target moves only the keys it was first for. The ranking doubles as the fallback order. When no `hash_on`
 * source yields a value the key is the empty string (AISIX: deterministic, never random).
 */
export const orderConsistentHash: TierOrder = (tier, ctx) => {
  const key = ctx.hashKey ?? '';
  const keys = tierKeys(tier);
  const weights = integerWeights(tier.map((c) => c.weight));
  const scored = tier.map((c, i) => ({ c, i, score: rendezvousScore(key, keys[i]!, weights[i]!) }));
  scored.sort((a, b) => b.score - a.score || a.i - b.i);
  return scored.map((s) => s.c);
};

/** least_cost: cheapest first by the target model's input + output price per 1K tokens (AISIX's key); targets
 *  without a `cost` last; ties by declaration order. */
export const orderLeastCost: TierOrder = (tier) => stableSortBy(tier, (c) => c.cost ?? Infinity);

/** least_latency: targets never observed first (so they get measured), then lowest EWMA; ties by declaration. */
export const orderLeastLatency: TierOrder = (tier, ctx) => {
  const rank = (c: Candidate): number => ctx.state.latency(c.modelId) ?? -1;
  return stableSortBy(tier, rank);
};

/** least_busy: fewest in-flight requests first; ties by declaration order. */
export const orderLeastBusy: TierOrder = (tier, ctx) => stableSortBy(tier, (c) => ctx.state.inFlight(c.modelId));

const ORDERS: Record<Strategy, TierOrder> = {
  failover: orderFailover,
  round_robin: orderRoundRobin,
  consistent_hash: orderConsistentHash,
  least_cost: orderLeastCost,
  least_latency: orderLeastLatency,
  least_busy: orderLeastBusy,
};

/**
 * The seam: the ordered targets to try for one request, or `all_unavailable` (answer 503
 * `all_candidates_unavailable` without calling an upstream). The caller builds one `Candidate` per
 * `routing.targets[i]` (its `health` from `ModelHealth.state`) and gets its own objects back: `order[0]` is
 * the pick, the rest are the fallbacks, already capped by `max_fallbacks`. Around each attempt it calls
 * `state.begin(modelId)` (least_busy) and, on success, `state.observeLatency` (least_latency).
 */
export function pickTargets<C extends Candidate>(
  routing: Routing,
  candidates: readonly C[],
  ctx: PickContext,
): PickResult<C> {
  const usable = usableCandidates(candidates, routing.when_all_unavailable);
  if (!usable) return { kind: 'all_unavailable' };
  // One usable target: every strategy orders it the same way and none keeps state for a tier of one
  // (round robin advances only over two or more), so skip the tiers and the strategy on every request.
  if (usable.pool.length === 1) return { kind: 'ok', order: usable.pool as TargetOrder<C>, pool: usable.health };
  const order = ORDERS[routing.strategy];
  const tierCtx: OrderContext = {
    ...ctx,
    hashKey: routing.strategy === 'consistent_hash' ? hashKeyOf(routing, ctx) : undefined,
  };
  const ordered: C[] = [];
  tiersOf(usable.pool).forEach((tier, i) => ordered.push(...order(tier, tierCtx, i === 0)));
  const limit = routing.max_fallbacks === undefined ? ordered.length : 1 + routing.max_fallbacks;
  return { kind: 'ok', order: ordered.slice(0, limit) as TargetOrder<C>, pool: usable.health };
}

/**
 * The health filter of docs/routing.md: healthy; else cooled (a cooldown is short and the caller asked for
 * an answer); else (try_anyway) everything; else nothing.
 */
export function usableCandidates<C extends Candidate>(
  candidates: readonly C[],
  whenAllUnavailable: Routing['when_all_unavailable'],
): { pool: C[]; health: HealthState } | undefined {
  for (const health of ['healthy', 'cooldown'] as const) {
    const pool = candidates.filter((c) => c.health === health);
    if (pool.length > 0) return { pool, health };
  }
  if (whenAllUnavailable === 'try_anyway' && candidates.length > 0) {
    return { pool: [...candidates], health: 'unhealthy' };
  }
  return undefined;
}

/** One `routing.hash_on` source. */
export type HashSource = NonNullable<Routing['hash_on']>[number];

/** AISIX's default `hash_on`: the `x-aisix-routing-key` header, then the caller's API key id. */
export const DEFAULT_HASH_ON: readonly HashSource[] = [
  { type: 'header', name: 'x-aisix-routing-key' },
  { type: 'api_key' },
];

/**
 * consistent_hash key (AISIX `resolve_hash_key`): the first `hash_on` source (default `DEFAULT_HASH_ON`)
 * that yields a non-empty value, trimmed; `header`/`cookie` without a `name` yield nothing. Undefined when
 * none does (the strategy then hashes the empty string).
 */
export function hashKeyOf(
  routing: Pick<Routing, 'hash_on'>,
  ctx: Pick<PickContext, 'headers' | 'apiKeyId' | 'clientIp'>,
): string | undefined {
  for (const source of routing.hash_on ?? DEFAULT_HASH_ON) {
    let value: string | null | undefined;
    switch (source.type) {
      case 'header':
        value = source.name === undefined ? undefined : ctx.headers?.get(source.name);
        break;
      case 'cookie':
        value = source.name === undefined ? undefined : cookieValue(ctx.headers?.get('cookie'), source.name);
        break;
      case 'api_key':
        value = ctx.apiKeyId;
        break;
      case 'client_ip':
        value = ctx.clientIp;
        break;
    }
    const trimmed = value?.trim();
    if (trimmed) return trimmed;
  }
  return undefined;
}

/** A cookie's value from a `Cookie` header (`a=1; b=2`): the first pair named `name` with a non-empty value. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    const key = (eq < 0 ? pair : pair.slice(0, eq)).trim();
    if (key !== name) continue;
    const value = eq < 0 ? '' : pair.slice(eq + 1).trim();
    if (value) return value;
  }
  return undefined;
}

// ---- helpers --------------------------------------------------------------------------------------------

/** Group by priority, descending (higher first, AISIX/APISIX); declaration order inside a tier. */
function tiersOf<C extends Candidate>(pool: readonly C[]): C[][] {
  const byPriority = new Map<number, C[]>();
  for (const c of pool) {
    const tier = byPriority.get(c.priority);
    if (tier) tier.push(c);
    else byPriority.set(c.priority, [c]);
  }
  return [...byPriority.keys()].sort((a, b) => b - a).map((p) => byPriority.get(p)!);
}

/** Per-target keys, unique inside a tier even if a model is listed twice (`id`, `id#1`, …). */
function tierKeys(tier: readonly Candidate[]): string[] {
  const seen = new Map<string, number>();
  return tier.map((c) => {
    const n = seen.get(c.modelId) ?? 0;
    seen.set(c.modelId, n + 1);
    return n === 0 ? c.modelId : `${c.modelId}#${n}`;
  });
}

/**
 * Weights as integers in the same proportions (0.7/0.3 → 7/3), so round-robin arithmetic is exact.
 * If every weight is 0 they all count as 1.
 */
export function integerWeights(weights: readonly number[]): number[] {
  if (weights.every((w) => w === 0)) return weights.map(() => 1);
  let scale = 1;
  while (scale < 1e6 && weights.some((w) => Math.abs(w * scale - Math.round(w * scale)) > 1e-9)) scale *= 10;
  return weights.map((w) => Math.round(w * scale));
}

function stableSortBy<C>(items: readonly C[], rank: (c: C) => number): C[] {
  return items.map((c, i) => ({ c, i, r: rank(c) })).sort((a, b) => a.r - b.r || a.i - b.i).map((x) => x.c);
}

/** Weighted rendezvous score: weight / -ln(u), u uniform in (0, 1) from the hash of (key, target). */
function rendezvousScore(key: string, target: string, weight: number): number {
  if (weight === 0) return 0;
  const u = (hash32(`${key}\u0000${target}`) + 0.5) / 4294967296;
  return weight / -Math.log(u);
}

/** FNV-1a (32-bit) with murmur3's finaliser for avalanche: fast, non-cryptographic, identical everywhere. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
