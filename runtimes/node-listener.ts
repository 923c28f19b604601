// The node:http / node:http2 listener behind the Platform contract. Node uses it, and so can Bun and
// Deno through their node:http compatibility (see the runtime table in the README for what each does).
import { getRequestListener } from '@hono/node-server';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { Socket } from 'node:net';
import type { ConnInfo, FetchHandler, Listener, ListenSpec } from '../src/platform.ts';
import { Cancel } from '../src/util/cancel.ts';
import { acceptUpgrades } from './node-websocket.ts';
import { readHeadersRaw } from './node-request-headers.ts';

export function peerOf(socket: { remoteAddress?: string; remotePort?: number } | undefined): string | undefined {
  const a = socket?.remoteAddress;
  if (!a) return undefined;
  return a.includes(':') ? `[${a}]:${socket!.remotePort}` : `${a}:${socket!.remotePort}`;
}

/** Each open connection's peer: node:net's address getters cost several property lookups per read. */
const connectionPeers = new WeakMap<object, string>();

/** `peerOf` a node:http request's connection, made once per connection (its address does not change). */
function connectionPeer(socket: { remoteAddress?: string; remotePort?: number } | undefined): string | undefined {
  if (!socket) return undefined;
  let peer = connectionPeers.get(socket);
  if (peer === undefined) {
    peer = peerOf(socket);
    if (peer !== undefined) connectionPeers.set(socket, peer);
  }
  return peer;
}

type AnyServer = http.Server | http2.Http2SecureServer | http2.Http2Server;

/** Room above `headerLimits.maxBytes` for the request line, so the runtime's parser lets our check answer. */
export const PARSER_HEADROOM_BYTES = 8192;

/**
 * Why `rawHeaders` breaks `limits`, or undefined. HTTP/2 pseudo-headers (`:path` …) do not count; a field
 * costs its name and value plus 4 bytes (`: ` and CRLF), as on the wire in HTTP/1.1.
 */
export function headerExcess(
  rawHeaders: readonly string[],
  limits: { maxCount: number; maxBytes: number },
): string | undefined {
  let count = 0;
  let bytes = 0;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.charCodeAt(0) === 0x3a /* : */) continue;
    count++;
    bytes += name.length + rawHeaders[i + 1]!.length + 4;
  }
  return headerCountExcess(count, bytes, limits);
}

/** Why `count` fields of `bytes` in all break `limits`, or undefined: the 431's message, on every listener. */
export function headerCountExcess(
  count: number,
  bytes: number,
  limits: { maxCount: number; maxBytes: number },
): string | undefined {
  if (count > limits.maxCount) return `too many request header fields: ${count} (the limit is ${limits.maxCount})`;
  if (bytes > limits.maxBytes) {
    return `request header fields too large: ${bytes} bytes (the limit is ${limits.maxBytes} bytes)`;
  }
  return undefined;
}

type AnyRequest = http.IncomingMessage | http2.Http2ServerRequest;
type AnyResponse = http.ServerResponse | http2.Http2ServerResponse;

/** What a runtime's entrypoint may ask of this listener besides the spec. */
export interface NodeListenOptions {
  /**
   * Close idle HTTP/1.1 connections with a timer of our own: for a runtime whose node:http announces
   * `keepAliveTimeout` (`Keep-Alive: timeout=N`) without closing the connection when it runs out (Bun's).
   */
  enforceKeepAliveTimeout?: boolean;
  /**
   * Hand an upgrade request that is no WebSocket's (h2c) back to node:http as a plain request (default); false
   * where the runtime's node:http cannot take a socket back (Deno's): it is then served on the raw socket.
   */
  reparseUpgrades?: boolean;
}

/** What the request handler and the connection tracking share. */
interface ListenerState {
  draining: boolean;
  /** Sockets whose first request head arrived (see `firstRequestMs` in trackConnections). */
  readonly requested: WeakSet<object>;
  /** How long a connection may idle: the spec's, else the runtime's HTTP/1.1 default; 0 = forever. */
  readonly idleMs: number;
  /** Our own idle timer for HTTP/1.1 connections (`NodeListenOptions.enforceKeepAliveTimeout`). */
  readonly idle?: IdleHttp1;
}

/**
 * HTTP/1.1 connections closed after `idleMs` without a request in flight: the timer starts when a connection's
 * last answer is done and stops when its next request arrives, as the runtime's `keepAliveTimeout` would.
 */
class IdleHttp1 {
  private readonly conns = new WeakMap<Socket, { inFlight: number; timer?: ReturnType<typeof setTimeout> }>();
  constructor(private readonly idleMs: number) {}

  /** A request arrived on `socket`: its connection is busy until `res` closes. */
  track(socket: Socket, res: http.ServerResponse): void {
    let c = this.conns.get(socket);
    if (!c) this.conns.set(socket, c = { inFlight: 0 });
    const conn = c;
    clearTimeout(conn.timer);
    conn.inFlight++;
    res.once('close', () => {
      if (--conn.inFlight > 0 || socket.destroyed) return;
      conn.timer = setTimeout(() => socket.destroy(), this.idleMs);
      conn.timer.unref?.();
    });
  }
}

/**
 * One listener. HTTP/1.1 responses during the drain get `Connection: close` (Node adds it and closes the
 * socket when `shouldKeepAlive` is false); HTTP/2 sessions get GOAWAY at drain start and finish their
 * open streams. Connections are counted exactly, idle pooled ones included.
 */
export async function nodeListen(
  spec: ListenSpec,
  fetch: FetchHandler,
  opts: NodeListenOptions = {},
): Promise<Listener> {
  const idleMs = spec.idleTimeoutMs ?? RUNTIME_IDLE_TIMEOUT_MS;
  const state: ListenerState = {
    draining: false,
    requested: new WeakSet(),
    idleMs,
    ...(opts.enforceKeepAliveTimeout && idleMs > 0 ? { idle: new IdleHttp1(idleMs) } : {}),
  };
  const servers = createServers(spec, requestHandler(spec, fetch, state));
  // WebSocket upgrades (the Realtime relay) on the HTTP/1.1 servers; not on the TLS listener.
  for (const s of [servers.server, servers.h1]) {
    if (s instanceof http.Server) {
      const reparse = opts.reparseUpgrades !== false;
      acceptUpgrades(s, fetch, (socket) => state.requested.add(socket), peerOf, { reparse });
    }
  }
  const conns = trackConnections(servers, spec, state);
  const port = await bind(conns.listening, spec);
  return {
    port,
    beginDrain() {
      state.draining = true;
      for (const s of conns.sessions) s.goaway();
    },
    openConnections: () => conns.sockets.size,
    close: () => closeGracefully(conns, servers),
  };
}

/**
 * The request listener shared by every protocol: the header limits' 431 before Hono builds a Request, then
 * the Fetch handler with the connection's facts. While `state.draining`, HTTP/1.1 responses close their
 * connection.
 */
function requestHandler(
  spec: ListenSpec,
  fetch: FetchHandler,
  state: ListenerState,
): (req: AnyRequest, res: AnyResponse) => void {
  const handle = getRequestListener(
    (req, env: { incoming: AnyRequest; outgoing: AnyResponse }) => {
      // The caller left before its response was written: what @hono/node-server's `request.signal` says, without
      // the AbortController it allocates for every request whose `.signal` is read (src/util/cancel.ts).
      const closed = new Cancel();
      const res = env.outgoing;
      res.once('close', () => {
        // The same test as @hono/node-server's own close handler (an HTTP/2 response has no writableFinished).
        if (env.incoming.errored || !res.writableFinished) closed.abort(new Error('the client closed the connection'));
      });
      const conn: ConnInfo = {
        peer: connectionPeer(env.incoming.socket),
        httpVersion: env.incoming.httpVersion,
        closed,
      };
      // The core reads a handful of headers per request: from the raw fields, not through the lazy header object.
      readHeadersRaw(req, env.incoming.rawHeaders);
      return fetch(req, conn);
    },
  );
  const limits = spec.headerLimits;
  return (req, res) => {
    state.requested.add(req.socket);
    if (state.draining && res instanceof http.ServerResponse) res.shouldKeepAlive = false;
    if (state.idle && req.httpVersionMajor === 1) state.idle.track(req.socket, res as http.ServerResponse);
    // Before Hono builds a Request: a header flood costs one pass over rawHeaders and a short answer.
    const excess = limits && headerExcess(req.rawHeaders, limits);
    if (excess !== undefined && limits) {
      const body = limits.refuse((req.url ?? '/').split('?')[0]!, excess, peerOf(req.socket));
      // HTTP/1.1: the connection closes after the answer (the unread body, if any, is not worth reading).
      if (res instanceof http.ServerResponse) res.shouldKeepAlive = false;
      res.writeHead(431, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
      res.end(body);
      return;
    }
    // The two request/response pairs are interchangeable for the listener (it is written for both).
    handle(req as http.IncomingMessage, res as http.ServerResponse);
  };
}

/**
 * The servers for the spec's protocol: `server` speaks HTTP/2 with TLS (HTTP/1.1 by ALPN fallback), HTTP/2
 * cleartext (then `h1` serves the HTTP/1.1 connections of the same port, see `sniffH2c`) or HTTP/1.1 only.
 */
interface Servers {
  server: AnyServer;
  h1?: http.Server;
}

function createServers(spec: ListenSpec, onRequest: (req: AnyRequest, res: AnyResponse) => void): Servers {
  // With header limits, the runtime's own parser limits sit above ours, so our 431 (with its JSON body) is
  // what a caller sees. Without them, the runtime defaults stay (16 KiB; HTTP/2: 128 fields).
  const limits = spec.headerLimits;
  const h1Options: http.ServerOptions = {
    ServerResponse: HeadWithBody,
    ...(limits ? { maxHeaderSize: limits.maxBytes + PARSER_HEADROOM_BYTES } : {}),
  };
  const h2Options: http2.ServerOptions = limits
    ? {
      maxHeaderListPairs: Math.max(128, limits.maxCount * 2 + 8),
      settings: { maxHeaderListSize: limits.maxBytes + PARSER_HEADROOM_BYTES },
    }
    : {};
  let servers: Servers;
  if (spec.tls) {
    servers = {
      server: http2.createSecureServer({
        ...h1Options,
        ...h2Options,
        cert: Buffer.from(spec.tls.cert),
        key: Buffer.from(spec.tls.key),
        allowHTTP1: true,
        Http1ServerResponse: HeadWithBody,
      }, onRequest),
    };
  } else if (spec.http2) {
    // Cleartext: HTTP/1.1 and h2c prior knowledge on one port; the first bytes decide (see sniffH2c).
    servers = { server: http2.createServer(h2Options, onRequest), h1: http.createServer(h1Options, onRequest) };
  } else {
    servers = { server: http.createServer(h1Options, onRequest) };
  }
  // Node 22.23.2, 24.18.1 and later refuse a head of more fields than `maxHeadersCount` (1,000 by default) in the
  // parser, with a bare 431 and a reset connection; the byte bound above bounds the fields, so our check answers.
  if (limits) {
    for (const s of [servers.server, servers.h1]) if (s) (s as { maxHeadersCount: number | null }).maxHeadersCount = 0;
  }
  // Idle HTTP/1.1 connections (between requests only: a request in flight or an SSE stream is never cut).
  // 0 disables the timer; the TLS server's HTTP/1.1 fallback reads the same property.
  if (spec.idleTimeoutMs !== undefined) {
    for (const s of [servers.server, servers.h1]) {
      if (s) (s as { keepAliveTimeout?: number }).keepAliveTimeout = spec.idleTimeoutMs;
    }
  }
  return servers;
}

/**
 * A response whose `flushHeaders()` waits for the end of the event loop's turn. @hono/node-server flushes a
 * streamed response's head before it reads the body; when the first chunk is already at hand, the head now
 * leaves with it in one write (one segment, one wake-up of the caller) instead of alone. A body with nothing
 * to read yet still has its head sent within the turn.
 */
class HeadWithBody<Req extends http.IncomingMessage = http.IncomingMessage> extends http.ServerResponse<Req> {
  private flushQueued = false;

  override flushHeaders(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(flushHead, this);
  }
}

/** The deferred flush: a no-op when a write already carried the head (Node sends it with the first write). */
function flushHead(res: http.ServerResponse): void {
  if (!res.destroyed) http.ServerResponse.prototype.flushHeaders.call(res);
}

/** The open connections of one listener, and the server that accepts them. */
interface Connections {
  /** The server bound to the port (a sniffing front for h2c, else the protocol server itself). */
  listening: net.Server;
  /** Every accepted socket until it closes. */
  sockets: Set<Socket>;
  /** Sockets carrying HTTP/2 (a session's `socket` is a Proxy, so they are marked where they are routed). */
  h2Sockets: WeakSet<Socket>;
  sessions: Set<http2.Http2Session>;
}

/**
 * Counts every accepted socket and HTTP/2 session, marks the HTTP/2 sockets, sends GOAWAY to sessions
 * opened during the drain and reports connections accepted then (`spec.onDrainAccept`).
 */
function trackConnections(servers: Servers, spec: ListenSpec, state: ListenerState): Connections {
  const conns: Connections = {
    listening: servers.server as net.Server,
    sockets: new Set(),
    h2Sockets: new WeakSet(),
    sessions: new Set(),
  };
  servers.server.on('session', (s: http2.Http2Session) => {
    conns.sessions.add(s);
    s.once('close', () => conns.sessions.delete(s));
    if (state.draining) s.goaway();
    if (state.idleMs > 0) closeWhenIdle(s, state.idleMs);
  });
  const firstRequestMs = spec.firstRequestTimeoutMs ?? 0;
  const track = (socket: Socket) => {
    conns.sockets.add(socket);
    // A connection that never sends a request: neither Node's nor Deno's node:http closes it (Bun's after ~10 s
    // of silence), so a client could hold any number of them. One timer per connection, not per request: past
    // it, a socket whose first request head has not arrived is closed (HTTP/2 sockets, which sent the preface,
    // are the session's). Bun's socket does not count the bytes its native parser reads (`bytesRead` stays 0),
    // so "a request arrived" is what is tested, the same on all three runtimes.
    const silent = firstRequestMs > 0
      ? setTimeout(() => {
        if (!state.requested.has(socket) && !conns.h2Sockets.has(socket)) socket.destroy();
      }, firstRequestMs)
      : undefined;
    silent?.unref?.();
    socket.once('close', () => {
      clearTimeout(silent);
      conns.sockets.delete(socket);
    });
    if (state.draining) spec.onDrainAccept?.(peerOf(socket), conns.sockets.size);
  };
  if (servers.h1) {
    conns.listening = sniffH2c(servers.h1, servers.server as http2.Http2Server, (socket, isH2) => {
      // Tracked once, when accepted; the second call only marks it HTTP/2.
      if (isH2) conns.h2Sockets.add(socket);
      else track(socket);
    });
  } else {
    servers.server.on(spec.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      if ((socket as Socket & { alpnProtocol?: string | false }).alpnProtocol === 'h2') conns.h2Sockets.add(socket);
      track(socket);
    });
  }
  return conns;
}

/** Node's own HTTP/1.1 `keepAliveTimeout`: what an HTTP/2 session of a listener whose spec sets none gets too. */
const RUNTIME_IDLE_TIMEOUT_MS = 5000;

/**
 * Close `session` (GOAWAY, then the socket) once it has had no open stream for `idleMs`: from its preface, or
 * from the end of its last stream. A session is never cut while a stream is open, however long its answer is
 * silent. The runtime's own session timeout would be no substitute: it counts silence, streams open or not,
 * and is off by default.
 */
function closeWhenIdle(session: http2.Http2Session, idleMs: number): void {
  let open = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    timer = setTimeout(() => session.close(), idleMs);
    timer.unref?.();
  };
  session.on('stream', (stream: http2.Http2Stream) => {
    open++;
    clearTimeout(timer);
    stream.once('close', () => {
      if (--open === 0 && !session.closed && !session.destroyed) arm();
    });
  });
  session.once('close', () => clearTimeout(timer));
  arm();
}

/**
 * HTTP/1.1 and h2c prior knowledge on one port: a plain TCP server hands each socket to `h2` when its
 * first three bytes are `PRI` (the HTTP/2 preface), else to `h1`. `accepted` sees every socket at once
 * (`isH2` false until its first bytes are read) and again, with `isH2` true, when it turns out HTTP/2.
 */
function sniffH2c(
  h1: http.Server,
  h2: http2.Http2Server,
  accepted: (socket: Socket, isH2: boolean) => void,
): net.Server {
  // `h1` never listens itself, so it never sets up the connection list that closeIdleConnections() and the
  // headers/request timeouts read (Node does that on 'listening'; Bun and Deno tolerate the event).
  h1.emit('listening');
  return net.createServer((socket) => {
    accepted(socket, false);
    socket.once('readable', () => {
      const head: Buffer | null = socket.read(Math.min(socket.readableLength, 3));
      if (head) socket.unshift(head);
      const isH2 = head?.toString('latin1') === 'PRI';
      if (isH2) accepted(socket, true);
      (isH2 ? h2 : h1).emit('connection', socket);
    });
  });
}

/** Listen on the spec's address; a bind error names the listener. */
async function bind(listening: net.Server, spec: ListenSpec): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error) => reject(new Error(`${spec.name} listener on ${spec.host}:${spec.port}: ${e.message}`));
    listening.once('error', onError);
    listening.listen(spec.port, spec.host, () => {
      listening.off('error', onError);
      resolve();
    });
  });
  return (listening.address() as net.AddressInfo).port;
}

/** How long connections still open after `close()` get before they are cut. */
const CLOSE_GRACE_MS = 2000;

/**
 * Stop accepting and end every connection without losing a request; resolves when the last one is gone.
 * The drain calls this with in_flight at zero, so what remains are idle pooled connections, requests the
 * gateway has not yet seen (accepted sockets whose request is on its way or half parsed) and, at most, a
 * probe mid-response. HTTP/2 sessions close gracefully (their sockets go with them). HTTP/1.1 connections
 * idle between requests close now, through the runtime's own `closeIdleConnections()`: its parser knows
 * which ones are mid-request, where a socket without a response (`_httpMessage`) may hold a half-read
 * request. The others answer with `Connection: close` and close themselves; a connection that never sent a
 * byte closes with the rest when the grace runs out (nothing unread, so the peer sees a clean FIN).
 */
function closeGracefully(conns: Connections, servers: Servers): Promise<void> {
  return new Promise<void>((resolve) => {
    conns.listening.close(() => resolve());
    for (const s of conns.sessions) s.close();
    for (const s of [servers.h1 ?? servers.server]) {
      if ('closeIdleConnections' in s && typeof s.closeIdleConnections === 'function') s.closeIdleConnections();
    }
    setTimeout(() => {
      for (const socket of conns.sockets) socket.destroy();
    }, CLOSE_GRACE_MS).unref();
  });
}
