// Budget counters shared through Redis (`budgets.backend: redis`; docs/budgets.md "Redis"): the memory
// store's arithmetic in two Lua scripts, atomic per call, on Redis's clock. Every key carries one hash tag, so
// a Cluster keeps a call's lines in one slot. A failed command rejects: the caller (budgets.ts) decides
// whether the call goes on (`on_store_unavailable`).
import type { RedisClient } from '../platform.ts';
import type { Amount, BudgetLine, BudgetStore, LineState, ReserveOutcome } from './store.ts';

export const BUDGET_KEY_PREFIX = 'sluice:budget';

/**
 * `sluice:budget:{<env_id>}:<counter>` (`{b}` without an env id). A counter is a hash (`s`, `t` spent; `r`, `rt`
 * reserved), with `:a` (reservation id → `usd:tokens`) and `:x` (reservation id → expiry, ms) beside it.
 */
export function counterKey(counter: string, envId?: string): string {
  return `${BUDGET_KEY_PREFIX}:{${envId || 'b'}}:${counter}`;
}

// Releases the reservations of key `k` whose expiry passed (`now`, ms). `0 - x`, never `-x`: Lua writes -0 as
// "-0", which HINCRBY refuses.
const PURGE = `
local function purge(k, now)
  local gone = redis.call('ZRANGEBYSCORE', k .. ':x', '-inf', now)
  for _, m in ipairs(gone) do
    local a = redis.call('HGET', k .. ':a', m)
    if a then
      local sep = string.find(a, ':', 1, true)
      redis.call('HINCRBY', k, 'r', 0 - tonumber(string.sub(a, 1, sep - 1)))
      redis.call('HINCRBY', k, 'rt', 0 - tonumber(string.sub(a, sep + 1)))
      redis.call('HDEL', k .. ':a', m)
    end
    redis.call('ZREM', k .. ':x', m)
  end
end
local function state(k)
  local v = redis.call('HMGET', k, 's', 't', 'r', 'rt')
  return tonumber(v[1] or '0'), tonumber(v[2] or '0'), tonumber(v[3] or '0'), tonumber(v[4] or '0')
end
local function expire(k, at)
  if at >= 0 then
    redis.call('PEXPIREAT', k, at)
    redis.call('PEXPIREAT', k .. ':a', at)
    redis.call('PEXPIREAT', k .. ':x', at)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

// KEYS: one counter per line. ARGV: id, usd, tokens, ttl (ms), then per line: limit usd (-1: none), limit
// tokens (-1: none), hard (0/1), expire at (ms, -1: never). Returns {refused line (1-based, 0: admitted), then
// per line spent usd, spent tokens, reserved usd, reserved tokens}.
export const RESERVE_LUA = `${PURGE}
local id, usd, tok, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {0}
for i = 1, #KEYS do
  local k = KEYS[i]
  local base = 4 + (i - 1) * 4
  local lu, lt, hard = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), ARGV[base + 3]
  purge(k, now)
  local s, st, r, rt = state(k)
  if out[1] == 0 and hard == '1' and ((lu >= 0 and s + r + usd > lu) or (lt >= 0 and st + rt + tok > lt)) then
    out[1] = i
  end
  out[#out + 1] = s
  out[#out + 1] = st
  out[#out + 1] = r
  out[#out + 1] = rt
end
if out[1] ~= 0 then return out end
for i = 1, #KEYS do
  local k = KEYS[i]
  out[1 + (i - 1) * 4 + 3] = redis.call('HINCRBY', k, 'r', usd)
  out[1 + (i - 1) * 4 + 4] = redis.call('HINCRBY', k, 'rt', tok)
  redis.call('HSET', k .. ':a', id, usd .. ':' .. tok)
  redis.call('ZADD', k .. ':x', now + ttl, id)
  expire(k, tonumber(ARGV[4 + (i - 1) * 4 + 4]))
end
return out
`;

// KEYS: the reservation's counters. ARGV: id, usd, tokens, then per line: expire at (ms, -1: never). Releases
// the reservation where it is still held, charges the amount; returns per line the four counts after it.
export const COMMIT_LUA = `${PURGE}
local id, usd, tok = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  local a = redis.call('HGET', k .. ':a', id)
  if a then
    local sep = string.find(a, ':', 1, true)
    redis.call('HINCRBY', k, 'r', 0 - tonumber(string.sub(a, 1, sep - 1)))
    redis.call('HINCRBY', k, 'rt', 0 - tonumber(string.sub(a, sep + 1)))
    redis.call('HDEL', k .. ':a', id)
    redis.call('ZREM', k .. ':x', id)
  end
  if usd > 0 then redis.call('HINCRBY', k, 's', usd) end
  if tok > 0 then redis.call('HINCRBY', k, 't', tok) end
  purge(k, now)
  local s, st, r, rt = state(k)
  out[#out + 1] = s
  out[#out + 1] = st
  out[#out + 1] = r
  out[#out + 1] = rt
  expire(k, tonumber(ARGV[3 + i]))
end
return out
`;

function ints(reply: unknown): number[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected reply from the budget script: ${String(reply)}`);
  return reply.map((v) => Number(v));
}

function states(r: number[], from: number, n: number): LineState[] {
  const out: LineState[] = [];
  for (let i = 0; i < n; i++) {
    const p = from + i * 4;
    out.push({ spentMicroUsd: r[p]!, spentTokens: r[p + 1]!, reservedMicroUsd: r[p + 2]!, reservedTokens: r[p + 3]! });
  }
  return out;
}

const expiry = (l: BudgetLine) => (Number.isFinite(l.expiresAtMs) ? Math.ceil(l.expiresAtMs) : -1);

export interface RedisBudgetStoreOptions {
  client: RedisClient;
  /** `etcd.env_id`: the keys' namespace. */
  envId?: string;
  /** How long the first command waits for the connection at boot. */
  timeoutMs: number;
}

export class RedisBudgetStore implements BudgetStore {
  private booted: Promise<unknown> | undefined;

  constructor(private readonly o: RedisBudgetStoreOptions) {
    this.booted = o.client.waitReady(o.timeoutMs).then(() => (this.booted = undefined));
  }

  async reserve(lines: readonly BudgetLine[], id: string, amount: Amount, ttlMs: number): Promise<ReserveOutcome> {
    if (this.booted) await this.booted;
    const args: (string | number)[] = [id, amount.microUsd, amount.tokens, Math.max(1, Math.ceil(ttlMs))];
    for (const l of lines) args.push(l.limitMicroUsd ?? -1, l.limitTokens ?? -1, l.hard ? '1' : '0', expiry(l));
    const r = ints(await this.o.client.evalScript(RESERVE_LUA, this.keys(lines), args));
    const out: ReserveOutcome = { states: states(r, 1, lines.length) };
    if (r[0]! > 0) out.refused = r[0]! - 1;
    return out;
  }

  async commit(lines: readonly BudgetLine[], id: string, actual: Amount): Promise<LineState[]> {
    if (this.booted) await this.booted;
    const args: (string | number)[] = [id, actual.microUsd, actual.tokens, ...lines.map(expiry)];
    return states(ints(await this.o.client.evalScript(COMMIT_LUA, this.keys(lines), args)), 0, lines.length);
  }

  close(): Promise<void> {
    return this.o.client.quit().catch(() => {});
  }

  private keys(lines: readonly BudgetLine[]): string[] {
    return lines.map((l) => counterKey(l.counter, this.o.envId));
  }
}
