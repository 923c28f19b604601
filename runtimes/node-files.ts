// Files through node:fs (Node, Bun and Deno all provide it): reads, and the atomic write of the snapshot
// cache (write a temporary file, fsync it, rename it over the target).
import { open, readFile, rename } from 'node:fs/promises';
import process from 'node:process';
import type { PlatformFiles } from '../src/platform.ts';

export const nodeFiles: PlatformFiles = {
  read: (path) => readFile(path),
  async writeAtomic(path, data) {
    const tmp = `${path}.tmp-${process.pid}`;
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  },
};
