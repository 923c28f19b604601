// A raw-HTTP A2A agent on 127.0.0.1 that records every request it receives (headers and body), for the A2A
// gateway's tests (docs/a2a.md): `message/send` answers a completed task, `message/stream` sends a `working`
// event, then waits for `release()` before its `completed` event; the card is an A2A 1.0 card (no top-level
// `url`) at `/agent/.well-known/agent-card.json`. A message whose text is `hang` waits for `release()` before
// any answer (a send), one whose text is `break` drops the connection after the first event (a stream), one
// whose text is `json` is answered with one JSON body (a stream), one whose text is `late` waits for `release()`
// before its headers (a stream), and a send whose text is `artifact` is answered with a task carrying an artifact
// and a status message. `tasks/resubscribe` streams like a send.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { latch } from './until.ts';

export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface MockA2a {
  /** The agent's JSON-RPC URL (`…/agent`). */
  url: string;
  received: Received[];
  /** Lets the stream open now send its final event; a new latch for the next stream. */
  release(): void;
  /** Streams that are open right now. */
  openStreams(): number;
  /** Requests whose connection closed before the agent answered them. */
  abandoned(): number;
  /** Answer every POST with this status instead (0 = normal). */
  failWith: number;
  close(): Promise<void>;
}

function task(id: string, state: string) {
  return { kind: 'task', id, contextId: 'ctx-1', status: { state } };
}

/** What a send whose text is `artifact` gets besides its task: an artifact and the status's message. */
export const ARTIFACT = {
  artifacts: [{ artifactId: 'a-1', parts: [{ kind: 'text', text: 'The answer is forty-two.' }] }],
  status: { state: 'completed', message: { role: 'agent', parts: [{ kind: 'text', text: 'Done.' }] } },
};

export async function mockA2a(): Promise<MockA2a> {
  const received: Received[] = [];
  let gate = latch();
  let open = 0;
  let abandoned = 0;
  const mock: Partial<MockA2a> = {};
  const server: Server = createServer((req, res) => {
    res.on('close', () => {
      if (!res.writableEnded) abandoned++;
    });
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      if (req.method === 'GET' && req.url === '/agent/.well-known/agent-card.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          name: 'Echo',
          description: 'echoes',
          version: '1.0.0',
          supportedInterfaces: [{ url: mock.url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
          capabilities: { streaming: true },
          defaultInputModes: ['text'],
          defaultOutputModes: ['text'],
          skills: [],
        }));
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      if (mock.failWith) {
        res.writeHead(mock.failWith, { 'content-type': 'text/plain' }).end('agent secret detail');
        return;
      }
      const rpc = JSON.parse(body) as { id: unknown; method: string };
      const text = body.includes('"text":"hang"') ? 'hang' : body.includes('"text":"break"') ? 'break' : '';
      if (rpc.method === 'message/send' && text === 'hang') await gate.promise;
      if (rpc.method === 'message/stream' && body.includes('"text":"json"')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result: task('t-1', 'completed') }));
        return;
      }
      if (rpc.method === 'message/stream' || rpc.method === 'tasks/resubscribe') {
        if (body.includes('"text":"late"')) await gate.promise;
        open++;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const first = `data: ${JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result: task('t-1', 'working') })}\n\n`;
        if (text === 'break') {
          // Dropped once the first event is on the wire: the caller has its 200 and that event.
          open--;
          res.write(first, () => res.socket?.destroy());
          return;
        }
        res.write(first);
        const g = gate;
        await g.promise;
        const done = {
          kind: 'status-update',
          taskId: 't-1',
          contextId: 'ctx-1',
          status: { state: 'completed' },
          final: true,
        };
        res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result: done })}\n\n`);
        open--;
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      const result = body.includes('"text":"artifact"')
        ? { ...task('t-2', 'completed'), ...ARTIFACT }
        : task('t-1', 'completed');
      res.end(JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  Object.assign(mock, {
    url: `http://127.0.0.1:${port}/agent`,
    received,
    failWith: 0,
    release() {
      const g = gate;
      gate = latch();
      g.resolve();
    },
    openStreams: () => open,
    abandoned: () => abandoned,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
  return mock as MockA2a;
}
