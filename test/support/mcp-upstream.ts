// Upstream MCP servers for the /mcp tests (docs/mcp.md): a real server built with the official SDK
// (`McpServer` behind its Web-standard Streamable HTTP transport, stateless, a fresh server per request), that
// records every request it receives; a hand-written 2026-07-28 server (the v1 SDK stops at 2025-11-25); and an
// OAuth token endpoint. Everything on 127.0.0.1.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';

export interface Received {
  method: string;
  headers: Record<string, string>;
  body: Record<string, unknown> | undefined;
}

export interface McpUpstream {
  url: string;
  received: Received[];
  /** The JSON-RPC methods received, in order. */
  methods(): string[];
  /** Answer every request with this HTTP status (an outage), or undefined to serve. */
  failWith: number | undefined;
  /** Required `Authorization` value; a request without it gets 401 with a challenge. */
  requireAuth: string | undefined;
  /** Requests whose caller hung up before the answer. */
  hungUp: number;
  /** `sessions`: the sessions opened and not yet ended by a DELETE. */
  liveSessions(): number;
  close(): Promise<void>;
}

function listen(fetch: (req: Request) => Promise<Response>): Promise<{ port: number; close(): Promise<void> }> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => {
      resolve({
        port: info.port,
        close: () =>
          new Promise<void>((r) => {
            (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            server.close(() => r());
          }),
      });
    });
  });
}

/** The tools every SDK upstream serves: `echo` (its text back), `add`, `fail` (a tool error), `whoami` (the headers). */
function buildServer(name: string, seen: Received, hang: AbortSignal | undefined): McpServer {
  const server = new McpServer({ name, version: '1.0.0' });
  server.registerTool('echo', {
    description: 'echoes its text',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true },
  }, ({ text }) => ({ content: [{ type: 'text', text: `${name}: ${text}` }] }));
  server.registerTool('add', { description: 'adds', inputSchema: { a: z.number(), b: z.number() } }, ({ a, b }) => ({
    content: [{ type: 'text', text: String(a + b) }],
    structuredContent: { sum: a + b },
  }));
  server.registerTool('fail', { description: 'always fails' }, () => ({
    content: [{ type: 'text', text: 'it failed' }],
    isError: true,
  }));
  server.registerTool('whoami', { description: 'the authorization it saw' }, () => ({
    content: [{ type: 'text', text: seen.headers.authorization ?? '(none)' }],
  }));
  if (!hang) return server;
  // Answers only once its HTTP request is gone: the gateway's cancellation is what ends it.
  server.registerTool('hang', { description: 'never answers in time' }, () =>
    new Promise((resolve) => {
      const done = () => resolve({ content: [{ type: 'text', text: 'late' }] });
      if (hang.aborted) done();
      else hang.addEventListener('abort', done);
    }));
  return server;
}

/**
 * An SDK upstream named `name`; `json`: JSON answers, else SSE (the SDK's default); `hang`: also a tool `hang`
 * that answers only once its caller has gone; `sessions`: stateful, each `initialize` opening a session the SDK
 * names in `Mcp-Session-Id` and later requests must carry, ended by the client's DELETE.
 */
export async function startSdkUpstream(
  name: string,
  opts: { json?: boolean; hang?: boolean; sessions?: boolean } = {},
): Promise<McpUpstream> {
  const received: Received[] = [];
  const live = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const up: McpUpstream = {
    url: '',
    received,
    methods: () => received.map((r) => String(r.body?.method ?? r.method)),
    failWith: undefined,
    requireAuth: undefined,
    hungUp: 0,
    liveSessions: () => live.size,
    close: async () => {},
  };
  const l = await listen(async (req) => {
    const text = req.method === 'POST' ? await req.text() : '';
    const seen: Received = {
      method: req.method,
      headers: Object.fromEntries(req.headers),
      body: text ? JSON.parse(text) : undefined,
    };
    received.push(seen);
    req.signal.addEventListener('abort', () => up.hungUp++);
    if (up.failWith !== undefined) return new Response('down', { status: up.failWith });
    if (up.requireAuth !== undefined && req.headers.get('authorization') !== up.requireAuth) {
      return new Response('unauthorized', { status: 401, headers: { 'www-authenticate': 'Bearer' } });
    }
    const forward = new Request(req.url, { method: req.method, headers: req.headers, body: text || undefined });
    if (opts.sessions) {
      const sid = req.headers.get('mcp-session-id');
      let transport = sid ? live.get(sid) : undefined;
      if (sid && !transport) return new Response('unknown session', { status: 404 });
      if (!transport) {
        const t = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: () => crypto.randomUUID(),
          enableJsonResponse: opts.json === true,
          onsessioninitialized: (id) => void live.set(id, t),
          onsessionclosed: (id) => void live.delete(id),
        });
        await buildServer(name, seen, undefined).connect(t);
        transport = t;
      }
      return transport.handleRequest(forward);
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: opts.json === true,
    });
    await buildServer(name, seen, opts.hang ? req.signal : undefined).connect(transport);
    return transport.handleRequest(forward);
  });
  up.url = `http://127.0.0.1:${l.port}/mcp`;
  up.close = l.close;
  return up;
}

/**
 * A 2026-07-28 upstream, by hand: `server/discover`, `tools/list`, `tools/call` on JSON, every request checked for
 * the modern `_meta` and headers (a 400 otherwise).
 */
export async function startModernUpstream(name: string): Promise<McpUpstream> {
  const received: Received[] = [];
  const up: McpUpstream = {
    url: '',
    received,
    methods: () => received.map((r) => String(r.body?.method ?? r.method)),
    failWith: undefined,
    requireAuth: undefined,
    hungUp: 0,
    liveSessions: () => 0,
    close: async () => {},
  };
  const l = await listen(async (req) => {
    const body = (await req.json()) as Record<string, unknown>;
    received.push({ method: req.method, headers: Object.fromEntries(req.headers), body });
    const meta = (body.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
    const ok = req.headers.get('mcp-protocol-version') === '2026-07-28' &&
      meta?.['io.modelcontextprotocol/protocolVersion'] === '2026-07-28' &&
      req.headers.get('mcp-method') === body.method;
    const reply = (result: unknown, status = 200) =>
      Response.json({ jsonrpc: '2.0', id: body.id, ...(status === 200 ? { result } : { error: result }) }, { status });
    if (!ok) return reply({ code: -32020, message: 'bad modern request' }, 400);
    if (body.method === 'server/discover') {
      return reply({ resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {} } });
    }
    if (body.method === 'tools/list') {
      return reply({ resultType: 'complete', tools: [{ name: 'now', inputSchema: { type: 'object' } }], ttlMs: 0 });
    }
    if (body.method === 'tools/call') {
      return reply({ resultType: 'complete', content: [{ type: 'text', text: `${name} at 2026` }] });
    }
    return reply({ code: -32601, message: String(body.method) }, 404);
  });
  up.url = `http://127.0.0.1:${l.port}/mcp`;
  up.close = l.close;
  return up;
}

export interface TokenEndpoint {
  url: string;
  /** The form bodies received. */
  requests: URLSearchParams[];
  /** The tokens minted, in order: `token-1`, `token-2`, … */
  minted: string[];
  close(): Promise<void>;
}

/** An OAuth 2.0 client-credentials endpoint minting `token-<n>` for client `c1` / secret `s1`. */
export async function startTokenEndpoint(): Promise<TokenEndpoint> {
  const t: TokenEndpoint = { url: '', requests: [], minted: [], close: async () => {} };
  const l = await listen(async (req) => {
    const form = new URLSearchParams(await req.text());
    t.requests.push(form);
    if (form.get('client_id') !== 'c1' || form.get('client_secret') !== 's1') {
      return Response.json({ error: 'invalid_client' }, { status: 401 });
    }
    const token = `token-${t.minted.length + 1}`;
    t.minted.push(token);
    return Response.json({ access_token: token, token_type: 'Bearer', expires_in: 3600 });
  });
  t.url = `http://127.0.0.1:${l.port}/token`;
  t.close = l.close;
  return t;
}
