// `sluice validate --resources <file>` (README.md "Command line"): one resources file through the full
// pipeline, as the file source would load it.
import { type Platform, readFile } from '../platform.ts';
import { loadResourcesFile } from '../resources/pipeline.ts';
import { printErr, printOut } from './print.ts';

/** Exit 0 with AISIX's `OK: …` line on stdout, or 1 with the report on stderr. */
export async function validateResources(platform: Platform, path: string): Promise<number> {
  const count = await checkResourcesFile(platform, path);
  if (count === undefined) return 1;
  printOut(platform, `OK: ${path} loaded ${count} resource(s)`);
  return 0;
}

/** Read and load a resources file: the number of resources it holds, or undefined with the report on stderr. */
export async function checkResourcesFile(platform: Platform, path: string): Promise<number | undefined> {
  let text: string;
  try {
    text = new TextDecoder().decode(await readFile(platform, path));
  } catch (e) {
    printErr(platform, `resources file ${path}: cannot read it: ${(e as Error).message}`);
    return undefined;
  }
  const r = await loadResourcesFile(path, text, platform.env);
  if (!r.ok) {
    printErr(platform, r.report.format());
    return undefined;
  }
  return r.resourceCount;
}
