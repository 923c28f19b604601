// The upstream client of Node and Deno: undici's `request` behind the core's UpstreamFetch. It is faster than
// the global fetch on Node, and on Deno it takes the core's `Cancel` as its signal directly where Deno's
// fetch needs an AbortController per attempt (docs/performance.md "Decisions on the hot path").
import { createSecureContext, rootCertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import type { KeyTls, UpstreamFetch, UpstreamOptions, UpstreamResponse, UpstreamTls } from '../src/platform.ts';
import {
  AnswerBudget,
  boundedChunks,
  bufferedText,
  declaredLength,
  declaredText,
  declaresTooMuch,
  KeyTlsPools,
  UpstreamTooLarge,
} from '../src/upstream-fetch.ts';

/** CA certificates the transport trusts beyond node:tls's `rootCertificates`. */
export interface ExtraCa {
  pem: string;
  /**
   * Whether node:tls trusts `pem` by default already (NODE_EXTRA_CA_CERTS on Node): then it is only added
   * where an explicit `ca` replaces the defaults. Deno's node:tls does not read DENO_CERT, so that one is
   * always added.
   */
  inDefaults: boolean;
}

/** How many distinct upstream URLs `ParsedUrls` keeps; past it, it starts again. */
export const MAX_PARSED_URLS = 512;

/**
 * An upstream URL as undici's `request` takes it, parsed once per distinct URL: a provider key's URL is the same
 * string request after request. At most `MAX_PARSED_URLS` are kept, so URLs that differ per request (a passthrough
 * path, a query) cost one parse each, as without it.
 */
export class ParsedUrls {
  private readonly parsed = new Map<string, { origin: string; path: string }>();

  partsOf(url: string): { origin: string; path: string } {
    let parts = this.parsed.get(url);
    if (parts === undefined) {
      const u = new URL(url);
      parts = { origin: u.origin, path: u.search ? u.pathname + u.search : u.pathname };
      if (this.parsed.size >= MAX_PARSED_URLS) this.parsed.clear();
      this.parsed.set(url, parts);
    }
    return parts;
  }
}

/**
 * `opts.maxResponseBytes` and `maxBufferedBytes` bound answers as src/upstream-fetch.ts describes; a refused
 * body is destroyed, which makes undici close its connection instead of pooling it. A request carrying a
 * provider key's TLS goes through that key's own Agent (one per distinct `KeyTls`, src/upstream-fetch.ts).
 */
export function undiciUpstream(opts: UpstreamOptions, extraCa?: ExtraCa): UpstreamFetch {
  const timeout = opts.connectTimeoutMs || undefined;
  const agentFor = (key?: KeyTls) =>
    new Agent({
      connect: lazyTls(timeout, () => tlsOptions(opts.tls, extraCa, key)),
      // undici lets a server's `Keep-Alive: timeout` hint stretch the idle time up to keepAliveMaxTimeout: both
      // are the configured bound, so no hint keeps a connection longer.
      ...(opts.poolIdleTimeoutMs
        ? { keepAliveTimeout: opts.poolIdleTimeoutMs, keepAliveMaxTimeout: opts.poolIdleTimeoutMs }
        : {}),
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  const agent = agentFor();
  // close() lets the requests in flight on a retired pool finish.
  const keyAgents = new KeyTlsPools(agentFor, (a) => void a.close().catch(() => {}));
  const maxBytes = opts.maxResponseBytes ?? 0;
  const budget = new AnswerBudget(opts.maxBufferedBytes ?? 0);
  const unbounded = !maxBytes && !budget.limitBytes;
  const urls = new ParsedUrls();
  return async (r) => {
    // undici duck-types `signal` (reads `aborted`/`reason`, calls add/removeEventListener: lib/api/abort-signal.js,
    // lib/core/util.js addAbortListener), so the core's `Cancel` goes in as it is; its types only name AbortSignal.
    const signal = r.signal as AbortSignal | undefined;
    const url = urls.partsOf(r.url);
    // The pool's own `request`, not undici's top-level one: that one copies these options into a new object per
    // request, and once Node 20's V8 has optimised the copy, every copy has a map of its own, so each of undici's
    // reads of the options misses V8's caches (docs/performance.md "Decisions on the hot path").
    const res = await (r.tls ? keyAgents.get(r.tls) : agent).request({
      origin: url.origin,
      path: url.path,
      method: r.method as Dispatcher.HttpMethod,
      headers: r.headers,
      body: r.body,
      signal,
    });
    const body = res.body;
    if (unbounded) return new UndiciAnswer(res.statusCode, res.headers, body, body, undefined, 0, undefined);
    const h = res.headers['content-length'];
    const declared = Array.isArray(h) ? h[0] : h;
    if (declaresTooMuch(declared, maxBytes)) {
      body.destroy();
      throw new UpstreamTooLarge(maxBytes);
    }
    // A declared length within the limit bounds the body already (undici fails a body longer than declared;
    // its `request` does not decompress). On a limit, the throw ends the `for await` over `body`, which destroys it.
    const chunks = maxBytes ? boundedChunks(body, maxBytes) : body;
    return new UndiciAnswer(res.statusCode, res.headers, chunks, body, declaredLength(declared), maxBytes, budget);
  };
}

/**
 * An undici answer as the core's `UpstreamResponse`: its reads are methods of one object, not closures made per
 * answer. Without a `budget` the body is unbounded (no `max_response_bytes`, no buffered-bytes budget).
 */
class UndiciAnswer implements UpstreamResponse {
  constructor(
    readonly status: number,
    private readonly headers: Dispatcher.ResponseData['headers'],
    readonly body: AsyncIterable<Uint8Array>,
    private readonly raw: Dispatcher.ResponseData['body'],
    /** The declared length, when it bounds the body (`declaredLength`). */
    private readonly length: number | undefined,
    private readonly maxBytes: number,
    private readonly budget: AnswerBudget | undefined,
  ) {}

  header(name: string): string | null {
    const v = this.headers[name];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
  }

  /** undici's `request` does not decode the body: every header describes it as delivered. */
  headerList(): [string, string][] {
    return Object.entries(this.headers).flatMap(([k, v]): [string, string][] =>
      v === undefined ? [] : Array.isArray(v) ? v.map((x): [string, string] => [k, x]) : [[k, v]]
    );
  }

  text(): Promise<string> {
    const { raw, budget, length } = this;
    if (budget === undefined) return raw.text();
    return length === undefined
      ? bufferedText(raw, this.maxBytes, budget)
      : declaredText(length, budget, () => raw.text(), raw, () => raw.destroy());
  }

  discard(): Promise<void> {
    return this.raw.dump().then(() => {});
  }
}

/**
 * undici's connector, whose TLS options (`tls()`) are built at the first https connection rather than with the
 * Agent: a context holding a few hundred roots takes about a quarter of a second to build, which a boot or a
 * plain-http upstream should not pay.
 */
function lazyTls(timeout: number | undefined, tls: () => buildConnector.BuildOptions): buildConnector.connector {
  let plain: buildConnector.connector | undefined;
  let secure: buildConnector.connector | undefined;
  return (o, callback) => {
    const connector = o.protocol === 'https:'
      ? (secure ??= buildConnector({ timeout, ...tls() }))
      : (plain ??= buildConnector({ timeout }));
    return connector(o, callback);
  };
}

/**
 * node:tls options for `upstream.tls` and a provider key's `tls` on top of it: a `ca` replaces the default
 * roots, so the roots and the extra CAs go in with it; either one turning verification off turns it off. The
 * context is built once per pool: built by each connection from the PEM text, a few hundred roots cost about a
 * quarter of a second per handshake.
 */
function tlsOptions(tls: UpstreamTls | undefined, extraCa: ExtraCa | undefined, key: KeyTls | undefined) {
  const text = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
  const configured = [text(tls?.ca), key?.ca_cert?.trim() || undefined].filter((p): p is string => !!p);
  const extra = extraCa && (configured.length > 0 || !extraCa.inDefaults) ? [extraCa.pem, ...configured] : configured;
  const ca = extra.length > 0 ? { ca: [...rootCertificates, ...extra] } : {};
  const cert = tls?.cert ? { cert: text(tls.cert), key: text(tls.key) } : {};
  return {
    ...(extra.length > 0 || tls?.cert ? { secureContext: createSecureContext({ ...ca, ...cert }) } : {}),
    ...(tls?.verify === false || key?.verify === false ? { rejectUnauthorized: false } : {}),
  };
}
