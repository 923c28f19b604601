// WebSockets on Bun (docs/realtime.md "Runtimes"): `Bun.serve`'s `websocket` handlers feed a relay side per
// accepted socket, and the upstream client is Bun's `WebSocket`, which takes headers (the standard one cannot).
import type { ServerWebSocket } from 'bun';
import type { RelaySocket, WebSocketConnect, WsFrame, WsHandlers } from '../src/platform.ts';

/** A relay side that keeps what arrives before `listen`; the transport's own send and close are given. */
class Side implements RelaySocket {
  private early: ((h: WsHandlers) => void)[] = [];
  private handlers: WsHandlers | undefined;
  constructor(
    private readonly out: { send(f: WsFrame): void; close(code?: number, reason?: string): void },
  ) {}
  send(frame: WsFrame): void {
    this.out.send(frame);
  }
  close(code?: number, reason?: string): void {
    this.out.close(code, reason);
  }
  listen(h: WsHandlers): void {
    this.handlers = h;
    for (const f of this.early.splice(0)) f(h);
  }
  deliver(f: (h: WsHandlers) => void): void {
    if (this.handlers) f(this.handlers);
    else this.early.push(f);
  }
}

/** What an accepted socket carries in `ws.data`: resolves the handler's socket at `open`. */
export interface BunSocketData {
  accepted(side: RelaySocket): void;
  refused(e: Error): void;
  side?: Side;
}

/** `Bun.serve`'s `websocket` option: each event goes to the socket's relay side. */
export const bunWebSocketHandlers = {
  // The relay has its own idle cap; Bun's would cut a quiet session at 120 s.
  idleTimeout: 0,
  perMessageDeflate: false,
  open(ws: ServerWebSocket<BunSocketData>) {
    let closed = false;
    const side = new Side({
      send: (f) => void ws.send(f),
      close: (code, reason) => {
        if (closed) return;
        closed = true;
        ws.close(code, reason);
      },
    });
    ws.data.side = side;
    ws.data.accepted(side);
  },
  message(ws: ServerWebSocket<BunSocketData>, message: string | Buffer) {
    const frame: WsFrame = typeof message === 'string' ? message : new Uint8Array(message);
    ws.data.side?.deliver((h) => h.message(frame));
  },
  close(ws: ServerWebSocket<BunSocketData>, code: number, reason: string) {
    ws.data.side?.deliver((h) => h.close(code, reason));
  },
};

/** Codes a WebSocket client may send in its close frame (the standard constructor refuses others). */
function clientMaySend(code: number): boolean {
  return code === 1000 || (code >= 3000 && code <= 4999);
}

/** Open an upstream WebSocket with headers through Bun's `WebSocket`; rejects on a failed handshake. */
export function bunConnectWebSocket(req: WebSocketConnect): Promise<RelaySocket> {
  return new Promise((resolve, reject) => {
    // Bun's constructor takes headers and protocols in an options object (not in the DOM's types).
    const ws = new WebSocket(req.url, { headers: req.headers, protocols: req.protocols ?? [] } as unknown as string[]);
    ws.binaryType = 'arraybuffer';
    const side = new Side({
      send: (f) => ws.readyState === WebSocket.OPEN && ws.send(f),
      close: (code, reason) => {
        if (ws.readyState === WebSocket.CLOSING || ws.readyState === WebSocket.CLOSED) return;
        if (code === undefined || !clientMaySend(code)) ws.close();
        else ws.close(code, reason);
      },
    });
    let open = false;
    const timer = setTimeout(() => {
      reject(new Error(`the upstream handshake took longer than ${req.timeoutMs} ms`));
      ws.close();
    }, req.timeoutMs);
    ws.addEventListener('open', () => {
      open = true;
      clearTimeout(timer);
      resolve(side);
    });
    ws.addEventListener('message', (e: MessageEvent) => {
      const frame: WsFrame = typeof e.data === 'string' ? e.data : new Uint8Array(e.data as ArrayBuffer);
      side.deliver((h) => h.message(frame));
    });
    ws.addEventListener('error', () => {
      if (open) return; // the close event follows
      clearTimeout(timer);
      reject(new Error('the upstream refused or failed the WebSocket handshake'));
    });
    ws.addEventListener('close', (e: CloseEvent) => side.deliver((h) => h.close(e.code, e.reason)));
  });
}
