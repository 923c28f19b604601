// Rate-limit counters shared through Redis (`ratelimit.backend: redis`), so every replica enforces one window
// per limit. Keys and scripts follow AISIX's `aisix-ratelimit/src/store/redis.rs`; while Redis is unavailable
// a per-replica memory store serves, loudly. Key layout, Cluster and outage rules: docs/scaling.md.
import {
  type AcquireOutcome,
  type BucketEnd,
  type BucketSpec,
  type BucketUsage,
  MemoryRateLimitStore,
  type RateLimitDimension,
  type RateLimitStore,
  windowStart,
} from './rate-limit.ts';
import type { RedisClient, RedisClientOptions } from '../platform.ts';

export type { RedisClient, RedisClientOptions } from '../platform.ts';

export const KEY_PREFIX = 'aisix:rl';
/** Seconds a window counter outlives its window, so it never expires a hair before the window closes. */
export const GRACE_SECS = 5;
/** While Redis is down, a background probe asks it this long after the last one ended; requests go to memory. */
export const PROBE_EVERY_MS = 1000;
/** The background probe: the cheapest script, so an answer proves scripts run again. */
export const PROBE_LUA = 'return 1';

export const SHARED_STORE_DOWN_WARNING =
  'shared rate-limit Redis unavailable; failing open to per-replica in-memory counting until it recovers (cluster limits not enforced during the outage)';
export const SHARED_STORE_RECOVERED = 'shared rate-limit Redis answers again; limits are shared across replicas';

/** `aisix:rl:{<bucket>}`, or with AISIX's `etcd.env_id` namespace `aisix:rl:<env_id>:{<bucket>}`. */
export function bucketPrefix(bucket: string, envId?: string): string {
  return envId ? `${KEY_PREFIX}:${envId}:{${bucket}}` : `${KEY_PREFIX}:{${bucket}}`;
}

// KEYS: one prefix per bucket. ARGV: member, concurrency ttl (s), grace (s), then per bucket: concurrency
// limit (-1: none), token dimension count, request dimension count, then (name, window, limit) per token
// dimension and per request dimension. Returns {now_ms, refused_bucket (1-based, 0 = admitted),
// refused_dim (0 = concurrency, else 1-based over tokens then requests), retry_after_secs}, then per bucket
// its in-flight count and its used count per dimension (after admission when admitted).
export const ACQUIRE_LUA = `
local member = ARGV[1]
local ttl = tonumber(ARGV[2])
local grace = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1])
local out = {now * 1000 + math.floor(tonumber(t[2]) / 1000), 0, 0, 0}
local refused = false
local idx = 4
local plan = {}
for b = 1, #KEYS do
  local p = KEYS[b]
  local conc = tonumber(ARGV[idx])
  local ntok = tonumber(ARGV[idx + 1])
  local nreq = tonumber(ARGV[idx + 2])
  idx = idx + 3
  local inflight = 0
  if conc >= 0 then
    redis.call('ZREMRANGEBYSCORE', p .. ':conc', '-inf', now - ttl)
    inflight = redis.call('ZCARD', p .. ':conc')
    if not refused and inflight >= conc then refused = {b, 0, 1} end
  end
  local pos = #out + 1
  out[pos] = inflight
  local reqs = {}
  for i = 1, ntok + nreq do
    local w = tonumber(ARGV[idx + 1])
    local lim = tonumber(ARGV[idx + 2])
    local ws = now - (now % w)
    local k = p .. ':' .. ARGV[idx] .. ':' .. ws
    idx = idx + 3
    local cur = tonumber(redis.call('GET', k) or '0')
    if i <= ntok then
      if not refused and cur > lim then refused = {b, i, w - (now - ws)} end
    else
      if not refused and cur + 1 > lim then refused = {b, i, w - (now - ws)} end
      reqs[#reqs + 1] = {k, w, pos + i}
    end
    out[pos + i] = cur
  end
  plan[b] = {p, conc, pos, reqs}
end
if refused then
  out[2] = refused[1]
  out[3] = refused[2]
  out[4] = refused[3]
  return out
end
for b = 1, #plan do
  local p, conc, pos, reqs = plan[b][1], plan[b][2], plan[b][3], plan[b][4]
  if conc >= 0 then
    redis.call('ZADD', p .. ':conc', now, member)
    redis.call('EXPIRE', p .. ':conc', ttl + grace)
    out[pos] = out[pos] + 1
  end
  for i = 1, #reqs do
    local v = redis.call('INCR', reqs[i][1])
    if v == 1 then redis.call('EXPIRE', reqs[i][1], reqs[i][2] + grace) end
    out[reqs[i][3]] = v
  end
end
return out
`;

// KEYS: one prefix per bucket. ARGV: member, tokens, grace, then per bucket: release (0/1), token dimension
// count, then (name, window) per token dimension. Charges in the window of Redis TIME.
export const FINISH_LUA = `
local member = ARGV[1]
local tokens = tonumber(ARGV[2])
local grace = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1])
local idx = 4
for b = 1, #KEYS do
  local p = KEYS[b]
  local release = ARGV[idx]
  local n = tonumber(ARGV[idx + 1])
  idx = idx + 2
  for i = 1, n do
    local w = tonumber(ARGV[idx + 1])
    local k = p .. ':' .. ARGV[idx] .. ':' .. (now - (now % w))
    idx = idx + 2
    if tokens > 0 and redis.call('INCRBY', k, tokens) == tokens then redis.call('EXPIRE', k, w + grace) end
  end
  if release == '1' then redis.call('ZREM', p .. ':conc', member) end
end
return 1
`;

// Cluster mode only: undo one bucket's admission. KEYS[1]: the prefix. ARGV: member, release (0/1), then
// the request counter keys the admission incremented (same hash tag, same slot).
export const ROLLBACK_LUA = `
if ARGV[2] == '1' then redis.call('ZREM', KEYS[1] .. ':conc', ARGV[1]) end
for i = 3, #ARGV do
  if tonumber(redis.call('GET', ARGV[i]) or '0') > 0 then redis.call('DECR', ARGV[i]) end
end
return 1
`;

function acquireArgs(specs: readonly BucketSpec[], member: string, ttlSecs: number): (string | number)[] {
  const out: (string | number)[] = [member, ttlSecs, GRACE_SECS];
  for (const s of specs) {
    out.push(s.concurrency ?? -1, s.tokens.length, s.requests.length);
    for (const w of [...s.tokens, ...s.requests]) out.push(w.dim, w.windowSecs, w.limit);
  }
  return out;
}

function finishArgs(ends: readonly BucketEnd[], member: string): (string | number)[] {
  const tokens = ends.reduce((n, e) => Math.max(n, e.tokens), 0);
  const out: (string | number)[] = [member, tokens, GRACE_SECS];
  for (const e of ends) {
    out.push(e.release ? '1' : '0', e.tokenDims.length);
    for (const d of e.tokenDims) out.push(d.dim, d.windowSecs);
  }
  return out;
}

function toInts(reply: unknown): number[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected reply from the rate-limit script: ${String(reply)}`);
  return reply.map((v) => Number(v));
}

/** Read ACQUIRE_LUA's reply. */
export function parseAcquireReply(specs: readonly BucketSpec[], reply: unknown): AcquireOutcome {
  const r = toInts(reply);
  const usage: BucketUsage[] = [];
  let pos = 4;
  for (const s of specs) {
    const n = s.tokens.length + s.requests.length;
    usage.push({ inFlight: r[pos]!, used: r.slice(pos + 1, pos + 1 + n) });
    pos += 1 + n;
  }
  const out: AcquireOutcome = { nowMs: r[0]!, usage };
  const b = r[1]!;
  if (b > 0) {
    const spec = specs[b - 1]!;
    const d = r[2]!;
    const dim: RateLimitDimension = d === 0 ? 'concurrency' : [...spec.tokens, ...spec.requests][d - 1]!.dim;
    out.refused = { bucket: b - 1, dim, retryAfterSecs: r[3]! };
  }
  return out;
}

export interface SharedStoreState {
  backend: 'redis';
  mode: RedisClientOptions['mode'];
  /** True while counts are shared through Redis; false while failing open to per-replica counting. */
  shared: boolean;
  /** When `shared` last changed (the store's start at first). */
  since: string;
}

export interface RedisStoreOptions {
  client: RedisClient;
  mode: RedisClientOptions['mode'];
  concurrencyTtlSecs: number;
  timeoutMs: number;
  warn: (msg: string, fields: Record<string, unknown>) => void;
  info: (msg: string, fields: Record<string, unknown>) => void;
  onState?: (s: SharedStoreState) => void;
  /** Wall clock for the fallback store and the state timestamps. */
  now?: () => number;
  /** `etcd.env_id`: the keys' namespace, as AISIX's. */
  envId?: string;
}

type Attempt<T> = { ok: true; value: T } | { ok: false };

export class RedisRateLimitStore implements RateLimitStore {
  private readonly client: RedisClient;
  private readonly o: RedisStoreOptions;
  private readonly fallback: MemoryRateLimitStore;
  private readonly now: () => number;
  private readonly ttlSecs: number;
  /** Members whose slots were taken in the fallback store (given back there). */
  private readonly localMembers = new Set<string>();
  private up = true;
  private probeTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  /** Resolved once the first connection attempt ended (ready or timed out): requests wait for it at boot. */
  private booted: Promise<void> | undefined;
  private state: SharedStoreState;

  constructor(o: RedisStoreOptions) {
    this.o = o;
    this.client = o.client;
    this.now = o.now ?? Date.now;
    this.fallback = new MemoryRateLimitStore({ now: this.now });
    this.ttlSecs = Math.max(1, o.concurrencyTtlSecs);
    this.state = { backend: 'redis', mode: o.mode, shared: true, since: new Date(this.now()).toISOString() };
    this.booted = o.client.waitReady(o.timeoutMs).then(() => {
      this.booted = undefined;
    });
    o.onState?.(this.state);
  }

  current(): SharedStoreState {
    return this.state;
  }

  async acquire(specs: readonly BucketSpec[], member: string): Promise<AcquireOutcome> {
    const r = await this.attempt(() => this.acquireShared(specs, member), 'acquire');
    if (r.ok) return r.value;
    const out = this.fallback.acquireSync(specs, member);
    if (!out.refused && specs.some((s) => s.concurrency !== undefined)) this.localMembers.add(member);
    return out;
  }

  async finish(ends: readonly BucketEnd[], member: string): Promise<void> {
    if (this.localMembers.delete(member)) {
      this.fallback.finishSync(ends, member);
      return;
    }
    const r = await this.attempt(() => this.finishShared(ends, member), 'finish');
    // Redis's slot (if any) expires after concurrency_ttl_secs; the tokens are counted here meanwhile.
    if (!r.ok) this.fallback.finishSync(ends.map((e) => ({ ...e, release: false })), member);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.probeTimer);
    await this.client.quit().catch(() => {});
  }

  /**
   * Run `op` against Redis unless it is down: then no request waits for it, and only the background probe
   * asks whether it is back. A command the client gave up on (`command_timeout_ms`) fails like any error.
   */
  private async attempt<T>(op: () => Promise<T>, what: string): Promise<Attempt<T>> {
    if (this.booted) await this.booted;
    if (!this.up) return { ok: false };
    try {
      return { ok: true, value: await op() };
    } catch (e) {
      if (this.up) this.markDown(what, e);
      return { ok: false };
    }
  }

  private markDown(op: string, e: unknown): void {
    this.up = false;
    this.o.warn(SHARED_STORE_DOWN_WARNING, { op, mode: this.o.mode, error: String((e as Error)?.message ?? e) });
    this.setState(false);
    this.scheduleProbe();
  }

  private scheduleProbe(): void {
    if (this.closed || this.probeTimer !== undefined) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe();
    }, PROBE_EVERY_MS);
  }

  /** One background probe, bounded by the command budget; the next one is scheduled after it failed. */
  private async probe(): Promise<void> {
    try {
      await this.client.evalScript(PROBE_LUA, [], []);
    } catch {
      this.scheduleProbe();
      return;
    }
    if (!this.closed && !this.up) this.markUp();
  }

  private markUp(): void {
    this.up = true;
    this.o.info(SHARED_STORE_RECOVERED, { mode: this.o.mode });
    this.setState(true);
  }

  private setState(shared: boolean): void {
    this.state = { ...this.state, shared, since: new Date(this.now()).toISOString() };
    this.o.onState?.(this.state);
  }

  private async acquireShared(specs: readonly BucketSpec[], member: string): Promise<AcquireOutcome> {
    if (this.o.mode !== 'cluster' || specs.length === 1) {
      const reply = await this.client.evalScript(
        ACQUIRE_LUA,
        specs.map((s) => bucketPrefix(s.bucket, this.o.envId)),
        acquireArgs(specs, member, this.ttlSecs),
      );
      return parseAcquireReply(specs, reply);
    }
    // Cluster: one script per bucket (each bucket is one slot), together; undo the admitted ones if any
    // refused.
    const parts = await Promise.all(specs.map(async (s) => {
      const reply = await this.client.evalScript(
        ACQUIRE_LUA,
        [bucketPrefix(s.bucket, this.o.envId)],
        acquireArgs([s], member, this.ttlSecs),
      );
      return parseAcquireReply([s], reply);
    }));
    const refusedAt = parts.findIndex((p) => p.refused);
    const usage = parts.map((p) => p.usage[0]!);
    if (refusedAt < 0) return { nowMs: parts[0]!.nowMs, usage };
    const undo: Promise<unknown>[] = [];
    parts.forEach((p, i) => {
      if (p.refused) return;
      const s = specs[i]!;
      // Report the counts as before this request, as a refusal does.
      const u = usage[i]!;
      if (s.concurrency !== undefined) u.inFlight--;
      for (let j = s.tokens.length; j < u.used.length; j++) u.used[j]!--;
      const now = Math.floor(p.nowMs / 1000);
      const prefix = bucketPrefix(s.bucket, this.o.envId);
      const keys = s.requests.map((w) => `${prefix}:${w.dim}:${windowStart(now, w.windowSecs)}`);
      undo.push(
        this.client.evalScript(ROLLBACK_LUA, [prefix], [member, s.concurrency !== undefined ? '1' : '0', ...keys]),
      );
    });
    await Promise.all(undo);
    const refused = parts[refusedAt]!.refused!;
    return { nowMs: parts[refusedAt]!.nowMs, refused: { ...refused, bucket: refusedAt }, usage };
  }

  private async finishShared(ends: readonly BucketEnd[], member: string): Promise<void> {
    if (this.o.mode !== 'cluster' || ends.length === 1) {
      await this.client.evalScript(
        FINISH_LUA,
        ends.map((e) => bucketPrefix(e.bucket, this.o.envId)),
        finishArgs(ends, member),
      );
      return;
    }
    await Promise.all(
      ends.map((e) =>
        this.client.evalScript(FINISH_LUA, [bucketPrefix(e.bucket, this.o.envId)], finishArgs([e], member))
      ),
    );
  }
}
