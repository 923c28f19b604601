// `sluice spend` (docs/admin.md "Spend reports"): the same report as `GET /admin/v1/spend`, read straight from
// the Redis the budgets count in: `--config`'s `budgets.redis`, or `--redis <url>`. With `--etcd` the rows are
// named from the api keys and models under the prefix; the counters live in Redis either way, not in etcd.
import { loadBootConfig } from '../boot.ts';
import { spendNamesFromEtcd } from '../admin/spend-names.ts';
import { spendSourceFor } from '../admin/spend-route.ts';
import { nameRows, type SpendNames, spendQuery, type SpendReport } from '../admin/spend-report.ts';
import { type Config, type RedisConn, RedisConnSchema } from '../config/schema.ts';
import type { Platform } from '../platform.ts';
import { EtcdClient } from '../sources/etcd/client.ts';
import { normalizePrefix } from '../sources/etcd/rows.ts';
import { printErr, printOut } from './print.ts';

export interface SpendCommand {
  kind: 'spend';
  /** Where `budgets.redis` and `etcd.env_id` come from unless `redisUrl` / `envId` say otherwise. */
  configPath?: string;
  /** Read the keys' and models' rows here to name the report's rows. */
  etcd?: { endpoints: string[]; prefix?: string; user?: string; passwordEnv?: string };
  redisUrl?: string;
  envId?: string;
  by?: string;
  since?: string;
  until?: string;
  json: boolean;
}

type Where = { redis: RedisConn; envId: string | undefined; prefix: string };

/** The Redis, env id and etcd prefix the command reads, or what to fix (exit 1 or 2). */
async function where(platform: Platform, cmd: SpendCommand): Promise<Where | { exit: number; message: string }> {
  let config: Config | undefined;
  if (cmd.configPath) {
    const boot = await loadBootConfig(platform, cmd.configPath);
    if (typeof boot === 'string') return { exit: 1, message: boot };
    config = boot.config;
  }
  const envId = cmd.envId ?? (config?.etcd.env_id || undefined);
  let redis: RedisConn | undefined;
  if (cmd.redisUrl !== undefined) {
    const parsed = RedisConnSchema.safeParse({ url: cmd.redisUrl });
    // The URL may hold a password: the message names the flag, never its value.
    if (!parsed.success) return { exit: 2, message: 'spend: --redis must be a redis:// or rediss:// URL' };
    redis = parsed.data;
  } else if (config?.budgets.backend === 'redis') redis = config.budgets.redis;
  if (!redis) {
    return {
      exit: 1,
      message: `${cmd.configPath}: spend reports read the budget counters in Redis: set budgets.backend: redis`,
    };
  }
  // config.yaml's etcd.prefix already ends in its env id; --prefix (default /aisix) gets the env id's segment, as
  // the gateway reads its rows under `<prefix>/<env_id>/`.
  const fromConfig = cmd.etcd?.prefix === undefined && config !== undefined;
  const base = normalizePrefix(cmd.etcd?.prefix ?? config?.etcd.prefix ?? '/aisix');
  const prefix = !fromConfig && envId ? `${base}/${envId}` : base;
  return { redis, envId, prefix };
}

async function namesFromEtcd(
  platform: Platform,
  etcd: NonNullable<SpendCommand['etcd']>,
  prefix: string,
): Promise<SpendNames | string> {
  let password: string | undefined;
  if (etcd.passwordEnv) {
    password = platform.env[etcd.passwordEnv];
    if (!password) return `spend: --password-env: environment variable ${etcd.passwordEnv} is not set or empty`;
  }
  if (etcd.endpoints.length === 0) return 'spend: --etcd needs at least one endpoint';
  const client = new EtcdClient({
    endpoints: etcd.endpoints,
    ...(etcd.user ? { user: etcd.user } : {}),
    ...(password !== undefined ? { password } : {}),
  });
  try {
    return await spendNamesFromEtcd(client, prefix);
  } catch (e) {
    return `spend: cannot read ${prefix}/ from etcd: ${client.redact((e as Error).message)}`;
  }
}

/** Exit 0 with the report on stdout (a table, or one JSON document); 1 when it cannot be read; 2 on bad flags. */
export async function runSpend(platform: Platform, cmd: SpendCommand): Promise<number> {
  const w = await where(platform, cmd);
  if ('exit' in w) {
    printErr(platform, w.message);
    return w.exit;
  }
  const source = spendSourceFor(
    { budgets: { backend: 'redis', redis: w.redis }, etcd: { env_id: w.envId } },
    platform,
  );
  if (!source) {
    printErr(platform, 'spend: this runtime has no Redis client');
    return 1;
  }
  const redisName = cmd.redisUrl !== undefined ? '--redis' : `budgets.redis in ${cmd.configPath}`;
  try {
    let names: SpendNames | undefined;
    if (cmd.etcd) {
      const n = await namesFromEtcd(platform, cmd.etcd, w.prefix);
      if (typeof n === 'string') {
        printErr(platform, n);
        return 1;
      }
      names = n;
    }
    const report = await spendQuery(source, cmd, Date.now());
    if (typeof report === 'string') {
      printErr(platform, `spend: ${report}`);
      return 2;
    }
    const named = names ? nameRows(report, names) : report;
    if (cmd.json) printOut(platform, JSON.stringify(named));
    else for (const line of table(named)) printOut(platform, line);
    return 0;
  } catch {
    printErr(platform, `spend: the budget counters could not be read: check ${redisName}`);
    return 1;
  } finally {
    await source.close?.().catch(() => {});
  }
}

/** One line per subject and budget, most spent first, under a header naming the range; names when known. */
export function table(r: SpendReport): string[] {
  const named = r.rows.some((x) => x.name !== undefined || x.team_id !== undefined);
  const head = [r.by, ...(named ? ['name', 'team'] : []), 'budget', 'spent_usd', 'tokens', 'periods'];
  const rows = r.rows.map((x) => [
    x.id,
    ...(named ? [x.name ?? '-', x.team_id ?? '-'] : []),
    x.budget,
    x.spent_usd.toFixed(6),
    String(x.spent_tokens),
    String(x.periods.length),
  ]);
  const numeric = head.length - 3;
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (cells: string[]) =>
    cells.map((c, i) => (i >= numeric ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [`# spend by ${r.by} from ${r.since} to ${r.until}`, fmt(head), ...rows.map(fmt)];
}
