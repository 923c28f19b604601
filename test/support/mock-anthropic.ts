// A scriptable Anthropic Messages upstream (`POST /v1/messages`, `POST /v1/messages/count_tokens`) on a
// real loopback socket: JSON answers, named-event SSE streams (or `data:`-only ones, as some relays send; with
// a delay before the first event, for first-byte deadlines), error statuses.
// Every request is recorded with its headers, so tests can check `x-api-key` and `anthropic-version`. With
// `rules: true` a request the real API refuses gets Anthropic's 400 and leaves the script alone (api-rules.ts).
import { anthropicViolation } from './api-rules.ts';
import { sleep } from './until.ts';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AnthropicReply {
  status?: number;
  /** JSON body; default: a message answering "hi from anthropic mock". */
  body?: unknown;
  headers?: Record<string, string>;
  /** SSE: send these events (`[name, payload]`), `eventDelayMs` apart. Default for stream requests: a short text answer. */
  events?: [string, unknown][];
  eventDelayMs?: number;
  /** SSE: headers go out at once, the first event only after this long (a silent upstream). */
  firstEventDelayMs?: number;
  /**
   * SSE: `data:` lines only, no `event:` lines (a relay that names each event by its `type` alone), its JSON
   * `compact` or `spaced` (`{ "type": "…", … }`, as a re-serialising relay may write it).
   */
  dataOnly?: 'compact' | 'spaced';
}

/** An event as the reply frames it (`AnthropicReply.dataOnly`). */
export function anthropicFrame(name: string, payload: unknown, dataOnly?: 'compact' | 'spaced'): string {
  if (!dataOnly) return `event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`;
  const json = dataOnly === 'spaced' ? JSON.stringify(payload, null, 1).replace(/\n */g, ' ') : JSON.stringify(payload);
  return `data: ${json}\n\n`;
}

export interface AnthropicRecorded {
  url: string;
  headers: http.IncomingHttpHeaders;
  json: Record<string, unknown> | undefined;
}

export interface MockAnthropic {
  /** What a provider key's `api_base` points at (no `/v1`). */
  url: string;
  requests: AnthropicRecorded[];
  script(...r: AnthropicReply[]): void;
  close(): Promise<void>;
}

/** What the mock's `count_tokens` answers by default. */
export const COUNTED_INPUT_TOKENS = 42;

export function anthropicMessage(model: string, text = 'hi from anthropic mock'): Record<string, unknown> {
  return {
    id: 'msg_mock',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 5, output_tokens: 4 },
  };
}

export function anthropicEvents(model: string, pieces: string[] = ['hello', ' world']): [string, unknown][] {
  return [
    ['message_start', {
      type: 'message_start',
      message: {
        ...anthropicMessage(model),
        content: [],
        stop_reason: null,
        usage: { input_tokens: 5, output_tokens: 1 },
      },
    }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['ping', { type: 'ping' }],
    ...pieces.map((
      text,
    ): [string, unknown] => ['content_block_delta', {
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'text_delta', text },
    }]),
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 7 },
    }],
    ['message_stop', { type: 'message_stop' }],
  ];
}

/** Every thinking signature an answer or stream event carries (its `signature` fields), into `issued`. */
function noteSignatures(issued: Set<string>, v: unknown): void {
  if (Array.isArray(v)) { for (const x of v) noteSignatures(issued, x); }
  else if (typeof v === 'object' && v !== null) {
    for (const [k, x] of Object.entries(v)) {
      if (k === 'signature' && typeof x === 'string' && x !== '') issued.add(x);
      else noteSignatures(issued, x);
    }
  }
}

export async function startMockAnthropic(opts: { rules?: boolean } = {}): Promise<MockAnthropic> {
  const queue: AnthropicReply[] = [];
  const requests: AnthropicRecorded[] = [];
  /** The thinking signatures the mock has given out (the rules check a continued tool turn's against them). */
  const issued = new Set<string>();
  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    let json: Record<string, unknown> | undefined;
    try {
      json = JSON.parse(Buffer.concat(parts).toString('utf8'));
    } catch {
      json = undefined;
    }
    requests.push({ url: req.url ?? '', headers: req.headers, json });
    const violation = opts.rules
      ? anthropicViolation(json, req.url === '/v1/messages/count_tokens', issued)
      : undefined;
    if (violation) {
      res.writeHead(violation.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(violation.body));
      return;
    }
    const reply = queue.shift() ?? {};
    const model = typeof json?.model === 'string' ? json.model : 'unknown';
    const countTokens = req.url === '/v1/messages/count_tokens';
    const status = reply.status ?? (req.url === '/v1/messages' || countTokens ? 200 : 404);
    if (status < 300 && (reply.events || json?.stream === true)) {
      res.writeHead(status, { 'content-type': 'text/event-stream', ...reply.headers });
      res.flushHeaders();
      if (reply.firstEventDelayMs) await sleep(reply.firstEventDelayMs);
      for (const [name, payload] of reply.events ?? anthropicEvents(model)) {
        if (res.destroyed) return;
        noteSignatures(issued, payload);
        res.write(anthropicFrame(name, payload, reply.dataOnly));
        if (reply.eventDelayMs) await sleep(reply.eventDelayMs);
      }
      res.end();
      return;
    }
    const body = reply.body ??
      (status < 300
        ? (countTokens ? { input_tokens: COUNTED_INPUT_TOKENS } : anthropicMessage(model))
        : { type: 'error', error: { type: 'overloaded_error', message: `mock ${status}` } });
    noteSignatures(issued, body);
    res.writeHead(status, { 'content-type': 'application/json', ...reply.headers });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    script: (...r) => {
      queue.push(...r);
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
