// The `Bun.serve` listener behind the Platform contract, for Bun's plain HTTP/1.1 listeners (a listener with
// TLS or HTTP/2 stays on runtimes/node-listener.ts, see runtimes/bun.ts). What it keeps and what is
// approximate on it: README "Runtimes" and docs/performance.md "`Bun.serve` bound".
import http from 'node:http';
import type { ConnInfo, FetchHandler, Listener, ListenSpec, RelaySocket } from '../src/platform.ts';
import { type BunSocketData, bunWebSocketHandlers } from './bun-websocket.ts';
import { headerCountExcess, PARSER_HEADROOM_BYTES, peerOf } from './node-listener.ts';

/** The longest idle timeout Bun's server takes; a longer `idleTimeoutMs` is served as this. */
export const MAX_IDLE_TIMEOUT_SECS = 255;
/** The idle timeout of a listener whose spec sets none (status, admin): Bun's own default. */
const DEFAULT_IDLE_TIMEOUT_SECS = 10;
/**
 * Bun's timers tick every 4 s: a connection given `t` seconds closes at a tick up to 4 s before `t` (rounded
 * up to a tick). Armed with the idle timeout plus a tick, an idle connection is never closed before the
 * timeout, and at most about 8 s after it.
 */
const TIMER_TICK_SECS = 4;
/** How long connections still open after `close()` get before they are cut. */
const CLOSE_GRACE_MS = 2000;

type BunServer = ReturnType<typeof Bun.serve>;

/**
 * One listener. HTTP/1.1 answers to requests that arrive during the drain carry `Connection: close`, after
 * which Bun closes the connection. Bun reports no connection, so `openConnections()` is undefined and
 * `spec.onDrainAccept` is called for each request that arrives during the drain (each of those answers
 * closes its connection, so it is one call per connection, plus one per connection pooled before the signal
 * that is used again).
 */
export function bunServeListen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener> {
  const state = { draining: false };
  const idleSecs = idleSecsOf(spec.idleTimeoutMs);
  if (spec.headerLimits) raiseHeaderSize(spec.headerLimits.maxBytes + PARSER_HEADROOM_BYTES);
  let server: BunServer;
  try {
    server = Bun.serve({
      hostname: spec.host,
      port: spec.port,
      // Applies between requests only: each request switches it off until its answer is handed over.
      idleTimeout: idleSecs,
      // Sluice bounds request bodies itself (413 in the endpoint's envelope), and errors never show a stack.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      development: false,
      error: () => new Response(null, { status: 500 }),
      fetch: requestHandler(spec, fetch, state, idleSecs),
      websocket: bunWebSocketHandlers,
    });
  } catch (e) {
    return Promise.reject(new Error(`${spec.name} listener on ${spec.host}:${spec.port}: ${(e as Error).message}`));
  }
  return Promise.resolve({
    port: server.port ?? spec.port,
    beginDrain() {
      state.draining = true;
    },
    openConnections: () => undefined,
    close: () => closeGracefully(server),
  });
}

/** The handler's answer, or nothing when it accepted the upgrade (Bun then writes the 101 itself). */
async function upgradeOrAnswer(
  req: Request,
  server: BunServer,
  conn: ConnInfo,
  fetch: FetchHandler,
): Promise<Response | undefined> {
  let accept: { protocol: string | undefined; data: BunSocketData } | undefined;
  conn.upgradeWebSocket = (protocol) => {
    let data!: BunSocketData;
    const socket = new Promise<RelaySocket>((resolve, reject) => (data = { accepted: resolve, refused: reject }));
    accept = { protocol, data };
    return { response: new Response(null), socket };
  };
  const res = await fetch(req, conn);
  if (!accept) return res;
  const headers = accept.protocol ? { 'sec-websocket-protocol': accept.protocol } : undefined;
  if (server.upgrade(req, { data: accept.data, ...(headers ? { headers } : {}) })) return undefined;
  accept.data.refused(new Error('Bun refused the upgrade'));
  return new Response(null, { status: 400 });
}

/** `idleTimeoutMs` in whole seconds as Bun takes it: 0 = never, at most `MAX_IDLE_TIMEOUT_SECS`. */
export function idleSecsOf(idleTimeoutMs: number | undefined): number {
  if (idleTimeoutMs === undefined) return DEFAULT_IDLE_TIMEOUT_SECS;
  return Math.min(MAX_IDLE_TIMEOUT_SECS, Math.ceil(idleTimeoutMs / 1000));
}

/**
 * Bun's parser refuses a request head past `http.maxHeaderSize` with a bare 431 (one value for the process,
 * its fetch's answers included): raised, never lowered, so our check answers with its JSON body.
 */
function raiseHeaderSize(bytes: number): void {
  const h = http as { maxHeaderSize: number };
  if (h.maxHeaderSize < bytes) h.maxHeaderSize = bytes;
}

/**
 * The fetch handler Bun calls: the header limits' 431 before the gateway sees the request, then the gateway
 * with the connection's facts. The caller-closed signal is the request's own (`request.signal`, which Bun
 * aborts when the caller leaves first): `ConnInfo.closed` is left out, so the core follows it.
 */
function requestHandler(
  spec: ListenSpec,
  fetch: FetchHandler,
  state: { draining: boolean },
  idleSecs: number,
): (req: Request, server: BunServer) => Response | undefined | Promise<Response | undefined> {
  const limits = spec.headerLimits;
  const keepAlive = `timeout=${idleSecs}`;
  const armSecs = idleSecs + TIMER_TICK_SECS;
  return (req, server) => {
    const ip = server.requestIP(req);
    const peer = ip ? peerOf({ remoteAddress: ip.address, remotePort: ip.port }) : undefined;
    if (limits) {
      const excess = headersExcess(req.headers, limits);
      if (excess !== undefined) return refusal(limits.refuse(pathOf(req.url), excess, peer));
    }
    // Bun's idle timer also runs while a request waits for its answer: off until the answer is handed over.
    if (idleSecs > 0) server.timeout(req, 0);
    const conn: ConnInfo = { peer, httpVersion: '1.1' };
    // A WebSocket upgrade (the Realtime relay) is answered by Bun once the handler accepted it.
    if (req.headers.get('upgrade')?.toLowerCase() === 'websocket') return upgradeOrAnswer(req, server, conn, fetch);
    if (state.draining) {
      spec.onDrainAccept?.(peer, undefined);
      return then(fetch(req, conn), (res) => withHeader(res, 'connection', 'close'));
    }
    if (idleSecs === 0) return fetch(req, conn);
    return then(fetch(req, conn), (res) => rearmIdle(res, req, server, keepAlive, armSecs));
  };
}

/**
 * Why `headers` break `limits`, or undefined, counted as `headerExcess` counts raw fields; a field repeated
 * in the request is one entry here (its values joined by `, `), so it counts once.
 */
function headersExcess(headers: Headers, limits: { maxCount: number; maxBytes: number }): string | undefined {
  let count = 0;
  let bytes = 0;
  headers.forEach((value, name) => {
    count++;
    bytes += name.length + value.length + 4;
  });
  return headerCountExcess(count, bytes, limits);
}

/** The 431 answer; the connection closes after it (the unread body, if any, is not worth reading). */
function refusal(body: string): Response {
  return new Response(body, { status: 431, headers: { 'content-type': 'application/json', connection: 'close' } });
}

/** The path of Bun's absolute request URL, without its query. */
function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  if (start < 0) return '/';
  const query = url.indexOf('?', start);
  return url.slice(start, query < 0 ? undefined : query);
}

function then(res: Response | Promise<Response>, f: (res: Response) => Response): Response | Promise<Response> {
  return res instanceof Promise ? res.then(f) : f(res);
}

/** `res` with one more header; a response with immutable headers (`Response.error()` …) is copied. */
function withHeader(res: Response, name: string, value: string): Response {
  try {
    res.headers.set(name, value);
    return res;
  } catch {
    const headers = new Headers(res.headers);
    headers.set(name, value);
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  }
}

/**
 * The idle timer back on once the answer is handed over, with the `Keep-Alive` header that announces it. An
 * event stream is handed over chunk by chunk, so its timer comes back on after its last chunk: a stream that
 * is silent for longer than the timeout is never cut.
 */
function rearmIdle(res: Response, req: Request, server: BunServer, keepAlive: string, armSecs: number): Response {
  const out = withHeader(res, 'keep-alive', keepAlive);
  if (!out.body || !isEventStream(out.headers.get('content-type'))) {
    server.timeout(req, armSecs);
    return out;
  }
  const body = out.body.pipeThrough(new TransformStream({ flush: () => server.timeout(req, armSecs) }));
  return new Response(body, { status: out.status, statusText: out.statusText, headers: out.headers });
}

function isEventStream(contentType: string | null): boolean {
  return contentType !== null && contentType.trimStart().toLowerCase().startsWith('text/event-stream');
}

/**
 * Stop accepting and end every connection without losing a request; resolves when the last one is gone. The
 * drain calls this with in_flight at zero: `stop(false)` closes the idle connections at once and each other
 * one after its answer (a request whose head is still arriving is read and answered); what is left after
 * the grace (a request head that never completes) is cut by `stop(true)`.
 */
function closeGracefully(server: BunServer): Promise<void> {
  const closed = server.stop(false);
  const cut = setTimeout(() => void server.stop(true), CLOSE_GRACE_MS);
  return closed.finally(() => clearTimeout(cut));
}
