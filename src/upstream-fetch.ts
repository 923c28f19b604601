// The upstream transport on the web `fetch` every runtime has (Bun, Workers; Node and Deno use
// runtimes/undici-upstream.ts, which is faster there). `maxBytes` bounds every answer here, at the transport
// (docs/operations.md "Limits and failure behaviour").
import type { UpstreamFetch, UpstreamResponse } from './platform.ts';
import { toAbortSignal } from './util/cancel.ts';

const empty: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };

/** The error an over-limit answer fails with (the dispatcher turns it into a 502 `upstream_error`). */
export class UpstreamTooLarge extends Error {
  override readonly name = 'UpstreamTooLarge';
  constructor(readonly limitBytes: number) {
    super(`upstream answer exceeded ${limitBytes} bytes`);
  }
}

/** Whether a declared `content-length` is over `maxBytes` (0 = no limit). Pure. */
export function declaresTooMuch(contentLength: string | null | undefined, maxBytes: number): boolean {
  if (!maxBytes || !contentLength) return false;
  const n = Number(contentLength);
  return Number.isFinite(n) && n > maxBytes;
}

/** Passes chunks through while counting; throws `UpstreamTooLarge` once more than `maxBytes` went by. */
export async function* boundedChunks(
  chunks: AsyncIterable<Uint8Array>,
  maxBytes: number,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  for await (const chunk of chunks) {
    seen += chunk.byteLength;
    if (maxBytes && seen > maxBytes) throw new UpstreamTooLarge(maxBytes);
    yield chunk;
  }
}

/** The whole body as text, reading no more than `maxBytes` (+ one chunk) before giving up. */
export async function boundedText(chunks: AsyncIterable<Uint8Array>, maxBytes: number): Promise<string> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of boundedChunks(chunks, maxBytes)) {
    parts.push(chunk);
    total += chunk.byteLength;
  }
  if (parts.length === 1) return new TextDecoder().decode(parts[0]);
  const all = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.byteLength;
  }
  return new TextDecoder().decode(all);
}

/**
 * `maxBytes` (0 = no limit): a declared Content-Length over it rejects the call before a byte of the body is
 * read; `text()` rejects, and an iterated body throws, once the bytes read pass it. Either way the body is
 * cancelled, so the connection is closed rather than pooled with an unread answer on it.
 */
export function fetchUpstream(fetchFn: typeof fetch = fetch, maxBytes = 0): UpstreamFetch {
  return async (req) => {
    const res = await fetchFn(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: req.signal && toAbortSignal(req.signal),
    });
    const body = res.body;
    const declared = res.headers.get('content-length');
    if (declaresTooMuch(declared, maxBytes)) {
      await body?.cancel().catch(() => {});
      throw new UpstreamTooLarge(maxBytes);
    }
    // A declared length within the limit bounds the body already, unless fetch decompresses it (a few KiB of
    // gzip can inflate to gigabytes): then the decoded bytes are counted.
    const encoding = res.headers.get('content-encoding');
    const withinDeclared = declared !== null && /^\d+$/.test(declared) && (!encoding || encoding === 'identity');
    const chunks = body ? streamChunks(body) : empty;
    const out: UpstreamResponse = {
      status: res.status,
      header: (name) => res.headers.get(name),
      body: maxBytes ? boundedChunks(chunks, maxBytes) : chunks,
      text: () => (maxBytes && !withinDeclared ? boundedText(chunks, maxBytes) : res.text()),
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
