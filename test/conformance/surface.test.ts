// The HTTP surface as AISIX shows it (docs/aisix-compatibility.md "Metrics"): the text log line (golden),
// access-log fields, the declared-length 413 before authentication with its drain, line and counter, the
// Anthropic error vocabulary, legacy completions, `anthropic-beta`, `/v1/models`, `allowed_cidrs` with
// `proxy.real_ip`, the token families and the labelled in-flight gauge. Through app.request() against real
// mock upstreams on loopback sockets.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { drain } from '../../src/proxy/body-limit.ts';
import { clientIpResolver } from '../../src/proxy/client-ip.ts';
import { ipAllowed } from '../../src/util/cidr.ts';
import { anthropicErrorType } from '../../src/http/errors.ts';
import { aggregateStatus, healthLevel, snapshotFreshness } from '../../src/admin/app.ts';
import type { ConfigFacts } from '../../src/config-facts.ts';
import { gatewayWith } from '../support/platform.ts';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';
import { parseTextLine } from '../support/log-line.ts';
import { labelNamesOf, sumSamples } from '../support/metrics.ts';

const KEY = 'sk-surface-caller-SECRET';
const BODY_LIMIT = 4096;
const CONFIG = (extra = '') => `
resources_file: resources.yaml
proxy:
  addr: "127.0.0.1:0"
  request_body_limit_bytes: ${BODY_LIMIT}
${extra}
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

function resources(openaiBase: string, anthropicBase: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up-SECRET, api_base: "${openaiBase}" }
  - { display_name: claude-key, provider: anthropic, api_key: sk-ant-SECRET, api_base: "${anthropicBase}" }
  - { display_name: offline, provider: echo }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: claude, provider_key: claude-key, model_name: claude-up, retries: 0 }
  - { display_name: echo, provider_key: offline, model_name: echo-1 }
  - { display_name: lan-only, provider_key: offline, model_name: echo-2, allowed_cidrs: ["10.0.0.0/8", "2001:db8::/32"] }
  - { display_name: group, routing: { targets: [{ model: lan-only }] } }
  - { display_name: open-group, routing: { targets: [{ model: echo }, { model: lan-only }] } }
  - { display_name: guarded-group, routing: { targets: [{ model: echo }] }, allowed_cidrs: ["192.168.0.0/16"] }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`;
}

const rig = proxyOverMocks(resources, { config: CONFIG(), env: { CALLER: KEY } });

function post(
  path: string,
  body: unknown,
  o: { key?: string | null; headers?: Record<string, string>; peer?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...o.headers };
  if (o.key !== null) headers.authorization = `Bearer ${o.key ?? KEY}`;
  return Promise.resolve(rig.app.request(path, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  }, { peer: o.peer ?? '127.0.0.1:5555' }));
}

const completed = (id: string) =>
  rig.platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === id) as
    | Record<string, unknown>
    | undefined;
const metrics = async () => (await createStatusApp(rig.gw).request('/metrics')).text();
const MESSAGES = [{ role: 'user', content: 'hello there' }];

describe('the text log line (golden)', () => {
  const at = new Date('2026-03-04T05:06:07.089Z');
  const lines: string[] = [];
  const log = createLogger({ level: 'info', format: 'text', write: (l) => lines.push(l), clock: () => at.getTime() });

  test("AISIX's shape: µs timestamp, padded level, target, message, Debug-quoted strings, bare numbers", () => {
    lines.length = 0;
    log.withTarget('aisix::body_limit').info('request body exceeded the configured limit', {
      request_id: 'req-1',
      endpoint: '/v1/chat/completions',
      method: 'POST',
      status: 413,
      declared_content_length: 20971520,
      configured_limit_bytes: 10485760,
      drained_bytes: 20971520,
      drain_outcome: 'completed',
      elapsed_ms: 12,
    });
    assert.deepEqual(lines, [
      '2026-03-04T05:06:07.089000Z  INFO aisix::body_limit: request body exceeded the configured limit ' +
      'request_id="req-1" endpoint="/v1/chat/completions" method="POST" status=413 ' +
      'declared_content_length=20971520 configured_limit_bytes=10485760 drained_bytes=20971520 ' +
      'drain_outcome="completed" elapsed_ms=12',
    ]);
  });

  test('levels right-aligned to 5; absent fields omitted; escapes as Rust Debug; booleans bare', () => {
    lines.length = 0;
    log.warn('w', { a: undefined, b: null, ok: true });
    log.error('e', { s: 'quote " back \\ nl \n tab \t bell \x07 del \x7f é' });
    log.info('plain');
    assert.deepEqual(lines, [
      '2026-03-04T05:06:07.089000Z  WARN sluice: w ok=true',
      '2026-03-04T05:06:07.089000Z ERROR sluice: e s="quote \\" back \\\\ nl \\n tab \\t bell \\u{7} del \\u{7f} é"',
      '2026-03-04T05:06:07.089000Z  INFO sluice: plain',
    ]);
    const parsed = parseTextLine(lines[1]!);
    assert.equal(parsed?.s, 'quote " back \\ nl \n tab \t bell \x07 del \x7f é');
    assert.equal(parsed?.level, 'ERROR');
    assert.equal(parsed?.target, 'sluice');
  });

  test('json stays an opt-in with the same fields', () => {
    const out: string[] = [];
    const j = createLogger({ level: 'info', format: 'json', write: (l) => out.push(l), clock: () => at.getTime() });
    j.withTarget('aisix_obs::access_log').info('proxy request completed', { status: 200, path: '/v1/models' });
    assert.deepEqual(JSON.parse(out[0]!), {
      time: '2026-03-04T05:06:07.089Z',
      level: 'INFO',
      target: 'aisix_obs::access_log',
      msg: 'proxy request completed',
      status: 200,
      path: '/v1/models',
    });
  });
});

describe('access log', () => {
  test("AISIX's fields on a served request, target aisix_obs::access_log, default text format", async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MESSAGES }, {
      headers: { 'x-aisix-request-id': 'acc-1', 'x-request-id': 'lb-7' },
    });
    assert.equal(res.status, 200);
    await res.text();
    const l = completed('acc-1');
    assert.ok(l, 'logged');
    assert.equal(l.target, 'aisix_obs::access_log');
    assert.equal(l.level, 'INFO');
    assert.deepEqual(Object.keys(l).slice(4), [
      'method',
      'path',
      'status',
      'latency_ms',
      ...(l.provider !== undefined ? ['provider'] : []),
      'model',
      'api_key_id',
      'prompt_tokens',
      'completion_tokens',
      'total_tokens',
      'request_id',
      'provider_request_id',
      ...['routing_attempt_count', 'routing_fallback_count'].filter((k) => l[k] !== undefined),
      'peer',
      'downstream_request_id',
    ]);
    assert.equal(l.model, 'gpt');
    assert.equal(l.api_key_id, rig.gw.snapshot!.resources.api_keys[0]!.id);
    assert.equal(l.prompt_tokens, 1);
    assert.equal(l.completion_tokens, 3);
    assert.equal(l.total_tokens, 4);
    assert.equal(l.provider_request_id, 'chatcmpl-mock');
    assert.equal(l.peer, '127.0.0.1:5555');
    assert.equal(l.downstream_request_id, 'lb-7');
    assert.equal('error' in l, false);
  });

  test('a failure carries error_kind and the error message; refused before dispatch: no model', async () => {
    const bad = await post('/v1/chat/completions', '{not json', { headers: { 'x-aisix-request-id': 'acc-2' } });
    assert.equal(bad.status, 400);
    await bad.text();
    const l = completed('acc-2')!;
    assert.equal(l.error_kind, 'invalid_request_error');
    assert.equal(l.error, 'request payload is invalid: invalid JSON request body');
    assert.equal(l.model, undefined);
    assert.ok(l.api_key_id, 'authenticated before the body was read');
  });

  test('observability.access_log: false silences the line, not the metrics', async () => {
    const { gw: quiet, platform: p } = await gatewayWith(resources(rig.mock.base, rig.anth.url), {
      config: CONFIG().replace('observability: {', 'observability: { access_log: false,'),
      env: { CALLER: KEY },
    });
    const res = await createProxyApp(quiet).request('/v1/models', { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    assert.equal(p.logs.some((l) => l.msg === 'proxy request completed'), false);
    const text = await (await createStatusApp(quiet).request('/metrics')).text();
    assert.equal(sumSamples(text, 'aisix_proxy_requests_total', { endpoint: '/v1/models', status: '200' }), 1);
  });
});

describe('request body limit', () => {
  test('declared length over the limit: 413 before authentication, drained, logged, counted', async () => {
    const big = JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'x'.repeat(BODY_LIMIT) }] });
    const n = rig.mock.requests.length;
    const res = await post('/v1/chat/completions', big, {
      key: null,
      headers: { 'content-length': String(big.length), 'x-aisix-request-id': 'big-1' },
    });
    assert.equal(res.status, 413);
    const body = await res.json() as { error: { type: string; message: string } };
    assert.deepEqual(body.error, {
      message: `request body exceeds ${BODY_LIMIT}-byte limit`,
      type: 'invalid_request_error',
    });
    assert.equal(rig.mock.requests.length, n);
    const diag = rig.platform.logs.find((l) => l.target === 'aisix::body_limit' && l.request_id === 'big-1');
    assert.ok(diag, 'diagnostic line');
    assert.equal(diag.level, 'INFO');
    assert.equal(diag.msg, 'request body exceeded the configured limit');
    const { time: _t, elapsed_ms, ...rest } = diag;
    assert.equal(typeof elapsed_ms, 'number');
    assert.deepEqual(rest, {
      level: 'INFO',
      target: 'aisix::body_limit',
      msg: 'request body exceeded the configured limit',
      request_id: 'big-1',
      endpoint: '/v1/chat/completions',
      method: 'POST',
      status: 413,
      declared_content_length: big.length,
      configured_limit_bytes: BODY_LIMIT,
      drained_bytes: big.length,
      drain_outcome: 'completed',
    });
    const l = completed('big-1')!;
    assert.equal(l.status, 413);
    assert.equal(l.error_kind, 'invalid_request_error');
    assert.equal(l.error, `request body exceeds ${BODY_LIMIT}-byte limit`);
    assert.equal(l.api_key_id, undefined);
    const text = await metrics();
    assert.equal(
      sumSamples(text, 'aisix_proxy_request_body_limit_rejections_total', {
        endpoint: '/v1/chat/completions',
        inbound_protocol: 'openai',
        outcome: 'completed',
      }),
      1,
    );
    assert.equal(
      sumSamples(text, 'aisix_requests_total', { provider: 'unknown', model: 'unresolved', status: '413' }),
      1,
    );
    assert.equal(
      sumSamples(text, 'aisix_proxy_requests_total', { model: 'unresolved', status: '413', outcome: 'client_error' }),
      1,
    );
  });

  test('on /v1/messages the 413 is request_too_large in the Anthropic envelope', async () => {
    const big = 'y'.repeat(BODY_LIMIT + 1);
    const res = await post('/v1/messages', big, { headers: { 'content-length': String(big.length) } });
    assert.equal(res.status, 413);
    assert.deepEqual(await res.json(), {
      type: 'error',
      error: { type: 'request_too_large', message: `request body exceeds ${BODY_LIMIT}-byte limit` },
    });
  });

  test('undeclared (chunked) oversize: authenticated first, then 413; the line carries api_key_id', async () => {
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode('{"model":"gpt","messages":[{"role":"user","content":"'));
        c.enqueue(enc.encode('z'.repeat(BODY_LIMIT)));
        c.enqueue(enc.encode('"}]}'));
        c.close();
      },
    });
    const res = await rig.app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'x-aisix-request-id': 'big-2' },
      body,
      duplex: 'half',
    } as RequestInit, { peer: '127.0.0.1:1' });
    assert.equal(res.status, 413);
    await res.text();
    assert.equal(completed('big-2')?.api_key_id, rig.gw.snapshot!.resources.api_keys[0]!.id);
    assert.equal(rig.platform.logs.some((l) => l.target === 'aisix::body_limit' && l.request_id === 'big-2'), false);
  });

  test('drain bounds: cap_reached, timeout, client_read_error', async () => {
    const endless = (chunk: number) =>
      new ReadableStream<Uint8Array>({
        pull(c) {
          c.enqueue(new Uint8Array(chunk));
        },
      });
    // Past the cap the reader comes back uncancelled, for the rest to be read and dropped after the answer.
    const { rest, ...capped } = await drain(endless(1000), 2500, 5000);
    assert.deepEqual(capped, { outcome: 'cap_reached', bytes: 3000 });
    assert.equal((await rest!.read()).value?.byteLength, 1000);
    await rest!.cancel();
    const silent = new ReadableStream<Uint8Array>({ start() {} });
    assert.deepEqual(await drain(silent, 1000, 50), { outcome: 'timeout', bytes: 0 });
    const broken = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new Uint8Array(10));
        c.error(new Error('reset'));
      },
    });
    assert.equal((await drain(broken)).outcome, 'client_read_error');
  });
});

describe('Anthropic error envelope on /v1/messages (L3)', () => {
  test('error.type by status', () => {
    const table: [number, string][] = [
      [400, 'invalid_request_error'],
      [422, 'invalid_request_error'],
      [401, 'authentication_error'],
      [403, 'permission_error'],
      [404, 'not_found_error'],
      [408, 'timeout_error'],
      [413, 'request_too_large'],
      [429, 'rate_limit_error'],
      [503, 'overloaded_error'],
      [500, 'api_error'],
      [502, 'api_error'],
      [504, 'api_error'],
      [405, 'api_error'],
    ];
    for (const [status, type] of table) assert.equal(anthropicErrorType(status), type, String(status));
  });

  test('through the endpoint: 401, 404, 400', async () => {
    const msg = { model: 'claude', max_tokens: 5, messages: MESSAGES };
    const cases: [Promise<Response>, number, string][] = [
      [post('/v1/messages', msg, { key: 'sk-wrong' }), 401, 'authentication_error'],
      [post('/v1/messages', { ...msg, model: 'nope' }), 404, 'not_found_error'],
      [post('/v1/messages', { ...msg, max_tokens: 0 }), 400, 'invalid_request_error'],
    ];
    for (const [p, status, type] of cases) {
      const res = await p;
      assert.equal(res.status, status);
      const body = await res.json() as { type: string; error: { type: string; message: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, type);
      assert.equal(typeof body.error.message, 'string');
    }
  });
});

describe('POST /v1/completions', () => {
  test('JSON passed through to the OpenAI-compatible upstream at /completions', async () => {
    const answer = {
      id: 'cmpl-1',
      object: 'text_completion',
      created: 1,
      model: 'gpt-up',
      choices: [{ index: 0, text: ' world', logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 },
    };
    rig.mock.script({ body: answer });
    const res = await post('/v1/completions', { model: 'gpt', prompt: 'hello' });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), answer);
    const up = rig.mock.requests.at(-1)!;
    assert.equal(up.url, '/v1/completions');
    assert.deepEqual(up.json, { model: 'gpt-up', prompt: 'hello' });
  });

  test('SSE passed through', async () => {
    const ev = (text: string) => ({ id: 'cmpl-2', object: 'text_completion', choices: [{ index: 0, text }] });
    rig.mock.script({ sse: [ev('a'), ev('b')] });
    const res = await post('/v1/completions', { model: 'gpt', prompt: 'hi', stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    assert.equal(
      await res.text(),
      `data: ${JSON.stringify(ev('a'))}\n\ndata: ${JSON.stringify(ev('b'))}\n\ndata: [DONE]\n\n`,
    );
  });

  test('the echo adapter answers it; an Anthropic target answers 400; prompt is required', async () => {
    const e = await post('/v1/completions', { model: 'echo', prompt: 'say this' });
    assert.equal(e.status, 200);
    const body = await e.json() as { object: string; choices: { text: string }[] };
    assert.equal(body.object, 'text_completion');
    assert.equal(body.choices[0]!.text, 'say this');
    const a = await post('/v1/completions', { model: 'claude', prompt: 'x' });
    assert.equal(a.status, 400);
    assert.equal((await a.json() as { error: { type: string } }).error.type, 'invalid_request_error');
    const n = await post('/v1/completions', { model: 'gpt' });
    assert.equal(n.status, 400);
    await n.text();
  });
});

test("the caller's anthropic-beta header reaches the Anthropic upstream", async () => {
  const res = await post('/v1/messages', { model: 'claude', max_tokens: 5, messages: MESSAGES }, {
    headers: { 'anthropic-beta': 'prompt-caching-2024-07-31,context-1m-2025-08-07' },
  });
  assert.equal(res.status, 200);
  await res.text();
  assert.equal(rig.anth.requests.at(-1)?.headers['anthropic-beta'], 'prompt-caching-2024-07-31,context-1m-2025-08-07');
  const plain = await post('/v1/messages', { model: 'claude', max_tokens: 5, messages: MESSAGES });
  await plain.text();
  assert.equal(rig.anth.requests.at(-1)?.headers['anthropic-beta'], undefined);
});

test('/v1/models: owned_by the provider, "sluice" without one; created is now', async () => {
  const before = Math.floor(Date.now() / 1000);
  const res = await rig.app.request('/v1/models', { headers: { authorization: `Bearer ${KEY}` } });
  const body = await res.json() as { data: { id: string; created: number; owned_by: string }[] };
  const by = Object.fromEntries(body.data.map((m) => [m.id, m.owned_by]));
  assert.equal(by.gpt, 'openai');
  assert.equal(by.claude, 'anthropic');
  assert.equal(by.group, 'sluice');
  for (const m of body.data) assert.ok(m.created >= before && m.created <= Math.floor(Date.now() / 1000) + 1);
});

describe("proxy.identity: aisix keeps AISIX's identity strings", () => {
  const aisix = proxyOverMocks(resources, { config: CONFIG('  identity: aisix'), env: { CALLER: KEY } });
  test('Server: AISIX/<version> (AISIX\'s e2e pattern) on 2xx, 401, 404, probes and streams; owned_by "aisix"', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    const answers = [
      await aisix.app.request('/livez'),
      await aisix.app.request('/v1/models'),
      await aisix.app.request('/v1/nothing', { headers: auth }),
      await aisix.post('/v1/chat/completions', { model: 'gpt', messages: MESSAGES }, KEY),
      await aisix.post('/v1/chat/completions', { model: 'gpt', messages: MESSAGES, stream: true }, KEY),
      await aisix.post('/v1/messages', { model: 'claude', max_tokens: 5, messages: MESSAGES }, 'wrong-key'),
    ];
    for (const res of answers) {
      assert.match(res.headers.get('server') ?? '', /^AISIX\/\d+\.\d+\.\d+([-+][\w.-]+)?$/, res.url);
      await res.text();
    }
    const body = await (await aisix.app.request('/v1/models', { headers: auth })).json() as {
      data: { id: string; owned_by: string }[];
    };
    const by = Object.fromEntries(body.data.map((m) => [m.id, m.owned_by]));
    assert.deepEqual([by.gpt, by.claude, by.group], ['openai', 'anthropic', 'aisix']);
  });
});

describe('allowed_cidrs (L7) and proxy.real_ip', () => {
  const chat = (model: string, peer: string, headers: Record<string, string> = {}) =>
    post('/v1/chat/completions', { model, messages: MESSAGES }, { peer, headers });

  async function refused(res: Response): Promise<void> {
    assert.equal(res.status, 403);
    assert.deepEqual(await res.json(), {
      error: {
        message: 'Access denied: your client IP is not allowed to access this model',
        type: 'permission_denied',
        code: 'ip_restricted',
      },
    });
  }

  test('IPv4 and IPv6 peers inside the list are served; outside are refused with 403 ip_restricted', async () => {
    for (const peer of ['10.1.2.3:40000', '[2001:db8::7]:443', '[::ffff:10.9.9.9]:1']) {
      const ok = await chat('lan-only', peer);
      assert.equal(ok.status, 200, peer);
      await ok.text();
    }
    await refused(await chat('lan-only', '127.0.0.1:5555'));
    await refused(await chat('lan-only', '[2001:db9::1]:443'));
  });

  test('the routing model: its own list, and at least one reachable target', async () => {
    await refused(await chat('group', '127.0.0.1:1')); // its only target is LAN-only
    const lan = await chat('group', '10.0.0.1:1');
    assert.equal(lan.status, 200);
    await lan.text();
    const open = await chat('open-group', '127.0.0.1:1');
    assert.equal(open.status, 200);
    await open.text();
    await refused(await chat('guarded-group', '10.0.0.1:1'));
    const inside = await chat('guarded-group', '192.168.1.1:1');
    assert.equal(inside.status, 200);
    await inside.text();
  });

  test('an unknown peer is refused (never fail open); on /v1/messages the envelope is permission_error', async () => {
    const res = await Promise.resolve(rig.app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lan-only', messages: MESSAGES }),
    }));
    await refused(res);
    const m = await post('/v1/messages', { model: 'lan-only', max_tokens: 3, messages: MESSAGES });
    assert.equal(m.status, 403);
    assert.equal((await m.json() as { error: { type: string } }).error.type, 'permission_error');
  });

  test('x-forwarded-for is ignored unless the peer is a trusted proxy', async () => {
    await refused(await chat('lan-only', '127.0.0.1:1', { 'x-forwarded-for': '10.0.0.5' }));
    const { gw: g } = await gatewayWith(resources(rig.mock.base, rig.anth.url), {
      config: CONFIG('  real_ip: { trusted_proxies: ["127.0.0.0/8", "::1/128"], recursive: true }'),
      env: { CALLER: KEY },
    });
    const a = createProxyApp(g);
    const send = (peer: string, xff: string) =>
      Promise.resolve(a.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-forwarded-for': xff },
        body: JSON.stringify({ model: 'lan-only', messages: MESSAGES }),
      }, { peer }));
    const ok = await send('127.0.0.1:1', '10.0.0.5, 127.0.0.2');
    assert.equal(ok.status, 200);
    await ok.text();
    const ok6 = await send('[::1]:1', '2001:db8::9');
    assert.equal(ok6.status, 200);
    await ok6.text();
    await refused(await send('127.0.0.1:1', '203.0.113.7'));
    await refused(await send('198.51.100.1:1', '10.0.0.5')); // untrusted peer: the header is not read
  });

  test('resolution matches nginx set_real_ip_from + real_ip_recursive', () => {
    const h = (v: string) => new Headers({ 'x-forwarded-for': v });
    const trusted = ['10.0.0.0/8'];
    const rec = clientIpResolver({ trusted_proxies: trusted, recursive: true, header: 'x-forwarded-for' });
    const flat = clientIpResolver({ trusted_proxies: trusted, recursive: false, header: 'x-forwarded-for' });
    assert.equal(rec('203.0.113.9:1', h('1.2.3.4')), '203.0.113.9');
    assert.equal(rec('10.0.0.1:1', h('203.0.113.7, 10.0.0.2, 10.0.0.3')), '203.0.113.7');
    assert.equal(flat('10.0.0.1:1', h('203.0.113.7, 198.51.100.4')), '198.51.100.4');
    assert.equal(rec('10.0.0.1:1', h('10.0.0.9, 10.0.0.8')), '10.0.0.9');
    assert.equal(rec('10.0.0.1:1', new Headers()), '10.0.0.1');
    assert.equal(flat('10.0.0.1:1', new Headers()), '10.0.0.1');
    assert.equal(
      flat('10.0.0.1:1', h('203.0.113.7:1234, garbage, 198.51.100.4 , [2001:db8::1]:443')),
      '2001:db8::1',
    );
    const multi = new Headers();
    multi.append('x-forwarded-for', '203.0.113.7, 10.0.0.1');
    multi.append('x-forwarded-for', '10.0.0.2');
    assert.equal(rec('10.0.0.3:1', multi), '203.0.113.7');
    const none = clientIpResolver({ trusted_proxies: [], recursive: false, header: 'x-forwarded-for' });
    assert.equal(none('[::1]:80', h('1.1.1.1')), '::1');
    assert.equal(none(undefined, h('1.1.1.1')), undefined);
    assert.equal(ipAllowed(undefined, undefined), true);
    assert.equal(ipAllowed([], '1.1.1.1'), true);
    assert.equal(ipAllowed(['not-a-cidr'], '1.1.1.1'), false);
    assert.equal(ipAllowed(['1.1.1.1'], '1.1.1.1'), true);
  });
});

describe('request, token and in-flight families', () => {
  test('token families with AISIX labels, spend from cost, tokens_consumed', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: MESSAGES });
    await res.text();
    const text = await metrics();
    assert.deepEqual(labelNamesOf(text, 'aisix_llm_input_tokens_total'), [
      'endpoint',
      'inbound_protocol',
      'provider',
      'model',
      'upstream_model',
      'provider_key_id',
      'provider_key_name',
      'api_key_id',
      'team_id',
      'user_id',
      'user_name',
    ]);
    const sel = { endpoint: '/v1/chat/completions', model: 'gpt', team_id: 'unknown', user_name: 'unknown' };
    const calls =
      rig.mock.requests.filter((r) => r.json?.model === 'gpt-up' && r.url === '/v1/chat/completions').length;
    assert.equal(sumSamples(text, 'aisix_llm_input_tokens_total', sel), calls * 1);
    assert.equal(sumSamples(text, 'aisix_llm_output_tokens_total', sel), calls * 3);
    assert.equal(sumSamples(text, 'aisix_llm_total_tokens_total', sel), calls * 4);
    // cost: 1 USD / 1K input, 2 USD / 1K output → (1·1 + 3·2) / 1000 USD = 7000 µUSD per request
    assert.equal(sumSamples(text, 'aisix_llm_spend_micro_usd_total', sel), calls * 7000);
    assert.equal(
      sumSamples(text, 'aisix_tokens_consumed_total', { provider: 'openai', model: 'gpt' }),
      sumSamples(text, 'aisix_llm_total_tokens_total', { model: 'gpt' }), // every endpoint: chat and completions
    );
  });

  test('streamed usage is counted too (Anthropic events)', async () => {
    const before = sumSamples(await metrics(), 'aisix_llm_total_tokens_total', { model: 'claude' }) ?? 0;
    const res = await post('/v1/messages', { model: 'claude', max_tokens: 5, messages: MESSAGES, stream: true });
    await res.text();
    const after = sumSamples(await metrics(), 'aisix_llm_total_tokens_total', { model: 'claude' });
    assert.ok(after !== undefined && after > before, `${before} → ${after}`);
  });

  test('in flight per endpoint and inbound protocol, back to 0', async () => {
    const res = await post('/v1/messages', { model: 'claude', max_tokens: 5, messages: MESSAGES });
    await res.text();
    const text = await metrics();
    assert.equal(
      sumSamples(text, 'aisix_proxy_in_flight_requests', { endpoint: '/v1/messages', inbound_protocol: 'anthropic' }),
      0,
    );
    assert.deepEqual(labelNamesOf(text, 'aisix_proxy_in_flight_requests'), ['endpoint', 'inbound_protocol']);
  });
});

describe('/admin/v1/health pieces', () => {
  test('levels and aggregate status', () => {
    assert.deepEqual([0, 3, 4, 7, 8, 100].map(healthLevel), [0, 0, 1, 1, 2, 2]);
    assert.equal(aggregateStatus([{ health: 0 }], undefined), 'ok');
    assert.equal(aggregateStatus([{ health: 1 }], undefined), 'degraded');
    assert.equal(aggregateStatus([{ health: 2 }], { snapshot_revision: 1, snapshot_age_seconds: 5 }), 'unhealthy');
    assert.equal(aggregateStatus([], { snapshot_revision: 0, snapshot_age_seconds: null }), 'degraded');
    assert.equal(aggregateStatus([], { snapshot_revision: 9, snapshot_age_seconds: 301 }), 'degraded');
    assert.equal(aggregateStatus([], { snapshot_revision: 9, snapshot_age_seconds: 300 }), 'ok');
  });

  test('the etcd freshness block', () => {
    const facts: ConfigFacts = {
      sourceType: 'etcd',
      latestLoadFailed: false,
      partiallyCompatibleRows: {},
      lastFailure: null,
      rejected: [],
      partiallyCompatible: [],
    };
    const now = new Date('2026-01-01T00:10:00Z');
    assert.deepEqual(snapshotFreshness(facts, now), { snapshot_revision: 0, snapshot_age_seconds: null });
    facts.applied = {
      applied_revision: 42,
      config_hash: 'h',
      apply_seq: 1,
      applied_at: '2026-01-01T00:00:00Z',
      resource_counts: {},
    } as unknown as ConfigFacts['applied'];
    facts.lastReload = { successful: true, at: '2026-01-01T00:09:30Z' };
    assert.deepEqual(snapshotFreshness(facts, now), { snapshot_revision: 42, snapshot_age_seconds: 30 });
    facts.lastReload = { successful: false, at: '2026-01-01T00:09:50Z' };
    facts.lastFailure = { at: '2026-01-01T00:09:50Z', last_error_kind: 'fetch', last_error: 'unreachable' };
    assert.deepEqual(snapshotFreshness(facts, now), { snapshot_revision: 42, snapshot_age_seconds: 600 });
  });
});
