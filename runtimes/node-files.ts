// Files through node:fs (Node, Bun and Deno all provide it): reads, whole or a piece at a time, and the atomic
// write of the snapshot cache (write a temporary file, fsync it, rename it over the target).
import { open, readFile, rename } from 'node:fs/promises';
import process from 'node:process';
import type { PlatformFiles } from '../src/platform.ts';

export const nodeFiles: PlatformFiles = {
  read: (path) => readFile(path),
  async openRead(path) {
    const fh = await open(path, 'r');
    return {
      read: async (into) => (await fh.read(into, 0, into.length, null)).bytesRead,
      close: () => fh.close(),
    };
  },
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
