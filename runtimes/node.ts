// Node entrypoint: implements the Platform contract with node:http(s)/http2, undici and node:fs, then
// hands over to the runtime-agnostic core. Started by bin/sluice from the esbuild bundle.
import { getRequestListener } from '@hono/node-server';
import { open, readFile, rename } from 'node:fs/promises';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { Socket } from 'node:net';
import { Agent, request } from 'undici';
import { main } from '../src/main.ts';
import type { ConnInfo, FetchHandler, ListenSpec, Listener, Platform, PlatformFiles, UpstreamFetch } from '../src/platform.ts';

function peerOf(socket: { remoteAddress?: string; remotePort?: number } | undefined): string | undefined {
  if (!socket?.remoteAddress) return undefined;
  const a = socket.remoteAddress;
  return a.includes(':') ? `[${a}]:${socket.remotePort}` : `${a}:${socket.remotePort}`;
}

/** undici's `request` (about 1.9× the global fetch on a proxy here), behind the core's UpstreamFetch. */
export function undiciUpstream(connectTimeoutMs: number): UpstreamFetch {
  const agent = new Agent({ connect: { timeout: connectTimeoutMs || undefined }, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  return async (r) => {
    const res = await request(r.url, { method: r.method, headers: r.headers, body: r.body, signal: r.signal, dispatcher: agent });
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

export const nodeFiles: PlatformFiles = {
  read: (path) => readFile(path),
  async writeAtomic(path, data) {
    const tmp = `${path}.tmp-${process.pid}`;
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  },
};

type AnyServer = http.Server | http2.Http2SecureServer | http2.Http2Server;

/**
 * One listener. HTTP/1.1 responses during the drain get `Connection: close` (Node adds it and closes the
 * socket when `shouldKeepAlive` is false); HTTP/2 sessions get GOAWAY at drain start and finish their
 * open streams. Connections are counted exactly, idle pooled ones included.
 */
export async function nodeListen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener> {
  let draining = false;
  const sockets = new Set<Socket>();
  const sessions = new Set<http2.Http2Session>();
  const handle = getRequestListener((req, env: { incoming: http.IncomingMessage | http2.Http2ServerRequest }) => {
    const conn: ConnInfo = { peer: peerOf(env.incoming.socket), httpVersion: env.incoming.httpVersion };
    return fetch(req, conn);
  });
  const onRequest = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => {
    if (draining && res instanceof http.ServerResponse) res.shouldKeepAlive = false;
    // The two request/response pairs are interchangeable for the listener (it is written for both).
    handle(req as http.IncomingMessage, res as http.ServerResponse);
  };

  let server: AnyServer;
  let h1: http.Server | undefined;
  if (spec.tls) {
    server = http2.createSecureServer({ cert: Buffer.from(spec.tls.cert), key: Buffer.from(spec.tls.key), allowHTTP1: true }, onRequest);
  } else if (spec.http2) {
    // Cleartext: HTTP/1.1 and h2c prior knowledge on one port; the first bytes decide (see sniff below).
    h1 = http.createServer(onRequest);
    server = http2.createServer({}, onRequest);
  } else {
    server = http.createServer(onRequest);
  }
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
        (head?.toString('latin1') === 'PRI' ? h2 : h1!).emit('connection', socket);
      });
    });
    listening = front;
  } else {
    server.on(spec.tls ? 'secureConnection' : 'connection', (socket: Socket) => track(socket));
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
        // Idle keep-alive sockets hold no request: close them now. Busy ones finish their response first
        // (in_flight is already zero when the drain gets here, so only a probe can be mid-response).
        (h1 ?? (server instanceof http.Server ? server : undefined))?.closeIdleConnections();
        for (const s of sessions) s.close();
        for (const socket of sockets) {
          if (!(h1 ?? server instanceof http.Server)) continue;
          const busy = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
          if (!busy) socket.destroy();
        }
        setTimeout(() => { for (const socket of sockets) socket.destroy(); }, 2000).unref();
      });
    },
  };
}

export function nodePlatform(): Platform {
  return {
    name: 'node',
    listen: nodeListen,
    onSignal: (signal, handler) => void process.on(signal, handler),
    upstream: (o) => undiciUpstream(o.connectTimeoutMs),
    files: nodeFiles,
    env: process.env,
    writeLog: (line) => void process.stderr.write(`${line}\n`),
    exit: (code) => process.exit(code),
  };
}

/** Run the CLI with this process's arguments; bin/sluice calls this from the bundle. */
export function start(): void {
  const platform = nodePlatform();
  main(platform, process.argv.slice(2)).then((code) => platform.exit(code), (e) => {
    process.stderr.write(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}\n`);
    platform.exit(1);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) start();
