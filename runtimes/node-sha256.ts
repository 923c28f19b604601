// `Platform.sha256Stream` through node:crypto (Node, Bun and Deno all provide it natively): the file source
// hashes a large resources file several times faster than in JavaScript (docs/performance.md "Configuration
// at scale").
import { createHash } from 'node:crypto';
import type { Sha256Stream } from '../src/platform.ts';

export function nodeSha256Stream(): Sha256Stream {
  const h = createHash('sha256');
  return {
    update: (bytes) => void h.update(bytes),
    digest: () => h.digest(),
  };
}
