// The node:http / node:http2 listener behind the Platform contract. Node uses it, and so can Bun and
// Deno through their node:http compatibility (see the runtime table in the README for what each does).
import { getRequestListener } from '@hono/node-server';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { Socket } from 'node:net';
import type { ConnInfo, FetchHandler, Listener, ListenSpec } from '../src/platform.ts';
import { Cancel } from '../src/util/cancel.ts';

export function peerOf(socket: { remoteAddress?: string; remotePort?: number } | undefined): string | undefined {
  if (!socket?.remoteAddress) return undefined;
  const a = socket.remoteAddress;
  return a.includes(':') ? `[${a}]:${socket.remotePort}` : `${a}:${socket.remotePort}`;
}

type AnyServer = http.Server | http2.Http2SecureServer | http2.Http2Server;

/** Room above `headerLimits.maxBytes` for the request line, so the runtime's parser lets our check answer. */
const PARSER_HEADROOM_BYTES = 8192;

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
  if (count > limits.maxCount) return `too many request header fields: ${count} (the limit is ${limits.maxCount})`;
  if (bytes > limits.maxBytes) {
    return `request header fields too large: ${bytes} bytes (the limit is ${limits.maxBytes} bytes)`;
  }
  return undefined;
}

/**
 * One listener. HTTP/1.1 responses during the drain get `Connection: close` (Node adds it and closes the
 * socket when `shouldKeepAlive` is false); HTTP/2 sessions get GOAWAY at drain start and finish their
 * open streams. Connections are counted exactly, idle pooled ones included.
 */
export async function nodeListen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener> {
  let draining = false;
  const sockets = new Set<Socket>();
  const sessions = new Set<http2.Http2Session>();
  const handle = getRequestListener(
    (
      req,
      env: {
        incoming: http.IncomingMessage | http2.Http2ServerRequest;
        outgoing: http.ServerResponse | http2.Http2ServerResponse;
      },
    ) => {
      // The caller left before its response was written: what @hono/node-server's `request.signal` says, without
      // the AbortController it allocates for every request whose `.signal` is read (src/util/cancel.ts).
      const closed = new Cancel();
      const res = env.outgoing;
      res.once('close', () => {
        // The same test as @hono/node-server's own close handler (an HTTP/2 response has no writableFinished).
        if (env.incoming.errored || !res.writableFinished) closed.abort(new Error('the client closed the connection'));
      });
      const conn: ConnInfo = { peer: peerOf(env.incoming.socket), httpVersion: env.incoming.httpVersion, closed };
      return fetch(req, conn);
    },
  );
  const limits = spec.headerLimits;
  const onRequest = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    if (draining && res instanceof http.ServerResponse) res.shouldKeepAlive = false;
    // Before Hono builds a Request: a header flood costs one pass over rawHeaders and a short answer.
    const excess = limits && headerExcess(req.rawHeaders, limits);
    if (excess !== undefined && limits) {
      const body = limits.refuse((req.url ?? '/').split('?')[0]!, excess);
      // HTTP/1.1: the connection closes after the answer (the unread body, if any, is not worth reading).
      if (res instanceof http.ServerResponse) res.shouldKeepAlive = false;
      res.writeHead(431, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
      res.end(body);
      return;
    }
    // The two request/response pairs are interchangeable for the listener (it is written for both).
    handle(req as http.IncomingMessage, res as http.ServerResponse);
  };

  // With header limits, the runtime's own parser limits sit above ours, so our 431 (with its JSON body) is
  // what a caller sees. Without them, the runtime defaults stay (16 KiB; HTTP/2: 128 fields).
  const h1Options: http.ServerOptions = limits ? { maxHeaderSize: limits.maxBytes + PARSER_HEADROOM_BYTES } : {};
  const h2Options: http2.ServerOptions = limits
    ? {
      maxHeaderListPairs: Math.max(128, limits.maxCount * 2 + 8),
      settings: { maxHeaderListSize: limits.maxBytes + PARSER_HEADROOM_BYTES },
    }
    : {};
  let server: AnyServer;
  let h1: http.Server | undefined;
  if (spec.tls) {
    server = http2.createSecureServer({
      ...h1Options,
      ...h2Options,
      cert: Buffer.from(spec.tls.cert),
      key: Buffer.from(spec.tls.key),
      allowHTTP1: true,
    }, onRequest);
  } else if (spec.http2) {
    // Cleartext: HTTP/1.1 and h2c prior knowledge on one port; the first bytes decide (see sniff below).
    h1 = http.createServer(h1Options, onRequest);
    server = http2.createServer(h2Options, onRequest);
  } else {
    server = http.createServer(h1Options, onRequest);
  }
  // Idle HTTP/1.1 connections (between requests only: a request in flight or an SSE stream is never cut).
  // 0 disables the timer; the TLS server's HTTP/1.1 fallback reads the same property.
  if (spec.idleTimeoutMs !== undefined) {
    for (const s of [server, h1]) if (s) (s as { keepAliveTimeout?: number }).keepAliveTimeout = spec.idleTimeoutMs;
  }
  // Sockets carrying HTTP/2 (a session's `socket` is a Proxy, so they are marked where they are routed).
  const h2Sockets = new WeakSet<Socket>();
  server.on('session', (s: http2.Http2Session) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
    if (draining) s.goaway();
  });
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    if (draining) spec.onDrainAccept?.(peerOf(socket), sockets.size);
  };

  let listening: net.Server;
  if (h1) {
    const h2 = server as http2.Http2Server;
    const front = net.createServer((socket) => {
      track(socket);
      socket.once('readable', () => {
        const head: Buffer | null = socket.read(Math.min(socket.readableLength, 3));
        if (head) socket.unshift(head);
        const isH2 = head?.toString('latin1') === 'PRI';
        if (isH2) h2Sockets.add(socket);
        (isH2 ? h2 : h1!).emit('connection', socket);
      });
    });
    listening = front;
  } else {
    server.on(spec.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      if ((socket as Socket & { alpnProtocol?: string | false }).alpnProtocol === 'h2') h2Sockets.add(socket);
      track(socket);
    });
    listening = server as net.Server;
  }

  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error) => reject(new Error(`${spec.name} listener on ${spec.host}:${spec.port}: ${e.message}`));
    listening.once('error', onError);
    listening.listen(spec.port, spec.host, () => {
      listening.off('error', onError);
      resolve();
    });
  });
  const port = (listening.address() as net.AddressInfo).port;

  return {
    port,
    beginDrain() {
      draining = true;
      for (const s of sessions) s.goaway();
    },
    openConnections: () => sockets.size,
    close() {
      return new Promise<void>((resolve) => {
        listening.close(() => resolve());
        // When the drain gets here in_flight is zero: what remains are idle pooled connections and, at
        // most, a probe mid-response. HTTP/2 sessions close gracefully; idle HTTP/1.1 sockets close now,
        // busy ones as soon as their response is written; anything left is cut after a short grace.
        for (const s of sessions) s.close();
        for (const socket of sockets) {
          // An HTTP/2 socket goes when its session has flushed and closed (session.close() above); a busy
          // HTTP/1.1 socket's response already carries Connection: close, so it closes itself.
          if (h2Sockets.has(socket)) continue;
          const busy = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
          if (!busy) socket.destroy();
        }
        setTimeout(() => {
          for (const socket of sockets) socket.destroy();
        }, 2000).unref();
      });
    },
  };
}
