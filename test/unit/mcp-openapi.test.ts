// OpenAPI-backed MCP servers through app.request() (docs/mcp.md "OpenAPI-backed servers"): the tools AISIX builds
// from the row's OpenAPI 3 document, and each call as the HTTP request a real API on loopback receives — the
// path segments encoded, the declared query, the JSON body, the gateway-held credential (bearer, a named API-key
// header, an OAuth token dropped on a 401) and never the caller's key; non-2xx and redirects as tool errors; the
// ACL, rate limits and guardrails as for any tool; and the official SDK client on top.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { startTokenEndpoint, type TokenEndpoint } from '../support/mcp-upstream.ts';
import { gatewayWith, midMinute, type TestPlatform } from '../support/platform.ts';

const PEER = { peer: '127.0.0.1:5555' };
const KEY = 'sk-openapi-caller-SECRET';
const LIMITED = 'sk-openapi-limited-SECRET';
const ACCEPT = 'application/json, text/event-stream';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A REST API that records what it receives: items by id, item creation, a 404, a redirect. */
async function startApi(): Promise<{ url: string; seen: Seen[]; oauthToken: string; close(): Promise<void> }> {
  const api = { url: '', seen: [] as Seen[], oauthToken: 'token-1', close: async () => {} };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const seen: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      api.seen.push(seen);
      const auth = req.headers.authorization;
      if (auth?.startsWith('Bearer token-') && auth !== `Bearer ${api.oauthToken}`) {
        res.writeHead(401).end('token revoked');
        return;
      }
      const path = (req.url ?? '').split('?')[0];
      if (path === '/v1/slow') return; // never answers: the gateway's deadline ends the call
      if (path === '/v1/redirect') {
        res.writeHead(302, { location: `${api.url}/v1/items` }).end();
      } else if (path === '/v1/missing') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no such thing');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ got: req.url, body }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return api;
}

const SPEC = {
  openapi: '3.0.3',
  info: { title: 'items', version: '1' },
  paths: {
    '/items/{id}': {
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'the id' }],
      get: {
        operationId: 'getItem',
        summary: 'Get an item',
        parameters: [
          { $ref: '#/components/parameters/Verbose' },
          { name: 'tags', in: 'query', schema: { type: 'array', items: { type: 'string' } } },
          { name: 'X-Trace', in: 'header', schema: { type: 'string' } },
        ],
      },
    },
    '/items': {
      post: {
        operationId: 'createItem',
        description: 'Creates an item',
        requestBody: {
          required: true,
          content: { 'application/json; charset=utf-8': { schema: { $ref: '#/components/schemas/Item' } } },
        },
      },
    },
    '/missing': { get: {} },
    '/redirect': { get: { operationId: 'redirect' } },
    '/upload': { post: { operationId: 'upload', requestBody: { content: { 'multipart/form-data': {} } } } },
  },
  components: {
    parameters: { Verbose: { name: 'verbose', in: 'query', schema: { type: 'boolean' } } },
    schemas: { Item: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
  },
};

let api: Awaited<ReturnType<typeof startApi>>;
let tokens: TokenEndpoint;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

function resources(): string {
  const spec = JSON.stringify(SPEC);
  return `_format_version: "1"
mcp_servers:
  - { name: api, type: openapi, url: "${api.url}/v1/", auth_type: bearer, secret: api-SECRET, spec: ${spec} }
  - { name: keyed, type: openapi, url: "${api.url}/v1", auth_type: api_key, api_key_header: X-Api-Token, secret: key-SECRET, spec: ${spec} }
  - { name: oauthapi, type: openapi, url: "${api.url}/v1", auth_type: oauth2, secret: s1, client_id: c1, token_url: "${tokens.url}", spec: ${spec} }
  - { name: slow, type: openapi, url: "${api.url}/v1", timeout_ms: 200, spec: { paths: { /slow: { get: { operationId: slow } } } } }
  - { name: broken, type: openapi, url: "${api.url}/v1", spec: { openapi: "3.0.3" } }
api_keys:
  - { display_name: all, key_env: K_ALL, allowed_models: [], mcp_access: { allow: ["*"], deny: ["keyed__createitem"] } }
  - display_name: limited
    key_env: K_LIMITED
    allowed_models: []
    mcp_access: { allow: ["api__*"] }
    mcp_rate_limits: { api: { rpm: 1 } }
guardrails:
  - { name: words, kind: keyword, hook_point: input, patterns: [{ kind: literal, value: forbidden }] }
`;
}

before(async () => {
  [api, tokens] = await Promise.all([startApi(), startTokenEndpoint()]);
  ({ gw, platform } = await gatewayWith(resources(), { env: { K_ALL: KEY, K_LIMITED: LIMITED }, now: midMinute() }));
  app = createProxyApp(gw);
});

after(async () => {
  await Promise.all([api.close(), tokens.close()]);
});

let nextId = 1;

function rpc(path: string, method: string, params?: Record<string, unknown>, key = KEY): Promise<Response> {
  const headers = { 'content-type': 'application/json', accept: ACCEPT, authorization: `Bearer ${key}` };
  const body = JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, ...(params ? { params } : {}) });
  return Promise.resolve(app.request(path, { method: 'POST', headers, body }, PEER));
}

async function result(res: Response): Promise<Record<string, unknown>> {
  assert.equal(res.status, 200);
  const body = await res.json() as { result?: Record<string, unknown> };
  assert.ok(body.result, JSON.stringify(body));
  return body.result;
}

async function call(name: string, args: Record<string, unknown>, path = '/mcp', key = KEY) {
  return await result(await rpc(path, 'tools/call', { name, arguments: args }, key)) as {
    content: { type: string; text: string }[];
    isError?: boolean;
  };
}

function last(): Seen {
  const s = api.seen.at(-1);
  assert.ok(s, 'the API received nothing');
  return s;
}

describe('tools/list', () => {
  test('one tool per operation, as AISIX names and describes it', async () => {
    const r = await result(await rpc('/mcp/api', 'tools/list'));
    assert.deepEqual(r.tools, [
      {
        name: 'createitem',
        description: 'Creates an item',
        inputSchema: {
          type: 'object',
          properties: {
            body: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
          },
          required: ['body'],
        },
      },
      {
        name: 'getitem',
        description: 'Get an item',
        inputSchema: {
          type: 'object',
          properties: {
            id: { type: 'string', description: 'the id' },
            verbose: { type: 'boolean' },
            tags: { type: 'array', items: { type: 'string' } },
          },
          required: ['id'],
        },
      },
      {
        name: 'get__missing',
        description: 'GET /missing',
        inputSchema: { type: 'object', properties: {}, required: [] },
      },
      { name: 'redirect', description: 'GET /redirect', inputSchema: { type: 'object', properties: {}, required: [] } },
    ]);
  });

  test('aggregated: namespaced, filtered by the ACL; a document without paths is a skipped upstream', async () => {
    const r = await result(await rpc('/mcp', 'tools/list'));
    const names = (r.tools as { name: string }[]).map((t) => t.name);
    assert.deepEqual(names.filter((n) => n.startsWith('keyed__')), [
      'keyed__getitem',
      'keyed__get__missing',
      'keyed__redirect',
    ]);
    assert.ok(names.includes('api__createitem'));
    assert.ok(!names.some((n) => n.startsWith('broken__')));
    const warn = platform.logs.find((l) => l.msg === 'skipping upstream in tools/list: list_tools failed');
    assert.equal(warn?.upstream, 'broken');
    assert.match(String(warn?.error), /openapi spec has no `paths` object/);
  });
});

describe('tools/call', () => {
  test('path segments encoded, the declared query, the bearer credential and never the caller key', async () => {
    const r = await call('api__getitem', { id: 'a b(é)', verbose: true, tags: ['x', 'y z'], undeclared: 1 });
    const seen = last();
    assert.equal(seen.method, 'GET');
    assert.equal(seen.url, '/v1/items/a%20b%28%C3%A9%29?verbose=true&tags=x&tags=y+z');
    assert.equal(seen.headers.authorization, 'Bearer api-SECRET');
    assert.ok(!JSON.stringify(seen.headers).includes(KEY));
    assert.deepEqual(r, {
      content: [{ type: 'text', text: JSON.stringify({ got: seen.url, body: '' }) }],
      isError: false,
    });
  });

  test('a JSON body: an object as is, a plain string wrapped', async () => {
    await call('api__createitem', { body: { name: 'n1' } });
    assert.equal(last().method, 'POST');
    assert.equal(last().url, '/v1/items');
    assert.equal(last().headers['content-type'], 'application/json');
    assert.equal(last().body, '{"name":"n1"}');
    await call('api__createitem', { body: 'plain' });
    assert.equal(last().body, '{"data":"plain"}');
  });

  test('a path argument that would change the target is a tool error; the API is not asked', async () => {
    const before = api.seen.length;
    for (
      const [args, text] of [
        [{ id: 'a/b' }, "path parameter 'id' must not contain path separators"],
        [{ id: '..' }, "path parameter 'id' cannot be '.' or '..'"],
        // Escapes of a step, at any depth: an API that decodes once more would read one.
        [{ id: '%2e%2e' }, `path parameter 'id' holds a percent-escape of ".", "/" or "\\"`],
        [{ id: '%252e%252e' }, `path parameter 'id' holds a percent-escape of ".", "/" or "\\"`],
        [{ id: 'a%2Fb' }, `path parameter 'id' holds a percent-escape of ".", "/" or "\\"`],
        [{ id: '%255c' }, `path parameter 'id' holds a percent-escape of ".", "/" or "\\"`],
        [{ id: 'x..' }, `path parameter 'id' holds ".."`],
        [{ id: 'x%zz' }, `path parameter 'id' holds a "%" that is not an escape`],
        [{}, "missing required path parameter 'id'"],
        [{ id: { x: 1 } }, "path parameter 'id' must be a string, number, or boolean"],
      ] as const
    ) {
      assert.deepEqual(await call('api__getitem', args), { content: [{ type: 'text', text }], isError: true });
    }
    assert.equal(api.seen.length, before);
  });

  test('non-2xx answers and redirects are tool errors, the redirect not followed', async () => {
    assert.deepEqual(await call('api__get__missing', {}), {
      content: [{ type: 'text', text: 'HTTP 404: no such thing' }],
      isError: true,
    });
    const before = api.seen.length;
    assert.deepEqual(await call('keyed__redirect', {}), {
      content: [{ type: 'text', text: 'HTTP 302: ' }],
      isError: true,
    });
    assert.equal(api.seen.length, before + 1);
  });

  test('api_key under the row header name', async () => {
    await call('keyed__getitem', { id: 7 });
    assert.equal(last().url, '/v1/items/7');
    assert.equal(last().headers['x-api-token'], 'key-SECRET');
    assert.equal(last().headers['x-api-key'], undefined);
    assert.equal(last().headers.authorization, undefined);
  });

  test('oauth2: the minted token; a 401 drops it and the next call mints anew', async () => {
    await call('oauthapi__getitem', { id: '1' });
    assert.equal(last().headers.authorization, 'Bearer token-1');
    api.oauthToken = 'token-2';
    const refused = await call('oauthapi__getitem', { id: '1' });
    assert.deepEqual(refused, { content: [{ type: 'text', text: 'HTTP 401: token revoked' }], isError: true });
    const ok = await call('oauthapi__getitem', { id: '1' });
    assert.equal(ok.isError, false);
    assert.equal(last().headers.authorization, 'Bearer token-2');
    assert.deepEqual(tokens.minted, ['token-1', 'token-2']);
  });

  test('an unknown tool is -32603; an ACL refusal -32602 with no request made', async () => {
    const before = api.seen.length;
    const unknown = await (await rpc('/mcp', 'tools/call', { name: 'api__nope', arguments: {} })).json() as {
      error: { code: number; message: string };
    };
    assert.deepEqual(unknown.error, { code: -32603, message: "upstream MCP server 'api' failed to call tool" });
    const refused = await (await rpc('/mcp', 'tools/call', { name: 'keyed__createitem', arguments: {} })).json() as {
      error: { code: number; message: string };
    };
    assert.deepEqual(refused.error, { code: -32602, message: "tool 'keyed__createitem' is not available" });
    assert.equal(api.seen.length, before);
  });

  test('a call past timeout_ms is -32603, the cause in the WARN', async () => {
    const res = await rpc('/mcp', 'tools/call', { name: 'slow__slow', arguments: {} });
    const body = await res.json() as { error: { code: number; message: string } };
    assert.deepEqual(body.error, { code: -32603, message: "upstream MCP server 'slow' failed to call tool" });
    assert.equal(last().url, '/v1/slow');
    const warn = platform.logs.findLast((l) => l.msg === 'upstream tools/call failed');
    assert.equal(warn?.upstream, 'slow');
    assert.match(String(warn?.error), /timed out after 200 ms/);
  });

  test('an input guardrail blocks before the API is asked', async () => {
    const before = api.seen.length;
    assert.deepEqual(await call('api__createitem', { body: { name: 'forbidden' } }), {
      content: [{ type: 'text', text: "tool call blocked by content policy (guardrail 'words')" }],
      isError: true,
    });
    assert.equal(api.seen.length, before);
  });

  test('the rate limit per key × server', async () => {
    assert.equal((await call('getitem', { id: 'r' }, '/mcp/api', LIMITED)).isError, false);
    const res = await rpc('/mcp/api', 'tools/call', { name: 'getitem', arguments: { id: 'r' } }, LIMITED);
    assert.equal(res.status, 429);
  });
});

describe('the official SDK client', () => {
  test('lists and calls an OpenAPI tool through the scoped endpoint', async () => {
    const client = new Client({ name: 'openapi-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL('http://gw.test/mcp/api'), {
        requestInit: { headers: { authorization: `Bearer ${KEY}` } },
        fetch: (url, init) => Promise.resolve(app.request(String(url), init, PEER)),
      }),
    );
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['createitem', 'getitem', 'get__missing', 'redirect']);
      const r = await client.callTool({ name: 'getitem', arguments: { id: 'sdk' } });
      assert.equal(r.isError, false);
      assert.equal(last().url, '/v1/items/sdk');
    } finally {
      await client.close();
    }
  });
});
