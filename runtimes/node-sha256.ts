// `Platform.sha256Stream` through node:crypto (Node, Bun and Deno all provide it natively): the file source
// hashes a large resources file several times faster than in JavaScript, the response cache its fingerprints
// without Web Crypto's per-call cost (docs/performance.md "Configuration at scale", "The cache's fingerprints").
import { createHash } from 'node:crypto';
import type { Sha256Stream } from '../src/platform.ts';

export function nodeSha256Stream(): Sha256Stream {
  const h = createHash('sha256');
  return {
    update: (bytes) => void h.update(bytes),
    digest: () => h.digest(),
  };
}
