// A small client for etcd's v3 HTTP/JSON gateway (etcd 3.4+ serves it under `/v3/`), using nothing but
// an injectable `fetch`, so the same code runs on Node, Bun, Deno and Workers.
//
// Wire facts this file relies on (checked against etcd 3.4):
// - keys and values travel base64-encoded; 64-bit integers (revisions, counts) travel as JSON strings;
//   fields at their proto3 default (empty value, revision 0, PUT event type) are omitted entirely;
// - errors come back as a non-200 status with `{"error","message","code"}` (`code` is the gRPC code);
// - with auth enabled, POST /v3/auth/authenticate `{name,password}` returns `{token}`, which is sent
//   verbatim as the `Authorization` header. A token the server no longer knows (TTL expiry, etcd
//   restart with simple tokens) fails with 401 / gRPC 16 "invalid auth token": we re-authenticate once
//   and retry.
//
// Timeouts. `fetch` exposes no separate connection phase, so:
// - `dialTimeoutMs` bounds each attempt against one endpoint up to the arrival of the response headers
//   (TCP/TLS connect + the server starting to answer). Expiry fails over to the next endpoint.
// - `requestTimeoutMs` additionally bounds a unary request as a whole (headers and body), per endpoint
//   attempt. Streams (watch) are not subject to it once their headers arrived: watch.ts runs its own
//   idle watchdog instead.
//
// TLS: this file only needs the `fetch` it is given. The Node runtime passes an undici-based fetch with
// a dispatcher carrying the CA and client certificate; endpoints without a scheme get `https://` when
// `tls` is set, `http://` otherwise.
//
// Secrets: no error message built here contains the password or a token (they are never interpolated,
// and every message goes through `redact` as a second line of defence).
import { base64Decode, base64Encode } from '../../util/bytes.ts';
import { type RangeAsk, RangePlan, SAMPLE_EVERY } from './range-plan.ts';

/**
 * A 3xx: etcd's gateway never sends one, so it is a proxy or an impostor asking for the token, password or
 * request to go elsewhere. Every call asks its fetch not to follow (`redirect: 'manual'`) and fails here.
 */
function isRedirect(status: number): boolean {
  return status >= 300 && status < 400;
}

/** The subset of `fetch` we use. Any WHATWG-compatible fetch fits (global, undici, Workers). */
export type EtcdFetch = (url: string, init: RequestInit) => Promise<Response>;

export interface EtcdClientOptions {
  endpoints: readonly string[];
  user?: string;
  password?: string;
  /** Defaults to the global `fetch`. */
  fetch?: EtcdFetch;
  /** Scheme for endpoints given without one. */
  tls?: boolean;
  /** Per endpoint attempt, until response headers. Default 5000. */
  dialTimeoutMs?: number;
  /** Per endpoint attempt, whole unary exchange. Default 5000. */
  requestTimeoutMs?: number;
}

export type EtcdErrorKind =
  | 'transport' // could not talk to any endpoint, or a stream broke
  | 'timeout' // dial or request timeout
  | 'auth' // authentication failed or was refused
  | 'server' // etcd answered with an error
  | 'protocol' // etcd answered something we cannot read
  | 'aborted'; // the caller's signal fired

export class EtcdError extends Error {
  override readonly name = 'EtcdError';
  readonly kind: EtcdErrorKind;
  /** HTTP status, when etcd answered. */
  readonly status?: number;
  /** gRPC status code from the gateway's error body, when present. */
  readonly grpcCode?: number;
  constructor(message: string, kind: EtcdErrorKind, extra: { status?: number; grpcCode?: number } = {}) {
    super(message);
    this.kind = kind;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.grpcCode !== undefined) this.grpcCode = extra.grpcCode;
  }
}

export interface EtcdKv {
  key: string;
  /** UTF-8 decoded value (`''` for an empty value, and for delete events). */
  value: string;
  modRevision: number;
  createRevision: number;
  version: number;
  /** Set when the key or value was not valid UTF-8 (decoded lossily with U+FFFD). */
  invalidUtf8?: true;
}

export interface EtcdRangeResult {
  /** Store revision at which the range was served. */
  revision: number;
  kvs: EtcdKv[];
}

/** A paged range's rows are handed this many at a time, each piece decoded (base64, UTF-8) as it is handed. */
export const DECODED_KVS = 512;

/**
 * A range read in pages, every page at the revision of the first (one consistent read that is never one
 * response: a prefix of a million keys is hundreds of MB as one JSON body).
 */
export interface EtcdPagedRange {
  /** Store revision the range is read at (the first page's). */
  revision: number;
  /**
   * The pages in key order, each in pieces of at most `DECODED_KVS` rows; iterate once. A page that fails (e.g.
   * compacted meanwhile) throws.
   */
  pages: AsyncIterable<EtcdKv[]>;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

/** An open streaming response (watch). `close()` aborts it and releases listeners; idempotent. */
export interface EtcdStream {
  response: Response;
  endpoint: string;
  close(): void;
}

// ---------------------------------------------------------------------------------------------------
// Codecs (pure)

const utf8Encoder = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });
const utf8Lossy = new TextDecoder('utf-8');

export function encodeUtf8(s: string): Uint8Array {
  return utf8Encoder.encode(s);
}

/** Decodes UTF-8; `lossy` is true when the bytes were not valid UTF-8. */
export function decodeUtf8(bytes: Uint8Array): { text: string; lossy: boolean } {
  try {
    return { text: utf8Strict.decode(bytes), lossy: false };
  } catch {
    return { text: utf8Lossy.decode(bytes), lossy: true };
  }
}

/** etcd's base64, or the protocol error it is. */
function etcdBase64(b64: string): Uint8Array {
  try {
    return base64Decode(b64);
  } catch {
    throw new EtcdError('etcd returned invalid base64', 'protocol');
  }
}

/** etcd's prefix range end: the prefix with its last byte incremented (trailing 0xff bytes dropped). */
export function prefixRangeEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice();
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.slice(0, i + 1);
    }
  }
  // Empty prefix or all 0xff: "every key from `key` onwards".
  return new Uint8Array([0]);
}

/** The `key`/`range_end` pair selecting every key under `prefix`. */
export function prefixRange(prefix: string): { key: string; range_end: string } {
  const bytes = encodeUtf8(prefix);
  const key = bytes.length === 0 ? new Uint8Array([0]) : bytes;
  return { key: base64Encode(key), range_end: base64Encode(prefixRangeEnd(bytes)) };
}

/**
 * A 64-bit integer from the gateway (a JSON string, occasionally a number; absent means 0). Revisions
 * are plain numbers in this codebase: a value beyond 2^53 would need ~9e15 writes, so we reject it
 * rather than carry bigints everywhere.
 */
export function parseInt64(v: unknown, field: string): number {
  if (v === undefined || v === null) return 0;
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : typeof v === 'number' ? v : NaN;
  if (!Number.isSafeInteger(n)) throw new EtcdError(`etcd returned a bad ${field}`, 'protocol');
  return n;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A character of `atob`'s string (one per byte) that is not ASCII. */
const NOT_ASCII = /[\x80-\xff]/;

/**
 * etcd's base64 of a UTF-8 text, decoded (`lossy`: the bytes were not UTF-8). `atob` gives a character per byte:
 * when every byte is below 0x80 (keys and most values), that is the text, without the bytes or a decoder.
 */
function etcdText(b64: string): { text: string; lossy: boolean } {
  let bin: string;
  try {
    bin = atob(b64);
  } catch {
    throw new EtcdError('etcd returned invalid base64', 'protocol');
  }
  if (!NOT_ASCII.test(bin)) return { text: bin, lossy: false };
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return decodeUtf8(bytes);
}

/** Decodes one gateway `mvccpb.KeyValue`. */
export function decodeKv(raw: unknown): EtcdKv {
  if (!isRecord(raw) || typeof raw.key !== 'string') {
    throw new EtcdError('etcd returned a kv without a key', 'protocol');
  }
  const key = etcdText(raw.key);
  const value = typeof raw.value === 'string' && raw.value !== '' ? etcdText(raw.value) : { text: '', lossy: false };
  const kv: EtcdKv = {
    key: key.text,
    value: value.text,
    modRevision: parseInt64(raw.mod_revision, 'mod_revision'),
    createRevision: parseInt64(raw.create_revision, 'create_revision'),
    version: parseInt64(raw.version, 'version'),
  };
  if (key.lossy || value.lossy) kv.invalidUtf8 = true;
  return kv;
}

export function headerRevision(body: unknown): number {
  const header = isRecord(body) ? body.header : undefined;
  return parseInt64(isRecord(header) ? header.revision : undefined, 'header.revision');
}

/** Reads `{error|message, code}` (unary) or `{error:{message, grpc_code}}` (stream) error bodies. */
export function gatewayError(body: unknown): { message: string; code?: number } | undefined {
  if (!isRecord(body)) return undefined;
  const err = body.error;
  if (isRecord(err)) {
    const message = typeof err.message === 'string' ? err.message : 'unknown error';
    return typeof err.grpc_code === 'number' ? { message, code: err.grpc_code } : { message };
  }
  if (typeof err === 'string' || typeof body.message === 'string') {
    const message = typeof body.message === 'string' ? body.message : String(err);
    return typeof body.code === 'number' ? { message, code: body.code } : { message };
  }
  return undefined;
}

const AUTH_TOKEN_TROUBLE = /invalid auth token|auth store is old|token.*expired|Unauthenticated/i;

/** True when a request failed because its token is missing, expired or unknown: re-authenticate. */
export function isTokenError(status: number | undefined, code: number | undefined, message: string): boolean {
  return status === 401 || code === 16 || AUTH_TOKEN_TROUBLE.test(message);
}

// ---------------------------------------------------------------------------------------------------
// Signals and timers (web standard only)

/** Makes `child` abort when `parent` does. Returns the unlink function. */
export function linkAbort(parent: AbortSignal | undefined, child: AbortController): () => void {
  if (!parent) return () => {};
  if (parent.aborted) {
    child.abort();
    return () => {};
  }
  const onAbort = (): void => child.abort();
  parent.addEventListener('abort', onAbort, { once: true });
  return () => parent.removeEventListener('abort', onAbort);
}

export function abortedError(): EtcdError {
  return new EtcdError('etcd request aborted', 'aborted');
}

function describeFetchError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let msg = err.message || err.name;
  const cause: unknown = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    const detail = cause.message || (typeof code === 'string' ? code : '') || cause.name;
    if (detail && !msg.includes(detail)) msg += `: ${detail}`;
  }
  return msg;
}

/** Drops userinfo from an endpoint URL for messages. */
function displayEndpoint(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `${u.protocol}//${u.host}`;
  } catch {
    return endpoint;
  }
}

export function normalizeEndpoint(endpoint: string, tls = false): string {
  const trimmed = endpoint.trim().replace(/\/+$/, '');
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `${tls ? 'https' : 'http'}://${trimmed}`;
}

// ---------------------------------------------------------------------------------------------------
// Client

interface Exchange {
  status: number;
  body: unknown;
  endpoint: string;
}

type AttemptResult =
  | { ok: true; status: number; body: unknown; stream?: EtcdStream }
  // `failover` errors try the next endpoint; others are final.
  | { ok: false; error: EtcdError; failover: boolean };

export class EtcdClient {
  readonly endpoints: readonly string[];
  readonly dialTimeoutMs: number;
  readonly requestTimeoutMs: number;
  private readonly fetchFn: EtcdFetch;
  private readonly user: string | undefined;
  private readonly password: string | undefined;
  /** Index of the endpoint that answered last; attempts start there. */
  private current = 0;
  /** `''` = the server does not need a token (auth not enabled). */
  private token: Promise<string> | undefined;
  /** Every token ever received, for redaction. */
  private readonly secrets = new Set<string>();

  constructor(opts: EtcdClientOptions) {
    if (opts.endpoints.length === 0) throw new EtcdError('etcd: no endpoints configured', 'transport');
    this.endpoints = opts.endpoints.map((e) => normalizeEndpoint(e, opts.tls));
    this.fetchFn = opts.fetch ?? ((url, init) => fetch(url, init));
    this.user = opts.user || undefined;
    this.password = opts.password;
    if (opts.password) this.secrets.add(opts.password);
    this.dialTimeoutMs = opts.dialTimeoutMs ?? 5000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 5000;
  }

  /** Replaces any secret this client knows with `***`. */
  redact(message: string): string {
    let out = message;
    for (const s of this.secrets) if (s) out = out.split(s).join('***');
    return out;
  }

  /** Every key under `prefix` (one consistent read), with the store revision it was read at. */
  async range(prefix: string, opts: RequestOptions = {}): Promise<EtcdRangeResult> {
    const body = await this.unary('/v3/kv/range', prefixRange(prefix), opts.signal);
    const kvs = isRecord(body) && Array.isArray(body.kvs) ? body.kvs.map(decodeKv) : [];
    return { revision: headerRevision(body), kvs };
  }

  /**
   * Every key under `prefix`, at most `limit` keys per request: the first page is read before this resolves (its
   * revision pins the others), the rest as `pages` is iterated, each request planned from the answers so far
   * (range-plan.ts bounds what each one makes etcd walk) and asked for one page ahead.
   */
  async rangePaged(prefix: string, opts: RequestOptions & { limit: number }): Promise<EtcdPagedRange> {
    const whole = prefixRange(prefix);
    const plan = new RangePlan(etcdBase64(whole.key), etcdBase64(whole.range_end), opts.limit);
    const limit = String(opts.limit);
    const ask = (client: EtcdClient, a: RangeAsk, revision?: number) => {
      const req = { key: base64Encode(a.key), range_end: base64Encode(a.end), limit };
      return client.unary(
        '/v3/kv/range',
        revision === undefined ? req : { ...req, revision: String(revision) },
        opts.signal,
      );
    };
    const firstAsk = plan.first();
    const first = await ask(this, firstAsk);
    const revision = headerRevision(first);
    const read = (a: RangeAsk, body: unknown) => {
      const raw: unknown[] = isRecord(body) && Array.isArray(body.kvs) ? body.kvs : [];
      const keyBytes = (i: number) => {
        const kv = raw[i];
        return etcdBase64(isRecord(kv) && typeof kv.key === 'string' ? kv.key : decodeKv(kv).key); // throws
      };
      const sample: Uint8Array[] = [];
      for (let i = 0; i < raw.length; i += SAMPLE_EVERY) sample.push(keyBytes(i));
      if (raw.length > 1) sample.push(keyBytes(raw.length - 1));
      const next = plan.next(a, {
        n: raw.length,
        ...(raw.length > 0 ? { last: sample[sample.length - 1]! } : {}),
        sample,
        count: parseInt64(isRecord(body) ? body.count : undefined, 'count'),
        more: isRecord(body) && body.more === true,
      });
      return { raw, next };
    };
    const fetchNext = async (client: EtcdClient, a: RangeAsk) => read(a, await ask(client, a, revision));
    // The next page is asked for while the caller judges this one, so etcd's work and the caller's overlap.
    const pages = async function* (client: EtcdClient): AsyncGenerator<EtcdKv[]> {
      let page = read(firstAsk, first);
      let handed = false;
      for (;;) {
        const next = page.next === undefined ? undefined : fetchNext(client, page.next);
        next?.catch(() => {}); // a caller that stops early never awaits it
        if (page.raw.length > 0 || !handed) {
          handed = true;
          // Decoded a piece at a time: the caller paces between rows, and a whole page's decode held the loop.
          if (page.raw.length === 0) yield [];
          for (let i = 0; i < page.raw.length; i += DECODED_KVS) {
            yield page.raw.slice(i, i + DECODED_KVS).map(decodeKv); // checks every kv has a key
          }
        }
        if (next === undefined) return;
        page = await next;
      }
    };
    return { revision, pages: pages(this) };
  }

  async put(key: string, value: string | Uint8Array, opts: RequestOptions = {}): Promise<{ revision: number }> {
    const bytes = typeof value === 'string' ? encodeUtf8(value) : value;
    const body = await this.unary(
      '/v3/kv/put',
      { key: base64Encode(encodeUtf8(key)), value: base64Encode(bytes) },
      opts.signal,
    );
    return { revision: headerRevision(body) };
  }

  /** Deletes `key`, or every key under it with `prefix: true`. */
  async delete(
    key: string,
    opts: RequestOptions & { prefix?: boolean } = {},
  ): Promise<{ revision: number; deleted: number }> {
    const req = opts.prefix ? prefixRange(key) : { key: base64Encode(encodeUtf8(key)) };
    const body = await this.unary('/v3/kv/deleterange', req, opts.signal);
    return {
      revision: headerRevision(body),
      deleted: parseInt64(isRecord(body) ? body.deleted : undefined, 'deleted'),
    };
  }

  /** Compacts the key-value history up to `revision` (tests, maintenance). */
  async compact(revision: number, opts: RequestOptions & { physical?: boolean } = {}): Promise<void> {
    await this.unary(
      '/v3/kv/compaction',
      { revision: String(revision), physical: opts.physical ?? false },
      opts.signal,
    );
  }

  /**
   * A cheap liveness check: POST /v3/maintenance/status (no token needed, no key read) on `endpoint`, or on
   * any endpoint when none is given, bounded by `timeoutMs`. Resolves with the first endpoint that answers
   * (a 200 must name a leader; 502/503/504 do not count); throws `EtcdError` otherwise. Used to notice a
   * stalled connection under a watch and to learn, between reconnect attempts, that etcd is back
   * (supervisor.ts).
   */
  async ping(opts: { endpoint?: string; timeoutMs: number; signal?: AbortSignal }): Promise<string> {
    const endpoints = opts.endpoint !== undefined ? [opts.endpoint] : this.endpoints;
    const failures: string[] = [];
    let kind: EtcdErrorKind = 'transport';
    for (const endpoint of endpoints) {
      if (opts.signal?.aborted) throw abortedError();
      const where = displayEndpoint(endpoint);
      const ctrl = new AbortController();
      const unlink = linkAbort(opts.signal, ctrl);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        ctrl.abort();
      }, opts.timeoutMs);
      try {
        const res = await this.fetchFn(`${endpoint}/v3/maintenance/status`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
          signal: ctrl.signal,
          redirect: 'manual',
        });
        const text = await res.text();
        if (isRedirect(res.status)) {
          failures.push(`${where}: HTTP ${res.status}, a redirect (never followed)`);
          kind = 'server';
          continue;
        }
        let leader: unknown;
        try {
          const body: unknown = JSON.parse(text);
          leader = isRecord(body) ? body.leader : undefined;
        } catch {
          // not JSON: a proxy's page, not etcd
        }
        // 200 without a leader, or a proxy's "unavailable": not usable. Any other answer proves the path
        // (a front proxy that does not expose the maintenance API answers 404: that is still an answer).
        const noLeader = res.status === 200 && (leader === undefined || leader === '0' || leader === 0);
        if (!noLeader && res.status !== 502 && res.status !== 503 && res.status !== 504) return endpoint;
        failures.push(noLeader ? `${where}: no leader` : `${where}: HTTP ${res.status}`);
        kind = 'server';
      } catch (err) {
        if (opts.signal?.aborted) throw abortedError();
        failures.push(
          timedOut
            ? `${where}: no answer within ${opts.timeoutMs} ms`
            : this.redact(`${where}: ${describeFetchError(err)}`),
        );
        kind = timedOut ? 'timeout' : 'transport';
      } finally {
        clearTimeout(timer);
        unlink();
      }
    }
    throw new EtcdError(this.redact(`etcd status: ${failures.join('; ')}`), kind);
  }

  /** Forgets the current token (e.g. a watch was refused with "invalid auth token"). */
  invalidateToken(): void {
    this.token = undefined;
  }

  /** Any gateway call answered with JSON, with auth and endpoint failover. */
  async unary(path: string, req: unknown, signal?: AbortSignal): Promise<unknown> {
    const ex = await this.withAuth(path, req, signal, false);
    return ex.body;
  }

  /**
   * Opens a streaming call (POST `path`) and returns once the response headers (status 200) arrived.
   * The caller reads `response.body` and must call `close()` when done.
   */
  async openStream(path: string, req: unknown, signal?: AbortSignal): Promise<EtcdStream> {
    const ex = await this.withAuth(path, req, signal, true);
    if (!ex.stream) throw new EtcdError(`etcd ${path}: no stream`, 'protocol');
    return ex.stream;
  }

  // -- internals --------------------------------------------------------------------------------------

  private async withAuth(
    path: string,
    req: unknown,
    signal: AbortSignal | undefined,
    stream: boolean,
  ): Promise<Exchange & { stream?: EtcdStream }> {
    for (let attempt = 0;; attempt++) {
      const token = await this.getToken(signal);
      const res = await this.exchange(path, req, token, signal, stream);
      if (res.status === 200) return res;
      const err = gatewayError(res.body);
      const message = err?.message ?? `HTTP ${res.status}`;
      if (this.user && attempt === 0 && isTokenError(res.status, err?.code, message)) {
        this.invalidateToken();
        continue;
      }
      const kind = res.status === 401 || err?.code === 16 || err?.code === 7 ? 'auth' : 'server';
      throw new EtcdError(
        this.redact(
          `etcd ${path} on ${displayEndpoint(res.endpoint)}: ${message} (HTTP ${res.status}${
            err?.code !== undefined ? `, code ${err.code}` : ''
          })`,
        ),
        kind,
        err?.code !== undefined ? { status: res.status, grpcCode: err.code } : { status: res.status },
      );
    }
  }

  /** The token to send, authenticating first when needed; `''` when no auth is configured or needed. */
  private getToken(signal: AbortSignal | undefined): Promise<string> {
    if (!this.user) return Promise.resolve('');
    if (!this.token) {
      const p = this.authenticate(signal);
      this.token = p;
      // A failed authentication must not be cached.
      p.catch(() => {
        if (this.token === p) this.token = undefined;
      });
    }
    return this.token;
  }

  private async authenticate(signal: AbortSignal | undefined): Promise<string> {
    const res = await this.exchange(
      '/v3/auth/authenticate',
      { name: this.user, password: this.password ?? '' },
      '',
      signal,
      false,
    );
    if (res.status === 200 && isRecord(res.body) && typeof res.body.token === 'string') {
      this.secrets.add(res.body.token);
      return res.body.token;
    }
    const err = gatewayError(res.body);
    const message = err?.message ?? `HTTP ${res.status}`;
    // Like clientv3: credentials configured against a server without auth are not an error.
    if (/authentication is not enabled/i.test(message)) return '';
    throw new EtcdError(
      this.redact(`etcd authentication as user "${this.user}" on ${displayEndpoint(res.endpoint)} failed: ${message}`),
      'auth',
      err?.code !== undefined ? { status: res.status, grpcCode: err.code } : { status: res.status },
    );
  }

  /** One call, trying each endpoint (starting with the last good one) on transport failure. */
  private async exchange(
    path: string,
    req: unknown,
    token: string,
    signal: AbortSignal | undefined,
    stream: boolean,
  ): Promise<Exchange & { stream?: EtcdStream }> {
    const payload = JSON.stringify(req);
    const failures: string[] = [];
    let last: EtcdError | undefined;
    for (let i = 0; i < this.endpoints.length; i++) {
      const idx = (this.current + i) % this.endpoints.length;
      const endpoint = this.endpoints[idx]!;
      const r = await this.attempt(endpoint, path, payload, token, signal, stream);
      if (r.ok) {
        this.current = idx;
        return r.stream
          ? { status: r.status, body: r.body, endpoint, stream: r.stream }
          : { status: r.status, body: r.body, endpoint };
      }
      if (!r.failover) throw r.error;
      failures.push(r.error.message);
      last = r.error;
    }
    const summary = this.endpoints.length === 1 ? failures[0] : `every endpoint failed: ${failures.join('; ')}`;
    // The last endpoint's kind and status, so the supervisor can tell "unreachable" (502/503/504) apart.
    throw new EtcdError(this.redact(`etcd ${path}: ${summary}`), last?.kind ?? 'transport', {
      ...(last?.status !== undefined ? { status: last.status } : {}),
      ...(last?.grpcCode !== undefined ? { grpcCode: last.grpcCode } : {}),
    });
  }

  /**
   * One request to one endpoint under the dial timeout (until the response head) and, for non-stream
   * requests, the request timeout (until the body is read). A stream's answer is handed over open; its
   * `close` releases it. Unreachable-looking answers (502/503/504, gRPC UNAVAILABLE) fail over.
   */
  private async attempt(
    endpoint: string,
    path: string,
    payload: string,
    token: string,
    signal: AbortSignal | undefined,
    stream: boolean,
  ): Promise<AttemptResult> {
    if (signal?.aborted) return { ok: false, error: abortedError(), failover: false };
    const where = displayEndpoint(endpoint);
    const ctrl = new AbortController();
    const unlink = linkAbort(signal, ctrl);
    const deadlines = new AttemptDeadlines(ctrl, this.dialTimeoutMs, stream ? undefined : this.requestTimeoutMs);
    const fail = (err: unknown): AttemptResult => {
      if (signal?.aborted) return { ok: false, error: abortedError(), failover: false };
      return { ok: false, error: deadlines.failure(where, err, (m) => this.redact(m)), failover: true };
    };
    let keepOpen = false;
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = token;
      let res: Response;
      try {
        res = await this.fetchFn(`${endpoint}${path}`, {
          method: 'POST',
          headers,
          body: payload,
          signal: ctrl.signal,
          redirect: 'manual',
        });
      } catch (err) {
        return fail(err);
      }
      deadlines.headReceived();
      if (isRedirect(res.status)) {
        await res.body?.cancel().catch(() => {});
        const msg = `${where}: answered HTTP ${res.status}, a redirect; the etcd client follows none`;
        return { ok: false, error: new EtcdError(this.redact(msg), 'server', { status: res.status }), failover: true };
      }
      if (stream && res.status === 200 && res.body) {
        keepOpen = true;
        let closed = false;
        const close = (): void => {
          if (closed) return;
          closed = true;
          unlink();
          ctrl.abort();
        };
        return { ok: true, status: 200, body: undefined, stream: { response: res, endpoint, close } };
      }
      let text: string;
      try {
        text = await res.text();
      } catch (err) {
        return fail(err);
      }
      return this.answer(where, res.status, text);
    } finally {
      deadlines.clear();
      if (!keepOpen) unlink();
    }
  }

  /** A whole answer: its JSON body, or a failover when it says the member cannot serve now. */
  private answer(where: string, status: number, text: string): AttemptResult {
    let body: unknown;
    try {
      body = text === '' ? {} : JSON.parse(text);
    } catch {
      body = { message: `non-JSON response: ${text.slice(0, 200)}` };
    }
    // Proxies in front of etcd and "no leader"-style unavailability: another member may do better.
    const code = gatewayError(body)?.code;
    if (status === 502 || status === 503 || status === 504 || code === 14) {
      const msg = gatewayError(body)?.message ?? `HTTP ${status}`;
      return {
        ok: false,
        error: new EtcdError(
          this.redact(`${where}: ${msg}`),
          'server',
          code !== undefined ? { status, grpcCode: code } : { status },
        ),
        failover: true,
      };
    }
    return { ok: true, status, body };
  }
}

/**
 * One attempt's deadlines, both aborting `ctrl`: the dial timeout until the response head arrives, and the
 * request timeout (absent for streams) until the answer has been read. `failure` names the one that fired.
 */
class AttemptDeadlines {
  private fired: 'dial' | 'request' | undefined;
  private readonly dialTimer: ReturnType<typeof setTimeout>;
  private readonly requestTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(ctrl: AbortController, private readonly dialMs: number, private readonly requestMs: number | undefined) {
    this.dialTimer = setTimeout(() => {
      this.fired = 'dial';
      ctrl.abort();
    }, dialMs);
    this.requestTimer = requestMs === undefined ? undefined : setTimeout(() => {
      this.fired ??= 'request';
      ctrl.abort();
    }, requestMs);
  }

  headReceived(): void {
    clearTimeout(this.dialTimer);
  }

  clear(): void {
    clearTimeout(this.dialTimer);
    if (this.requestTimer !== undefined) clearTimeout(this.requestTimer);
  }

  /** The error for a fetch or body read that failed: a deadline's when one fired, else the transport's. */
  failure(where: string, err: unknown, redact: (message: string) => string): EtcdError {
    if (this.fired === 'dial') {
      return new EtcdError(`${where}: no response within dial timeout ${this.dialMs} ms`, 'timeout');
    }
    if (this.fired === 'request') {
      return new EtcdError(`${where}: request timeout ${this.requestMs} ms exceeded`, 'timeout');
    }
    return new EtcdError(redact(`${where}: ${describeFetchError(err)}`), 'transport');
  }
}
