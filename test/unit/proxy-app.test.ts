// The proxy app through app.request() against a real mock upstream on a loopback port (docs/operations.md, docs/routing.md,
// docs/aisix-compatibility.md "Logs"): probes, /v1/models, chat (JSON and SSE), embeddings, the error table, request ids, in-flight
// accounting, client disconnects, the access log, and no secret in any body or log line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import { createProxyApp } from '../../src/proxy/app.ts';
import { ROUTES } from '../../src/proxy/routes.ts';
import { Gateway } from '../../src/gateway.ts';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigSchema } from '../../src/config/schema.ts';
import { VERSION } from '../../src/version.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { forcePhase, gatewayWith, type TestPlatform, testPlatform } from '../support/platform.ts';
import { sleep, until, within } from '../support/until.ts';
import { IdleTimer } from '../../src/util/idle-timer.ts';

const PEER = { peer: '127.0.0.1:5555' };
const UPSTREAM_KEY = 'sk-upstream-SECRET-7f3a9c';
const CALLER = {
  all: 'sk-caller-all-SECRET-1111',
  limited: 'sk-caller-limited-SECRET-2222',
  expired: 'sk-caller-expired-SECRET-3333',
  disabled: 'sk-caller-disabled-SECRET-4444',
  none: 'sk-caller-none-SECRET-5555',
};
const SECRETS = [UPSTREAM_KEY, ...Object.values(CALLER)];
const BODY_LIMIT = 2048;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0", request_body_limit_bytes: ${BODY_LIMIT} }
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

function resources(mockBase: string, deadBase: string): string {
  return `_format_version: "1"
provider_keys:
  - display_name: mock
    provider: openai
    api_key: \${UPSTREAM_KEY}
    api_base: ${mockBase}
  - display_name: dead
    provider: openai
    api_key: \${UPSTREAM_KEY}
    api_base: ${deadBase}
models:
  - { display_name: gpt-4o, provider_key: mock, model_name: gpt-4o-upstream, retries: 0 }
  - { display_name: gpt-4o-mini, provider_key: mock, model_name: gpt-4o-mini-upstream, retries: 0 }
  - { display_name: embed, provider_key: mock, model_name: text-embedding-3-small, retries: 0 }
  - { display_name: slow, provider_key: mock, model_name: slow-upstream, timeout: 200, retries: 0 }
  - { display_name: quiet, provider_key: mock, model_name: quiet-upstream, stream_timeout: 300, retries: 0 }
  - { display_name: dead, provider_key: dead, model_name: dead-upstream, retries: 0 }
  - { display_name: "openai/*", provider_key: mock, model_name: "*", retries: 0 }
  - { display_name: smart, routing: { targets: [{ model: gpt-4o }] } }
api_keys:
  - { display_name: all, key_env: CALLER_ALL, allowed_models: ["*"] }
  - { display_name: limited, key_env: CALLER_LIMITED, allowed_models: ["gpt-4o*", embed, "openai/gpt-*"] }
  - { display_name: expired, key_env: CALLER_EXPIRED, allowed_models: ["*"], expires_at: "2020-01-01T00:00:00Z" }
  - { display_name: disabled, key_env: CALLER_DISABLED, allowed_models: ["*"], disabled: true }
  - { display_name: none, key_env: CALLER_NONE, allowed_models: [] }
`;
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let mock: MockUpstream;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;
/** Every error body seen, checked for secrets at the end. */
const errorBodies: string[] = [];

before(async () => {
  mock = await startMockUpstream();
  const dead = await closedPort();
  ({ gw, platform } = await gatewayWith(resources(mock.base, `http://127.0.0.1:${dead}/v1`), {
    config: CONFIG,
    env: {
      UPSTREAM_KEY,
      CALLER_ALL: CALLER.all,
      CALLER_LIMITED: CALLER.limited,
      CALLER_EXPIRED: CALLER.expired,
      CALLER_DISABLED: CALLER.disabled,
      CALLER_NONE: CALLER.none,
    },
  }));
  app = createProxyApp(gw);
});

after(async () => {
  await mock.close();
});

type Init = RequestInit & { duplex?: 'half' };

function call(path: string, init: Init = {}): Promise<Response> {
  return Promise.resolve(app.request(path, init, PEER));
}

function post(
  path: string,
  body: unknown,
  opts: { key?: string | null; headers?: Record<string, string> } = {},
): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
  const key = opts.key === undefined ? CALLER.all : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return call(path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

const MESSAGES = [{ role: 'user', content: 'hello there' }];

/** Assert an OpenAI error envelope; returns it. */
async function expectError(
  res: Response,
  status: number,
  type: string,
  code?: string,
): Promise<{ message: string; type: string; code?: string }> {
  const text = await within(res.text(), 5000, 'error body');
  errorBodies.push(text);
  assert.equal(res.status, status, text);
  assert.equal(res.headers.get('content-type'), 'application/json');
  const body = JSON.parse(text) as { error: { message: string; type: string; code?: string } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.type, type, text);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  if (code === undefined) assert.equal('code' in body.error, false, text);
  else assert.equal(body.error.code, code, text);
  assertCommonHeaders(res);
  return body.error;
}

function assertCommonHeaders(res: Response): void {
  assert.equal(res.headers.get('server'), `sluice/${VERSION}`);
  assert.match(res.headers.get('x-aisix-request-id') ?? '', /^[\x21-\x7e]{1,256}$/);
}

const completedLog = (requestId: string) =>
  platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === requestId);

describe('the route table in Hono', () => {
  test('a request to a route matches one handler, so Hono composes no chain; an unrouted path none', () => {
    for (const route of ROUTES) {
      const path = route.path.replace(/:[a-z]+/g, 'x');
      for (const method of route.method === 'ALL' ? ['GET', 'POST'] : [route.method].flat()) {
        assert.equal(app.router.match(method, path)[0].length, 1, `${method} ${route.path}`);
      }
    }
    for (const path of ['/livez', '/readyz']) assert.equal(app.router.match('GET', path)[0].length, 1, path);
    for (const path of ['/v1/nope', '/a2a', '/mcp/x/y', '/elsewhere']) {
      assert.equal(app.router.match('POST', path)[0].length, 0, `${path}: answered by notFound`);
    }
  });
});

describe('/livez', () => {
  test('200 ok, plain text, nosniff', async () => {
    const res = await call('/livez');
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'ok');
    assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assertCommonHeaders(res);
  });

  test('verbose (any value)', async () => {
    for (const q of ['?verbose', '?verbose=1', '?verbose=false']) {
      const res = await call(`/livez${q}`);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '[+]ping ok\nlivez check passed\n', q);
    }
  });

  test('HEAD 200 with no body; POST 405', async () => {
    const head = await call('/livez', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await call('/livez', { method });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get('allow'), 'GET, HEAD');
      await res.text();
    }
  });

  test('stays 200 while draining, and logs no "arrived while draining" line', async () => {
    const before = platform.logs.length;
    forcePhase(gw, 'draining');
    try {
      const res = await call('/livez');
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'ok');
    } finally {
      forcePhase(gw, 'serving');
    }
    assert.equal(platform.logs.slice(before).some((l) => l.msg === 'request arrived while draining'), false);
  });
});

describe('/readyz', () => {
  test('200 ok; verbose', async () => {
    const res = await call('/readyz');
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'ok');
    assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const v = await call('/readyz?verbose');
    assert.equal(await v.text(), '[+]shutdown ok\n[+]config ok\nreadyz check passed\n');
  });

  test('draining: 503 with the detailed body, even without verbose', async () => {
    forcePhase(gw, 'draining');
    try {
      for (const q of ['', '?verbose']) {
        const res = await call(`/readyz${q}`);
        assert.equal(res.status, 503);
        assert.equal(await res.text(), '[-]shutdown failed: draining\n[+]config ok\nreadyz check failed');
        assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      }
      const head = await call('/readyz', { method: 'HEAD' });
      assert.equal(head.status, 503);
    } finally {
      forcePhase(gw, 'serving');
    }
  });

  test('?exclude=shutdown while draining: 200 with the exclusion shown', async () => {
    forcePhase(gw, 'draining');
    try {
      const res = await call('/readyz?exclude=shutdown');
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '[+]shutdown excluded: ok\n[+]config ok\nreadyz check passed\n');
    } finally {
      forcePhase(gw, 'serving');
    }
  });

  test('an unknown exclude name adds the warn line', async () => {
    const res = await call('/readyz?exclude=foo');
    assert.equal(res.status, 200);
    assert.equal(
      await res.text(),
      '[+]shutdown ok\n[+]config ok\nwarn: some health checks cannot be excluded: no matches for "foo"\nreadyz check passed\n',
    );
    forcePhase(gw, 'draining');
    try {
      const d = await call('/readyz?exclude=foo&exclude=config');
      assert.equal(d.status, 503);
      assert.equal(
        await d.text(),
        '[-]shutdown failed: draining\n[+]config excluded: ok\nwarn: some health checks cannot be excluded: no matches for "foo"\nreadyz check failed',
      );
    } finally {
      forcePhase(gw, 'serving');
    }
  });

  test('before any configuration is applied: config not ready', async () => {
    const p = testPlatform();
    const c = loadConfig('/t/config.yaml', CONFIG, {});
    assert.ok(c.ok);
    const bare = new Gateway(c.config, p);
    const res = await createProxyApp(bare).request('/readyz', {}, PEER);
    assert.equal(res.status, 503);
    assert.equal(await res.text(), '[+]shutdown ok\n[-]config failed: not ready\nreadyz check failed');
  });

  test('POST is 405', async () => {
    const res = await call('/readyz', { method: 'POST' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, HEAD');
  });
});

describe('GET /v1/models', () => {
  test('sorted, wildcard aliases hidden, OpenAI list shape', async () => {
    const res = await call('/v1/models', { headers: { authorization: `Bearer ${CALLER.all}` } });
    assert.equal(res.status, 200);
    assertCommonHeaders(res);
    const body = await res.json() as {
      object: string;
      data: { id: string; object: string; created: number; owned_by: string }[];
    };
    assert.deepEqual(Object.keys(body), ['object', 'data']);
    assert.equal(body.object, 'list');
    assert.deepEqual(body.data.map((m) => m.id), ['dead', 'embed', 'gpt-4o', 'gpt-4o-mini', 'quiet', 'slow', 'smart']);
    const now = Math.floor(Date.now() / 1000);
    for (const m of body.data) {
      assert.deepEqual(Object.keys(m), ['id', 'object', 'created', 'owned_by']);
      assert.equal(m.object, 'model');
      assert.ok(Math.abs(m.created - now) <= 1, 'created is the time of the answer (AISIX)');
      assert.equal(m.owned_by, m.id === 'smart' ? 'sluice' : 'openai');
    }
  });

  test("filtered by the key's allowed_models globs", async () => {
    const res = await call('/v1/models', { headers: { 'x-api-key': CALLER.limited } });
    const body = await res.json() as { data: { id: string }[] };
    assert.deepEqual(body.data.map((m) => m.id), ['embed', 'gpt-4o', 'gpt-4o-mini']);
    const none = await call('/v1/models', { headers: { authorization: `Bearer ${CALLER.none}` } });
    assert.deepEqual(await none.json(), { object: 'list', data: [] });
  });

  test('needs a caller key', async () => {
    await expectError(await call('/v1/models'), 401, 'invalid_api_key');
    await expectError(await call('/v1/models', { headers: { authorization: 'Bearer wrong' } }), 401, 'invalid_api_key');
  });
});

describe('POST /v1/chat/completions (JSON)', () => {
  test('the upstream gets model_name and the provider key; the caller gets its body naming the caller model', async () => {
    const upstreamBody =
      '{"id":"chatcmpl-1",  "object":"chat.completion", "model":"gpt-4o-upstream", "choices":[{"index":0,"message":{"role":"assistant","content":"hey"},"finish_reason":"stop"}]}';
    mock.script({ body: upstreamBody });
    const n = mock.requests.length;
    const res = await post('/v1/chat/completions', {
      model: 'gpt-4o',
      messages: MESSAGES,
      temperature: 0.2,
      user: 'u-1',
    });
    assert.equal(res.status, 200);
    // Byte for byte but the model: the caller's name is spliced in place of the upstream's.
    assert.equal(await res.text(), upstreamBody.replace('"model":"gpt-4o-upstream"', '"model":"gpt-4o"'));
    assert.equal(res.headers.get('content-type'), 'application/json');
    assertCommonHeaders(res);
    assert.equal(mock.requests.length, n + 1);
    const r = mock.requests[n]!;
    assert.equal(r.method, 'POST');
    assert.equal(r.url, '/v1/chat/completions');
    assert.equal(r.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.deepEqual(r.json, { model: 'gpt-4o-upstream', messages: MESSAGES, temperature: 0.2, user: 'u-1' });
    // The caller's key never travels upstream.
    assert.equal(JSON.stringify(r.headers).includes(CALLER.all), false);
    assert.equal(r.body.includes(CALLER.all), false);
    assert.equal(gw.lifecycle.inFlight, 0);
  });

  test('x-api-key auth works', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
      key: null,
      headers: { 'x-api-key': CALLER.all },
    });
    assert.equal(res.status, 200);
    const body = await res.json() as { model: string; object: string };
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.model, 'gpt-4o');
  });

  test('the Bearer scheme is case-insensitive', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
      key: null,
      headers: { authorization: `bearer ${CALLER.all}` },
    });
    assert.equal(res.status, 200);
    await res.text();
  });

  test('a wildcard alias substitutes * in model_name', async () => {
    const n = mock.requests.length;
    const res = await post('/v1/chat/completions', { model: 'openai/gpt-4.1-nano', messages: MESSAGES });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(mock.requests[n]!.json?.model, 'gpt-4.1-nano');
  });

  test('in flight while the upstream holds the answer; back to 0 after', async () => {
    let release!: () => void;
    mock.script({
      hold: new Promise<void>((r) => {
        release = r;
      }),
    });
    const waiting = mock.waitForRequests(1);
    const pending = post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES });
    await waiting;
    assert.equal(gw.lifecycle.inFlight, 1);
    release();
    const res = await within(pending, 5000, 'the held response');
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(gw.lifecycle.inFlight, 0);
  });
});

describe('POST /v1/chat/completions (SSE)', () => {
  test('chunks pass through (naming the caller model) and end with data: [DONE]', async () => {
    const n = mock.requests.length;
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    assertCommonHeaders(res);
    assert.equal(gw.lifecycle.inFlight, 1, 'a stream holds its slot until its last byte');
    const text = await within(res.text(), 5000, 'the whole stream');
    assert.equal(
      text,
      `data: ${JSON.stringify(chunk('gpt-4o', 'hello'))}\n\ndata: ${
        JSON.stringify(chunk('gpt-4o', ' world'))
      }\n\ndata: [DONE]\n\n`,
    );
    assert.equal(gw.lifecycle.inFlight, 0);
    const r = mock.requests[n]!;
    assert.equal(r.json?.stream, true);
    assert.equal(r.json?.model, 'gpt-4o-upstream');
    assert.equal(r.headers.accept, 'text/event-stream');
  });

  test('the first chunk reaches the caller before the upstream finishes; cancelling aborts the upstream', async () => {
    const abortedBefore = mock.aborted;
    mock.script({ sse: [chunk('gpt-4o-upstream', 'first'), chunk('gpt-4o-upstream', 'second')], chunkDelayMs: 3000 });
    const started = Date.now();
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true }, {
      headers: { 'x-aisix-request-id': 'stream-cancel-1' },
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let got = '';
    const decoder = new TextDecoder();
    while (!got.includes('\n\n')) {
      const { done, value } = await within(reader.read(), 1500, 'the first SSE chunk');
      assert.equal(done, false, 'the stream ended before its first chunk');
      got += decoder.decode(value, { stream: true });
    }
    assert.ok(Date.now() - started < 1500, 'first chunk took too long');
    assert.equal(got, `data: ${JSON.stringify(chunk('gpt-4o', 'first'))}\n\n`);
    assert.equal(gw.lifecycle.inFlight, 1);
    await within(reader.cancel(), 2000, 'reader.cancel()');
    assert.equal(gw.lifecycle.inFlight, 0, 'the slot is released when the caller goes away');
    await until(() => mock.aborted > abortedBefore, 3000, 'the upstream request to be aborted');
    const log = completedLog('stream-cancel-1');
    assert.ok(log, 'access log line');
    assert.equal(log.status, 200);
    assert.equal(log.error_kind, 'client_closed');
  });

  test('an upstream failure after the first chunk ends the stream with an SSE error event', async () => {
    mock.script({
      sse: [chunk('gpt-4o-upstream', 'part'), chunk('gpt-4o-upstream', 'never')],
      chunkDelayMs: 300,
      dropAfterChunks: 1,
    });
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true }, {
      headers: { 'x-aisix-request-id': 'stream-drop-1' },
    });
    assert.equal(res.status, 200);
    const text = await within(res.text(), 5000, 'the broken stream');
    const events = text.split('\n\n').filter(Boolean);
    assert.equal(events.length, 2, text);
    assert.equal(events[0], `data: ${JSON.stringify(chunk('gpt-4o', 'part'))}`);
    const err = JSON.parse(events[1]!.slice('data: '.length)) as { error: { type: string; message: string } };
    assert.equal(err.error.type, 'upstream_error');
    assert.equal(text.includes('[DONE]'), false, 'a failed stream must not look complete');
    assert.equal(gw.lifecycle.inFlight, 0);
    assert.equal(completedLog('stream-drop-1')?.error_kind, 'upstream_error');
    errorBodies.push(text);
  });

  test('upstream silence longer than stream_timeout ends the stream with an upstream_timeout event', async () => {
    mock.script({ sse: [chunk('quiet-upstream', 'one'), chunk('quiet-upstream', 'two')], chunkDelayMs: 2000 });
    const abortedBefore = mock.aborted;
    const started = Date.now();
    const res = await post('/v1/chat/completions', { model: 'quiet', messages: MESSAGES, stream: true }, {
      headers: { 'x-aisix-request-id': 'stream-quiet-1' },
    });
    assert.equal(res.status, 200);
    const text = await within(res.text(), 3000, 'the timed-out stream');
    assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`);
    const events = text.split('\n\n').filter(Boolean);
    assert.equal(events.length, 2, text);
    assert.equal(JSON.parse(events[1]!.slice('data: '.length)).error.type, 'upstream_timeout');
    assert.equal(completedLog('stream-quiet-1')?.error_kind, 'upstream_timeout');
    assert.equal(gw.lifecycle.inFlight, 0);
    await until(() => mock.aborted > abortedBefore, 3000, 'the silent upstream request to be aborted');
  });

  test('stream: true with an upstream 4xx is passed through as JSON; a 5xx is 502', async () => {
    mock.script({ status: 429, body: '{"error":{"message":"slow down","type":"rate_limit"}}' });
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true });
    assert.equal(res.status, 429);
    assert.equal(await res.text(), '{"error":{"message":"slow down","type":"rate_limit"}}');
    mock.script({ status: 503 });
    await expectError(
      await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true }),
      502,
      'upstream_error',
    );
  });

  test('stream: true with a wrong model is still a JSON error', async () => {
    await expectError(
      await post('/v1/chat/completions', { model: 'nope', messages: MESSAGES, stream: true }),
      404,
      'model_not_found',
    );
  });
});

describe('POST /v1/embeddings', () => {
  test("forwarded with model_name; the body comes back as sent, naming the caller's model", async () => {
    const upstreamBody = {
      object: 'list',
      data: [{ object: 'embedding', index: 0, embedding: [0.25, -0.5] }],
      model: 'text-embedding-3-small',
      usage: { prompt_tokens: 2, total_tokens: 2 },
    };
    mock.script({ body: upstreamBody });
    const n = mock.requests.length;
    const res = await post('/v1/embeddings', { model: 'embed', input: 'hello world' }, { key: CALLER.limited });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ...upstreamBody, model: 'embed' });
    assertCommonHeaders(res);
    const r = mock.requests[n]!;
    assert.equal(r.url, '/v1/embeddings');
    assert.equal(r.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.deepEqual(r.json, { model: 'text-embedding-3-small', input: 'hello world' });
    assert.equal(gw.lifecycle.inFlight, 0);
  });

  test('input is required', async () => {
    await expectError(await post('/v1/embeddings', { model: 'embed' }), 400, 'invalid_request_error');
  });
});

describe('errors (docs/routing.md)', () => {
  const chat = { model: 'gpt-4o', messages: MESSAGES };

  test('missing auth: 401 invalid_api_key', async () => {
    const n = mock.requests.length;
    await expectError(await post('/v1/chat/completions', chat, { key: null }), 401, 'invalid_api_key');
    assert.equal(mock.requests.length, n, 'no upstream call');
  });

  test('malformed Authorization: 401 invalid_api_key', async () => {
    for (
      const authorization of [
        'Basic dXNlcjpwdw==',
        'Bearer',
        'Bearer ',
        `Bearer ${CALLER.all} extra`,
        CALLER.all,
        `Token ${CALLER.all}`,
      ]
    ) {
      await expectError(
        await post('/v1/chat/completions', chat, { key: null, headers: { authorization } }),
        401,
        'invalid_api_key',
      );
    }
    // A malformed Authorization is not rescued by x-api-key.
    await expectError(
      await post('/v1/chat/completions', chat, {
        key: null,
        headers: { authorization: 'Basic x', 'x-api-key': CALLER.all },
      }),
      401,
      'invalid_api_key',
    );
    await expectError(
      await post('/v1/chat/completions', chat, { key: null, headers: { 'x-api-key': '   ' } }),
      401,
      'invalid_api_key',
    );
  });

  test('unknown key: 401 invalid_api_key', async () => {
    await expectError(await post('/v1/chat/completions', chat, { key: 'sk-not-a-key' }), 401, 'invalid_api_key');
    await expectError(
      await post('/v1/chat/completions', chat, { key: null, headers: { 'x-api-key': 'sk-not-a-key' } }),
      401,
      'invalid_api_key',
    );
  });

  test('expired and disabled keys: 401 with api_key_expired / api_key_disabled', async () => {
    await expectError(
      await post('/v1/chat/completions', chat, { key: CALLER.expired }),
      401,
      'invalid_api_key',
      'api_key_expired',
    );
    await expectError(
      await post('/v1/chat/completions', chat, { key: CALLER.disabled }),
      401,
      'invalid_api_key',
      'api_key_disabled',
    );
    await expectError(
      await call('/v1/models', { headers: { authorization: `Bearer ${CALLER.expired}` } }),
      401,
      'invalid_api_key',
      'api_key_expired',
    );
  });

  test('model not allowed for the key: 403 permission_denied', async () => {
    const n = mock.requests.length;
    await expectError(
      await post('/v1/chat/completions', { model: 'slow', messages: MESSAGES }, { key: CALLER.limited }),
      403,
      'permission_denied',
    );
    await expectError(
      await post('/v1/chat/completions', { model: 'openai/o1', messages: MESSAGES }, { key: CALLER.limited }),
      403,
      'permission_denied',
    );
    await expectError(await post('/v1/chat/completions', chat, { key: CALLER.none }), 403, 'permission_denied');
    // A restricted key learns nothing about which other names exist: unknown and known both answer 403.
    await expectError(
      await post('/v1/chat/completions', { model: 'no-such-model', messages: MESSAGES }, { key: CALLER.none }),
      403,
      'permission_denied',
    );
    assert.equal(mock.requests.length, n, 'no upstream call');
  });

  test('unknown model: 404 model_not_found', async () => {
    const e = await expectError(
      await post('/v1/chat/completions', { model: 'gpt-9', messages: MESSAGES }),
      404,
      'model_not_found',
    );
    assert.match(e.message, /gpt-9/);
  });

  test('malformed JSON, empty body, non-object: 400 invalid_request_error', async () => {
    await expectError(await post('/v1/chat/completions', '{"model": "gpt-4o", '), 400, 'invalid_request_error');
    await expectError(await post('/v1/chat/completions', ''), 400, 'invalid_request_error');
    await expectError(await post('/v1/chat/completions', '[1,2]'), 400, 'invalid_request_error');
    await expectError(await post('/v1/chat/completions', '"text"'), 400, 'invalid_request_error');
  });

  test("edge rules as AISIX's: not declared JSON, invalid UTF-8, not JSON: one 400 wording", async () => {
    const body = JSON.stringify({ model: 'gpt-4o', messages: MESSAGES });
    const n = mock.requests.length;
    const refused = [
      post('/v1/chat/completions', body, { headers: { 'content-type': 'text/plain' } }),
      post('/v1/chat/completions', body, { headers: { 'content-type': '' } }),
      call('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER.all}`, 'content-type': 'application/json' },
        body: new Uint8Array([
          ...new TextEncoder().encode('{"model":"gpt-4o","messages":[{"role":"user","content":"'),
          0xff,
          0xfe,
          ...new TextEncoder().encode('"}]}'),
        ]),
      }),
      post('/v1/chat/completions', '{"model": "gpt-4o", '),
    ];
    for (const res of await Promise.all(refused)) {
      const e = await expectError(await res, 400, 'invalid_request_error');
      assert.equal(e.message, 'request payload is invalid: invalid JSON request body');
    }
    assert.equal(mock.requests.length, n, 'no upstream call');
    // A charset parameter and an application/*+json type are JSON.
    for (const type of ['application/json; charset=utf-8', 'application/vnd.api+json', 'Application/JSON']) {
      const res = await post('/v1/chat/completions', body, { headers: { 'content-type': type } });
      assert.equal(res.status, 200, type);
      await res.text();
    }
    // Anthropic's envelope on /v1/messages.
    const m = await post('/v1/messages', '{', { headers: { 'content-type': 'application/json' } });
    assert.equal(m.status, 400);
    assert.deepEqual(await m.json(), {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'request payload is invalid: invalid JSON request body' },
    });
  });

  test('wrong types: 400 invalid_request_error', async () => {
    const cases: [unknown, RegExp][] = [
      [{ model: 'gpt-4o', messages: 'hello' }, /messages/],
      [{ model: 'gpt-4o', messages: [] }, /messages/],
      [{ model: 'gpt-4o' }, /messages/],
      [{ model: 'gpt-4o', messages: MESSAGES, stream: 'yes' }, /stream/],
      [{ model: 'gpt-4o', messages: MESSAGES, stream: 1 }, /stream/],
      [{ messages: MESSAGES }, /model/],
      [{ model: 42, messages: MESSAGES }, /model/],
      [{ model: '', messages: MESSAGES }, /model/],
    ];
    const n = mock.requests.length;
    for (const [body, re] of cases) {
      const e = await expectError(await post('/v1/chat/completions', body), 400, 'invalid_request_error');
      assert.match(e.message, re, JSON.stringify(body));
    }
    assert.equal(mock.requests.length, n, 'no upstream call');
  });

  test('auth is checked before the body is parsed', async () => {
    await expectError(await post('/v1/chat/completions', '{not json', { key: null }), 401, 'invalid_api_key');
    await expectError(await post('/v1/chat/completions', '{not json', { key: 'sk-wrong' }), 401, 'invalid_api_key');
    await expectError(
      await post('/v1/chat/completions', 'x'.repeat(BODY_LIMIT + 1), { key: null }),
      401,
      'invalid_api_key',
    );
  });

  test('body over the limit with a content-length: 413', async () => {
    const big = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(BODY_LIMIT) }] });
    const n = mock.requests.length;
    const res = await call('/v1/chat/completions', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CALLER.all}`,
        'content-type': 'application/json',
        'content-length': String(new TextEncoder().encode(big).byteLength),
      },
      body: big,
    });
    const e = await expectError(res, 413, 'invalid_request_error');
    assert.match(e.message, new RegExp(String(BODY_LIMIT)));
    assert.equal(mock.requests.length, n);
  });

  test('body over the limit as a chunked stream: 413; under the limit: served', async () => {
    const enc = new TextEncoder();
    const streamOf = (parts: string[]) =>
      new ReadableStream<Uint8Array>({
        start(ctrl) {
          for (const p of parts) ctrl.enqueue(enc.encode(p));
          ctrl.close();
        },
      });
    const head = '{"model":"gpt-4o","messages":[{"role":"user","content":"';
    const big = [head, 'y'.repeat(1000), 'y'.repeat(1000), 'y'.repeat(1000), '"}]}'];
    const res = await call('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER.all}`, 'content-type': 'application/json' },
      body: streamOf(big),
      duplex: 'half',
    });
    await expectError(res, 413, 'invalid_request_error');

    const small = [head, 'hi', '"}]}'];
    const ok = await call('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER.all}`, 'content-type': 'application/json' },
      body: streamOf(small),
      duplex: 'half',
    });
    assert.equal(ok.status, 200, await ok.clone().text());
    await ok.text();
  });

  test('upstream 500: 502 upstream_error, the upstream body is not passed on', async () => {
    mock.script({ status: 500, body: { error: { message: 'internal upstream detail', type: 'server_error' } } });
    const e = await expectError(await post('/v1/chat/completions', chat), 502, 'upstream_error');
    assert.equal(e.message.includes('internal upstream detail'), false);
  });

  test('upstream unreachable: 502 upstream_error', async () => {
    await expectError(await post('/v1/chat/completions', { model: 'dead', messages: MESSAGES }), 502, 'upstream_error');
  });

  test('upstream timeout: 504 upstream_timeout', async () => {
    mock.script({ delayMs: 1000 });
    const started = Date.now();
    await expectError(
      await post('/v1/chat/completions', { model: 'slow', messages: MESSAGES }),
      504,
      'upstream_timeout',
    );
    assert.ok(Date.now() - started < 900, 'the 200 ms model timeout was not honoured');
  });

  test('upstream 4xx: same status and body passed through', async () => {
    const upstreamBody =
      '{"error":{"message":"Invalid value for temperature","type":"invalid_request_error","param":"temperature","code":null}}';
    mock.script({ status: 400, body: upstreamBody });
    const res = await post('/v1/chat/completions', { ...chat, temperature: 9 });
    assert.equal(res.status, 400);
    assert.equal(await res.text(), upstreamBody);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assertCommonHeaders(res);
    mock.script({
      status: 404,
      body: '{"error":{"message":"The model does not exist","type":"invalid_request_error"}}',
    });
    const nf = await post('/v1/chat/completions', chat);
    assert.equal(nf.status, 404);
    assert.equal(await nf.text(), '{"error":{"message":"The model does not exist","type":"invalid_request_error"}}');
  });

  test('unknown path 404 not_found; wrong method on a known endpoint 405', async () => {
    await expectError(
      await call('/v1/nothing', { headers: { authorization: `Bearer ${CALLER.all}` } }),
      404,
      'not_found',
    );
    await expectError(
      await call('/v1/chat/completions', { headers: { authorization: `Bearer ${CALLER.all}` } }),
      405,
      'method_not_allowed',
    );
    const other = await call('/elsewhere');
    assert.equal(other.status, 404);
    assertCommonHeaders(other);
  });

  test('in flight is back to 0 after every error', () => {
    assert.equal(gw.lifecycle.inFlight, 0);
  });
});

describe('request ids and the Server header', () => {
  test('a caller-supplied id of at most 256 visible ASCII characters is honoured', async () => {
    for (const id of ['req-abc-123', 'x'.repeat(256), '!~{}[]"\'']) {
      const res = await post('/v1/chat/completions', { model: 'nope', messages: MESSAGES }, {
        headers: { 'x-aisix-request-id': id },
      });
      assert.equal(res.headers.get('x-aisix-request-id'), id);
      await res.text();
    }
  });

  test('otherwise a UUID is minted', async () => {
    for (const id of ['x'.repeat(257), 'has space', 'tab\there', 'é-non-ascii']) {
      const headers = new Headers({ authorization: `Bearer ${CALLER.all}` });
      headers.set('x-aisix-request-id', id);
      const res = await call('/v1/models', { headers });
      const got = res.headers.get('x-aisix-request-id') ?? '';
      assert.match(got, UUID, id);
      await res.text();
    }
    const none = await call('/v1/models', { headers: { authorization: `Bearer ${CALLER.all}` } });
    assert.match(none.headers.get('x-aisix-request-id') ?? '', UUID);
    const a = await call('/v1/models');
    const b = await call('/v1/models');
    assert.notEqual(a.headers.get('x-aisix-request-id'), b.headers.get('x-aisix-request-id'));
  });

  test('every proxy response has x-aisix-request-id and server: sluice/<version>, probes included', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    assert.equal(VERSION, pkg.version);
    const responses = [
      await call('/livez'),
      await call('/readyz'),
      await call('/livez', { method: 'POST' }),
      await call('/nowhere'),
      await call('/v1/models'),
      await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }),
      await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true }),
    ];
    for (const res of responses) {
      assert.equal(res.headers.get('server'), `sluice/${pkg.version}`, res.url);
      assert.ok(res.headers.get('x-aisix-request-id'), res.url);
      await res.text();
    }
    const probe = await call('/livez', { headers: { 'x-aisix-request-id': 'probe-1' } });
    assert.equal(probe.headers.get('x-aisix-request-id'), 'probe-1');
  });
});

describe('proxy.identity', () => {
  test('aisix: Server is AISIX/<version> on every proxy response and a group is owned_by "aisix"', async () => {
    const { gw: g2 } = await gatewayWith(resources(mock.base, mock.base), {
      config: CONFIG.replace(`request_body_limit_bytes: ${BODY_LIMIT}`, 'identity: aisix'),
      env: {
        UPSTREAM_KEY,
        CALLER_ALL: CALLER.all,
        CALLER_LIMITED: CALLER.limited,
        CALLER_EXPIRED: CALLER.expired,
        CALLER_DISABLED: CALLER.disabled,
        CALLER_NONE: CALLER.none,
      },
    });
    assert.equal(g2.config.proxy.identity, 'aisix');
    const a2 = createProxyApp(g2);
    const auth = { authorization: `Bearer ${CALLER.all}`, 'content-type': 'application/json' };
    const chat = (stream: boolean) =>
      a2.request('/v1/chat/completions', {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ model: 'gpt-4o', messages: MESSAGES, stream }),
      }, PEER);
    const responses = [
      await a2.request('/livez', {}, PEER),
      await a2.request('/readyz', {}, PEER),
      await a2.request('/nowhere', {}, PEER),
      await a2.request('/v1/models', {}, PEER), // 401
      await a2.request('/v1/models', { headers: auth }, PEER),
      await chat(false),
      await chat(true),
    ];
    // AISIX's e2e pattern for its Server header.
    for (const res of responses) {
      assert.equal(res.headers.get('server'), `AISIX/${VERSION}`, res.url);
      assert.match(res.headers.get('server')!, /^AISIX\/\d+\.\d+\.\d+([-+][\w.-]+)?$/);
      await res.text();
    }
    const models = await (await a2.request('/v1/models', { headers: auth }, PEER)).json() as {
      data: { id: string; owned_by: string }[];
    };
    const by = Object.fromEntries(models.data.map((m) => [m.id, m.owned_by]));
    assert.equal(by.smart, 'aisix');
    assert.equal(by['gpt-4o'], 'openai');
  });

  test('the default is sluice; any other value is a config error naming the field', async () => {
    assert.equal(gw.config.proxy.identity, 'sluice');
    const res = await call('/v1/models', { headers: { authorization: `Bearer ${CALLER.all}` } });
    assert.equal(res.headers.get('server'), `sluice/${VERSION}`);
    const models = await res.json() as { data: { id: string; owned_by: string }[] };
    assert.equal(models.data.find((m) => m.id === 'smart')?.owned_by, 'sluice');
    const bad = ConfigSchema.safeParse({ proxy: { addr: '127.0.0.1:0', identity: 'AISIX' } });
    assert.equal(bad.success, false);
    assert.deepEqual(bad.error?.issues[0]?.path, ['proxy', 'identity']);
  });
});

describe('request id accept headers', () => {
  test('proxy.request_id.accept_headers chooses which caller headers are honoured, in order', async () => {
    const { gw: g2 } = await gatewayWith(resources(mock.base, mock.base), {
      config: CONFIG.replace(
        `request_body_limit_bytes: ${BODY_LIMIT}`,
        'request_id: { accept_headers: [x-request-id, x-correlation-id] }',
      ),
      env: {
        UPSTREAM_KEY,
        CALLER_ALL: CALLER.all,
        CALLER_LIMITED: CALLER.limited,
        CALLER_EXPIRED: CALLER.expired,
        CALLER_DISABLED: CALLER.disabled,
        CALLER_NONE: CALLER.none,
      },
    });
    const a2 = createProxyApp(g2);
    const id = async (headers: Record<string, string>) =>
      (await a2.request('/v1/models', { headers }, PEER)).headers.get('x-aisix-request-id');
    assert.equal(await id({ 'x-request-id': 'lb-1', 'x-correlation-id': 'corr-1' }), 'lb-1');
    assert.equal(await id({ 'x-correlation-id': 'corr-1' }), 'corr-1');
    assert.equal(await id({ 'x-request-id': 'bad id', 'x-correlation-id': 'corr-2' }), 'corr-2');
    assert.match(await id({ 'x-aisix-request-id': 'not-accepted-here' }) ?? '', UUID);
  });
});

describe('internal errors', () => {
  test('a throw inside a handler is a 500 JSON envelope, logged, with the slot released', async () => {
    const { gw: g2, platform: p2 } = await gatewayWith(resources(mock.base, mock.base), {
      config: CONFIG,
      env: {
        UPSTREAM_KEY,
        CALLER_ALL: CALLER.all,
        CALLER_LIMITED: CALLER.limited,
        CALLER_EXPIRED: CALLER.expired,
        CALLER_DISABLED: CALLER.disabled,
        CALLER_NONE: CALLER.none,
      },
    });
    g2.snapshot!.resolveModel = () => {
      throw new Error('boom');
    };
    const res = await createProxyApp(g2).request('/v1/chat/completions', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CALLER.all}`,
        'content-type': 'application/json',
        'x-aisix-request-id': 'internal-1',
      },
      body: JSON.stringify({ model: 'gpt-4o', messages: MESSAGES }),
    }, PEER);
    assert.equal(res.headers.get('x-aisix-request-id'), 'internal-1');
    await expectError(res, 500, 'internal_error');
    assert.equal(g2.lifecycle.inFlight, 0);
    const err = p2.logs.find((l) => l.msg === 'unhandled error while serving a request');
    assert.ok(err);
    assert.equal(err.level, 'ERROR');
    assert.equal(err.request_id, 'internal-1');
    const done = p2.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === 'internal-1');
    assert.equal(done?.status, 500);
    assert.equal(done?.error_kind, 'internal_error');
  });
});

describe('client disconnect', () => {
  test('aborting a JSON request while the upstream works aborts the upstream request', async () => {
    let release!: () => void;
    mock.script({
      hold: new Promise<void>((r) => {
        release = r;
      }),
    });
    const abortedBefore = mock.aborted;
    const ac = new AbortController();
    const waiting = mock.waitForRequests(1);
    const pending = app.request(
      new Request('http://localhost/v1/chat/completions', {
        method: 'POST',
        signal: ac.signal,
        headers: { authorization: `Bearer ${CALLER.all}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: MESSAGES }),
      }),
      undefined,
      PEER,
    );
    await waiting;
    ac.abort();
    try {
      await until(() => mock.aborted > abortedBefore, 3000, 'the upstream request to be aborted');
      const res = await within(Promise.resolve(pending), 3000, 'the response after the abort');
      await res.text();
      assert.equal(gw.lifecycle.inFlight, 0);
    } finally {
      release();
    }
  });
});

describe('draining', () => {
  test('a /v1 request during the drain is served and logs "request arrived while draining"', async () => {
    const before = platform.logs.length;
    forcePhase(gw, 'draining');
    try {
      const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
        headers: { 'x-aisix-request-id': 'drain-1', 'x-request-id': 'lb-77' },
      });
      assert.equal(res.status, 200);
      await res.text();
    } finally {
      forcePhase(gw, 'serving');
    }
    const line = platform.logs.slice(before).find((l) => l.msg === 'request arrived while draining');
    assert.ok(line);
    assert.equal(line.level, 'INFO');
    assert.equal(line.method, 'POST');
    assert.equal(line.path, '/v1/chat/completions');
    assert.equal(line.request_id, 'drain-1');
    assert.equal(line.peer, '127.0.0.1:5555');
    assert.equal(line.downstream_request_id, 'lb-77');
  });
});

describe('pumpSse timers', () => {
  /** A keep-alive timer factory for the pump (its injected `timer`) that counts timers never stopped. */
  function recordingTimers() {
    const live = new Set<object>();
    const timer = (ms: number, onIdle: () => void) => {
      const t = new IdleTimer(ms, onIdle);
      const handle = {
        touch: () => t.touch(),
        pause: () => t.pause(),
        stop: () => {
          live.delete(handle);
          t.stop();
        },
      };
      live.add(handle);
      return handle;
    };
    return { timer, live };
  }

  test('no keep-alive timer outlives a stream that failed or was cancelled', async () => {
    const { pumpSse } = await import('../../src/proxy/stream.ts');
    const enc = new TextEncoder();
    const ends: string[] = [];
    const details: string[] = [];
    let aborts = 0;
    // 1. the upstream fails after one chunk
    const failing = recordingTimers();
    {
      const chunks = async function* () {
        yield enc.encode('data: 1\n\n');
        await sleep(20);
        throw new Error('socket hang up');
      };
      const text = await new Response(pumpSse({
        chunks: chunks(),
        keepaliveMs: 15000,
        timer: failing.timer,
        abortUpstream: () => {
          aborts++;
        },
        onEnd: (e, detail) => {
          ends.push(e);
          details.push(detail ?? '');
        },
      })).text();
      // The transport's words go to the log (onEnd's detail), never to the caller.
      assert.match(
        text,
        /^data: 1\n\ndata: \{"error":\{"message":"upstream stream failed: the connection ended before the stream did","type":"upstream_error"\}\}\n\n$/,
      );
      assert.ok(!text.includes('socket hang up'));
      assert.match(details[0]!, /socket hang up/);
    }
    assert.equal(failing.live.size, 0, 'a timer outlived the failed stream');
    // 2. the caller cancels while the pump waits for the upstream
    let release!: () => void;
    const cancelled = recordingTimers();
    {
      const chunks = async function* () {
        yield enc.encode('data: 1\n\n');
        await new Promise<void>((r) => {
          release = r;
        });
      };
      const reader = pumpSse({
        chunks: chunks(),
        keepaliveMs: 15000,
        timer: cancelled.timer,
        abortUpstream: () => {
          aborts++;
          release();
        },
        onEnd: (e) => ends.push(e),
      }).getReader();
      assert.equal(new TextDecoder().decode((await reader.read()).value), 'data: 1\n\n');
      const next = reader.read();
      await sleep(20);
      await reader.cancel();
      assert.equal((await next).done, true);
    }
    assert.equal(cancelled.live.size, 0, 'a timer outlived the cancelled stream');
    assert.deepEqual(ends, ['upstream_error', 'client_closed']);
    assert.equal(aborts, 1);
  });
});

describe('access log and secrets', () => {
  test('one "proxy request completed" line per request, with its fields', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
      headers: { 'x-aisix-request-id': 'log-ok-1', 'x-request-id': 'lb-1' },
    });
    assert.equal(res.status, 200);
    await res.text();
    const lines = platform.logs.filter((l) => l.msg === 'proxy request completed' && l.request_id === 'log-ok-1');
    assert.equal(lines.length, 1);
    const l = lines[0]!;
    assert.equal(l.level, 'INFO');
    assert.equal(typeof l.time, 'string');
    assert.ok(!Number.isNaN(Date.parse(l.time as string)));
    assert.equal(l.method, 'POST');
    assert.equal(l.path, '/v1/chat/completions');
    assert.equal(l.status, 200);
    assert.equal(typeof l.latency_ms, 'number');
    assert.ok((l.latency_ms as number) >= 0);
    assert.equal(l.model, 'gpt-4o');
    assert.equal(l.peer, '127.0.0.1:5555');
    assert.equal(l.downstream_request_id, 'lb-1');
    assert.equal(l.error_kind, undefined);

    const bad = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
      key: 'sk-wrong',
      headers: { 'x-aisix-request-id': 'log-err-1' },
    });
    await bad.text();
    const e = completedLog('log-err-1');
    assert.ok(e);
    assert.equal(e.status, 401);
    assert.equal(e.error_kind, 'invalid_api_key');
    assert.equal(e.model, undefined);
    assert.equal(e.downstream_request_id, undefined);

    mock.script({ status: 400 });
    const up = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES }, {
      headers: { 'x-aisix-request-id': 'log-up-1' },
    });
    await up.text();
    assert.equal(completedLog('log-up-1')?.error_kind, 'upstream_status');
    assert.equal(completedLog('log-up-1')?.status, 400);
  });

  test('a streamed request is logged once its body is fully read', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt-4o', messages: MESSAGES, stream: true }, {
      headers: { 'x-aisix-request-id': 'log-stream-1' },
    });
    assert.equal(completedLog('log-stream-1'), undefined, 'logged before the body was sent');
    await within(res.text(), 5000, 'stream');
    const l = completedLog('log-stream-1');
    assert.ok(l);
    assert.equal(l.status, 200);
    assert.equal(l.error_kind, undefined);
  });

  test('no error body and no log line contains a secret', () => {
    assert.ok(errorBodies.length > 30, `only ${errorBodies.length} error bodies were collected`);
    for (const body of errorBodies) {
      for (const s of SECRETS) assert.equal(body.includes(s), false, `error body contains a secret: ${body}`);
    }
    assert.ok(platform.logs.length > 30);
    const all = platform.logs.map((l) => JSON.stringify(l));
    for (const line of all) {
      for (const s of SECRETS) assert.equal(line.includes(s), false, `log line contains a secret: ${line}`);
    }
    assert.equal(gw.lifecycle.inFlight, 0);
  });
});
