// A scriptable OpenAI-compatible upstream on a real loopback socket, in the test process. Each request
// takes the next scripted reply (or the default one); every request is recorded. With `rules: true` a chat
// request the real API refuses gets OpenAI's 400 and leaves the script alone (api-rules.ts).
import { openaiViolation } from './api-rules.ts';
import { sleep } from './until.ts';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reply {
  status?: number;
  /** JSON body (object) or raw string. Default: a chat.completion echoing the model. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Delay before the status line. */
  delayMs?: number;
  /** SSE: these `data:` payloads, one per chunk, `chunkDelayMs` apart; then `data: [DONE]`. */
  sse?: unknown[];
  chunkDelayMs?: number;
  /** SSE: stop after this many chunks by destroying the socket (mid-stream failure). */
  dropAfterChunks?: number;
  /** Hold the response open until this promise resolves (for in-flight tests). */
  hold?: Promise<void>;
  /** SSE: after chunk i is written, wait for `chunkHolds[i]` (if any) before the next (a silence a test ends). */
  chunkHolds?: (Promise<void> | undefined)[];
}

export interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Record<string, unknown> | undefined;
}

export interface MockUpstream {
  url: string;
  /** `${url}/v1`, what a provider key's api_base points at. */
  base: string;
  requests: Recorded[];
  script(...replies: Reply[]): void;
  setDefault(reply: Reply): void;
  /** Resolves when the n-th request (1-based, counting from now) has arrived. */
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  /** Requests whose client went away before the response finished. */
  aborted: number;
  close(): Promise<void>;
}

export function chatCompletion(model: string, content = 'hi from mock'): Record<string, unknown> {
  return {
    id: 'chatcmpl-mock',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
  };
}

export function chunk(model: string, content: string): Record<string, unknown> {
  return {
    id: 'chatcmpl-mock',
    object: 'chat.completion.chunk',
    created: 1,
    model,
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  };
}

export async function startMockUpstream(opts: { rules?: boolean } = {}): Promise<MockUpstream> {
  const queue: Reply[] = [];
  let fallback: Reply = {};
  const requests: Recorded[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const state = { aborted: 0 };

  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    const body = Buffer.concat(parts).toString('utf8');
    let json: Record<string, unknown> | undefined;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, json });
    for (const w of [...waiters]) {
      if (requests.length >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
    const violation = opts.rules && req.url?.endsWith('/chat/completions') ? openaiViolation(json) : undefined;
    if (violation) {
      res.writeHead(violation.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(violation.body));
      return;
    }
    const reply = queue.shift() ?? fallback;
    let finished = false;
    res.on('finish', () => {
      finished = true;
    });
    res.on('close', () => {
      if (!finished) state.aborted++;
    });
    if (reply.delayMs) await sleep(reply.delayMs);
    if (reply.hold) await reply.hold;
    const model = typeof json?.model === 'string' ? json.model : 'unknown';
    if (reply.sse || (json?.stream === true && reply.body === undefined && (reply.status ?? 200) < 300)) {
      const events = reply.sse ?? [chunk(model, 'hello'), chunk(model, ' world')];
      res.writeHead(reply.status ?? 200, { 'content-type': 'text/event-stream', ...reply.headers });
      res.flushHeaders();
      for (let i = 0; i < events.length; i++) {
        if (reply.dropAfterChunks !== undefined && i >= reply.dropAfterChunks) {
          res.socket?.destroy();
          return;
        }
        if (res.destroyed) return;
        res.write(`data: ${JSON.stringify(events[i])}\n\n`);
        if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
        await reply.chunkHolds?.[i];
      }
      if (reply.dropAfterChunks !== undefined && reply.dropAfterChunks >= events.length) {
        res.socket?.destroy();
        return;
      }
      res.end('data: [DONE]\n\n');
      return;
    }
    const status = reply.status ?? 200;
    const out = reply.body === undefined
      ? (status < 300 ? chatCompletion(model) : { error: { message: `mock ${status}`, type: 'mock_error' } })
      : reply.body;
    res.writeHead(status, { 'content-type': 'application/json', ...reply.headers });
    res.end(typeof out === 'string' ? out : JSON.stringify(out));
  });
  // Provider endpoints keep idle connections open far longer than Node's 5 s default; at 5 s a client that
  // reuses a pooled connection while the server is closing it races (Bun's fetch then fails the request).
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    base: `${url}/v1`,
    requests,
    get aborted() {
      return state.aborted;
    },
    script: (...r) => {
      queue.push(...r);
    },
    setDefault: (r) => {
      fallback = r;
    },
    waitForRequests(n, timeoutMs = 5000) {
      const target = requests.length + n;
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () =>
            reject(new Error(`mock upstream: waited ${timeoutMs} ms for request #${target}, saw ${requests.length}`)),
          timeoutMs,
        );
        waiters.push({
          n: target,
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
        });
      });
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  } as MockUpstream;
}
