// WebSockets on node:http with the `ws` package (docs/realtime.md "Runtimes"): the listener's upgrade requests
// go through the same Fetch handler as every request, which accepts one with `ConnInfo.upgradeWebSocket`; the
// upstream client sends headers, which Node 20 has no global WebSocket for.
import * as http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { ConnInfo, FetchHandler, RelaySocket, WebSocketConnect, WsFrame, WsHandlers } from '../src/platform.ts';

/** `ws`'s socket as a relay side: messages and the close kept until `listen`, errors left to the close (1006). */
export function relaySocketOf(ws: WebSocket): RelaySocket {
  const early: ((h: WsHandlers) => void)[] = [];
  let handlers: WsHandlers | undefined;
  const deliver = (f: (h: WsHandlers) => void) => (handlers ? f(handlers) : early.push(f));
  ws.on('message', (data, isBinary) => {
    const frame: WsFrame = isBinary ? new Uint8Array(bytesOf(data)) : bytesOf(data).toString('utf8');
    deliver((h) => h.message(frame));
  });
  ws.on('close', (code, reason) => deliver((h) => h.close(code, reason.toString('utf8'))));
  ws.on('error', () => {/* the close event follows, with 1006 */});
  return {
    send(frame) {
      if (ws.readyState === WebSocket.OPEN) ws.send(frame, { binary: typeof frame !== 'string' });
    },
    close(code, reason) {
      if (ws.readyState === WebSocket.CLOSING || ws.readyState === WebSocket.CLOSED) return;
      if (ws.readyState === WebSocket.CONNECTING) return ws.terminate();
      if (code === undefined) ws.close();
      else ws.close(code, reason);
    },
    listen(h) {
      handlers = h;
      for (const f of early.splice(0)) f(h);
    },
  };
}

function bytesOf(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** Open an upstream WebSocket with headers; rejects on a refused or failed handshake. */
export function connectWebSocket(req: WebSocketConnect): Promise<RelaySocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(req.url, req.protocols ?? [], {
      headers: req.headers,
      handshakeTimeout: req.timeoutMs,
      followRedirects: false,
    });
    const socket = relaySocketOf(ws);
    ws.once('open', () => resolve(socket));
    ws.once('error', (e) => reject(e));
    ws.once('unexpected-response', (request, response) => {
      reject(new Error(`the upstream answered the upgrade with ${response.statusCode}`));
      request.destroy();
    });
  });
}

/**
 * Serve `server`'s upgrade requests through `fetch`: a handler that calls `upgradeWebSocket` gets the socket
 * once the handshake is done (selecting the protocol it named); any other answer is written as a plain HTTP
 * response and the connection closed.
 */
export function acceptUpgrades(
  server: http.Server,
  fetch: FetchHandler,
  onRequest: (socket: Duplex) => void,
  peerOf: (socket: Socket) => string | undefined,
  /** Hand other upgrades back to node:http (Node); without, they are served here (Deno cannot take them back). */
  opts: { reparse: boolean },
): void {
  const chosen = new WeakMap<http.IncomingMessage, string | undefined>();
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (_offered, req) => chosen.get(req) ?? false,
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    // node:http leaves an upgraded socket without its error listener: a peer that hangs up while its refusal is
    // written (EPIPE, ECONNRESET) would otherwise be an uncaught error that ends the process.
    socket.on('error', () => socket.destroy());
    // With an `upgrade` listener node:http hands it every upgrade (h2c from `curl --http2` too), where it served
    // them as plain requests before: any other than a WebSocket's goes back to the server as one.
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
      if (opts.reparse) return reparse(server, req, socket, head);
      return void serveInPlace(req, socket, fetch, peerOf).catch(() => socket.destroy());
    }
    onRequest(socket);
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers: headersOf(req),
    });
    let accept: { resolve(s: RelaySocket): void; reject(e: Error): void } | undefined;
    const conn: ConnInfo = {
      // node:http's upgrade socket is the connection's `net.Socket`, typed as a Duplex.
      peer: peerOf(socket as Socket),
      httpVersion: req.httpVersion,
      upgradeWebSocket(protocol) {
        chosen.set(req, protocol);
        const socketReady = new Promise<RelaySocket>((resolve, reject) => (accept = { resolve, reject }));
        return { response: new Response(null, { status: 200 }), socket: socketReady };
      },
    };
    socket.once('close', () => accept?.reject(new Error('the client closed the connection')));
    Promise.resolve(fetch(request, conn)).then(async (res) => {
      if (accept) {
        const a = accept;
        wss.handleUpgrade(req, socket, head, (ws) => a.resolve(relaySocketOf(ws)));
        return;
      }
      await writeRaw(socket, res);
    }).catch(() => socket.destroy());
  });
}

/**
 * Feed `req` back to `server` as a request that asks for no upgrade: its head rebuilt without `Upgrade` (and
 * with `Connection: keep-alive`), then the bytes already read, on a fresh parser for the same socket.
 */
function reparse(server: http.Server, req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    if (name === 'upgrade' || name === 'http2-settings') continue;
    text += `${req.rawHeaders[i]}: ${name === 'connection' ? 'keep-alive' : req.rawHeaders[i + 1]}\r\n`;
  }
  socket.unshift(Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
}

/**
 * A request that asked for another upgrade, served on its raw socket (Deno, whose node:http cannot take the socket
 * back): its body streamed to the handler, the answer streamed back and the connection closed after it. Deno's
 * node:http delivers such a request's body on the request (decoded, chunked too), not on the socket.
 */
async function serveInPlace(
  req: http.IncomingMessage,
  socket: Duplex,
  fetch: FetchHandler,
  peerOf: (socket: Socket) => string | undefined,
): Promise<void> {
  const init: RequestInit & { duplex?: 'half' } = { method: req.method ?? 'GET', headers: headersOf(req) };
  if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) {
    init.body = bodyOf(req);
    init.duplex = 'half';
  }
  const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, init);
  await writeRaw(socket, await fetch(request, { peer: peerOf(socket as Socket), httpVersion: req.httpVersion }));
}

function headersOf(req: http.IncomingMessage): Headers {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  return headers;
}

/** The request's body as it arrives, read no faster than the handler takes it. */
function bodyOf(req: http.IncomingMessage): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      req.on('data', (chunk: Buffer) => {
        controller.enqueue(new Uint8Array(chunk));
        if ((controller.desiredSize ?? 1) <= 0) req.pause();
      });
      req.once('end', () => controller.close());
      req.once('error', (e) => controller.error(e));
      req.once('aborted', () => controller.error(new Error('the client closed the connection')));
    },
    pull() {
      req.resume();
    },
  });
}

/** An HTTP/1.1 answer written on the upgrade's raw socket as it comes, then the connection closed. */
async function writeRaw(socket: Duplex, res: Response): Promise<void> {
  let head = `HTTP/1.1 ${res.status} ${http.STATUS_CODES[res.status] ?? ''}\r\n`;
  res.headers.forEach((value, name) => {
    if (name !== 'content-length' && name !== 'connection' && name !== 'transfer-encoding') {
      head += `${name}: ${value}\r\n`;
    }
  });
  // No length: the answer ends with the connection, so a stream is relayed as it comes.
  socket.write(`${head}connection: close\r\n\r\n`, 'latin1');
  const reader = res.body?.getReader();
  for (let r = await reader?.read(); r && !r.done; r = await reader!.read()) socket.write(r.value);
  socket.end();
}
