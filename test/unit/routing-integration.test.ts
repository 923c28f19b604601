// Routing and model health end to end (docs/routing.md, docs/aisix-compatibility.md "Metrics"): the proxy app through app.request() against
// scripted mock upstreams on real loopback ports, with /status/models, the admin copy and /metrics read
// from the same Gateway. Each describe block builds its own Gateway, so health never leaks between blocks.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdminApp } from '../../src/admin/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { Dispatcher, type DispatchInput, type DispatchResult } from '../../src/routing/dispatch.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import {
  anthropicEvents,
  anthropicMessage,
  type MockAnthropic,
  startMockAnthropic,
} from '../support/mock-anthropic.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';
import { latch, until, within } from '../support/until.ts';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

const CALLER = 'sk-caller-routing-SECRET-1';
const LIMITED = 'sk-caller-limited-SECRET-2';
const TPM = 'sk-caller-tpm-SECRET-3';
const ENV = { CALLER, LIMITED, TPM, UPSTREAM_KEY: 'sk-upstream-SECRET-9', ANTHROPIC_KEY: 'sk-ant-SECRET-8' };
const MESSAGES = [{ role: 'user', content: 'hello there' }];

let a: MockUpstream;
let b: MockUpstream;
let c: MockUpstream;
let anth: MockAnthropic;
/** An SSE upstream that sends its 200 head at once and its first chunk only after `SLOW_FIRST_CHUNK_MS`. */
let slow: { base: string; hits: number; close(): Promise<void> };
const SLOW_FIRST_CHUNK_MS = 800;

async function startSlowFirstChunk(): Promise<typeof slow> {
  const state = { hits: 0 };
  const server = http.createServer(async (req, res) => {
    for await (const _ of req) { /* drain the body */ }
    state.hits++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    const timer = setTimeout(() => {
      if (res.destroyed) return;
      res.write(`data: ${JSON.stringify(chunk('up-slow', 'late'))}\n\n`);
      res.end('data: [DONE]\n\n');
    }, SLOW_FIRST_CHUNK_MS);
    res.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base: `${url}/v1`,
    get hits() {
      return state.hits;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

before(async () => {
  [a, b, c, anth] = await Promise.all([
    startMockUpstream(),
    startMockUpstream(),
    startMockUpstream(),
    startMockAnthropic(),
  ]);
  slow = await startSlowFirstChunk();
});
after(async () => {
  await Promise.all([a.close(), b.close(), c.close(), anth.close(), slow.close()]);
});

/** Provider keys pa/pb/pc (the three OpenAI mocks), pant (the Anthropic mock), echo; direct models m-a/m-b/m-c. */
function resources(models: string, opts: { directExtra?: string } = {}): string {
  const extra = opts.directExtra ? `, ${opts.directExtra}` : '';
  return `_format_version: "1"
provider_keys:
  - { display_name: pa, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${a.base} }
  - { display_name: pb, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${b.base} }
  - { display_name: pc, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${c.base} }
  - { display_name: pant, provider: anthropic, api_key: "\${ANTHROPIC_KEY}", api_base: ${anth.url} }
  - { display_name: offline, provider: echo }
  - { display_name: pslow, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${slow.base} }
models:
  - { display_name: m-a, provider_key: pa, model_name: up-a, retries: 0${extra} }
  - { display_name: m-b, provider_key: pb, model_name: up-b, retries: 0${extra} }
  - { display_name: m-c, provider_key: pc, model_name: up-c, retries: 0${extra} }
${models}
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: limited, key_env: LIMITED, allowed_models: ["*"], rate_limit: { rps: 2 } }
  - { display_name: tpm, key_env: TPM, allowed_models: ["*"], rate_limit: { tpm: 5 } }
`;
}

interface Harness {
  gw: Gateway;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  chat(model: string, extra?: Record<string, unknown>, headers?: Record<string, string>): Promise<Response>;
  rows(): Promise<Record<string, Record<string, unknown>>>;
  metrics(): Promise<string>;
}

async function harness(
  models: string,
  opts: { config?: string; directExtra?: string; now?: () => Date } = {},
): Promise<Harness> {
  const { gw } = await gatewayWith(resources(models, opts), {
    env: ENV,
    config: BASE_CONFIG + (opts.config ?? ''),
    now: opts.now,
  });
  const proxy = createProxyApp(gw);
  const status = createStatusApp(gw);
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    Promise.resolve(proxy.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }));
  return {
    gw,
    post,
    chat: (model, extra = {}, headers = {}) =>
      post('/v1/chat/completions', { model, messages: MESSAGES, ...extra }, headers),
    async rows() {
      const res = await status.request('/status/models');
      const list = await res.json() as Record<string, unknown>[];
      return Object.fromEntries(list.map((r) => [r.display_name as string, r]));
    },
    metrics: async () => (await status.request('/metrics')).text(),
  };
}

/** Poll `cond` until it holds (bounded). */
/** The sample value of the series of `name` whose labels contain every `label="value"` given. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return undefined;
}

/**
 * The upstream model that served a chat answer, its body read: the answer names the caller's model, so
 * the target is the one `x-aisix-served-by` names (a routing model), else the model the caller named.
 */
async function upstreamOf(h: Pick<Harness, 'gw'>, res: Response): Promise<string> {
  const body = await res.json() as { model?: unknown };
  const name = res.headers.get('x-aisix-served-by') ?? String(body.model);
  const m = h.gw.snapshot!.modelByName(name);
  return m?.kind === 'direct' ? m.model_name : name;
}

const nowSecs = () => Date.now() / 1000;

/** Reads `res`'s body; once `seen` holds for the text so far calls `then` (once), and reads on to the end. */
async function readAcross(res: Response, seen: (text: string) => boolean, then: () => void): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let told = false;
  for (;;) {
    if (!told && seen(text)) {
      told = true;
      then();
    }
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  assert.ok(told, `the body ended before the awaited point: ${text}`);
  return text;
}

// ---------------------------------------------------------------------------------------------------------------

describe('failover and cooldown', () => {
  let h: Harness;
  before(async () => {
    h = await harness(`  - { display_name: smart, routing: { targets: [{ model: m-a }, { model: m-b }] } }
  - { display_name: strict, routing: { targets: [{ model: m-a }, { model: m-b }], max_fallbacks: 0 } }
  - { display_name: tiers, routing: { targets: [{ model: m-a, priority: -1 }, { model: m-b, priority: 0 }] } }
  - { display_name: on429, routing: { targets: [{ model: m-a }, { model: m-b }], retry_on_429: true, retries: 0 } }
  - { display_name: on404, routing: { targets: [{ model: m-a }, { model: m-b }], fallback_on_statuses: [404] } }
  - { display_name: retried, provider_key: pc, model_name: up-c, retries: 2 }`);
  });
  after(() => h.gw.stop());

  test('a 502 fails over; the failed target cools down (upstream_server_error) and the next request skips it', async () => {
    const [na, nb] = [a.requests.length, b.requests.length];
    a.script({ status: 502 });
    const res = await h.chat('smart');
    assert.equal(res.status, 200);
    assert.equal(await upstreamOf(h, res), 'up-b');
    assert.equal(a.requests.length, na + 1);
    assert.equal(b.requests.length, nb + 1);

    const rows = await h.rows();
    assert.equal(rows['m-a']!.status, 'cooldown');
    assert.equal(rows['m-a']!.status_reason, 'upstream_server_error');
    const until = rows['m-a']!.cooldown_until as { secs_since_epoch: number; nanos_since_epoch: number };
    assert.ok(Math.abs(until.secs_since_epoch - (nowSecs() + 30)) < 3, 'default cooldown is 30 s');
    assert.equal(rows['m-b']!.status, 'healthy');
    assert.deepEqual(rows.smart, {
      id: rows.smart!.id,
      display_name: 'smart',
      kind: 'routing',
      status: 'not_applicable',
    });

    const again = await h.chat('smart');
    assert.equal(again.status, 200);
    assert.equal(await upstreamOf(h, again), 'up-b');
    assert.equal(a.requests.length, na + 1, 'a cooled target is skipped while a healthy one remains');

    const m = await h.metrics();
    const la = { model: 'm-a', upstream_model: 'up-a', provider: 'openai' };
    assert.equal(sample(m, 'aisix_deployment_requests_total', la), 1);
    assert.equal(sample(m, 'aisix_deployment_failure_responses_total', la), 1);
    assert.equal(sample(m, 'aisix_deployment_cooled_down_total', la), 1);
    assert.equal(sample(m, 'aisix_deployment_state', la), 2);
    assert.equal(sample(m, 'aisix_deployment_state', { model: 'm-b' }), 0);
    assert.equal(sample(m, 'aisix_deployment_success_responses_total', { model: 'm-b' }), 2);
    assert.equal(sample(m, 'aisix_routing_successful_fallbacks_total', { model: 'smart', fallback_model: 'm-b' }), 1);
    assert.equal(sample(m, 'aisix_routing_failed_fallbacks_total'), undefined);
    assert.match(
      m,
      /aisix_deployment_state\{provider="openai",model="m-a",upstream_model="up-a",provider_key_id="[0-9a-f-]{36}"\} 2/,
    );
  });

  test('/admin/v1/models/status serves the same bytes as /status/models', async () => {
    const admin = createAdminApp(h.gw);
    const [s, ad] = await Promise.all([
      Promise.resolve(createStatusApp(h.gw).request('/status/models')).then((r) => r.text()),
      Promise.resolve(admin.request('/admin/v1/models/status', { headers: { authorization: 'Bearer admin-secret-1' } }))
        .then((r) => r.text()),
    ]);
    assert.equal(ad, s);
  });

  test('a direct model in cooldown is still called (it is its only target); a success clears the cooldown', async () => {
    const na = a.requests.length;
    const res = await h.chat('m-a');
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(a.requests.length, na + 1);
    const rows = await h.rows();
    assert.equal(rows['m-a']!.status, 'healthy');
    assert.equal(rows['m-a']!.cooldown_until, undefined);
  });

  test('401 goes back to the caller as sent and cools the model (upstream_auth_failure)', async () => {
    b.script({ status: 401, body: { error: { message: 'bad upstream key', type: 'invalid_request_error' } } });
    const res = await h.chat('m-b');
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), { error: { message: 'bad upstream key', type: 'invalid_request_error' } });
    const rows = await h.rows();
    assert.equal(rows['m-b']!.status, 'cooldown');
    assert.equal(rows['m-b']!.status_reason, 'upstream_auth_failure');
    b.script({});
    await (await h.chat('m-b')).text(); // clears it
  });

  test('429 with Retry-After: 180 → passed back with its Retry-After; cooldown_until ≈ now + 180 s', async () => {
    b.script({ status: 429, headers: { 'retry-after': '180' } });
    const res = await h.chat('m-b');
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '180');
    await res.text();
    const row = (await h.rows())['m-b']!;
    assert.equal(row.status, 'cooldown');
    assert.equal(row.status_reason, 'upstream_rate_limited');
    const until = row.cooldown_until as { secs_since_epoch: number };
    assert.ok(
      Math.abs(until.secs_since_epoch - (nowSecs() + 180)) < 3,
      `cooldown_until ${until.secs_since_epoch} vs now ${nowSecs()}`,
    );
    b.script({});
    await (await h.chat('m-b')).text();
  });

  test('a non-429 4xx goes straight back: no retry, no failover', async () => {
    const [na, nb] = [a.requests.length, b.requests.length];
    a.script({ status: 400, body: { error: { message: 'bad request upstream', type: 'invalid_request_error' } } });
    const res = await h.chat('smart');
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { message: string } }).error.message, 'bad request upstream');
    assert.equal(a.requests.length, na + 1);
    assert.equal(b.requests.length, nb);
  });

  test('retry_on_429 fails over on 429; fallback_on_statuses fails over on a listed 4xx', async () => {
    a.script({ status: 429 });
    let res = await h.chat('on429');
    assert.equal(res.status, 200);
    assert.equal(await upstreamOf(h, res), 'up-b');
    h.gw.health.recordSuccess({ id: (await h.rows())['m-a']!.id as string });
    a.script({ status: 404 });
    res = await h.chat('on404');
    assert.equal(res.status, 200);
    assert.equal(await upstreamOf(h, res), 'up-b');
  });

  test("max_fallbacks: 0 → the first target's failure is the answer (502), the second is never called", async () => {
    const nb = b.requests.length;
    a.script({ status: 503 });
    const res = await h.chat('strict');
    assert.equal(res.status, 502);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'upstream_error');
    assert.equal(b.requests.length, nb);
    h.gw.health.recordSuccess({ id: (await h.rows())['m-a']!.id as string });
  });

  test('priority tiers: a higher priority value is tried first', async () => {
    const res = await h.chat('tiers');
    assert.equal(await upstreamOf(h, res), 'up-b');
  });

  test('retries: 5xx is retried on the same target (backoff), an upstream Retry-After ≤ 5 s is honoured', async () => {
    const nc = c.requests.length;
    c.script({ status: 500 }, { status: 503, headers: { 'retry-after': '1' } });
    const started = Date.now();
    const res = await h.chat('retried');
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(c.requests.length, nc + 3);
    assert.ok(Date.now() - started >= 1150, 'backoff (≥ 250 ms) then the 1 s Retry-After');
  });
});

describe('retry budgets as AISIX resolves them (docs/aisix-compatibility.md "Resources")', () => {
  // d-* carry no `retries`: their budget comes from the routing model, else the deployment default
  // (upstream.retries: 2) — 0 while another target is queued behind, 2 on the last one.
  let h: Harness;
  before(async () => {
    h = await harness(`  - { display_name: d-a, provider_key: pa, model_name: up-a, cooldown: { enabled: false } }
  - { display_name: d-b, provider_key: pb, model_name: up-b, cooldown: { enabled: false } }
  - { display_name: d-slow, provider_key: pa, model_name: up-a, timeout: 200, cooldown: { enabled: false } }
  - { display_name: d-slow-r1, provider_key: pa, model_name: up-a, timeout: 200, retries: 1, cooldown: { enabled: false } }
  - { display_name: pair, routing: { targets: [{ model: d-a }, { model: d-b }] } }
  - { display_name: pair-slow, routing: { targets: [{ model: d-slow }, { model: d-b }] } }
  - { display_name: pair-r1, routing: { targets: [{ model: d-a }, { model: d-b }], retries: 1 } }
  - { display_name: pair-r0, routing: { targets: [{ model: d-a }, { model: d-b }], retries: 0 } }
  - { display_name: pair-slow-r1, routing: { targets: [{ model: d-slow }, { model: d-b }], retries: 1 } }
  - { display_name: pair-own, routing: { targets: [{ model: d-slow-r1 }, { model: d-b }], retries: 0 } }`);
  });
  after(() => h.gw.stop());

  /** Upstream hits on a and b while `fn` runs. */
  async function hits(fn: () => Promise<void>): Promise<[number, number]> {
    const [na, nb] = [a.requests.length, b.requests.length];
    await fn();
    return [a.requests.length - na, b.requests.length - nb];
  }
  const served = async (model: string, status = 200, upstream?: string) => {
    const res = await h.chat(model);
    assert.equal(res.status, status);
    const up = await upstreamOf(h, res);
    if (upstream) assert.equal(up, upstream);
  };

  test('a 5xx on the first of two targets: first hit once, second once', async () => {
    a.script({ status: 500 });
    assert.deepEqual(await hits(() => served('pair', 200, 'up-b')), [1, 1]);
  });

  test('a transport error on the first of two targets: first hit once, second once', async () => {
    a.script({ sse: [], dropAfterChunks: 0 });
    assert.deepEqual(await hits(() => served('pair', 200, 'up-b')), [1, 1]);
  });

  test('a timeout on the first of two targets: first hit once, second once', async () => {
    a.script({ delayMs: 600 });
    assert.deepEqual(await hits(() => served('pair-slow', 200, 'up-b')), [1, 1]);
  });

  test('every target fails with 5xx: the first is hit once, the last 1 + upstream.retries times', async () => {
    a.script({ status: 500 });
    b.script({ status: 502 }, { status: 503 }, { status: 500 });
    assert.deepEqual(await hits(() => served('pair', 502)), [1, 3]);
  });

  test('every target fails with a transport error: the last target spends the default budget too', async () => {
    a.script({ sse: [], dropAfterChunks: 0 });
    b.script({ sse: [], dropAfterChunks: 0 }, { sse: [], dropAfterChunks: 0 }, { sse: [], dropAfterChunks: 0 });
    assert.deepEqual(await hits(() => served('pair', 502)), [1, 3]);
  });

  test('a direct model is a lone last target: 5xx spends upstream.retries, a timeout is never retried', async () => {
    a.script({ status: 500 }, { status: 500 }, { status: 500 });
    assert.deepEqual(await hits(() => served('d-a', 502)), [3, 0]);
    a.script({ delayMs: 600 });
    assert.deepEqual(await hits(() => served('d-slow', 504)), [1, 0]);
  });

  test('a configured routing.retries is honoured as written: 1 retries the first target, 0 never retries', async () => {
    a.script({ status: 500 }, { status: 500 });
    assert.deepEqual(await hits(() => served('pair-r1', 200, 'up-b')), [2, 1]);
    a.script({ status: 500 });
    b.script({ status: 500 });
    assert.deepEqual(await hits(() => served('pair-r0', 502)), [1, 1]);
  });

  test('a configured budget is spent on timeouts too (group level, and the target model beats the group)', async () => {
    a.script({ delayMs: 600 }, { delayMs: 600 });
    assert.deepEqual(await hits(() => served('pair-slow-r1', 200, 'up-b')), [2, 1]);
    a.script({ delayMs: 600 }, { delayMs: 600 });
    assert.deepEqual(await hits(() => served('pair-own', 200, 'up-b')), [2, 1]);
  });
});

describe('AISIX routing shapes through the proxy (priority, least_cost, group timeouts, counters)', () => {
  let h: Harness;
  before(async () => {
    h = await harness(
      `  - { display_name: c-a, provider_key: pa, model_name: up-a, retries: 0, cost: { input_per_1k: 0.03, output_per_1k: 0.06 } }
  - { display_name: c-b, provider_key: pb, model_name: up-b, retries: 0, cost: { input_per_1k: 0.0005, output_per_1k: 0.0015 } }
  - { display_name: c-c, provider_key: pc, model_name: up-c, retries: 0 }
  - { display_name: backups, routing: { targets: [{ model: m-a, priority: -2 }, { model: m-b, priority: 0 }, { model: m-c, priority: -1 }] } }
  - { display_name: cheapest, routing: { strategy: least_cost, targets: [{ model: c-c }, { model: c-a }, { model: c-b }] } }
  - { display_name: g-timeout, timeout: 200, routing: { targets: [{ model: m-a }, { model: m-b }] } }
  - { display_name: g-nodeadline, timeout: 0, routing: { targets: [{ model: m-a }] } }
  - { display_name: rescued, routing: { targets: [{ model: m-a }, { model: m-b }] } }`,
      { config: 'upstream: { timeout_ms: 300 }\n' },
    );
  });
  after(() => h.gw.stop());

  const id = async (name: string) => (await h.rows())[name]!.id as string;
  const clear = async (...names: string[]) => {
    for (const n of names) h.gw.health.recordSuccess({ id: await id(n) });
  };

  test('priorities -2, 0, -1 are tried 0, then -1, then -2', async () => {
    const counts = () => [a.requests.length, b.requests.length, c.requests.length];
    let before = counts();
    const ok = await h.chat('backups');
    assert.equal(await upstreamOf(h, ok), 'up-b', 'priority 0 serves while healthy');
    assert.deepEqual(counts().map((n, i) => n - before[i]!), [0, 1, 0]);

    before = counts();
    b.script({ status: 500 });
    const second = await h.chat('backups');
    assert.equal(await upstreamOf(h, second), 'up-c', 'then priority -1');
    assert.deepEqual(counts().map((n, i) => n - before[i]!), [0, 1, 1]);
    await clear('m-b');

    before = counts();
    b.script({ status: 500 });
    c.script({ status: 500 });
    const third = await h.chat('backups');
    assert.equal(await upstreamOf(h, third), 'up-a', 'then priority -2');
    assert.deepEqual(counts().map((n, i) => n - before[i]!), [1, 1, 1]);
    await clear('m-b', 'm-c');
  });

  test('least_cost: the cheapest input+output per 1K serves; a target without cost is tried last', async () => {
    assert.equal(await upstreamOf(h, await h.chat('cheapest')), 'up-b');
    b.script({ status: 500 });
    assert.equal(await upstreamOf(h, await h.chat('cheapest')), 'up-a');
    await clear('c-b');
    b.script({ status: 500 });
    a.script({ status: 500 });
    assert.equal(await upstreamOf(h, await h.chat('cheapest')), 'up-c');
    await clear('c-a', 'c-b');
  });

  test("a routing model's timeout is the deadline of its targets; timeout: 0 means no deadline", async () => {
    a.script({ delayMs: 600 });
    const started = Date.now();
    const res = await h.chat('g-timeout');
    assert.equal(res.status, 200);
    assert.equal(await upstreamOf(h, res), 'up-b');
    assert.ok(Date.now() - started < 600, 'the group timeout (200 ms) cut the first target');
    assert.equal((await h.rows())['m-a']!.status_reason, 'request_timeout');
    await clear('m-a');
    // The deployment default is 300 ms here; the group says 0: no deadline at all.
    a.script({ delayMs: 500 });
    const slow = await h.chat('g-nodeadline');
    assert.equal(slow.status, 200);
    await slow.text();
  });

  test('a rescued request: one 5xx and one 2xx usage event, one successful fallback', async () => {
    const before = await h.metrics();
    const ev = (m: string, code: string, key: string) =>
      sample(m, 'aisix_usage_events_emitted_total', {
        handler: 'chat',
        status_code: code,
        inbound_protocol: 'openai',
        model: 'rescued',
        provider_key_name: key,
      }) ?? 0;
    a.script({ status: 503 });
    const res = await h.chat('rescued');
    assert.equal(res.status, 200);
    await res.text();
    const m = await h.metrics();
    assert.equal(ev(m, '5xx', 'pa') - ev(before, '5xx', 'pa'), 1);
    assert.equal(ev(m, '2xx', 'pb') - ev(before, '2xx', 'pb'), 1);
    assert.equal(
      sample(m, 'aisix_routing_successful_fallbacks_total', { model: 'rescued', fallback_model: 'm-b' }),
      1,
    );
    assert.match(
      m,
      /^aisix_usage_events_emitted_total\{handler="chat",status_code="5xx",inbound_protocol="openai",model="rescued",provider_key_id="[0-9a-f-]{36}",provider_key_name="pa"\} 1$/m,
    );
    assert.doesNotMatch(m, /aisix_proxy_fallbacks_total/);
    await clear('m-a');

    // Both fail: the move to m-b is a failed fallback; a timeout's usage event is a 5xx.
    a.script({ status: 500 });
    b.script({ status: 500 });
    const failed = await h.chat('rescued');
    assert.equal(failed.status, 502);
    await failed.text();
    const m2 = await h.metrics();
    assert.equal(sample(m2, 'aisix_routing_failed_fallbacks_total', { model: 'rescued', fallback_model: 'm-b' }), 1);
    assert.equal(ev(m2, '5xx', 'pb') - ev(m, '5xx', 'pb'), 1);
    await clear('m-a', 'm-b');
  });
});

describe('background checks and unavailability', () => {
  let h: Harness;
  let hAll: Harness;
  const check =
    'background_model_check: { enabled: true, interval_seconds: 60, timeout_seconds: 2, prompt: ping, max_tokens: 1, stale_after_seconds: 31536000, ignore_statuses: [429] }';
  before(async () => {
    a.setDefault({ status: 503 });
    c.setDefault({ status: 429 });
    const na = a.requests.length;
    const nc = c.requests.length;
    h = await harness(`  - { display_name: smart, routing: { targets: [{ model: m-a }, { model: m-b }] } }`, {
      directExtra: check,
    });
    await a.waitForRequests(1).catch(() => {});
    await until(async () => (await h.rows())['m-a']!.status === 'unhealthy', 3000, 'm-a unhealthy');
    await until(async () => (await h.rows())['m-c']!.last_check_status === 429, 3000, 'm-c checked');
    assert.ok(a.requests.length > na && c.requests.length > nc);
  });
  after(() => {
    h.gw.stop();
    hAll?.gw.stop();
    a.setDefault({});
    b.setDefault({});
    c.setDefault({});
  });

  test("the check is a small real chat request: prompt, max_tokens, the model's key", () => {
    const req = a.requests.find((r) => r.json?.max_tokens === 1)!;
    assert.deepEqual(req.json, { model: 'up-a', messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 });
    assert.equal(req.headers.authorization, `Bearer ${ENV.UPSTREAM_KEY}`);
  });

  test('a background 503 marks the model unhealthy; routing skips it', async () => {
    const row = (await h.rows())['m-a']!;
    assert.equal(row.status, 'unhealthy');
    assert.equal(row.status_reason, 'background_check_failed');
    assert.equal(row.last_check_status, 503);
    assert.equal(typeof (row.last_checked_at as { secs_since_epoch: number }).secs_since_epoch, 'number');
    const na = a.requests.length;
    for (let i = 0; i < 3; i++) {
      const res = await h.chat('smart');
      assert.equal(res.status, 200);
      assert.equal(await upstreamOf(h, res), 'up-b');
    }
    assert.equal(a.requests.length, na, 'no caller traffic to an unhealthy target');
    assert.equal(sample(await h.metrics(), 'aisix_deployment_state', { model: 'm-a' }), 2);
  });

  test('an ignored status (429 in ignore_statuses) leaves the model healthy with ignored_transient_error', async () => {
    const row = (await h.rows())['m-c']!;
    assert.equal(row.status, 'healthy');
    assert.equal(row.status_reason, 'ignored_transient_error');
    assert.equal(row.last_check_status, 429);
  });

  test('a direct model marked unhealthy answers 503 all_candidates_unavailable without an upstream call', async () => {
    const na = a.requests.length;
    const res = await h.chat('m-a');
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '30');
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'all_candidates_unavailable');
    assert.equal(a.requests.length, na);
  });

  test('all targets unhealthy: fail → 503 + Retry-After: 30 and zero upstream calls; try_anyway calls them', async () => {
    b.setDefault({ status: 503 });
    const nb = b.requests.length;
    hAll = await harness(
      `  - { display_name: smart, routing: { targets: [{ model: m-a }, { model: m-b }] } }
  - { display_name: anyway, routing: { targets: [{ model: m-a }, { model: m-b }], when_all_unavailable: try_anyway } }`,
      {
        directExtra:
          'background_model_check: { enabled: true, interval_seconds: 60, timeout_seconds: 2, prompt: ping, max_tokens: 1, stale_after_seconds: 31536000 }',
      },
    );
    await until(
      async () => {
        const r = await hAll.rows();
        return r['m-a']!.status === 'unhealthy' && r['m-b']!.status === 'unhealthy' &&
          r['m-c']!.last_checked_at !== undefined;
      },
      3000,
      'checks',
    );
    assert.ok(b.requests.length > nb);
    const before = [a.requests.length, b.requests.length, c.requests.length];
    const res = await hAll.chat('smart');
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '30');
    const body = await res.json() as { error: { type: string; message: string } };
    assert.equal(body.error.type, 'all_candidates_unavailable');
    assert.deepEqual([a.requests.length, b.requests.length, c.requests.length], before, 'zero upstream calls');

    a.script({});
    const anyway = await hAll.chat('anyway');
    assert.equal(anyway.status, 200);
    assert.equal(await upstreamOf(h, anyway), 'up-a');
    assert.equal(a.requests.length, before[0]! + 1);
  });
});

describe('strategies through the proxy', () => {
  let h: Harness;
  before(async () => {
    h = await harness(
      `  - { display_name: rr, routing: { strategy: round_robin, targets: [{ model: m-a, weight: 70 }, { model: m-b, weight: 30 }] } }
  - { display_name: sticky, routing: { strategy: consistent_hash, hash_on: [{ type: header, name: x-session }, { type: api_key }], targets: [{ model: m-a }, { model: m-b }, { model: m-c }] } }
  - { display_name: busy, routing: { strategy: least_busy, targets: [{ model: m-a }, { model: m-b }] } }
  - { display_name: lat-a, provider_key: pa, model_name: up-a, retries: 0 }
  - { display_name: lat-b, provider_key: pb, model_name: up-b, retries: 0 }
  - { display_name: fast, routing: { strategy: least_latency, targets: [{ model: lat-a }, { model: lat-b }] } }`,
    );
  });
  after(() => h.gw.stop());

  test('weighted round robin 70/30 over 100 requests is exact (mock hits per target)', async () => {
    const [na, nb] = [a.requests.length, b.requests.length];
    for (let i = 0; i < 100; i++) {
      const res = await h.chat('rr');
      assert.equal(res.status, 200);
      await res.text();
    }
    assert.equal(a.requests.length - na, 70);
    assert.equal(b.requests.length - nb, 30);
  });

  test('consistent hash is sticky per hash_on header value, and per API key without it', async () => {
    const seen = new Set<string>();
    for (const session of ['s-1', 's-2', 's-3', 's-4', 's-5', 's-6', 's-7', 's-8']) {
      const picks = new Set<string>();
      for (let i = 0; i < 4; i++) {
        picks.add(await upstreamOf(h, await h.chat('sticky', {}, { 'x-session': session })));
      }
      assert.equal(picks.size, 1, `session ${session} moved between ${[...picks].join(', ')}`);
      seen.add([...picks][0]!);
    }
    assert.ok(seen.size >= 2, 'different sessions spread over the targets');
    const byKey = new Set<string>();
    for (let i = 0; i < 4; i++) byKey.add(await upstreamOf(h, await h.chat('sticky')));
    assert.equal(byKey.size, 1);
  });

  test('least_busy sends the next request to the target with fewer requests in flight', async () => {
    let release!: () => void;
    a.script({
      hold: new Promise<void>((r) => {
        release = r;
      }),
    });
    const held = h.chat('busy');
    await a.waitForRequests(1);
    const res = await h.chat('busy');
    assert.equal(await upstreamOf(h, res), 'up-b');
    release();
    assert.equal(await upstreamOf(h, await held), 'up-a');
  });

  test('least_latency prefers the faster target once both are measured', async () => {
    a.script({ delayMs: 150 });
    assert.equal(await upstreamOf(h, await h.chat('fast')), 'up-a'); // unmeasured targets first, in order
    assert.equal(await upstreamOf(h, await h.chat('fast')), 'up-b');
    for (let i = 0; i < 3; i++) assert.equal(await upstreamOf(h, await h.chat('fast')), 'up-b');
  });
});

describe('streaming', () => {
  let h: Harness;
  before(async () => {
    h = await harness(
      `  - { display_name: quick, provider_key: pa, model_name: up-a, retries: 0, stream_timeout: 300 }
  - { display_name: smart, routing: { targets: [{ model: m-a }, { model: m-b }] } }
  - { display_name: smart-quick, routing: { targets: [{ model: quick }, { model: m-b }] } }`,
      { config: 'downstream: { sse_keepalive_interval_secs: 1 }\n' },
    );
  });
  after(() => h.gw.stop());

  test('a mid-stream upstream failure surfaces as an SSE error event; health records it', async () => {
    a.script({ sse: [chunk('up-a', 'part'), chunk('up-a', 'never')], chunkDelayMs: 200, dropAfterChunks: 1 });
    const res = await h.chat('m-a', { stream: true });
    assert.equal(res.status, 200);
    const text = await res.text();
    const events = text.split('\n\n').filter(Boolean);
    assert.equal(events[0], `data: ${JSON.stringify(chunk('m-a', 'part'))}`); // the caller's model name
    const err = JSON.parse(events.at(-1)!.slice('data: '.length)) as { error: { type: string } };
    assert.equal(err.error.type, 'upstream_error');
    assert.ok(!text.includes('[DONE]'));
    const row = (await h.rows())['m-a']!;
    assert.equal(row.status, 'cooldown');
    assert.equal(row.status_reason, 'transport_error');
    const m = await h.metrics();
    assert.equal(sample(m, 'aisix_deployment_failure_responses_total', { model: 'm-a' }), 1);
    assert.equal(sample(m, 'aisix_deployment_success_responses_total', { model: 'm-a' }), undefined);
    h.gw.health.recordSuccess({ id: row.id as string });
  });

  test('a stream that fails before its first byte (5xx) fails over like JSON', async () => {
    a.script({ status: 500 });
    const res = await h.chat('smart', { stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-aisix-served-by'), 'm-b');
    assert.equal(
      await res.text(),
      `data: ${JSON.stringify(chunk('smart', 'hello'))}\n\ndata: ${
        JSON.stringify(chunk('smart', ' world'))
      }\n\ndata: [DONE]\n\n`,
    );
    h.gw.health.recordSuccess({ id: (await h.rows())['m-a']!.id as string });
  });

  test('a stream whose head does not arrive within stream_timeout fails over (timeout → request_timeout)', async () => {
    a.script({ delayMs: 800 });
    const started = Date.now();
    const res = await h.chat('smart-quick', { stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-aisix-served-by'), 'm-b');
    assert.match(await res.text(), /"model":"smart-quick"/);
    assert.ok(Date.now() - started < 800);
    const row = (await h.rows()).quick!;
    assert.equal(row.status, 'cooldown');
    assert.equal(row.status_reason, 'request_timeout');
  });

  test('all targets failing before the first byte: a JSON 502, not a stream', async () => {
    a.script({ status: 500 });
    b.script({ status: 502 });
    h.gw.health.recordSuccess({ id: (await h.rows())['m-a']!.id as string });
    const res = await h.chat('smart', { stream: true });
    assert.equal(res.status, 502);
    assert.equal(res.headers.get('content-type'), 'application/json');
    await res.text();
    h.gw.health.recordSuccess({ id: (await h.rows())['m-a']!.id as string });
    h.gw.health.recordSuccess({ id: (await h.rows())['m-b']!.id as string });
  });

  test('keep-alive comments flow while the upstream is silent between chunks', async () => {
    // The upstream stays silent after "one" until the caller has seen a comment after it.
    const silence = latch();
    b.script({ sse: [chunk('up-b', 'one'), chunk('up-b', 'two')], chunkHolds: [silence.promise] });
    const res = await h.chat('m-b', { stream: true });
    const text = await within(
      readAcross(res, (t) => /"one".*\n\n:\n\n/s.test(t), silence.resolve),
      10_000,
      'a keep-alive comment after the first chunk',
    ).finally(silence.resolve);
    const one = text.indexOf('"one"');
    const two = text.indexOf('"two"');
    assert.ok(one >= 0 && two > one, text);
    assert.match(text.slice(one, two), /\n\n:\n\n/, 'a `:` comment between the chunks');
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });

  test('a slow first chunk: the response commits after the keep-alive interval and sends comments meanwhile', async () => {
    // The upstream answers only once the caller has the head and a first comment.
    const answer = latch();
    b.script({ hold: answer.promise });
    const text = await within(
      (async () => {
        const res = await h.chat('m-b', { stream: true });
        assert.equal(res.status, 200, 'headers before the upstream answered');
        return await readAcross(res, (t) => t.length > 0, answer.resolve);
      })(),
      10_000,
      'the head and a comment while the upstream holds its answer',
    ).finally(answer.resolve);
    assert.ok(text.startsWith(':\n\n'), text);
    assert.ok(text.includes('"hello"') && text.endsWith('data: [DONE]\n\n'));
  });
});

describe('the Dispatcher: hash_on client_ip and ServedBy', () => {
  let h: Harness;
  let d: Dispatcher;
  before(async () => {
    h = await harness(`  - { display_name: x-a, provider_key: pa, model_name: up-a, cooldown: { enabled: false } }
  - { display_name: x-b, provider_key: pb, model_name: up-b, cooldown: { enabled: false } }
  - { display_name: by-ip, routing: { strategy: consistent_hash, hash_on: [{ type: client_ip }], targets: [{ model: m-a }, { model: m-b }, { model: m-c }] } }
  - { display_name: by-cookie, routing: { strategy: consistent_hash, hash_on: [{ type: cookie, name: sid }, { type: client_ip }], targets: [{ model: m-a }, { model: m-b }, { model: m-c }] } }
  - { display_name: xpair, routing: { targets: [{ model: x-a }, { model: x-b }], retries: 1 } }`);
    d = new Dispatcher({
      config: h.gw.config,
      upstream: h.gw.upstream,
      health: h.gw.health,
      routing: h.gw.routingState,
      metrics: h.gw.metrics,
    });
  });
  after(() => h.gw.stop());

  function dispatch(name: string, extra: Partial<DispatchInput> = {}): Promise<DispatchResult> {
    const snapshot = h.gw.snapshot!;
    return d.dispatch({
      snapshot,
      model: snapshot.modelByName(name)!,
      endpoint: 'chat',
      body: { model: name, messages: MESSAGES },
      stream: false,
      signal: new Cancel(),
      ...extra,
    });
  }
  const picked = (r: DispatchResult) => (r.kind === 'response' ? r.served?.upstreamModel : `(${r.kind})`);

  test('hash_on client_ip: one client IP sticks to one target; IPs spread', async () => {
    const seen = new Set<string | undefined>();
    for (const ip of ['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.100.4', '2001:db8::5', '10.1.2.3']) {
      const picks = new Set<string | undefined>();
      for (let i = 0; i < 3; i++) picks.add(picked(await dispatch('by-ip', { clientIp: ip })));
      assert.equal(picks.size, 1, `${ip} moved: ${[...picks].join(', ')}`);
      seen.add([...picks][0]);
    }
    assert.ok(seen.size >= 2, 'different clients spread over the targets');
  });

  test('hash_on cookie then client_ip: the cookie decides when present, the IP otherwise', async () => {
    const viaIp = picked(await dispatch('by-cookie', { clientIp: 'sess-77' }));
    const viaCookie = picked(
      await dispatch('by-cookie', { clientIp: '203.0.113.9', headers: new Headers({ cookie: 'a=1; sid=sess-77' }) }),
    );
    assert.equal(viaCookie, viaIp, 'the same key from either source ranks the targets the same way');
    // And through the proxy: the caller's Cookie header reaches the strategy.
    const proxied = new Set<string>();
    for (let i = 0; i < 3; i++) {
      proxied.add(await upstreamOf(h, await h.chat('by-cookie', {}, { cookie: 'sid=sess-77' })));
    }
    assert.deepEqual([...proxied], [viaIp]);
  });

  test('ServedBy: the deciding target, attempts, fallbacks and is_fallback on every kind of result', async () => {
    const direct = await dispatch('x-a');
    assert.ok(direct.kind === 'response');
    assert.equal(direct.served?.model.display_name, 'x-a');
    assert.equal(direct.served?.key.display_name, 'pa');
    assert.deepEqual(
      [direct.served?.upstreamModel, direct.served?.attempts, direct.served?.fallbacks, direct.served?.isFallback],
      ['up-a', 1, 0, false],
    );

    a.script({ status: 500 }, { status: 502 });
    const rescued = await dispatch('xpair');
    assert.ok(rescued.kind === 'response' && rescued.status === 200);
    assert.equal(rescued.served?.model.display_name, 'x-b');
    assert.deepEqual([rescued.served?.attempts, rescued.served?.fallbacks, rescued.served?.isFallback], [3, 1, true]);

    a.script({ status: 500 }, { status: 500 });
    b.script({ status: 503 }, { status: 503 });
    const failed = await dispatch('xpair');
    assert.ok(failed.kind === 'error');
    assert.equal(failed.failure.status, 502);
    assert.equal(failed.served?.model.display_name, 'x-b');
    assert.deepEqual([failed.served?.attempts, failed.served?.fallbacks, failed.served?.isFallback], [4, 1, true]);

    b.script({ status: 400, body: { error: { message: 'no', type: 'invalid_request_error' } } });
    const passed = await dispatch('x-b');
    assert.ok(passed.kind === 'response' && passed.status === 400);
    assert.deepEqual([passed.served?.model.display_name, passed.served?.attempts], ['x-b', 1]);

    a.script({ status: 500 });
    const stream = await dispatch('xpair', {
      stream: true,
      body: { model: 'xpair', messages: MESSAGES, stream: true },
    });
    assert.ok(stream.kind === 'stream');
    assert.deepEqual(
      [stream.served?.model.display_name, stream.served?.attempts, stream.served?.isFallback],
      ['x-a', 2, false],
      'a retried first target that then served is not a fallback',
    );
    for await (const _ of stream.chunks) { /* drain */ }
    stream.settle('complete');
  });
});

describe('first-token failover only for a resource-configured stream budget (docs/aisix-compatibility.md "Resources")', () => {
  let h: Harness;
  before(async () => {
    h = await harness(
      `  - { display_name: s-conf, provider_key: pslow, model_name: up-slow, retries: 0, stream_timeout: 300 }
  - { display_name: s-plain, provider_key: pslow, model_name: up-slow, retries: 0 }
  - { display_name: own-budget, routing: { targets: [{ model: s-conf }, { model: m-b }] } }
  - { display_name: group-budget, stream_timeout: 300, routing: { targets: [{ model: s-plain }, { model: m-b }] } }
  - { display_name: group-timeout, timeout: 300, routing: { targets: [{ model: s-plain }, { model: m-b }] } }
  - { display_name: default-budget, routing: { targets: [{ model: s-plain }, { model: m-b }] } }`,
      { config: 'upstream: { stream_timeout_ms: 300 }\n' },
    );
  });
  after(() => h.gw.stop());

  const clear = async (name: string) => h.gw.health.recordSuccess({ id: (await h.rows())[name]!.id as string });

  for (const model of ['own-budget', 'group-budget', 'group-timeout']) {
    test(`${model}: the 200 is withheld until a first chunk; a slow first token fails over`, async () => {
      const [ns, nb] = [slow.hits, b.requests.length];
      const started = Date.now();
      const res = await h.chat(model, { stream: true });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(Date.now() - started < SLOW_FIRST_CHUNK_MS, 'the budget (300 ms) cut the slow target');
      assert.equal(res.headers.get('x-aisix-served-by'), 'm-b');
      assert.ok(text.startsWith('data: ') && text.includes('hello') && !text.includes('late'), text);
      assert.deepEqual([slow.hits - ns, b.requests.length - nb], [1, 1]);
      const target = model === 'own-budget' ? 's-conf' : 's-plain';
      assert.equal((await h.rows())[target]!.status_reason, 'request_timeout');
      await clear(target);
    });
  }

  test('the deployment default commits at the head: a first-chunk stall is an in-band timeout, no failover', async () => {
    const [ns, nb] = [slow.hits, b.requests.length];
    const res = await h.chat('default-budget', { stream: true });
    assert.equal(res.status, 200);
    const text = await res.text();
    const err = JSON.parse(text.trim().slice('data: '.length)) as { error: { type: string } };
    assert.equal(err.error.type, 'upstream_timeout');
    assert.deepEqual([slow.hits - ns, b.requests.length - nb], [1, 0]);
    assert.equal((await h.rows())['s-plain']!.status_reason, 'request_timeout');
    await clear('s-plain');
  });
});

describe('caller rate limits', () => {
  let h: Harness;
  /** The gateway's clock runs with the wall clock, shifted by this (a test moves it to a window's start). */
  let clockOffsetMs = 0;
  before(async () => {
    h = await harness(
      `  - { display_name: one-at-a-time, provider_key: pa, model_name: up-a, retries: 0, rate_limit: { concurrency: 1 } }`,
      { now: () => new Date(Date.now() + clockOffsetMs) },
    );
  });
  after(() => h.gw.stop());

  test('rps on an API key: 429 rate_limit_exceeded with Retry-After', async () => {
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 5; i++) {
      const res = await h.chat('m-a', {}, { authorization: `Bearer ${LIMITED}` });
      statuses.push(res.status);
      if (res.status === 429) limited ??= res;
      else await res.text();
    }
    assert.ok(limited, `expected a 429 in ${statuses.join(',')}`);
    assert.equal(limited.headers.get('retry-after'), '1');
    const body = await limited.json() as { error: { type: string } };
    assert.equal(body.error.type, 'rate_limit_exceeded');
    assert.ok(statuses.filter((s) => s === 200).length <= 4);
  });

  test('concurrency on a model: a second request while one is in flight gets 429; the permit returns when the body ends', async () => {
    let release!: () => void;
    a.script({
      hold: new Promise<void>((r) => {
        release = r;
      }),
    });
    const first = h.chat('one-at-a-time');
    await a.waitForRequests(1);
    const second = await h.chat('one-at-a-time');
    assert.equal(second.status, 429);
    assert.equal(second.headers.get('retry-after'), '1');
    await second.text();
    release();
    assert.equal((await first).status, 200);
    const third = await h.chat('one-at-a-time');
    assert.equal(third.status, 200);
    await third.text();

    a.script({ sse: [chunk('up-a', 'x'), chunk('up-a', 'y')], chunkDelayMs: 200 });
    const stream = await h.chat('one-at-a-time', { stream: true });
    assert.equal(stream.status, 200);
    const during = await h.chat('one-at-a-time');
    assert.equal(during.status, 429, 'a stream holds its permit until its last byte');
    await during.text();
    await stream.text();
    const afterStream = await h.chat('one-at-a-time');
    assert.equal(afterStream.status, 200);
    await afterStream.text();
  });

  test('tpm on an API key is charged from the response usage', async () => {
    // The gateway's clock jumps to 1 s past the next minute boundary: the three requests share one window.
    clockOffsetMs = 60_000 - (Date.now() % 60_000) + 1000;
    const tpm = { authorization: `Bearer ${TPM}` };
    assert.equal((await h.chat('m-a', {}, tpm)).status, 200); // usage 4
    assert.equal((await h.chat('m-a', {}, tpm)).status, 200); // 4 < 5: admitted, now 8
    const res = await h.chat('m-a', {}, tpm);
    assert.equal(res.status, 429);
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    await res.text();
    // The limiter reads the gateway's clock: one minute later on it, the next window admits again.
    clockOffsetMs += 60_000;
    assert.equal((await h.chat('m-a', {}, tpm)).status, 200);
  });
});

describe('POST /v1/messages and Anthropic targets', () => {
  let h: Harness;
  before(async () => {
    h = await harness(`  - { display_name: claude, provider_key: pant, model_name: claude-up, retries: 0 }
  - { display_name: echo, provider_key: offline, model_name: echo-1 }`);
  });
  after(() => h.gw.stop());

  const msg = (model: string, extra: Record<string, unknown> = {}) =>
    h.post('/v1/messages', {
      model,
      max_tokens: 50,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello there' }],
      ...extra,
    });

  test('JSON to the echo target (translated): a Messages answer', async () => {
    const res = await msg('echo');
    assert.equal(res.status, 200);
    const body = await res.json() as Record<string, unknown>;
    assert.equal(body.type, 'message');
    assert.equal(body.role, 'assistant');
    assert.deepEqual(body.content, [{ type: 'text', text: 'hello there' }]);
    assert.equal(body.stop_reason, 'end_turn');
    assert.deepEqual(body.usage, { input_tokens: 2, output_tokens: 2 });
  });

  test('SSE to the echo target (translated): the Messages event sequence', async () => {
    const res = await msg('echo', { stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const events = (await res.text()).split('\n\n').filter(Boolean).map((e) => {
      const [ev, data] = e.split('\n');
      return {
        event: ev!.slice('event: '.length),
        data: JSON.parse(data!.slice('data: '.length)) as Record<string, unknown>,
      };
    });
    const names = events.map((e) => e.event);
    assert.equal(names[0], 'message_start');
    assert.equal(names[1], 'content_block_start');
    assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    const text = events.filter((e) => e.event === 'content_block_delta').map((e) =>
      (e.data.delta as { text: string }).text
    ).join('');
    assert.equal(text, 'hello there');
    const delta = events.find((e) => e.event === 'message_delta')!.data;
    assert.deepEqual(delta.delta, { stop_reason: 'end_turn', stop_sequence: null });
    assert.deepEqual(delta.usage, { input_tokens: 2, output_tokens: 2 });
  });

  test('JSON to an OpenAI-style target: the upstream gets a chat request, the caller a Messages answer', async () => {
    const res = await msg('m-a', { stop_sequences: ['END'], temperature: 0.2 });
    assert.equal(res.status, 200);
    const up = a.requests.at(-1)!;
    assert.equal(up.url, '/v1/chat/completions');
    assert.deepEqual(up.json, {
      model: 'up-a',
      max_tokens: 50,
      stop: ['END'],
      temperature: 0.2,
      messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello there' }],
    });
    const body = await res.json() as Record<string, unknown>;
    assert.deepEqual(body.content, [{ type: 'text', text: 'hi from mock' }]);
    assert.deepEqual(body.usage, { input_tokens: 1, output_tokens: 3 });
    assert.equal(body.model, 'm-a', "the caller's model");
  });

  test('SSE to an OpenAI-style target: chunks become Messages events; the stream asks for usage', async () => {
    const res = await msg('m-a', { stream: true });
    const text = await res.text();
    assert.deepEqual(a.requests.at(-1)!.json!.stream_options, { include_usage: true });
    assert.match(text, /^event: message_start\n/);
    assert.match(text, /"text_delta","text":"hello"/);
    assert.match(text, /event: message_stop\ndata: \{"type":"message_stop"\}\n\n$/);
  });

  test('an upstream 4xx on /v1/messages keeps its status, in the Anthropic envelope', async () => {
    a.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error' } } });
    const res = await msg('m-a');
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'context too long' },
    });
  });

  test('gateway errors on /v1/messages use the Anthropic envelope', async () => {
    const res = await h.post('/v1/messages', { model: 'echo', max_tokens: 5, messages: MESSAGES }, {
      authorization: 'Bearer nope',
    });
    assert.equal(res.status, 401);
    const body = await res.json() as { type: string; error: { type: string } };
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, 'authentication_error'); // Anthropic's vocabulary by status (L3)
    // `max_tokens` may be absent (AISIX's leniency), not malformed.
    const bad = await h.post('/v1/messages', { model: 'echo', max_tokens: 0, messages: MESSAGES });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
  });

  test("passthrough to an Anthropic target: body, headers and answer untouched but the caller's model (JSON)", async () => {
    const res = await msg('claude', { metadata: { user_id: 'u1' } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), anthropicMessage('claude'));
    const up = anth.requests.at(-1)!;
    assert.equal(up.url, '/v1/messages');
    assert.equal(up.headers['x-api-key'], ENV.ANTHROPIC_KEY);
    assert.equal(up.headers['anthropic-version'], '2023-06-01');
    assert.equal(up.headers.authorization, undefined);
    assert.deepEqual(up.json, {
      model: 'claude-up',
      max_tokens: 50,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello there' }],
      metadata: { user_id: 'u1' },
    });
  });

  test("passthrough to an Anthropic target: SSE bytes untouched but the caller's model", async () => {
    const res = await msg('claude', { stream: true });
    const expected = anthropicEvents('claude').map(([n, p]) => `event: ${n}\ndata: ${JSON.stringify(p)}\n\n`).join(
      '',
    );
    assert.equal(await res.text(), expected);
  });

  test('/v1/chat/completions to an Anthropic target: translated both ways (JSON)', async () => {
    const res = await h.post('/v1/chat/completions', {
      model: 'claude',
      messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi' }],
      stop: 'X',
      user: 'u2',
    });
    assert.equal(res.status, 200);
    const up = anth.requests.at(-1)!.json!;
    assert.deepEqual(up, {
      model: 'claude-up',
      max_tokens: 4096,
      system: 'sys',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      stop_sequences: ['X'],
      metadata: { user_id: 'u2' },
    });
    const body = await res.json() as {
      object: string;
      choices: { message: { content: string }; finish_reason: string }[];
      usage: Record<string, number>;
    };
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.choices[0]!.message.content, 'hi from anthropic mock');
    assert.equal(body.choices[0]!.finish_reason, 'stop');
    assert.deepEqual(body.usage, { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 });
  });

  test('/v1/chat/completions to an Anthropic target: translated both ways (SSE, with usage when asked)', async () => {
    const res = await h.post('/v1/chat/completions', {
      model: 'claude',
      messages: MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(res.status, 200);
    const events = (await res.text()).split('\n\n').filter(Boolean).map((e) => e.slice('data: '.length));
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) =>
      JSON.parse(e) as { choices: { delta: Record<string, unknown>; finish_reason: string | null }[]; usage?: unknown }
    );
    assert.deepEqual(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '' });
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'hello world');
    assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason, 'stop');
    assert.deepEqual(chunks.at(-1)!.usage, { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 });
  });

  test('an Anthropic upstream error status reaches an OpenAI caller in the OpenAI envelope', async () => {
    anth.script({
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'bad thing' } },
    });
    const res = await h.chat('claude');
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), { error: { message: 'bad thing', type: 'invalid_request_error' } });
  });

  test('a mid-stream failure on /v1/messages is an Anthropic `event: error`', async () => {
    a.script({ sse: [chunk('up-a', 'part'), chunk('up-a', 'never')], chunkDelayMs: 200, dropAfterChunks: 1 });
    const text = await (await msg('m-a', { stream: true })).text();
    assert.match(
      text,
      /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]+"\}\}\n\n$/,
    );
    assert.ok(!text.includes('message_stop'));
  });

  test("embeddings on an Anthropic target: 400 in the caller's wire, no upstream call", async () => {
    const n = anth.requests.length;
    const res = await h.post('/v1/embeddings', { model: 'claude', input: 'x' });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
    assert.equal(anth.requests.length, n);
  });

  test('no secret in any body seen by the status surfaces', async () => {
    const text = JSON.stringify(await h.rows()) + (await h.metrics());
    for (const s of Object.values(ENV)) assert.ok(!text.includes(s));
  });
});
