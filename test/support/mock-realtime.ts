// A mock OpenAI Realtime upstream (docs/realtime.md): checks what OpenAI checks at the handshake (the path, the
// `model` query, the bearer credential) and refuses a session opened with the retired `OpenAI-Beta: realtime=v1`
// header with 4000 `beta_api_shape_disabled`, as OpenAI now does. It answers `session.update` and
// `response.create` with the GA events, `response.done` carrying usage; `test.close` makes it close with 4001;
// `test.echo_key` answers OpenAI's `error` event quoting the key it was sent, then closes with it in the reason.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export const REALTIME_UPSTREAM_KEY = 'sk-upstream-SECRET-value';
export const UPSTREAM_USAGE = { input_tokens: 11, output_tokens: 7, input_token_details: { cached_tokens: 3 } };

export interface SeenHandshake {
  url: string;
  authorization: string | undefined;
  beta: string | undefined;
  protocols: string | undefined;
}

export interface MockRealtime {
  /** The base a provider key's `api_base` names (`http://127.0.0.1:<port>/v1`). */
  base: string;
  handshakes: SeenHandshake[];
  /** Every text frame received, in order. */
  received: string[];
  /** Close codes the upstream received from the gateway, per session. */
  closes: number[];
  close(): Promise<void>;
}

export async function startMockRealtime(model = 'gpt-upstream'): Promise<MockRealtime> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(426).end();
  });
  const handshakes: SeenHandshake[] = [];
  const received: string[] = [];
  const closes: number[] = [];
  const wss = new WebSocketServer({
    server,
    verifyClient: (info: { req: IncomingMessage }, done: (ok: boolean, code?: number) => void) => {
      const req = info.req;
      handshakes.push({
        url: req.url ?? '',
        authorization: req.headers.authorization,
        beta: req.headers['openai-beta'] as string | undefined,
        protocols: req.headers['sec-websocket-protocol'] as string | undefined,
      });
      const url = new URL(req.url ?? '/', 'http://x');
      const ok = url.pathname === '/v1/realtime' && url.searchParams.get('model') === model &&
        req.headers.authorization === `Bearer ${REALTIME_UPSTREAM_KEY}`;
      done(ok, ok ? undefined : 401);
    },
  });
  wss.on('connection', (ws, req) => {
    if (req.headers['openai-beta'] === 'realtime=v1') return ws.close(4000, 'beta_api_shape_disabled');
    let n = 0;
    const send = (e: Record<string, unknown>) => ws.send(JSON.stringify({ event_id: `evt_${++n}`, ...e }));
    send({ type: 'session.created', session: { id: 'sess_1', model } });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return ws.send(data, { binary: true }); // echoed, to test binary relay
      const text = data.toString();
      received.push(text);
      const event = JSON.parse(text) as { type: string; session?: unknown };
      if (event.type === 'session.update') send({ type: 'session.updated', session: event.session });
      if (event.type === 'response.create') {
        send({ type: 'response.created', response: { id: 'resp_1', status: 'in_progress' } });
        send({ type: 'response.done', response: { id: 'resp_1', status: 'completed', usage: UPSTREAM_USAGE } });
      }
      if (event.type === 'test.close') ws.close(4001, 'bye');
      if (event.type === 'test.echo_key') {
        send({
          type: 'error',
          error: {
            type: 'invalid_request_error',
            code: 'invalid_api_key',
            message: `Incorrect API key provided: ${REALTIME_UPSTREAM_KEY}.`,
            param: null,
          },
        });
        ws.close(4001, `invalid key ${REALTIME_UPSTREAM_KEY}`);
      }
    });
    ws.on('close', (code) => closes.push(code));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}/v1`,
    handshakes,
    received,
    closes,
    close: () =>
      new Promise((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.close(() => r());
      }),
  };
}
