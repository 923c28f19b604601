// `sluice validate --config <file>`: the whole configuration as the boot would take it (README.md "Command
// line"): config.yaml with its environment overrides and the files the boot reads before binding, then, in
// file mode, the resources file through the full pipeline. Nothing binds and nothing is contacted, so an
// etcd source is named but not read (`sluice export` + `validate --resources` checks its rows).
import { loadBootConfig } from '../boot.ts';
import type { Platform } from '../platform.ts';
import { printErr, printOut } from './print.ts';
import { checkResourcesFile } from './validate.ts';

export interface ValidateConfigCommand {
  kind: 'validate-config';
  configPath: string;
}

/**
 * Exit 0 with one `OK: …` line on stdout when the gateway would boot on this configuration; exit 1 with the
 * report (the boot's wording) on stderr otherwise. Ignored AISIX keys are listed on stderr, as the boot warns.
 */
export async function validateConfig(platform: Platform, configPath: string): Promise<number> {
  const boot = await loadBootConfig(platform, configPath);
  if (typeof boot === 'string') {
    printErr(platform, boot);
    return 1;
  }
  if (boot.ignoredKeys.length > 0) {
    printErr(platform, `config file ${configPath}: AISIX keys Sluice ignores: ${boot.ignoredKeys.join(', ')}`);
  }
  const resourcesPath = boot.config.resources_file;
  if (!resourcesPath) {
    const { endpoints, prefix } = boot.config.etcd;
    printOut(platform, `OK: ${configPath} (resources from etcd ${endpoints.join(',')} prefix ${prefix}, not read)`);
    return 0;
  }
  const count = await checkResourcesFile(platform, resourcesPath);
  if (count === undefined) return 1;
  printOut(platform, `OK: ${configPath} with ${resourcesPath} loaded ${count} resource(s)`);
  return 0;
}
