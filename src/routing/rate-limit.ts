// Caller rate limits with every AISIX dimension (docs/routing.md "Caller rate limits": the two phases, fixed
// windows, what `0` admits, the check order). `RateLimitStore` is the seam for many replicas: the memory
// store here is exact for one process; rate-limit-redis.ts shares the counters (docs/scaling.md).
import type { RateLimit } from '../resources/schema.ts';

/** What a bucket belongs to: AISIX's `layer` label of `aisix_ratelimit_rejections_total`. */
export type RateLimitScope = 'api_key' | 'model' | 'policy' | 'mcp';
export type RequestDimension = 'rps' | 'rpm' | 'rph' | 'rpd';
export type TokenDimension = 'tpm' | 'tpd';
export type RateLimitDimension = RequestDimension | TokenDimension | 'concurrency';
/** AISIX's `scope` label of `aisix_ratelimit_rejections_total`: what kind of limit refused. */
export type RejectionKind = 'requests' | 'tokens' | 'concurrency';

export const WINDOW_SECS: Record<RequestDimension | TokenDimension, number> = {
  rps: 1,
  rpm: 60,
  rph: 3_600,
  rpd: 86_400,
  tpm: 60,
  tpd: 86_400,
};
const TOKEN_DIMS: readonly TokenDimension[] = ['tpm', 'tpd'];
const REQUEST_DIMS: readonly RequestDimension[] = ['rps', 'rpm', 'rph', 'rpd'];
/** Retry-After for a concurrency refusal: there is no window to wait for. */
export const CONCURRENCY_RETRY_AFTER_SECS = 1;

/** One windowed limit of a bucket. */
export interface WindowLimit<D extends RateLimitDimension = RequestDimension | TokenDimension> {
  dim: D;
  windowSecs: number;
  limit: number;
}

/** Everything one bucket checks at admission. */
export interface BucketSpec {
  bucket: string;
  /** Checked, not counted (charged later by `finish`). AISIX's order: tpm, tpd. */
  tokens: WindowLimit<TokenDimension>[];
  /** Checked and counted. AISIX's order: rps, rpm, rph, rpd. */
  requests: WindowLimit<RequestDimension>[];
  /** The in-flight limit, when there is one. */
  concurrency?: number;
}

/** A bucket's counts as the store saw them: after admission when admitted, before it when refused. */
export interface BucketUsage {
  inFlight: number;
  /** Per dimension of the spec: its `tokens` first, then its `requests`, in their order. */
  used: number[];
}

export interface AcquireOutcome {
  /** The store's clock (ms) at the check: Redis `TIME` for a Redis store. Windows are relative to it. */
  nowMs: number;
  refused?: { bucket: number; dim: RateLimitDimension; retryAfterSecs: number };
  usage: BucketUsage[];
}

/** What a bucket gives back when a request ends. */
export interface BucketEnd {
  bucket: string;
  /** Token windows to charge `tokens` to (those the bucket limits). */
  tokenDims: { dim: TokenDimension; windowSecs: number }[];
  tokens: number;
  /** Free the in-flight slot `member` holds in this bucket. */
  release: boolean;
}

export interface RateLimitStore {
  /**
   * All or nothing across every bucket: if every limit admits, count the request dimensions and take a
   * concurrency slot as `member` in each bucket that has a concurrency limit; otherwise change nothing.
   */
  acquire(specs: readonly BucketSpec[], member: string): Promise<AcquireOutcome>;
  /** Charge tokens and free slots; unchecked. */
  finish(ends: readonly BucketEnd[], member: string): Promise<void>;
  /** Release connections (a Redis client); the store serves no more. */
  close?(): Promise<void>;
}

export interface RateLimitSubject {
  scope: RateLimitScope;
  /** The api key's, model's or policy's id. */
  id: string;
  /** A model's display name (its AISIX bucket is `model:<name>`; the id when absent); a policy's name. */
  name?: string;
  limits?: RateLimit | null;
  /** A policy's bucket, named by src/policies/match.ts. */
  spec?: BucketSpec;
}

/** Held by an admitted request until its response ends. */
export interface Permit {
  /** Whether any subject has a token limit, i.e. whether `end` wants the response's tokens. */
  readonly chargesTokens: boolean;
  /** Charge the response's tokens (if known) and free the concurrency slots. Idempotent. */
  end(tokens?: number): Promise<void>;
}

export type RateLimitDecision =
  | { allowed: true; permit: Permit; headers: Record<string, string> | undefined }
  | {
    allowed: false;
    retryAfterSecs: number;
    scope: RateLimitScope;
    id: string;
    /** The refusing subject's `name` (a policy's). */
    name?: string;
    dimension: RateLimitDimension;
    kind: RejectionKind;
    headers: Record<string, string> | undefined;
  };

export interface RateLimiterOptions {
  store?: RateLimitStore;
  /** Called once per refusal (the `aisix_ratelimit_rejections_total` counter); `policyId` on the policy layer. */
  onRefused?: (kind: RejectionKind, scope: RateLimitScope, policyId: string) => void;
}

/** The bucket name AISIX uses for a subject. */
export function bucketOf(s: RateLimitSubject): string {
  return s.scope === 'api_key' ? s.id : `model:${s.name ?? s.id}`;
}

/** The limits of a subject as a bucket spec, or undefined when it limits nothing. */
export function bucketSpec(bucket: string, limits: RateLimit | null | undefined): BucketSpec | undefined {
  if (!limits) return undefined;
  const spec: BucketSpec = { bucket, tokens: [], requests: [] };
  for (const dim of TOKEN_DIMS) {
    const limit = limits[dim];
    if (limit != null) spec.tokens.push({ dim, windowSecs: WINDOW_SECS[dim], limit });
  }
  for (const dim of REQUEST_DIMS) {
    const limit = limits[dim];
    if (limit != null) spec.requests.push({ dim, windowSecs: WINDOW_SECS[dim], limit });
  }
  if (limits.concurrency != null) spec.concurrency = limits.concurrency;
  if (spec.tokens.length === 0 && spec.requests.length === 0 && spec.concurrency === undefined) return undefined;
  return spec;
}

let instanceSeq = 0;

export class RateLimiter {
  readonly store: RateLimitStore;
  private readonly onRefused: RateLimiterOptions['onRefused'];
  /** Concurrency members are `<instance>:<seq>`: unique across replicas sharing a store. */
  private readonly instance = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}-${++instanceSeq}`;
  private seq = 0;

  constructor(opts: RateLimiterOptions = {}) {
    this.store = opts.store ?? new MemoryRateLimitStore();
    this.onRefused = opts.onRefused;
  }

  /**
   * Admit one request against every subject's limits (the API key's, then the model's), or say how long to
   * wait: a refusal is answered 429 with `Retry-After: retryAfterSecs` and `headers`. An admitted request
   * must call `permit.end(total_tokens)` once its response has ended, however it ended (undefined tokens
   * when the usage is unknown).
   */
  async acquire(subjects: readonly RateLimitSubject[]): Promise<RateLimitDecision> {
    const specs: BucketSpec[] = [];
    const owners: RateLimitSubject[] = [];
    for (const s of subjects) {
      const spec = s.spec ?? bucketSpec(bucketOf(s), s.limits);
      if (spec) {
        specs.push(spec);
        owners.push(s);
      }
    }
    if (specs.length === 0) return { allowed: true, permit: NO_OP_PERMIT, headers: undefined };
    const member = `${this.instance}:${++this.seq}`;
    const outcome = await this.store.acquire(specs, member);
    const keyIndex = owners.findIndex((o) => o.scope === 'api_key');
    const headers = keyIndex < 0
      ? undefined
      : rateLimitHeaders(specs[keyIndex]!, outcome.usage[keyIndex], outcome.nowMs);
    if (outcome.refused) {
      const { bucket, dim, retryAfterSecs } = outcome.refused;
      const owner = owners[bucket]!;
      const kind: RejectionKind = dim === 'concurrency' ? 'concurrency' : dim[0] === 't' ? 'tokens' : 'requests';
      this.onRefused?.(kind, owner.scope, owner.scope === 'policy' ? owner.id : '');
      return {
        allowed: false,
        retryAfterSecs,
        scope: owner.scope,
        id: owner.id,
        ...(owner.name !== undefined ? { name: owner.name } : {}),
        dimension: dim,
        kind,
        headers,
      };
    }
    const ends: BucketEnd[] = [];
    for (const spec of specs) {
      if (spec.tokens.length === 0 && spec.concurrency === undefined) continue;
      ends.push({
        bucket: spec.bucket,
        tokenDims: spec.tokens.map(({ dim, windowSecs }) => ({ dim, windowSecs })),
        tokens: 0,
        release: spec.concurrency !== undefined,
      });
    }
    if (ends.length === 0) return { allowed: true, permit: NO_OP_PERMIT, headers };
    return { allowed: true, permit: this.permit(ends, member), headers };
  }

  private permit(ends: BucketEnd[], member: string): Permit {
    let ended = false;
    const store = this.store;
    return {
      chargesTokens: ends.some((e) => e.tokenDims.length > 0),
      async end(tokens) {
        if (ended) return;
        ended = true;
        const t = tokens !== undefined && tokens > 0 ? Math.floor(tokens) : 0;
        const work = ends
          .map((e) => ({ ...e, tokens: t, tokenDims: t > 0 ? e.tokenDims : [] }))
          .filter((e) => e.release || e.tokenDims.length > 0);
        if (work.length > 0) await store.finish(work, member);
      },
    };
  }
}

/** The permit of a request nothing limits: ending it does nothing. */
export const NO_OP_PERMIT: Permit = { chargesTokens: false, end: async () => {} };

/**
 * AISIX's `x-ratelimit-*` headers (crates/aisix-proxy/src/render.rs `inject_ratelimit_headers`), from the
 * API key's bucket: requests from `rpm`, tokens from `tpm`, each only when that limit is set; reset is the
 * seconds left in the current minute, as `<n>s`.
 */
export function rateLimitHeaders(
  spec: BucketSpec,
  usage: BucketUsage | undefined,
  nowMs: number,
): Record<string, string> | undefined {
  if (!usage) return undefined;
  const h: Record<string, string> = {};
  const nowSecs = Math.floor(nowMs / 1000);
  const reset = `${60 - (nowSecs % 60)}s`;
  const find = (dim: RateLimitDimension): [number, number] | undefined => {
    const t = spec.tokens.findIndex((w) => w.dim === dim);
    if (t >= 0) return [spec.tokens[t]!.limit, usage.used[t] ?? 0];
    const r = spec.requests.findIndex((w) => w.dim === dim);
    if (r >= 0) return [spec.requests[r]!.limit, usage.used[spec.tokens.length + r] ?? 0];
    return undefined;
  };
  const rpm = find('rpm');
  if (rpm) {
    h['x-ratelimit-limit-requests'] = String(rpm[0]);
    h['x-ratelimit-remaining-requests'] = String(Math.max(0, rpm[0] - rpm[1]));
    h['x-ratelimit-reset-requests'] = reset;
  }
  const tpm = find('tpm');
  if (tpm) {
    h['x-ratelimit-limit-tokens'] = String(tpm[0]);
    h['x-ratelimit-remaining-tokens'] = String(Math.max(0, tpm[0] - tpm[1]));
    h['x-ratelimit-reset-tokens'] = reset;
  }
  if (spec.concurrency !== undefined) {
    h['x-ratelimit-limit-concurrent'] = String(spec.concurrency);
    h['x-ratelimit-remaining-concurrent'] = String(Math.max(0, spec.concurrency - usage.inFlight));
  }
  return Object.keys(h).length > 0 ? h : undefined;
}

/** The first second of the fixed window of `windowSecs` holding `nowSecs`. */
export function windowStart(nowSecs: number, windowSecs: number): number {
  return nowSecs - (nowSecs % windowSecs);
}

/**
 * Exact for one process: JavaScript runs `acquire` to completion, so check-then-count is atomic. The same
 * arithmetic as the Redis scripts (whole seconds of an injected clock), so both answer alike.
 */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly windows = new Map<string, number>();
  private readonly slots = new Map<string, number>();
  private opsSinceSweep = 0;
  private readonly now: () => number;

  /** Forget ended windows every this many operations, so idle keys do not accumulate. */
  static readonly SWEEP_EVERY = 1024;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? Date.now;
  }

  acquire(specs: readonly BucketSpec[], member: string): Promise<AcquireOutcome> {
    return Promise.resolve(this.acquireSync(specs, member));
  }

  acquireSync(specs: readonly BucketSpec[], _member: string): AcquireOutcome {
    const nowMs = this.now();
    const now = Math.floor(nowMs / 1000);
    this.maybeSweep(now);
    let refused: AcquireOutcome['refused'];
    const usage: BucketUsage[] = [];
    specs.forEach((s, b) => {
      const inFlight = this.slots.get(s.bucket) ?? 0;
      if (!refused && s.concurrency !== undefined && inFlight >= s.concurrency) {
        refused = { bucket: b, dim: 'concurrency', retryAfterSecs: CONCURRENCY_RETRY_AFTER_SECS };
      }
      const used: number[] = [];
      for (const w of s.tokens) {
        const ws = windowStart(now, w.windowSecs);
        const cur = this.windows.get(`${s.bucket}:${w.dim}:${ws}`) ?? 0;
        if (!refused && cur > w.limit) refused = { bucket: b, dim: w.dim, retryAfterSecs: w.windowSecs - (now - ws) };
        used.push(cur);
      }
      for (const w of s.requests) {
        const ws = windowStart(now, w.windowSecs);
        const cur = this.windows.get(`${s.bucket}:${w.dim}:${ws}`) ?? 0;
        if (!refused && cur + 1 > w.limit) {
          refused = { bucket: b, dim: w.dim, retryAfterSecs: w.windowSecs - (now - ws) };
        }
        used.push(cur);
      }
      usage.push({ inFlight, used });
    });
    if (refused) return { nowMs, refused, usage };
    specs.forEach((s, b) => {
      const u = usage[b]!;
      if (s.concurrency !== undefined) {
        this.slots.set(s.bucket, u.inFlight + 1);
        u.inFlight++;
      }
      s.requests.forEach((w, i) => {
        const key = `${s.bucket}:${w.dim}:${windowStart(now, w.windowSecs)}`;
        const v = (this.windows.get(key) ?? 0) + 1;
        this.windows.set(key, v);
        u.used[s.tokens.length + i] = v;
      });
    });
    return { nowMs, usage };
  }

  finish(ends: readonly BucketEnd[], member: string): Promise<void> {
    this.finishSync(ends, member);
    return Promise.resolve();
  }

  finishSync(ends: readonly BucketEnd[], _member: string): void {
    const now = Math.floor(this.now() / 1000);
    for (const e of ends) {
      if (e.tokens > 0) {
        for (const d of e.tokenDims) {
          const key = `${e.bucket}:${d.dim}:${windowStart(now, d.windowSecs)}`;
          this.windows.set(key, (this.windows.get(key) ?? 0) + e.tokens);
        }
      }
      if (e.release) {
        const n = (this.slots.get(e.bucket) ?? 0) - 1;
        if (n > 0) this.slots.set(e.bucket, n);
        else this.slots.delete(e.bucket);
      }
    }
  }

  private maybeSweep(now: number): void {
    if (++this.opsSinceSweep < MemoryRateLimitStore.SWEEP_EVERY) return;
    this.opsSinceSweep = 0;
    for (const key of this.windows.keys()) {
      // `<bucket>:<dim>:<window_start>`: the bucket may hold ':' itself, the last two segments never do.
      const j = key.lastIndexOf(':');
      const i = key.lastIndexOf(':', j - 1);
      const dim = key.slice(i + 1, j) as RequestDimension | TokenDimension;
      if (Number(key.slice(j + 1)) + WINDOW_SECS[dim] <= now) this.windows.delete(key);
    }
  }
}
