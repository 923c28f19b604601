// The upstream transport on the web `fetch` every runtime has (Bun, Workers; Node and Deno use
// runtimes/undici-upstream.ts, which is faster there), and the bounds both transports put on answers:
// `upstream.max_response_bytes` per answer and `upstream.max_buffered_response_bytes` over all the answers
// being read whole at once (docs/operations.md "Limits and failure behaviour").
import type { KeyTls, UpstreamFetch, UpstreamResponse } from './platform.ts';
import { CHUNKS_DONE, joinBytes } from './util/bytes.ts';
import { toAbortSignal } from './util/cancel.ts';

const empty: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };

/** What the caller is told about an answer the gateway would not pass on (routing turns it into a failure). */
export interface CallerRefusal {
  kind: 'upstream_error' | 'service_unavailable';
  status: number;
  message: string;
  retryAfterSecs?: number;
}

/**
 * An upstream answer the gateway refused to pass on. `upstreamAtFault`: the upstream sent something it
 * should not have (its health is charged); false when the gateway itself had no room for it. Either way
 * the same target is not retried: the attempt fails over.
 */
export class RefusedAnswer extends Error {
  constructor(message: string, readonly caller: CallerRefusal, readonly upstreamAtFault: boolean) {
    super(message);
  }
}

/** An answer over `upstream.max_response_bytes`: a 502 `upstream_error` naming the limit. */
export class UpstreamTooLarge extends RefusedAnswer {
  override readonly name = 'UpstreamTooLarge';
  constructor(readonly limitBytes: number) {
    const message = `upstream answer exceeded ${limitBytes} bytes`;
    super(message, { kind: 'upstream_error', status: 502, message: `${message} (upstream.max_response_bytes)` }, true);
  }
}

/** The answers being read whole already hold `upstream.max_buffered_response_bytes`: a 503, retry soon. */
export class AnswerBudgetFull extends RefusedAnswer {
  override readonly name = 'AnswerBudgetFull';
  constructor(readonly limitBytes: number) {
    super(`upstream answers being read hold the limit of ${limitBytes} bytes`, {
      kind: 'service_unavailable',
      status: 503,
      message:
        `the gateway is holding its limit of ${limitBytes} bytes of upstream answers (upstream.max_buffered_response_bytes); retry shortly`,
      retryAfterSecs: 1,
    }, false);
  }
}

/**
 * The bytes every answer being read whole (not streamed) holds together, bounded by `limitBytes` (0 = no
 * bound). An answer takes its bytes as they arrive and gives them back once it is whole or has failed; one
 * that does not fit fails at once rather than waiting, so answers never wait on each other's memory.
 */
export class AnswerBudget {
  private held = 0;
  constructor(readonly limitBytes: number) {}

  /** Take `n` bytes if they fit (nothing is taken if not). */
  take(n: number): boolean {
    if (this.limitBytes && this.held + n > this.limitBytes) return false;
    this.held += n;
    return true;
  }

  give(n: number): void {
    this.held -= n;
  }

  /** Bytes held now. */
  get heldBytes(): number {
    return this.held;
  }
}

/**
 * The upstream answered with a redirect (3xx): a 502 `upstream_error`, its health charged, and nothing
 * sent to where it points. A redirect would carry the provider key's custom headers (`x-api-key`,
 * `api-key`) and the prompt to another host, so no transport follows one and no 3xx is passed on.
 */
export class UpstreamRedirected extends RefusedAnswer {
  override readonly name = 'UpstreamRedirected';
  constructor(readonly status: number) {
    const message = `upstream answered ${status}, a redirect, which the gateway does not follow`;
    super(message, { kind: 'upstream_error', status: 502, message }, true);
  }
}

/** A redirect status (3xx); fetch's `redirect: 'manual'` answers 0 where it hides one (`opaqueredirect`). */
export function isRedirect(status: number): boolean {
  return status === 0 || (status >= 300 && status < 400);
}

/**
 * `upstream` that rejects with `UpstreamRedirected` (after discarding the body) when the answer is a
 * redirect, so every caller of the transport — providers, token endpoints, guardrail services, exporters —
 * sees one failure on every runtime.
 */
export function refuseRedirects(upstream: UpstreamFetch): UpstreamFetch {
  // One `then` with a shared function, not an async frame and an await per request; a throw still rejects.
  return (req) => {
    try {
      return upstream(req).then(notRedirected);
    } catch (e) {
      return Promise.reject(e);
    }
  };
}

function notRedirected(res: UpstreamResponse): UpstreamResponse | Promise<never> {
  if (!isRedirect(res.status)) return res;
  return res.discard().catch(() => {}).then(() => {
    throw new UpstreamRedirected(res.status);
  });
}

/** A byte no HTTP client sends in a header value: a control character (a newline among them) or one past U+00FF. */
const UNSENDABLE_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** A header the gateway would send upstream holds bytes HTTP cannot carry: nothing was sent. */
export class UnsendableHeader extends Error {
  override readonly name = 'UnsendableHeader';
  constructor(readonly header: string) {
    super(`the ${header} header holds bytes HTTP cannot send (a newline or another control character)`);
  }
}

/**
 * `upstream` that rejects with `UnsendableHeader`, before any connection, a request whose header values the
 * runtimes' clients would refuse — each in its own words, and Bun's fetch after trimming — so every runtime
 * fails the same way, and routing can tell a bad secret from a transport failure (no retry, no failover).
 */
export function refuseUnsendableHeaders(upstream: UpstreamFetch): UpstreamFetch {
  return (req) => {
    for (const name in req.headers) {
      if (UNSENDABLE_HEADER_VALUE.test(req.headers[name]!)) return Promise.reject(new UnsendableHeader(name));
    }
    return upstream(req);
  };
}

/** OpenSSL's words for the verification errors a runtime's TLS reports by code (Node, Bun and Deno share them). */
const CERTIFICATE_ERRORS: Record<string, string> = {
  UNABLE_TO_GET_ISSUER_CERT: 'unable to get issuer certificate',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'unable to get local issuer certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'unable to verify the first certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'self-signed certificate in certificate chain',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed certificate',
  CERT_HAS_EXPIRED: 'certificate has expired',
  CERT_NOT_YET_VALID: 'certificate is not yet valid',
  CERT_REVOKED: 'certificate revoked',
  CERT_UNTRUSTED: 'certificate not trusted',
  CERT_REJECTED: 'certificate rejected',
  CERT_SIGNATURE_FAILURE: 'certificate signature failure',
  INVALID_CA: 'invalid CA certificate',
  ERR_TLS_CERT_ALTNAME_INVALID: "the certificate does not name the upstream's host",
  HOSTNAME_MISMATCH: "the certificate does not name the upstream's host",
};

/**
 * The upstream's certificate problem behind a transport failure, in OpenSSL's words, or undefined when the
 * failure is not one. Only the fixed phrase is returned: the runtime's own message may carry host names.
 */
export function certificateProblem(e: unknown): string | undefined {
  for (let err = e, depth = 0; err && typeof err === 'object' && depth < 3; depth++) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && CERTIFICATE_ERRORS[code]) return CERTIFICATE_ERRORS[code];
    err = (err as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The bounds of one transport (`platform.upstream`'s options); 0 or absent = none. */
export interface AnswerLimits {
  maxResponseBytes?: number;
  maxBufferedBytes?: number;
}

/** Whether a declared `content-length` is over `maxBytes` (0 = no limit). Pure. */
export function declaresTooMuch(contentLength: string | null | undefined, maxBytes: number): boolean {
  if (!maxBytes || !contentLength) return false;
  const n = Number(contentLength);
  return Number.isFinite(n) && n > maxBytes;
}

/**
 * Passes chunks through while counting; throws `UpstreamTooLarge` once more than `maxBytes` went by, closing
 * the source (which destroys an HTTP body). An iterator, not an async generator: it runs once per chunk.
 */
export function boundedChunks(chunks: AsyncIterable<Uint8Array>, maxBytes: number): AsyncIterableIterator<Uint8Array> {
  return new Bounded(chunks, maxBytes);
}

class Bounded implements AsyncIterableIterator<Uint8Array> {
  private seen = 0;
  private over = false;
  private it: AsyncIterator<Uint8Array> | undefined;

  constructor(private readonly chunks: AsyncIterable<Uint8Array>, private readonly maxBytes: number) {}

  /** Taken on the first read, as `for await` would: a body answered through `text()` is never iterated. */
  private get source(): AsyncIterator<Uint8Array> {
    return (this.it ??= this.chunks[Symbol.asyncIterator]());
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    if (this.over) return CHUNKS_DONE;
    let r: IteratorResult<Uint8Array>;
    try {
      r = await this.source.next();
    } catch (e) {
      this.over = true; // a failed source is done, as for `for await`: not closed
      throw e;
    }
    if (r.done) {
      this.over = true;
      return r;
    }
    this.seen += r.value.byteLength;
    if (this.maxBytes && this.seen > this.maxBytes) {
      this.over = true;
      await this.source.return?.().catch(() => {});
      throw new UpstreamTooLarge(this.maxBytes);
    }
    return r;
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    if (!this.over) {
      this.over = true;
      await this.it?.return?.();
    }
    return CHUNKS_DONE;
  }
}

/**
 * The whole body as text, reading no more than `maxBytes` (0 = no limit) and holding its bytes in `budget`
 * while it reads. Throws `UpstreamTooLarge` or `AnswerBudgetFull`, which ends the iteration (and so the body).
 * The bytes are kept as they came and decoded once at the end: text decoded piece by piece would sit in
 * the engine's heap, which gives memory back to the system far later than freed byte buffers.
 */
export async function bufferedText(
  chunks: AsyncIterable<Uint8Array>,
  maxBytes: number,
  budget: AnswerBudget,
): Promise<string> {
  const parts: Uint8Array[] = [];
  let held = 0;
  try {
    for await (const chunk of chunks) {
      if (maxBytes && held + chunk.byteLength > maxBytes) throw new UpstreamTooLarge(maxBytes);
      if (!budget.take(chunk.byteLength)) throw new AnswerBudgetFull(budget.limitBytes);
      held += chunk.byteLength;
      parts.push(chunk);
    }
    if (parts.length === 1) return new TextDecoder().decode(parts[0]);
    const all = joinBytes(parts, held);
    parts.length = 0; // the pieces can go while the whole is decoded
    return new TextDecoder().decode(all);
  } finally {
    budget.give(held);
  }
}

/** Below this declared length a body is read by the client's own `text()`, the fastest way for small ones. */
export const NATIVE_TEXT_MAX_BYTES = 1_048_576;

/**
 * The text of a body whose length is `declared` (within `maxBytes`, already checked). Its bytes are taken
 * from `budget` up front: rejects with `AnswerBudgetFull` (after `cancel`) when they do not fit. A small
 * body is read by `nativeText`; a larger one is copied into one buffer of its length as it arrives, so it is
 * never held as pieces and as a whole at once.
 */
export async function declaredText(
  declared: number,
  budget: AnswerBudget,
  nativeText: () => Promise<string>,
  chunks: AsyncIterable<Uint8Array>,
  cancel: () => void,
): Promise<string> {
  if (!budget.take(declared)) {
    cancel();
    throw new AnswerBudgetFull(budget.limitBytes);
  }
  try {
    if (declared <= NATIVE_TEXT_MAX_BYTES) return await nativeText();
    const all = new Uint8Array(declared);
    let off = 0;
    for await (const chunk of chunks) {
      if (off + chunk.byteLength > declared) {
        throw new Error(`upstream answer longer than its content-length ${declared}`);
      }
      all.set(chunk, off);
      off += chunk.byteLength;
    }
    return new TextDecoder().decode(off === declared ? all : all.subarray(0, off));
  } finally {
    budget.give(declared);
  }
}

/** A declared length that bounds the body as it is read: digits, and no decoding that could inflate it. */
export function declaredLength(declared: string | null | undefined, encoding?: string | null): number | undefined {
  if (declared === null || declared === undefined || !/^\d+$/.test(declared)) return undefined;
  if (encoding && encoding !== 'identity') return undefined;
  return Number(declared);
}

/**
 * A `fetch` that may be handed a provider key's TLS with a request; one that cannot honour it (Workers' fetch
 * sets no CA and always verifies) ignores it, and the connection then fails closed on a private certificate.
 */
export type KeyFetch = (url: string, init: RequestInit, tls?: KeyTls) => Promise<Response>;

/**
 * What a transport builds for each provider key's TLS (a connection pool, a client's TLS options), built once
 * per distinct `KeyTls` and shared by every key configured the same, across snapshots. The most recently
 * used `max` are kept; an older one is handed to `retire` (which lets its requests in flight finish).
 */
export class KeyTlsPools<T> {
  private readonly ids = new WeakMap<KeyTls, string>();
  private readonly built = new Map<string, T>();

  constructor(
    private readonly build: (tls: KeyTls) => T,
    private readonly retire: (t: T) => void = () => {},
    private readonly max = 64,
  ) {}

  get(tls: KeyTls): T {
    let id = this.ids.get(tls);
    if (id === undefined) {
      // The same string object from then on: its hash is computed once, however long the PEM.
      id = `${tls.verify ? 1 : 0}\n${tls.ca_cert?.trim() ?? ''}`;
      this.ids.set(tls, id);
    }
    let t = this.built.get(id);
    if (t !== undefined) {
      this.built.delete(id); // re-inserted last: the Map's order is the recency
      this.built.set(id, t);
      return t;
    }
    t = this.build(tls);
    this.built.set(id, t);
    if (this.built.size > this.max) {
      const [oldest, pool] = this.built.entries().next().value!;
      this.built.delete(oldest);
      this.retire(pool);
    }
    return t;
  }

  /** Pools held now. */
  get size(): number {
    return this.built.size;
  }
}

/**
 * `limits.maxResponseBytes`: a declared Content-Length over it rejects the call before a byte of the body
 * is read; `text()` rejects, and an iterated body throws, once the bytes read pass it. `text()` also holds
 * the answer's bytes in the transport's `AnswerBudget` (`limits.maxBufferedBytes`) while it reads. Either
 * way the body is cancelled, so the connection is closed rather than pooled with an unread answer on it.
 */
export function fetchUpstream(fetchFn: KeyFetch = fetch, limits: AnswerLimits = {}): UpstreamFetch {
  const maxBytes = limits.maxResponseBytes ?? 0;
  const budget = new AnswerBudget(limits.maxBufferedBytes ?? 0);
  const unbounded = !maxBytes && !budget.limitBytes;
  return async (req) => {
    const res = await fetchFn(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: req.signal && toAbortSignal(req.signal),
      // Followed, a 307/308 would take the custom credential headers and the body to wherever it points.
      redirect: 'manual',
    }, req.tls);
    const body = res.body;
    const declared = res.headers.get('content-length');
    if (declaresTooMuch(declared, maxBytes)) {
      await body?.cancel().catch(() => {});
      throw new UpstreamTooLarge(maxBytes);
    }
    // A declared length within the limit bounds the body already, unless fetch decompresses it (a few KiB of
    // gzip can inflate to gigabytes): then the decoded bytes are counted.
    const length = declaredLength(declared, res.headers.get('content-encoding'));
    const chunks = body ? new BodyChunks(body) : empty;
    const out: UpstreamResponse = {
      status: res.status,
      header: (name) => res.headers.get(name),
      headerList: () => fetchHeaderList(res.headers),
      body: maxBytes ? boundedChunks(chunks, maxBytes) : chunks,
      text: () =>
        unbounded
          ? res.text()
          : length === undefined
          ? bufferedText(chunks, maxBytes, budget)
          : declaredText(length, budget, () => res.text(), chunks, () => void body?.cancel().catch(() => {})),
      discard: async () => {
        await body?.cancel().catch(() => {});
      },
    };
    return out;
  };
}

/**
 * A fetch answer's headers as its body is delivered: fetch decodes a compressed body, so its
 * `content-encoding` and `content-length` no longer describe it; each `set-cookie` stays its own header.
 */
function fetchHeaderList(headers: Headers): [string, string][] {
  const decoded = (headers.get('content-encoding') ?? 'identity').trim().toLowerCase() !== 'identity';
  const out: [string, string][] = [];
  for (const [k, v] of headers) {
    if (k === 'set-cookie' || (decoded && (k === 'content-encoding' || k === 'content-length'))) continue;
    out.push([k, v]);
  }
  for (const c of headers.getSetCookie()) out.push(['set-cookie', c]);
  return out;
}

/**
 * A fetch body's chunks. The body is locked at the first read (until then `text()` may take it), and once
 * the chunks are done, failed or returned it is cancelled, which closes a connection whose answer was not
 * read to the end. An iterator, not an async generator: it runs once per chunk.
 */
class BodyChunks implements AsyncIterableIterator<Uint8Array> {
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private over = false;

  constructor(private readonly stream: ReadableStream<Uint8Array>) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    if (this.over) return CHUNKS_DONE;
    const reader = (this.reader ??= this.stream.getReader());
    for (;;) {
      let r: Awaited<ReturnType<typeof reader.read>>;
      try {
        r = await reader.read();
      } catch (e) {
        await this.close();
        throw e;
      }
      if (r.done) {
        await this.close();
        return CHUNKS_DONE;
      }
      if (r.value) return { done: false, value: r.value };
    }
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    await this.close();
    return CHUNKS_DONE;
  }

  /** A body never read is left as it is, as an async generator never started would leave it. */
  private async close(): Promise<void> {
    if (this.over) return;
    this.over = true;
    const reader = this.reader;
    if (!reader) return;
    await reader.cancel().catch(() => {}); // settles a read still pending, where releasing the lock would throw
    reader.releaseLock();
  }
}
