// `sluice spend --config <file> [--since 7d] [--until …] [--by key|team|user|model] [--json]` (docs/admin.md
// "Spend reports"): the same report as `GET /admin/v1/spend`, read straight from the Redis that config.yaml's
// `budgets.redis` names — the counters live there, not in etcd.
import { loadBootConfig } from '../boot.ts';
import { spendSourceFor } from '../admin/spend-route.ts';
import { spendQuery, type SpendReport } from '../admin/spend-report.ts';
import type { Platform } from '../platform.ts';
import { printErr, printOut } from './print.ts';

export interface SpendCommand {
  kind: 'spend';
  configPath: string;
  by?: string;
  since?: string;
  until?: string;
  json: boolean;
}

/** Exit 0 with the report on stdout (a table, or one JSON document); 1 when it cannot be read; 2 on bad flags. */
export async function runSpend(platform: Platform, cmd: SpendCommand): Promise<number> {
  const boot = await loadBootConfig(platform, cmd.configPath);
  if (typeof boot === 'string') {
    printErr(platform, boot);
    return 1;
  }
  const source = spendSourceFor(boot.config, platform);
  if (!source) {
    printErr(
      platform,
      `${cmd.configPath}: spend reports read the budget counters in Redis: set budgets.backend: redis`,
    );
    return 1;
  }
  try {
    const report = await spendQuery(source, cmd, Date.now());
    if (typeof report === 'string') {
      printErr(platform, `spend: ${report}`);
      return 2;
    }
    if (cmd.json) printOut(platform, JSON.stringify(report));
    else for (const line of table(report)) printOut(platform, line);
    return 0;
  } catch {
    printErr(platform, `spend: the budget counters could not be read: check budgets.redis in ${cmd.configPath}`);
    return 1;
  } finally {
    await source.close?.().catch(() => {});
  }
}

/** One line per subject and budget, most spent first, under a header naming the range. */
export function table(r: SpendReport): string[] {
  const head = [r.by, 'budget', 'spent_usd', 'tokens', 'periods'];
  const rows = r.rows.map((
    x,
  ) => [x.id, x.budget, x.spent_usd.toFixed(6), String(x.spent_tokens), String(x.periods.length)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (cells: string[]) =>
    cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [`# spend by ${r.by} from ${r.since} to ${r.until}`, fmt(head), ...rows.map(fmt)];
}
