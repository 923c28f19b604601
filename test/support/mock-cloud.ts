// The loopback server the cloud mocks (mock-azure.ts, mock-bedrock.ts, mock-vertex.ts) share: every
// request recorded with its raw body; each answered by the next scripted handler, else the mock's own.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CloudRequest {
  method: string;
  /** The path as sent (still percent-encoded), without the query. */
  path: string;
  /** The raw query string, without `?` ('' when none). */
  query: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: string;
  json: Record<string, unknown> | undefined;
}

/** Answers one request; may write in pieces (event streams) and hold the response open. */
export type CloudHandler = (req: CloudRequest, res: http.ServerResponse) => void | Promise<void>;

export interface CloudServer {
  url: string;
  requests: CloudRequest[];
  /** Handlers for the next requests, in order, before the mock's own. */
  script(...handlers: CloudHandler[]): void;
  close(): Promise<void>;
}

export async function startCloudServer(own: CloudHandler): Promise<CloudServer> {
  const requests: CloudRequest[] = [];
  const queue: CloudHandler[] = [];
  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    const raw = Buffer.concat(parts);
    const body = raw.toString('utf8');
    let json: Record<string, unknown> | undefined;
    try {
      json = JSON.parse(body) as Record<string, unknown>;
    } catch {
      json = undefined;
    }
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const r: CloudRequest = {
      method: req.method ?? '',
      path: q < 0 ? url : url.slice(0, q),
      query: q < 0 ? '' : url.slice(q + 1),
      headers: req.headers,
      raw,
      body,
      json,
    };
    requests.push(r);
    try {
      await (queue.shift() ?? own)(r, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`mock failure: ${(e as Error).message}`);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    script: (...h) => {
      queue.push(...h);
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Resolves once the response has been flushed to the socket (a piece of a stream written on its own). */
export function writePiece(res: http.ServerResponse, piece: Uint8Array | string): Promise<void> {
  return new Promise((resolve) => res.write(piece, () => resolve()));
}
