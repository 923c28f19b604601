// `Platform.gzip` through node:zlib (Node, Bun and Deno all provide it natively), at level 1: a usage exporter's
// batch for a fraction of the CPU `CompressionStream` costs (docs/performance.md "Usage events on the request
// path"). A batch of up to `SYNC_MAX_CHARS` characters is compressed at once (well under a millisecond); a larger
// one (captured content) on the runtime's thread pool, so the event loop never waits on it.
import { gzip, gzipSync } from 'node:zlib';

export const SYNC_MAX_CHARS = 256 * 1024;
const OPTIONS = { level: 1 };

export function nodeGzip(text: string): Promise<Uint8Array<ArrayBuffer>> {
  // An own copy: node:zlib's result may be a view into a pooled buffer shared with other allocations.
  if (text.length <= SYNC_MAX_CHARS) return Promise.resolve(new Uint8Array(gzipSync(text, OPTIONS)));
  return new Promise((resolve, reject) => {
    gzip(text, OPTIONS, (e, out) => e ? reject(e) : resolve(new Uint8Array(out)));
  });
}
