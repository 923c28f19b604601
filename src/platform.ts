// The contract a runtime gives the core (docs/architecture.md "Who owns which question"): nothing else
// crosses the line between `src/` (identical on every runtime) and `runtimes/<platform>.ts`.
import type { CancelSignal } from './util/cancel.ts';
import type { Sha256Stream } from './util/crypto.ts';

export type { Sha256Stream };

/** What the core knows about the downstream connection a request arrived on. */
export interface ConnInfo {
  /** Remote `address:port` of the downstream connection, when the runtime can tell. */
  peer?: string;
  /** `1.1` or `2`, when the runtime can tell. */
  httpVersion?: string;
  /**
   * Aborted when the caller goes away before its response has been written. A listener gives this instead
   * of the core reading `request.signal` (on @hono/node-server that allocates an AbortController per
   * request); without it the core follows `request.signal`.
   */
  closed?: CancelSignal;
  /**
   * Accept this request as a WebSocket (docs/realtime.md "Runtimes"), selecting `protocol` when given. Called at
   * most once, as the handler's last step: the listener then answers the upgrade itself and ignores the
   * handler's `Response` (return `response`). Absent where the runtime cannot accept an upgrade.
   */
  upgradeWebSocket?(protocol: string | undefined): WebSocketUpgrade;
}

/** A WebSocket message: text as a string, binary as bytes. */
export type WsFrame = string | Uint8Array;

/** What a `RelaySocket` tells its one listener. */
export interface WsHandlers {
  message(frame: WsFrame): void;
  /** The close handshake ended or the connection dropped (`code` 1006 then); called once. */
  close(code: number, reason: string): void;
}

/** An open WebSocket, either side of a relay. Frames that arrive before `listen` are kept and delivered by it. */
export interface RelaySocket {
  send(frame: WsFrame): void;
  /** Start the close handshake; without `code`, a close frame with no status. */
  close(code?: number, reason?: string): void;
  listen(handlers: WsHandlers): void;
}

/** An accepted upgrade: the response the handler returns, and the socket once the handshake completed. */
export interface WebSocketUpgrade {
  response: Response;
  socket: Promise<RelaySocket>;
}

/** Opening a WebSocket to an upstream, with headers (the standard `WebSocket` constructor sets none). */
export interface WebSocketConnect {
  url: string;
  headers: Record<string, string>;
  protocols?: string[];
  /** Bound on the opening handshake. */
  timeoutMs: number;
}

export type FetchHandler = (req: Request, conn: ConnInfo) => Response | Promise<Response>;

export interface ListenSpec {
  /** Which listener this is; used in log lines and error messages. */
  name: 'proxy' | 'status' | 'admin';
  host: string;
  port: number;
  /** HTTPS (and HTTP/2 by ALPN) with these PEM files; their bytes were read before anything bound. */
  tls?: { cert: Uint8Array; key: Uint8Array; certFile: string; keyFile: string };
  /** Also accept cleartext HTTP/2 (prior knowledge), where the runtime can. */
  http2?: boolean;
  /**
   * Refuse a request with more header fields than `maxCount` or more header bytes (names + values + 4 per
   * field) than `maxBytes` with 431 and `refuse(path, message)` as its JSON body, before `fetch` sees it.
   */
  headerLimits?: {
    maxCount: number;
    maxBytes: number;
    /** The 431's body; `peer` is the connection's `host:port`, for the gateway's own accounting. */
    refuse(path: string, message: string, peer: string | undefined): string;
  };
  /**
   * Close an HTTP/1.1 connection idle (between requests), or an HTTP/2 session with no stream open, for this long;
   * 0 = never. Default: the runtime's HTTP/1.1 one (5 s on Node), for both.
   */
  idleTimeoutMs?: number;
  /** Close a connection whose first request head has not arrived this long after it was accepted; 0 = never. */
  firstRequestTimeoutMs?: number;
  /** Called for each connection accepted while the listener drains (the accept log line). */
  onDrainAccept?: (peer: string | undefined, openConnections: number | undefined) => void;
}

/** One bound address. */
export interface Listener {
  /** The port actually bound (useful when the spec asked for port 0). */
  readonly port: number;
  /** From now on: `Connection: close` on HTTP/1.1 responses, GOAWAY on HTTP/2 connections. */
  beginDrain(): void;
  /** Open downstream connections, idle pooled ones included; undefined where the runtime cannot count. */
  openConnections(): number | undefined;
  /** Stop accepting; resolves when the listener's connections are gone. */
  close(): Promise<void>;
}

export type SignalName = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

/** A request to an upstream provider. Bodies are already serialised. */
export interface UpstreamRequest {
  url: string;
  /** `GET` or `POST` for a model call; a passthrough route relays the caller's method. */
  method: string;
  headers: Record<string, string>;
  /** JSON as text; a multipart form as its encoded bytes; a relayed body (passthrough routes) as the caller's. */
  body?: string | Uint8Array<ArrayBuffer>;
  /** A `Cancel` on the proxy path (not an AbortSignal: see src/util/cancel.ts). */
  signal?: CancelSignal;
  /**
   * A provider key's own TLS, layered on `UpstreamOptions.tls`. The same object comes with every request for
   * that key, so a transport can keep one connection pool per object (and per distinct content).
   */
  tls?: KeyTls;
}

/** A provider key's `tls` block as the resources hold it. */
export interface KeyTls {
  /** PEM CA certificates trusted for this request on top of everything the transport trusts already. */
  ca_cert?: string;
  /** false: any certificate is accepted for this request. */
  verify: boolean;
}

/** The part of an upstream response the core reads. The body can be consumed once. */
export interface UpstreamResponse {
  status: number;
  header(name: string): string | null;
  /**
   * Every header as `body` delivers the answer, repeated ones kept (one `set-cookie` each): a client that
   * decoded a compressed body leaves out `content-encoding` and `content-length`. What a relay passes on.
   */
  headerList?(): [string, string][];
  /** Chunks as they arrive; iterating pulls from the network (used for SSE pass-through). */
  body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
  /** Discard the body and release the connection. */
  discard(): Promise<void>;
}

/** The runtime's fastest faithful HTTP client. Rejects on transport failure or abort. */
export type UpstreamFetch = (req: UpstreamRequest) => Promise<UpstreamResponse>;

/** `upstream.tls`, its PEM files read at boot. */
export interface UpstreamTls {
  /** CA certificates trusted on top of the runtime's default roots (never instead of them). */
  ca?: Uint8Array;
  /** The client certificate and its key, presented to an upstream that asks for one; both or neither. */
  cert?: Uint8Array;
  key?: Uint8Array;
  /** false: any certificate is accepted (the boot WARNs). */
  verify: boolean;
}

/** How `Platform.upstream` connects and what it bounds. */
export interface UpstreamOptions {
  connectTimeoutMs: number;
  /** Bounds each answer (src/upstream-fetch.ts). */
  maxResponseBytes?: number;
  /** Bounds all the answers being read whole at once. */
  maxBufferedBytes?: number;
  /** Absent: the runtime's defaults (its roots, verification on, no client certificate). */
  tls?: UpstreamTls;
  /**
   * Close a pooled connection idle this long, whatever the upstream's `Keep-Alive` hint says; 0 or absent =
   * the runtime's own rule. A runtime whose client has no such knob ignores it (docs/configuration.md).
   */
  poolIdleTimeoutMs?: number;
}

export interface PlatformFiles {
  read(path: string): Promise<Uint8Array>;
  /**
   * The file open for reading a piece at a time into the caller's buffer, so a large file (a resources file of a
   * million api keys) is never held whole. Absent: the file source reads it whole (`read`).
   */
  openRead?(path: string): Promise<FileReader>;
  /** Write-temp, fsync, rename: a reader sees the old file or the new one, never a mix. */
  writeAtomic(path: string, data: Uint8Array): Promise<void>;
}

/** A file open for reading (`PlatformFiles.openRead`). */
export interface FileReader {
  /** Fills `into` from where the last read ended: how many bytes it read, 0 at the end of the file. */
  read(into: Uint8Array): Promise<number>;
  close(): Promise<void>;
}

/** The Redis connection settings of `ratelimit.redis` or `cache.redis` (TLS paths resolved against the config file). */
export interface RedisClientOptions {
  /** The config block these come from (`ratelimit.redis`, `cache.redis`): errors name the key under it. */
  block?: string;
  mode: 'single' | 'cluster' | 'sentinel';
  url?: string;
  nodes: string[];
  sentinels: string[];
  masterName?: string;
  username?: string;
  password?: string;
  database?: number;
  tls?: { caFile?: string; certFile?: string; keyFile?: string; verify: boolean };
  /** Bound on establishing the connection (`timeout_secs`). */
  timeoutMs: number;
  /** Bound on every command, from when it is sent to its answer (`command_timeout_ms`); default `timeoutMs`. */
  commandTimeoutMs?: number;
}

/** The small part of a Redis client the limiter uses; a runtime with TCP sockets provides it (`Platform.redis`). */
export interface RedisClient {
  /**
   * EVALSHA of `lua` (EVAL when the server does not know it yet); rejects on any error, on a lost connection
   * and when no answer came within `commandTimeoutMs` — the limiter relies on this bound and adds no timer of
   * its own.
   */
  evalScript(lua: string, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
  /** Resolves true once the client can run commands, false if it could not within `ms`. */
  waitReady(ms: number): Promise<boolean>;
  /** Close the connection(s). */
  quit(): Promise<void>;
}

/** One piece of a parsed YAML file (src/resources/yaml-pieces.ts), as it crosses between threads (structured-cloneable). */
export type YamlPiece =
  /** The text is not YAML: the parse errors, with the line each starts on. */
  | { type: 'errors'; errors: { message: string; line?: number }[] }
  /** The parsed value, each top-level sequence emptied; its rows follow in `rows` pieces, in order. */
  | { type: 'head'; value: unknown }
  | { type: 'rows'; key: string; rows: unknown[] }
  | { type: 'done' };

/** The parser of another thread: `next()` answers with the following piece; `close()` ends the thread. */
export interface YamlPieces {
  next(): Promise<YamlPiece>;
  close(): void;
}

export interface Platform {
  /** `node`, `bun`, `deno`, `workers`: for log lines only, never for branching in `src/`. */
  readonly name: string;
  listen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener>;
  onSignal(signal: SignalName, handler: () => void): void;
  /**
   * The runtime's fastest faithful HTTP client, made once the configuration is known. A runtime that cannot
   * honour `opts.tls` refuses the configuration before this is called (`refuse`, src/boot.ts).
   */
  upstream(opts: UpstreamOptions): UpstreamFetch;
  files?: PlatformFiles;
  /**
   * Parse YAML on another thread with `yamlPieces` (src/resources/yaml-pieces.ts), handing the result back a
   * piece per `next()`, so a large resources file is parsed off the event loop. Absent where the runtime has
   * no worker threads (the pipeline parses on its own thread).
   */
  parseYamlOffThread?(text: string): YamlPieces;
  /**
   * Keep the heap within about 1.5 times what survives while a large resources file loads (`on`), then leave its
   * growth to the runtime again (`off`): such a load holds two snapshots at once, and a runtime that grows its
   * heap freely then peaks far above what is live. Absent where the runtime has no such setting.
   */
  boundHeapGrowth?(on: boolean): void;
  /**
   * A SHA-256 fed a piece at a time, in native code: the file source hashes every byte of the resources file it
   * reads (a reload reads it twice), the response cache a fingerprint per request. Absent: the file source uses
   * the pure-JavaScript one of @noble/hashes (several times slower), the cache Web Crypto's `digest`.
   */
  sha256Stream?(): Sha256Stream;
  /**
   * `text` as UTF-8, gzipped by the runtime's own zlib at a fast level (a usage exporter's batch). Absent: the web
   * platform's `CompressionStream`, which every runtime has and which costs several times as much per batch.
   */
  gzip?(text: string): Promise<Uint8Array<ArrayBuffer>>;
  /**
   * A `fetch` that speaks TLS with these PEM materials (private CA, client certificate), for the etcd
   * source. Absent where the runtime cannot (the global fetch is used, which trusts the system CAs).
   */
  fetchWithTls?(tls: { ca?: Uint8Array; cert?: Uint8Array; key?: Uint8Array }): typeof fetch;
  /**
   * Open a WebSocket to an upstream (the Realtime relay, docs/realtime.md); rejects when the handshake fails.
   * Absent where the runtime has no client that can send an `Authorization` header.
   */
  connectWebSocket?(req: WebSocketConnect): Promise<RelaySocket>;
  /** A Redis client for shared rate limits (`ratelimit.backend: redis`); absent where there are no TCP sockets. */
  redis?(opts: RedisClientOptions): RedisClient;
  env: Record<string, string | undefined>;
  /** Write one log line (no trailing newline) to stderr. */
  writeLog(line: string): void;
  /** Write command output (e.g. `sluice export` without `-o`) to stdout, where the runtime has one. */
  writeOut?(text: string): void;
  exit(code: number): void;
  /**
   * Keep the runtime alive until `work` settles, where work after a response would otherwise be cut
   * (Workers: the request's `ctx.waitUntil`). Given, trace export hands each delivery here and sends at once.
   */
  waitUntil?(work: Promise<unknown>): void;
}

/** A file's bytes; rejects with an error a person can read when the runtime has no file access at all. */
export function readFile(platform: Pick<Platform, 'files'>, path: string): Promise<Uint8Array> {
  if (!platform.files) return Promise.reject(new Error('this runtime has no file access'));
  return platform.files.read(path);
}

/**
 * Read-only files over texts bundled at build time (Workers), keyed by path: a read resolves `.` and `..`
 * first, so a path resolved against the config's directory finds its bundled text.
 */
export function bundledFiles(
  texts: Record<string, string>,
  say: { missing: string; readOnly: string },
): PlatformFiles {
  const encoder = new TextEncoder();
  return {
    read: async (path) => {
      const text = texts[normalizePath(path)];
      if (text === undefined) throw new Error(`${say.missing} (bundled: ${Object.keys(texts).join(', ')})`);
      return encoder.encode(text);
    },
    writeAtomic: () => Promise.reject(new Error(say.readOnly)),
  };
}

/** `examples/workers/../resources.yaml` → `examples/resources.yaml`, so bundle keys match resolved paths. */
export function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' && out.length > 0 && out[out.length - 1] !== '..') out.pop();
    else out.push(seg);
  }
  return (path.startsWith('/') ? '/' : '') + out.join('/');
}
