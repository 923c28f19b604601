// The default upstream transport on the web `fetch` every runtime has. undici's `request` replaces it
// (runtimes/undici-upstream.ts) on Node and Deno, which is faster there; Bun and Workers use this.
import type { UpstreamFetch, UpstreamResponse } from './platform.ts';
import { toAbortSignal } from './util/cancel.ts';

const empty: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };

export function fetchUpstream(fetchFn: typeof fetch = fetch): UpstreamFetch {
  return async (req) => {
    const res = await fetchFn(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: req.signal && toAbortSignal(req.signal),
    });
    const body = res.body;
    const out: UpstreamResponse = {
      status: res.status,
      header: (name) => res.headers.get(name),
      body: body ? streamChunks(body) : empty,
      text: () => res.text(),
      discard: async () => {
        await body?.cancel().catch(() => {});
      },
    };
    return out;
  };
}

async function* streamChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      if (value) yield value;
    }
  } finally {
    reader.releaseLock();
    await stream.cancel().catch(() => {});
  }
}
