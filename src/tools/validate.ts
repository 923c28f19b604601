// `sluice validate --resources <file>` (README.md "Command line"): one resources file through the full
// pipeline, as the file source would load it.
import { type Platform, readFile } from '../platform.ts';
import { loadResourcesFile } from '../resources/pipeline.ts';
import { printErr, printOut } from './print.ts';

/** Exit 0 with AISIX's `OK: …` line on stdout, or 1 with the report on stderr. */
export async function validateResources(platform: Platform, path: string): Promise<number> {
  let text: string;
  try {
    text = new TextDecoder().decode(await readFile(platform, path));
  } catch (e) {
    printErr(platform, `resources file ${path}: cannot read it: ${(e as Error).message}`);
    return 1;
  }
  const r = await loadResourcesFile(path, text, platform.env);
  if (!r.ok) {
    printErr(platform, r.report.format());
    return 1;
  }
  printOut(platform, `OK: ${path} loaded ${r.resourceCount} resource(s)`);
  return 0;
}
