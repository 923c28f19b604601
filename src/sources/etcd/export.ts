// PLACEHOLDER — replaced by `sluice export` (issue 4).
import type { Command } from '../../cli.ts';
import type { Platform } from '../../platform.ts';

export async function runExport(platform: Platform, _cmd: Extract<Command, { kind: 'export' }>): Promise<number> {
  platform.writeLog('export: not implemented yet');
  return 1;
}
