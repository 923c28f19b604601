// The budget counters Redis holds (src/budgets/store-redis.ts), read for a spend report (docs/admin.md "Spend
// reports"): one SCAN page per script call, so Redis is never blocked for longer than one page's work.
import { counterKey } from '../budgets/store-redis.ts';
import type { RedisClient } from '../platform.ts';
import type { CounterTotal, SpendSource } from './spend-report.ts';

/** Counters under `KEYS[1]`, one SCAN page from `ARGV[1]`: the next cursor, then key, spent, tokens triples. */
const PAGE = `
local r = redis.call('SCAN', ARGV[1], 'MATCH', KEYS[1] .. '*', 'COUNT', tonumber(ARGV[2]))
local out = { r[1] }
for _, k in ipairs(r[2]) do
  local tail = string.sub(k, -2)
  if tail ~= ':a' and tail ~= ':x' and redis.call('TYPE', k).ok == 'hash' then
    local v = redis.call('HMGET', k, 's', 't')
    table.insert(out, k)
    table.insert(out, v[1] or '0')
    table.insert(out, v[2] or '0')
  end
end
return out
`;

const PAGE_SIZE = 1000;

export class RedisSpendSource implements SpendSource {
  constructor(private readonly client: Pick<RedisClient, 'evalScript'>, private readonly envId?: string) {}

  async counters(): Promise<CounterTotal[]> {
    // The hash-tagged prefix routes the script to the node holding every counter in a Cluster.
    const prefix = counterKey('', this.envId);
    const out: CounterTotal[] = [];
    let cursor = '0';
    do {
      const page = await this.client.evalScript(PAGE, [prefix], [cursor, PAGE_SIZE]) as unknown[];
      cursor = String(page[0]);
      for (let i = 1; i + 2 < page.length; i += 3) {
        out.push({
          counter: String(page[i]).slice(prefix.length),
          spentMicroUsd: Number(page[i + 1]),
          spentTokens: Number(page[i + 2]),
        });
      }
    } while (cursor !== '0');
    return out;
  }
}
