// A provider's API as a passthrough route reaches it, on a real loopback socket: Anthropic's `POST /v1/messages`
// (refused 401 in Anthropic's envelope unless `x-api-key` is the expected key and `anthropic-version` is sent,
// as the real API does; JSON or a named-event SSE stream with usage), and OpenAI-style paths that require
// `Authorization: Bearer <key>` and echo what they received. Every request is recorded with its raw headers.
import * as http from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface ProviderMock {
  url: string;
  requests: SeenRequest[];
  /** Held before the next answer's status line until it resolves (a slow upstream). */
  holdNext(p: Promise<void>): void;
  close(): Promise<void>;
}

export const MESSAGE_USAGE = { input_tokens: 12, output_tokens: 7 };

/** Anthropic's stream of a short answer (`Hello there`), usage in `message_start` and `message_delta`. */
export function messageEvents(model: string): [string, unknown][] {
  return [
    ['message_start', {
      type: 'message_start',
      message: {
        id: 'msg_pt',
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: MESSAGE_USAGE.input_tokens, output_tokens: 1 },
      },
    }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' there' } }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: MESSAGE_USAGE.output_tokens },
    }],
    ['message_stop', { type: 'message_stop' }],
  ];
}

export async function startProviderMock(keys: { anthropic?: string; bearer?: string }): Promise<ProviderMock> {
  const requests: SeenRequest[] = [];
  let hold: Promise<void> | undefined;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', async () => {
      const body = Buffer.concat(parts);
      requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const h = hold;
      hold = undefined;
      if (h) await h;
      const json = (status: number, v: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(v));
      };
      const path = (req.url ?? '/').split('?')[0]!;
      if (path.endsWith('/v1/messages')) {
        if (req.headers['x-api-key'] !== keys.anthropic) {
          return json(401, {
            type: 'error',
            error: { type: 'authentication_error', message: 'invalid x-api-key' },
          });
        }
        if (!req.headers['anthropic-version']) {
          return json(400, {
            type: 'error',
            error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' },
          });
        }
        const msg = JSON.parse(body.toString('utf8')) as { model: string; stream?: boolean };
        if (!msg.stream) {
          return json(200, {
            id: 'msg_pt',
            type: 'message',
            role: 'assistant',
            model: msg.model,
            content: [{ type: 'text', text: 'Hello there' }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: MESSAGE_USAGE,
          }, { 'request-id': 'req_upstream_1', 'set-cookie': 'a=1' });
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for (const [name, payload] of messageEvents(msg.model)) {
          res.write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`);
        }
        return res.end();
      }
      if (keys.bearer !== undefined && req.headers.authorization !== `Bearer ${keys.bearer}`) {
        return json(401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
      }
      if (path.endsWith('/redirect')) {
        res.writeHead(307, { location: 'http://127.0.0.1:9/elsewhere' });
        return res.end();
      }
      if (path.endsWith('/boom')) return json(500, { error: 'boom', leaked: keys.bearer });
      if (path.endsWith('/gzip')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        return res.end(gzipSync(JSON.stringify({ zipped: true })));
      }
      if (path.endsWith('/empty')) {
        res.writeHead(204);
        return res.end();
      }
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      return json(200, {
        method: req.method,
        url: req.url,
        body: body.toString('utf8'),
        usage: { prompt_tokens: 3, completion_tokens: 4 },
      }, { server: 'upstream/1', 'x-upstream': 'yes' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    holdNext: (p) => {
      hold = p;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
