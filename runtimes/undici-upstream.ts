// The upstream client of Node and Deno: undici's `request` behind the core's UpstreamFetch. It is faster than
// the global fetch on Node, and on Deno it takes the core's `Cancel` as its signal directly where Deno's
// fetch needs an AbortController per attempt (docs/performance.md "Decisions on the hot path").
import { rootCertificates } from 'node:tls';
import { Agent, request } from 'undici';
import type { UpstreamFetch } from '../src/platform.ts';
import { boundedChunks, boundedText, declaresTooMuch, UpstreamTooLarge } from '../src/upstream-fetch.ts';

/**
 * `extraCaPem`: more trusted CAs on top of the default roots. Node's TLS reads NODE_EXTRA_CA_CERTS itself;
 * Deno's node:tls does not read DENO_CERT, so runtimes/deno.ts passes that file here.
 * `maxBytes` (upstream.max_response_bytes, 0 = none) bounds each answer as src/upstream-fetch.ts describes;
 * an over-limit body is destroyed, which makes undici close its connection instead of pooling it.
 */
export function undiciUpstream(connectTimeoutMs: number, extraCaPem?: string, maxBytes = 0): UpstreamFetch {
  const connect = {
    timeout: connectTimeoutMs || undefined,
    ca: extraCaPem ? [...rootCertificates, extraCaPem] : undefined,
  };
  const agent = new Agent({ connect, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  return async (r) => {
    // undici duck-types `signal` (reads `aborted`/`reason`, calls add/removeEventListener: lib/api/abort-signal.js,
    // lib/core/util.js addAbortListener), so the core's `Cancel` goes in as it is; its types only name AbortSignal.
    const signal = r.signal as AbortSignal | undefined;
    const res = await request(r.url, { method: r.method, headers: r.headers, body: r.body, signal, dispatcher: agent });
    if (maxBytes) {
      const h = res.headers['content-length'];
      const declared = Array.isArray(h) ? h[0] : h;
      if (declaresTooMuch(declared, maxBytes)) {
        res.body.destroy();
        throw new UpstreamTooLarge(maxBytes);
      }
      const body = res.body;
      // A declared length within the limit bounds the body already (undici fails a body longer than declared).
      const withinDeclared = declared !== undefined && /^\d+$/.test(declared);
      // On the limit, the generator's throw ends the `for await` over `body`, which destroys it.
      return {
        status: res.statusCode,
        header: (name) => {
          const v = res.headers[name];
          return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
        },
        body: boundedChunks(body, maxBytes),
        text: () => (withinDeclared ? body.text() : boundedText(body, maxBytes)),
        discard: () => body.dump().then(() => {}),
      };
    }
    return {
      status: res.statusCode,
      header: (name) => {
        const v = res.headers[name];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
      body: res.body,
      text: () => res.body.text(),
      discard: () => res.body.dump().then(() => {}),
    };
  };
}
