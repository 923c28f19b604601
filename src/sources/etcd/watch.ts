// A watch on a key prefix over the etcd v3 JSON gateway (docs/etcd.md "How it reads"): POST /v3/watch, then
// a stream of JSON objects, cut at each top-level object (`JsonObjectSplitter`), not at newlines.
// An idle watchdog re-opens a silent watch from the last fully delivered revision + 1, and no event is lost
// or repeated: an events message carries whole revisions, a progress notification is only sent to a synced
// watcher, and the `created` header revision is never trusted (an unsynced watcher may be catching up).
// The watchdog also bounds the wait for `created`. A keep-alive to the watch's endpoint ends a stalled
// path as a `timeout`; a compacted start revision yields `compacted` and the caller does a full range.
import {
  abortedError,
  decodeKv,
  EtcdClient,
  EtcdError,
  type EtcdKv,
  gatewayError,
  headerRevision,
  isTokenError,
  linkAbort,
  parseInt64,
  prefixRange,
} from './client.ts';

export interface WatchEvent extends EtcdKv {
  type: 'put' | 'delete';
}

export type WatchMessage =
  /** A watch stream was created (also after each idle re-watch). */
  | { type: 'created'; startRevision: number; headerRevision: number }
  /** Events of one or more whole revisions; `revision` is the last event's mod_revision. */
  | { type: 'events'; revision: number; events: WatchEvent[] }
  /** A progress notification: every change up to `revision` has been delivered. */
  | { type: 'progress'; revision: number }
  /** The idle watchdog fired; a new watch starts at `fromRevision` (no resync needed). */
  | { type: 'rewatch'; fromRevision: number; reason: 'idle' }
  /** History before `compactRevision` is gone: do a full range. The generator ends after this. */
  | { type: 'compacted'; compactRevision: number };

export interface WatchOptions {
  prefix: string;
  /** First revision to deliver (range revision + 1). */
  startRevision: number;
  /** Re-watch after this long without a byte from etcd. Default 120_000. */
  idleTimeoutMs?: number;
  /** Fail when `created` does not arrive within this. Default: the client's request timeout. */
  createTimeoutMs?: number;
  /** Interval of the keep-alive status call once the watch is created; 0 = none. Default 5000. */
  keepAliveMs?: number;
  /** Bound on one keep-alive call. Default 5000. */
  keepAliveTimeoutMs?: number;
  signal?: AbortSignal;
}

export const DEFAULT_IDLE_TIMEOUT_MS = 120_000;
export const DEFAULT_KEEPALIVE_MS = 5000;
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 5000;

/** Splits a stream of text into top-level JSON object texts. Pure. */
export class JsonObjectSplitter {
  private buf = '';
  private pos = 0; // next char of buf to scan
  private start = -1; // start of the object being scanned, -1 between objects
  private depth = 0;
  private inString = false;
  private escaped = false;

  push(text: string): string[] {
    this.buf += text;
    const out: string[] = [];
    const buf = this.buf;
    for (let i = this.pos; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c /* \ */) this.escaped = true;
        else if (c === 0x22 /* " */) this.inString = false;
        continue;
      }
      if (c === 0x22) {
        if (this.depth === 0) throw new EtcdError('etcd watch stream: unexpected data between objects', 'protocol');
        this.inString = true;
      } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
        if (this.depth === 0) {
          if (c === 0x5b) throw new EtcdError('etcd watch stream: unexpected data between objects', 'protocol');
          this.start = i;
        }
        this.depth++;
      } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
        if (this.depth === 0) throw new EtcdError('etcd watch stream: unbalanced JSON', 'protocol');
        this.depth--;
        if (this.depth === 0) {
          out.push(buf.slice(this.start, i + 1));
          this.start = -1;
        }
      } else if (this.depth === 0 && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) {
        throw new EtcdError('etcd watch stream: unexpected data between objects', 'protocol');
      }
    }
    if (this.start === -1) {
      this.buf = '';
      this.pos = 0;
    } else {
      this.buf = buf.slice(this.start);
      this.pos = this.buf.length;
      this.start = 0;
    }
    return out;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function decodeEvent(raw: unknown): WatchEvent {
  if (!isRecord(raw)) throw new EtcdError('etcd watch stream: malformed event', 'protocol');
  // PUT is enum value 0, so the gateway usually omits it.
  const t = raw.type;
  let type: WatchEvent['type'];
  if (t === undefined || t === 'PUT' || t === 0) type = 'put';
  else if (t === 'DELETE' || t === 1) type = 'delete';
  else throw new EtcdError(`etcd watch stream: unknown event type ${JSON.stringify(t)}`, 'protocol');
  return { type, ...decodeKv(raw.kv) };
}

/** What one parsed stream object means. Pure. */
export type WatchResponse =
  | { kind: 'created'; headerRevision: number }
  | { kind: 'events'; events: WatchEvent[] }
  | { kind: 'progress'; revision: number }
  | { kind: 'compacted'; compactRevision: number }
  | { kind: 'canceled'; reason: string; created: boolean }
  | { kind: 'error'; message: string; code?: number };

export function interpretWatchResponse(obj: unknown): WatchResponse {
  const err = isRecord(obj) && !('result' in obj) ? gatewayError(obj) : undefined;
  if (err) {
    return err.code !== undefined
      ? { kind: 'error', message: err.message, code: err.code }
      : { kind: 'error', message: err.message };
  }
  const r = isRecord(obj) ? obj.result : undefined;
  if (!isRecord(r)) throw new EtcdError('etcd watch stream: object without result', 'protocol');
  const compactRevision = parseInt64(r.compact_revision, 'compact_revision');
  const reason = typeof r.cancel_reason === 'string' ? r.cancel_reason : '';
  if (compactRevision > 0 || (r.canceled === true && /compacted/i.test(reason))) {
    return { kind: 'compacted', compactRevision };
  }
  if (r.canceled === true) {
    return { kind: 'canceled', reason: reason || 'no reason given', created: r.created === true };
  }
  if (r.created === true) return { kind: 'created', headerRevision: headerRevision(r) };
  const events = Array.isArray(r.events) ? r.events : [];
  if (events.length > 0) return { kind: 'events', events: events.map(decodeEvent) };
  return { kind: 'progress', revision: headerRevision(r) };
}

/**
 * One watch session's clocks and how it ended. The watchdog aborts the session when the watch is not created
 * within `createMs`, and afterwards after `idleMs` without a byte; the keep-alive asks the session's own
 * endpoint for its status every `keepAliveMs` once the watch is created, and aborts the session when no
 * answer comes (a TCP path that stalls without a reset). `ending(err)` turns whatever ended the read into
 * what the watch does next: re-watch after an idle period, or fail with the reason that matters.
 */
class WatchSession {
  private readonly controller = new AbortController();
  private readonly unlink: () => void;
  private created = false;
  private idleFired = false;
  /** Set when the keep-alive failed: the reason the session was aborted. */
  private stalled: EtcdError | undefined;
  private watchdog: ReturnType<typeof setTimeout> | undefined;
  private keepAliveTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly client: EtcdClient,
    private readonly t: { idleMs: number; createMs: number; keepAliveMs: number; keepAliveTimeoutMs: number },
    parent: AbortSignal | undefined,
  ) {
    this.unlink = linkAbort(parent, this.controller);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** (Re)start the watchdog: the stream is open, or a byte arrived. */
  arm(): void {
    if (this.watchdog !== undefined) clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      this.idleFired = true;
      this.controller.abort();
    }, this.created ? this.t.idleMs : this.t.createMs);
  }

  /** The watch was created on `endpoint`: the idle timeout applies from now on, and the keep-alive starts. */
  onCreated(endpoint: string): void {
    this.created = true;
    this.arm();
    this.keepAlive(endpoint);
  }

  /** Why the session ended, given what its read threw: re-watch (an idle watch) or the error to raise. */
  ending(err: unknown): 'rewatch' | EtcdError {
    const redact = (m: string) => this.client.redact(m);
    if (this.stalled) {
      return new EtcdError(
        redact(`etcd watch connection considered lost: keep-alive failed: ${this.stalled.message}`),
        'timeout',
      );
    }
    if (this.idleFired && this.created) return 'rewatch';
    if (this.idleFired) return new EtcdError(`etcd watch: not created within ${this.t.createMs} ms`, 'timeout');
    if (err instanceof EtcdError) return err;
    return new EtcdError(
      redact(`etcd watch stream failed: ${err instanceof Error ? err.message : String(err)}`),
      'transport',
    );
  }

  dispose(): void {
    if (this.watchdog !== undefined) clearTimeout(this.watchdog);
    if (this.keepAliveTimer !== undefined) clearTimeout(this.keepAliveTimer);
    this.unlink();
    this.controller.abort();
  }

  private keepAlive(endpoint: string): void {
    if (this.t.keepAliveMs <= 0 || this.signal.aborted) return;
    this.keepAliveTimer = setTimeout(() => {
      this.client.ping({ endpoint, timeoutMs: this.t.keepAliveTimeoutMs, signal: this.signal }).then(
        () => this.keepAlive(endpoint),
        (err: unknown) => {
          if (this.signal.aborted) return;
          this.stalled = err instanceof EtcdError ? err : new EtcdError(String(err), 'transport');
          this.controller.abort();
        },
      );
    }, this.t.keepAliveMs);
  }
}

/**
 * Watches every key under `prefix` from `startRevision`, re-watching transparently after idle periods.
 * Ends after yielding `compacted`; throws `EtcdError` on any other failure (or `aborted` on `signal`).
 */
export async function* watchPrefix(
  client: EtcdClient,
  opts: WatchOptions,
): AsyncGenerator<WatchMessage, void, undefined> {
  const timing = {
    idleMs: opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    createMs: opts.createTimeoutMs ?? client.requestTimeoutMs,
    keepAliveMs: opts.keepAliveMs ?? DEFAULT_KEEPALIVE_MS,
    keepAliveTimeoutMs: opts.keepAliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS,
  };
  /** First revision not yet fully delivered. */
  let next = opts.startRevision;
  let authRetried = false;
  const range = prefixRange(opts.prefix);

  sessions: for (;;) {
    if (opts.signal?.aborted) throw abortedError();
    const session = new WatchSession(client, timing, opts.signal);
    let close: (() => void) | undefined;
    try {
      const body = { create_request: { ...range, start_revision: String(next), progress_notify: true } };
      const stream = await client.openStream('/v3/watch', body, session.signal);
      close = stream.close;
      const reader = stream.response.body!.getReader(); // non-null: openStream only returns streams with a body
      session.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
      session.arm();
      const decoder = new TextDecoder();
      const splitter = new JsonObjectSplitter();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          throw new EtcdError(
            `etcd watch stream from ${stream.endpoint.replace(/\/\/[^@/]*@/, '//')} ended`,
            'transport',
          );
        }
        session.arm();
        for (const text of splitter.push(decoder.decode(value, { stream: true }))) {
          const r = interpretWatchResponse(parseStreamObject(text));
          switch (r.kind) {
            case 'created':
              authRetried = false;
              session.onCreated(stream.endpoint);
              yield { type: 'created', startRevision: next, headerRevision: r.headerRevision };
              break;
            case 'events': {
              const revision = r.events[r.events.length - 1]!.modRevision;
              if (revision >= next) next = revision + 1;
              yield { type: 'events', revision, events: r.events };
              break;
            }
            case 'progress':
              if (r.revision >= next) next = r.revision + 1;
              yield { type: 'progress', revision: r.revision };
              break;
            case 'compacted':
              yield { type: 'compacted', compactRevision: r.compactRevision };
              return;
            case 'canceled':
              if (isTokenError(undefined, undefined, r.reason)) {
                client.invalidateToken();
                if (!authRetried) {
                  authRetried = true;
                  continue sessions;
                }
              }
              throw watchEnded(client, r);
            case 'error':
              throw watchEnded(client, r);
          }
        }
      }
    } catch (err) {
      if (opts.signal?.aborted) throw abortedError();
      const why = session.ending(err);
      if (why !== 'rewatch') throw why;
      yield { type: 'rewatch', fromRevision: next, reason: 'idle' };
    } finally {
      session.dispose();
      close?.();
    }
  }
}

/** The error a `canceled` (a token error: `auth`) or `error` response ends the watch with, redacted. */
function watchEnded(
  client: EtcdClient,
  r: Extract<WatchResponse, { kind: 'canceled' | 'error' }>,
): EtcdError {
  if (r.kind === 'canceled') {
    const kind = isTokenError(undefined, undefined, r.reason) ? 'auth' : 'server';
    return new EtcdError(client.redact(`etcd watch canceled: ${r.reason}`), kind);
  }
  return new EtcdError(
    client.redact(`etcd watch failed: ${r.message}`),
    'server',
    r.code !== undefined ? { grpcCode: r.code } : {},
  );
}

/** One object of the watch stream, parsed; anything that is not JSON is a protocol error. */
function parseStreamObject(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new EtcdError('etcd watch stream: invalid JSON', 'protocol');
  }
}
