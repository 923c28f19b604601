// The Deno flags a tree runs Sluice under, read from that tree's own runtimes/deno-launch.ts, so an A/B of two
// trees (`--baseline`, `--trees`) runs each with its own flags rather than both with this tree's.
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

/** `root`'s `DENO_RUN_FLAGS`; `-A` alone (V8's defaults) for a tree from before that file existed. */
export async function denoRunFlags(root: string): Promise<readonly string[]> {
  const file = path.join(root, 'runtimes', 'deno-launch.ts');
  if (!existsSync(file)) return ['-A'];
  return ((await import(pathToFileURL(file).href)) as { DENO_RUN_FLAGS: readonly string[] }).DENO_RUN_FLAGS;
}
