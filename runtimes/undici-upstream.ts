// The upstream client of Node and Deno: undici's `request` behind the core's UpstreamFetch. It is faster than
// the global fetch on Node, and on Deno it takes the core's `Cancel` as its signal directly where Deno's
// fetch needs an AbortController per attempt (docs/performance.md "Decisions on the hot path").
import { rootCertificates } from 'node:tls';
import { Agent, request } from 'undici';
import type { UpstreamFetch, UpstreamOptions, UpstreamResponse, UpstreamTls } from '../src/platform.ts';
import {
  AnswerBudget,
  boundedChunks,
  bufferedText,
  declaredLength,
  declaredText,
  declaresTooMuch,
  UpstreamTooLarge,
} from '../src/upstream-fetch.ts';

/**
 * `extraCaPem`: more trusted CAs on top of the default roots. Node's TLS reads NODE_EXTRA_CA_CERTS itself;
 * Deno's node:tls does not read DENO_CERT, so runtimes/deno.ts passes that file here.
 * `opts.maxResponseBytes` and `maxBufferedBytes` bound answers as src/upstream-fetch.ts describes; a refused
 * body is destroyed, which makes undici close its connection instead of pooling it.
 */
export function undiciUpstream(opts: UpstreamOptions, extraCaPem?: string): UpstreamFetch {
  const agent = new Agent({
    connect: { timeout: opts.connectTimeoutMs || undefined, ...tlsOptions(opts.tls, extraCaPem) },
    // undici lets a server's `Keep-Alive: timeout` hint stretch the idle time up to keepAliveMaxTimeout: both
    // are the configured bound, so no hint keeps a connection longer.
    ...(opts.poolIdleTimeoutMs
      ? { keepAliveTimeout: opts.poolIdleTimeoutMs, keepAliveMaxTimeout: opts.poolIdleTimeoutMs }
      : {}),
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const maxBytes = opts.maxResponseBytes ?? 0;
  const budget = new AnswerBudget(opts.maxBufferedBytes ?? 0);
  const unbounded = !maxBytes && !budget.limitBytes;
  return async (r) => {
    // undici duck-types `signal` (reads `aborted`/`reason`, calls add/removeEventListener: lib/api/abort-signal.js,
    // lib/core/util.js addAbortListener), so the core's `Cancel` goes in as it is; its types only name AbortSignal.
    const signal = r.signal as AbortSignal | undefined;
    const res = await request(r.url, { method: r.method, headers: r.headers, body: r.body, signal, dispatcher: agent });
    const header = (name: string): string | null => {
      const v = res.headers[name];
      return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
    };
    const body = res.body;
    if (unbounded) {
      return {
        status: res.statusCode,
        header,
        body,
        text: () => body.text(),
        discard: () => body.dump().then(() => {}),
      };
    }
    const h = res.headers['content-length'];
    const declared = Array.isArray(h) ? h[0] : h;
    if (declaresTooMuch(declared, maxBytes)) {
      body.destroy();
      throw new UpstreamTooLarge(maxBytes);
    }
    // A declared length within the limit bounds the body already (undici fails a body longer than declared;
    // its `request` does not decompress).
    const length = declaredLength(declared);
    // On a limit, the throw ends the `for await` over `body`, which destroys it.
    const out: UpstreamResponse = {
      status: res.statusCode,
      header,
      body: maxBytes ? boundedChunks(body, maxBytes) : body,
      text: () =>
        length === undefined
          ? bufferedText(body, maxBytes, budget)
          : declaredText(length, budget, () => body.text(), body, () => body.destroy()),
      discard: () => body.dump().then(() => {}),
    };
    return out;
  };
}

/** node:tls options for `upstream.tls`: a `ca` replaces the default roots, so the extra CAs go in with them. */
function tlsOptions(tls: UpstreamTls | undefined, extraCaPem: string | undefined) {
  const text = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
  const extra = [extraCaPem, text(tls?.ca)].filter((p): p is string => !!p);
  return {
    ...(extra.length > 0 ? { ca: [...rootCertificates, ...extra] } : {}),
    ...(tls?.cert ? { cert: text(tls.cert), key: text(tls.key) } : {}),
    ...(tls?.verify === false ? { rejectUnauthorized: false } : {}),
  };
}
