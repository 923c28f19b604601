// An A2A 1.0 agent built with @a2a-js/sdk (its DefaultRequestHandler and JSON-RPC transport handler, served
// over node:http as its express adapter does), recording the headers of every request it receives. It answers
// `message/send` with a completed task; a streaming send publishes `working`, then waits for `release()` before
// `completed`. Its card (at `/agent/.well-known/agent-card.json`) has no top-level `url`, as 1.0 cards have none.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type AgentCard, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  defaultServerCallContextBuilder,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  UnauthenticatedUser,
  validateVersion,
} from '@a2a-js/sdk/server';
import { latch } from './until.ts';

export interface SdkAgent {
  url: string;
  /** The headers of every request the agent received, in order. */
  received: IncomingHttpHeaders[];
  /** Streams that have sent `working` and wait for `release()`. */
  waiting(): number;
  release(): void;
  close(): Promise<void>;
}

export async function sdkAgent(): Promise<SdkAgent> {
  const received: IncomingHttpHeaders[] = [];
  let gate = latch();
  let waiting = 0;
  let url = '';
  const card = (): AgentCard => ({
    name: 'SDK echo',
    description: 'an @a2a-js/sdk agent behind the gateway',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  } as unknown as AgentCard); // the card type's optional members differ across the SDK's minor versions
  const executor: AgentExecutor = {
    async execute(ctx, bus) {
      const text = ctx.userMessage.parts.map((p) => p.content?.$case === 'text' ? p.content.value : '').join('');
      const status = (state: TaskState) => ({
        state,
        message: state === TaskState.TASK_STATE_COMPLETED
          ? {
            messageId: `${ctx.taskId}-answer`,
            contextId: ctx.contextId,
            taskId: ctx.taskId,
            role: Role.ROLE_AGENT,
            parts: [{
              content: { $case: 'text' as const, value: `echo: ${text}` },
              metadata: undefined,
              filename: '',
              mediaType: 'text/plain',
            }],
            metadata: undefined,
            extensions: [],
            referenceTaskIds: [],
          }
          : undefined,
        timestamp: new Date().toISOString(),
      });
      bus.publish(AgentEvent.task({
        id: ctx.taskId,
        contextId: ctx.contextId,
        status: status(TaskState.TASK_STATE_WORKING),
        artifacts: [],
        history: [ctx.userMessage],
        metadata: undefined,
      } as never));
      if (text.startsWith('slow')) {
        waiting++;
        await gate.promise;
        waiting--;
      }
      bus.publish(AgentEvent.statusUpdate({
        taskId: ctx.taskId,
        contextId: ctx.contextId,
        status: status(TaskState.TASK_STATE_COMPLETED),
        metadata: undefined,
      } as never));
      bus.finished();
    },
    cancelTask: async () => {},
  };
  const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor);
  const rpc = new JsonRpcTransportHandler(handler);

  const server: Server = createServer((req, res) => {
    received.push(req.headers);
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      if (req.method === 'GET' && req.url === '/agent/.well-known/agent-card.json') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(card()));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/agent') return void res.writeHead(404).end();
      try {
        const requestedVersion = req.headers['a2a-version'] as string | undefined;
        const context = defaultServerCallContextBuilder({
          extensions: undefined,
          user: new UnauthenticatedUser(),
          headers: req.headers,
          requestedVersion,
        });
        validateVersion(context.requestedVersion, card(), 'JSONRPC');
        const out = await rpc.handle(body, context);
        if (typeof (out as AsyncGenerator)[Symbol.asyncIterator] !== 'function') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for await (const event of out as AsyncGenerator) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end();
      } catch (e) {
        res.writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: JsonRpcTransportHandler.mapToJSONRPCError(e) }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`;
  return {
    url,
    received,
    waiting: () => waiting,
    release() {
      const g = gate;
      gate = latch();
      g.resolve();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
