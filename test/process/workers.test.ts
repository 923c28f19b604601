// Cloudflare Workers (README.md "Runtimes"): the one fetch handler with the proxy routes and, behind a bearer token,
// the status routes; configuration bundled at build time, `${VAR}`/`key_env`/`AISIX_*` read from the
// Worker's env bindings on the first request of an isolate.
//
// Two layers: the handler in-process on Node (fast; every choice of runtimes/workers-handler.ts), then
// black-box under `wrangler dev --local` (workerd, offline): the shipped wrangler.toml + runtimes/workers.ts
// with its bundled examples/workers/ pair, and a generated Worker whose resources point at a mock upstream
// on loopback, so workerd's own fetch carries a real upstream call (JSON and SSE), and at the Bedrock and
// Vertex mocks, which verify the SigV4 signature and the service-account JWT the Worker's WebCrypto made
// (test/support/mock-bedrock.ts, mock-vertex.ts). etcd mode (range polling,
// src/sources/etcd/poll.ts) runs against a real etcd (`startEtcd()`) in both layers.
import { sumSamples } from '../support/metrics.ts';
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  createWorker,
  ETCD_POLL_VAR,
  STATUS_TOKEN_VAR,
  type WorkerBundle,
  type WorkerContext,
  type WorkerEnv,
} from '../../runtimes/workers-handler.ts';
import { sha256Hex } from '../../src/util/crypto.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { AWS, type MockBedrock, startMockBedrock } from '../support/mock-bedrock.ts';
import { type MockVertex, PROJECT, startMockVertex } from '../support/mock-vertex.ts';
import { type RedirectPair, startRedirectPair } from '../support/redirect-upstream.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { seeder, trio } from '../support/etcd-gateway.ts';
import { parseLogLine } from '../support/log-line.ts';
import { until } from '../support/until.ts';
import { freePort } from '../support/process.ts';
import { startWranglerDev, type WranglerDev } from '../support/wrangler-dev.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const DEMO_KEY = 'sk-sluice-demo';
const STATUS_TOKEN = 'status-token-SECRET-4b1d';
const UPSTREAM_KEY = 'sk-upstream-SECRET-93ae';
const CALLER_KEY = 'sk-caller-SECRET-51c0';
const REDIRECT_KEY = 'sk-ant-REDIR-SECRET-77d2';

const WORKER_CONFIG = `resources_file: resources.yaml
proxy: { addr: "0.0.0.0:8787" }
admin: { enabled: false }
`;

function upstreamResources(base = '${UPSTREAM_BASE}'): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: up, provider: openai, api_base: "${base}", api_key: "\${UPSTREAM_KEY}" }
models:
  - { display_name: gpt-test, model_name: gpt-upstream, provider_key: up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

/**
 * The generated Worker's resources: the OpenAI-wire upstream, plus a Bedrock key (static SigV4 credentials)
 * and a Vertex key (a service account whose JWT the mock verifies) on the cloud mocks, and an Anthropic key
 * on an upstream that redirects, bundled as written.
 */
function edgeResources(br: MockBedrock, vx: MockVertex, redirectBase: string): string {
  const gcp = { project: PROJECT, region: 'us-central1', service_account_json: vx.newServiceAccount() };
  return `_format_version: "1"
provider_keys:
  - { display_name: up, provider: openai, api_base: "\${UPSTREAM_BASE}", api_key: "\${UPSTREAM_KEY}" }
  - { display_name: aws, adapter: bedrock, api_key: '${JSON.stringify(AWS)}', api_base: "${br.url}" }
  - { display_name: gcp, adapter: vertex, api_key: '${JSON.stringify(gcp)}', api_base: "${vx.url}" }
  - { display_name: redir, provider: anthropic, api_key: "${REDIRECT_KEY}", api_base: "${redirectBase}" }
models:
  - { display_name: gpt-test, model_name: gpt-upstream, provider_key: up, retries: 0 }
  - { display_name: llama, provider_key: aws, model_name: "meta.llama3-1-70b-instruct-v1:0", retries: 0 }
  - { display_name: gemini, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: redirected, provider_key: redir, model_name: claude-3, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

function bundle(config: string, resources: string): WorkerBundle {
  return {
    configPath: 'bundle/config.yaml',
    files: { 'bundle/config.yaml': config, 'bundle/resources.yaml': resources },
  };
}

function etcdConfig(endpoint: string, prefix: string, extra = ''): string {
  return `etcd: { endpoints: ["${endpoint}"], prefix: "${prefix}" }
proxy: { addr: "0.0.0.0:8787" }
admin: { enabled: false }
${extra}`;
}

/** An ExecutionContext that keeps what was handed to `waitUntil`, so a test can wait for the poll. */
function execCtx(): WorkerContext & { settled(): Promise<void>; handed(): number } {
  const pending: Promise<unknown>[] = [];
  let handed = 0;
  return {
    waitUntil: (p) => void (pending.push(p), handed++),
    settled: async () => {
      await Promise.all(pending.splice(0));
    },
    handed: () => handed,
  };
}

interface ConfigStatus {
  state: string;
  source: { type: string; connected?: boolean; observed_revision?: number };
  applied?: { apply_seq: number; applied_revision?: number; resource_counts: Record<string, number> };
  last_reload?: { successful: boolean };
  last_failure: null | { last_error_kind: string; last_error: string };
  rejected: { resource_id: string; last_error_kind: string; serving_stale_since?: string }[];
  partially_compatible: { resource_kind: string; field: string; count: number }[];
}

const chatBody = (model: string, stream = false) =>
  JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hello from the edge' }] });

function chat(w: WranglerDev, key: string, model: string, stream = false): Promise<Response> {
  return w.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: chatBody(model, stream),
  });
}

/** The streamed answer: the `delta.content` of every `data:` event, joined. */
function sseContent(text: string): string {
  return text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => {
    const ev = JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[] };
    return ev.choices[0]?.delta.content ?? '';
  }).join('');
}

/** Console lines the handler logs (writeLog is console.log on Workers), parsed. */
function captureLogs(t: TestContext): Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  t.mock.method(console, 'log', (line: string) => void lines.push(parseLogLine(line) ?? { raw: line }));
  return lines;
}

describe('Workers handler (in-process)', () => {
  let upstream: MockUpstream;
  before(async () => {
    upstream = await startMockUpstream();
  });
  after(() => upstream.close());

  const env = (extra: WorkerEnv = {}): WorkerEnv => ({
    UPSTREAM_BASE: upstream.base,
    UPSTREAM_KEY,
    CALLER_KEY,
    ...extra,
  });
  const call = (w: ReturnType<typeof createWorker>, e: WorkerEnv, path: string, init: RequestInit = {}) =>
    w.fetch(new Request(`https://sluice.example${path}`, init), e);
  const chatInit = (key: string, stream = false): RequestInit => ({
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: chatBody('gpt-test', stream),
  });

  test('${VAR} and key_env come from string bindings; other bindings are ignored; peer is cf-connecting-ip', async (t) => {
    const logs = captureLogs(t);
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env({ SOME_KV: { get() {} } });
    const before = upstream.requests.length;
    const init = chatInit(CALLER_KEY);
    const res = await w.fetch(
      new Request('https://sluice.example/v1/chat/completions', {
        ...init,
        headers: { ...(init.headers as Record<string, string>), 'cf-connecting-ip': '203.0.113.9' },
      }),
      e,
    );
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { model: string }).model, 'gpt-test'); // the caller's name
    assert.equal(upstream.requests.at(-1)!.json?.model, 'gpt-upstream');
    assert.equal(upstream.requests[before]!.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    const line = logs.find((l) => l.msg === 'proxy request completed');
    assert.equal(line?.peer, '203.0.113.9');
    const sse = await call(w, e, '/v1/chat/completions', chatInit(CALLER_KEY, true));
    assert.equal(sse.headers.get('content-type'), 'text/event-stream');
    assert.equal(sseContent(await sse.text()), 'hello world');
    assert.equal((await call(w, e, '/v1/chat/completions', chatInit('sk-wrong'))).status, 401);
  });

  test('the wire routes: /v1/responses (native, JSON and SSE) and /v1/messages/count_tokens', async (t) => {
    captureLogs(t);
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env();
    const post = (path: string, body: unknown) =>
      call(w, e, path, {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const answer = { id: 'resp_1', object: 'response', status: 'completed', model: 'gpt-upstream', output: [] };
    upstream.script({ body: answer });
    const res = await post('/v1/responses', { model: 'gpt-test', input: 'hi' });
    assert.equal(res.status, 200);
    // Passed through, but for the model's name: the caller's, as every endpoint names it.
    assert.deepEqual(await res.json(), { ...answer, model: 'gpt-test' });
    assert.equal(upstream.requests.at(-1)!.url, '/v1/responses');
    upstream.script({ sse: [{ type: 'response.completed', response: answer }] });
    const sse = await post('/v1/responses', { model: 'gpt-test', input: 'hi', stream: true });
    assert.equal(sse.headers.get('content-type'), 'text/event-stream');
    assert.match(await sse.text(), /response\.completed/);
    const count = await post('/v1/messages/count_tokens', {
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'x' }],
    });
    // No Anthropic target: a local count, marked estimated (approximated: Workers build no tokenizer table).
    assert.equal(count.status, 200);
    assert.equal(count.headers.get('x-sluice-tokens-estimated'), 'true');
    assert.ok(((await count.json()) as { input_tokens: number }).input_tokens > 0);
  });

  test('the gateway is built once per isolate, even under concurrent first requests', async (t) => {
    captureLogs(t);
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env({ [STATUS_TOKEN_VAR]: STATUS_TOKEN });
    const auth = { headers: { authorization: `Bearer ${STATUS_TOKEN}` } };
    await Promise.all(Array.from({ length: 5 }, () => call(w, e, '/readyz')));
    await call(w, e, '/livez');
    const body = (await (await call(w, e, '/status/config', auth)).json()) as {
      state: string;
      applied: { apply_seq: number };
    };
    assert.equal(body.state, 'synced');
    assert.equal(body.applied.apply_seq, 1);
  });

  test('the boot runs in the waitUntil of the request that started it: others wait on it, its caller may leave', async (t) => {
    captureLogs(t);
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env();
    const [first, second] = [execCtx(), execCtx()];
    const go = (ctx: WorkerContext) => w.fetch(new Request('https://sluice.example/readyz'), e, ctx);
    const answers = await Promise.all([go(first), go(second)]);
    assert.deepEqual(answers.map((r) => r.status), [200, 200]);
    assert.equal(first.handed(), 1, 'the boot');
    assert.equal(second.handed(), 0);
    await go(second);
    assert.equal(second.handed(), 0, 'booted: nothing more to hand over');
  });

  test('status routes: not mounted without the token (404), 401 without or with a wrong bearer, 200 with it', async (t) => {
    captureLogs(t);
    const unconfigured = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    for (const path of ['/status/config', '/status/ready', '/status/models', '/metrics']) {
      const r = await call(unconfigured, env(), path, { headers: { authorization: `Bearer ${STATUS_TOKEN}` } });
      assert.equal(r.status, 404, path);
      assert.equal(((await r.json()) as { error: { type: string } }).error.type, 'not_found');
    }
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env({ [STATUS_TOKEN_VAR]: STATUS_TOKEN });
    const none = await call(w, e, '/status/config');
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="sluice-status"');
    assert.ok(!(await none.text()).includes(STATUS_TOKEN));
    assert.equal((await call(w, e, '/metrics', { headers: { authorization: 'Bearer nope' } })).status, 401);
    assert.equal((await call(w, e, '/metrics', { headers: { authorization: STATUS_TOKEN } })).status, 401);
    const ok = await call(w, e, '/status/ready', { headers: { authorization: `bearer ${STATUS_TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), 'ok');
    // The proxy routes never ask for the status token.
    assert.equal((await call(w, e, '/readyz')).status, 200);
  });

  test('AISIX_* overrides come from bindings; prometheus disabled leaves the status routes unmounted', async (t) => {
    captureLogs(t);
    const auth = { headers: { authorization: `Bearer ${STATUS_TOKEN}` } };
    const moved = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e = env({
      [STATUS_TOKEN_VAR]: STATUS_TOKEN,
      AISIX_OBSERVABILITY__METRICS__PROMETHEUS__PATH: '/edge-metrics',
    });
    const m = await call(moved, e, '/edge-metrics', auth);
    assert.equal(m.status, 200);
    assert.match(await m.text(), /aisix_config_reloads_total 1/);
    assert.equal((await call(moved, e, '/metrics', auth)).status, 404);
    const off = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e2 = env({ [STATUS_TOKEN_VAR]: STATUS_TOKEN, AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ENABLED: 'false' });
    assert.equal((await call(off, e2, '/status/config', auth)).status, 404);
  });

  test('an unset ${VAR}: /readyz 503, /status/config never_loaded with the failure naming the variable, no secret', async (t) => {
    const logs = captureLogs(t);
    const w = createWorker(bundle(WORKER_CONFIG, upstreamResources()));
    const e: WorkerEnv = { UPSTREAM_BASE: upstream.base, CALLER_KEY, [STATUS_TOKEN_VAR]: STATUS_TOKEN };
    const ready = await call(w, e, '/readyz');
    assert.equal(ready.status, 503);
    assert.equal(await ready.text(), '[+]shutdown ok\n[-]config failed: not ready\nreadyz check failed');
    assert.equal((await call(w, e, '/livez')).status, 200);
    const status = await call(w, e, '/status/config', { headers: { authorization: `Bearer ${STATUS_TOKEN}` } });
    const body = (await status.json()) as { state: string; last_failure: { last_error: string } };
    assert.equal(body.state, 'never_loaded');
    assert.match(body.last_failure.last_error, /environment variable UPSTREAM_KEY is not set/);
    assert.ok(
      logs.some((l) =>
        l.level === 'ERROR' && typeof l.error === 'string' && l.error.includes('UPSTREAM_KEY is not set')
      ),
    );
    assert.ok(!JSON.stringify(logs).includes(CALLER_KEY));
  });

  test('a config Workers cannot serve (etcd, snapshot cache, upstream.tls, bad YAML) answers 503 everywhere and logs why', async (t) => {
    const logs = captureLogs(t);
    const cases: [string, RegExp][] = [
      [
        'proxy: { addr: ":1" }\nadmin: { enabled: false }\netcd: { endpoints: ["http://127.0.0.1:2379"], tls: { ca_cert_file: /ca.pem } }\n',
        /etcd.tls: Workers cannot read certificate files/,
      ],
      [
        'proxy: { addr: ":1" }\nadmin: { enabled: false }\netcd: { endpoints: ["http://127.0.0.1:2379"], user: u, password_env: ETCD_PW }\n',
        /etcd.password_env: variable ETCD_PW is not set/,
      ],
      [`${WORKER_CONFIG}managed: { snapshot_cache_path: /tmp/x.json }\n`, /snapshot_cache_path/],
      // Refused before the file is looked for: the reason is the runtime, not a missing bundle entry.
      [
        `${WORKER_CONFIG}upstream: { tls: { ca_file: /ca.pem } }\n`,
        /upstream\.tls: Workers' fetch trusts only the public roots/,
      ],
      [`${WORKER_CONFIG}upstream: { tls: { verify: false } }\n`, /upstream\.tls: Workers' fetch .* always verifies/],
      [`${WORKER_CONFIG}proxy: [\n`, /config file bundle\/config.yaml/],
    ];
    for (const [config, why] of cases) {
      const w = createWorker(bundle(config, upstreamResources()));
      for (const path of ['/livez', '/readyz', '/v1/models']) {
        assert.equal((await call(w, env(), path)).status, 503, path);
      }
      assert.match(String(logs.at(-1)?.error), why);
    }
  });

  test('etcd mode: an invalid SLUICE_ETCD_POLL_SECS is refused', async (t) => {
    const logs = captureLogs(t);
    const w = createWorker(bundle(etcdConfig('http://127.0.0.1:9', '/x'), ''));
    assert.equal((await call(w, { [ETCD_POLL_VAR]: 'soon' }, '/livez')).status, 503);
    assert.match(String(logs.at(-1)?.error), /SLUICE_ETCD_POLL_SECS: "soon" is not a positive number/);
  });

  test('resources_file must be bundled; ../ paths resolve', async (t) => {
    captureLogs(t);
    const missing = createWorker({ configPath: 'a/config.yaml', files: { 'a/config.yaml': WORKER_CONFIG } });
    assert.equal((await call(missing, env(), '/readyz')).status, 503);
    const up = createWorker({
      configPath: 'a/b/config.yaml',
      files: {
        'a/b/config.yaml': WORKER_CONFIG.replace('resources.yaml', '../resources.yaml'),
        'a/resources.yaml': upstreamResources(),
      },
    });
    assert.equal((await call(up, env(), '/readyz')).status, 200);
  });
});

describe('Workers handler in etcd mode (in-process, real etcd)', () => {
  let etcd: EtcdServer;
  let upstream: MockUpstream;
  before(async () => {
    [etcd, upstream] = await Promise.all([startEtcd(), startMockUpstream()]);
  });
  after(async () => {
    await Promise.all([etcd?.stop(), upstream?.close()]);
  });

  const POLL_MS = 200;
  const env = (extra: WorkerEnv = {}): WorkerEnv => ({
    [STATUS_TOKEN_VAR]: STATUS_TOKEN,
    [ETCD_POLL_VAR]: String(POLL_MS / 1000),
    ...extra,
  });
  const auth = { headers: { authorization: `Bearer ${STATUS_TOKEN}` } };

  test('before the first configuration, a due read also runs in waitUntil: a later request may wait on it', async (t) => {
    captureLogs(t);
    let clock = 1_000_000;
    const nobody = `http://127.0.0.1:${await freePort()}`; // refused: no configuration can be applied
    const w = createWorker(bundle(etcdConfig(nobody, '/wk-early'), ''), { now: () => clock });
    const e = env();
    const [first, second] = [execCtx(), execCtx()];
    const go = (ctx: WorkerContext) => w.fetch(new Request('https://sluice.example/readyz'), e, ctx);
    assert.equal((await go(first)).status, 503);
    assert.equal(first.handed(), 1, 'the boot, with its first read');
    clock += POLL_MS;
    assert.equal((await go(second)).status, 503);
    assert.equal(second.handed(), 1, 'the due read, awaited by this request and handed over as well');
    await Promise.all([first.settled(), second.settled()]);
  });

  test('range polling: an empty prefix applies (empty, ready), then the row rules of the watch source; polls in waitUntil; fetch failures keep serving', async (t) => {
    const logs = captureLogs(t);
    const P = '/wk-inproc';
    const s = seeder(etcd.endpoint);
    // The poller's clock: a step of POLL_MS makes the next request's poll due, no waiting on the wall clock.
    let clock = 1_000_000;
    const step = () => void (clock += POLL_MS);
    const w = createWorker(bundle(etcdConfig(etcd.endpoint, P), ''), { now: () => clock });
    const e = env();
    const ctx = execCtx();
    const call = (path: string, init: RequestInit = {}) =>
      w.fetch(new Request(`https://sluice.example${path}`, init), e, ctx);
    const status = async () => (await (await call('/status/config', auth)).json()) as ConfigStatus;
    const chatReq = (): RequestInit => ({
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: chatBody('gpt-test'),
    });

    // Nothing under the prefix: the first successful read is the first configuration (state empty, ready);
    // no caller authenticates against an empty configuration.
    const ready = await call('/readyz');
    assert.equal(ready.status, 200);
    const refused = await call('/v1/chat/completions', chatReq());
    assert.equal(refused.status, 401);
    assert.equal((await call('/livez')).status, 200);
    let st = await status();
    assert.equal(st.state, 'empty');
    assert.deepEqual(st.applied?.resource_counts, {});
    assert.equal(st.source.type, 'etcd');
    assert.equal(st.source.connected, true);

    // The trio appears: the next due request starts a poll in waitUntil; once it settles, the trio serves.
    for (const [k, v] of trio(P, upstream.base, await sha256Hex(CALLER_KEY))) await s.put(k, v);
    step();
    assert.equal((await call('/readyz')).status, 200); // this request starts the poll in waitUntil
    await ctx.settled();
    const ok = await call('/v1/chat/completions', chatReq());
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { model: string }).model, 'gpt-test'); // the caller's name
    assert.equal(upstream.requests.at(-1)!.json?.model, 'gpt-upstream');
    st = await status();
    assert.equal(st.state, 'synced');
    assert.deepEqual(st.applied?.resource_counts, { provider_keys: 1, models: 1, api_keys: 1 });
    const seq = st.applied!.apply_seq;

    // Unchanged revision: a poll does not apply again.
    step();
    await call('/livez');
    await ctx.settled();
    assert.equal((await status()).applied?.apply_seq, seq);

    // A change, an unknown field and a rejected value: same rules as the watch source (pin, rejected[], partially_compatible[]).
    await s.put(`${P}/models/m1`, {
      display_name: 'gpt-test',
      model_name: 'gpt-upstream-2',
      provider_key_id: 'pk1',
      shiny: true,
    });
    step();
    await call('/livez'); // this request starts the poll in waitUntil, and does not wait for it
    await ctx.settled();
    const changed = await call('/v1/chat/completions', chatReq());
    assert.equal(((await changed.json()) as { model: string }).model, 'gpt-test'); // the caller's name
    assert.equal(upstream.requests.at(-1)!.json?.model, 'gpt-upstream-2');
    st = await status();
    assert.deepEqual(st.partially_compatible, [{ resource_kind: 'models', field: 'shiny', count: 1 }]);
    await s.put(`${P}/models/m1`, '{not json');
    step();
    await call('/livez');
    await ctx.settled();
    st = await status();
    assert.equal(st.state, 'degraded');
    assert.equal(st.rejected[0]?.last_error_kind, 'non_json');
    assert.ok(st.rejected[0]?.serving_stale_since, 'the last-known-good value keeps serving');
    assert.equal((await call('/v1/chat/completions', chatReq())).status, 200);
    assert.ok(logs.some((l) => l.msg === 'etcd resource rejected'));

    // etcd goes away: keep serving, connected=false, last_failure fetch; back: connected again.
    await etcd.kill();
    step();
    await call('/livez');
    await ctx.settled();
    st = await status();
    assert.equal(st.source.connected, false);
    assert.equal(st.last_failure?.last_error_kind, 'fetch');
    assert.equal(st.last_reload?.successful, false);
    assert.equal(st.state, 'degraded');
    assert.equal((await call('/readyz')).status, 200);
    assert.equal((await call('/v1/chat/completions', chatReq())).status, 200);
    assert.ok(
      logs.some((l) => l.msg === 'etcd watch failed; backing off before reconnect' && l.backoff_ms === POLL_MS),
    );
    await etcd.restart();
    step();
    await call('/livez');
    await ctx.settled();
    st = await status();
    assert.equal(st.source.connected, true);
    assert.equal(st.last_reload?.successful, false, 'm1 is still rejected: a load that leaves a row rejected fails');
    await s.del(`${P}/models/m1`);
    step();
    await call('/livez');
    await ctx.settled();
    st = await status();
    assert.equal(st.last_reload?.successful, true, 'nothing rejected: the load is successful');
  });
});

// ---------------------------------------------------------------------------------------------------------
// Black-box under `wrangler dev --local` (workerd).

describe('wrangler dev --local (workerd, offline)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'sluice-workers-'));
  let shipped: WranglerDev | undefined;
  let generated: WranglerDev | undefined;
  let etcdWorker: WranglerDev | undefined;
  let upstream: MockUpstream;
  let etcd: EtcdServer;
  let br: MockBedrock;
  let vx: MockVertex;
  let redirect: RedirectPair;
  const ETCD_PREFIX = '/wk-edge';

  before(async () => {
    [upstream, etcd, br, vx, redirect] = await Promise.all([
      startMockUpstream(),
      startEtcd(),
      startMockBedrock(),
      startMockVertex(),
      startRedirectPair(),
    ]);
    // A Worker of the same shape as runtimes/workers.ts, with a bundle pointing at the mock upstream.
    const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(
      readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'),
    )?.[1];
    assert.ok(compatibilityDate, 'wrangler.toml has a compatibility_date');
    const entry = join(scratch, 'worker.ts');
    writeFileSync(
      entry,
      `import { createWorker } from ${JSON.stringify(join(ROOT, 'runtimes/workers-handler.ts'))};
export default createWorker(${JSON.stringify(bundle(WORKER_CONFIG, edgeResources(br, vx, redirect.redirector.url)))});
`,
    );
    writeFileSync(
      join(scratch, 'wrangler.toml'),
      `name = "sluice-test"\nmain = "worker.ts"\ncompatibility_date = "${compatibilityDate}"\n`,
    );
    // The same shape in etcd mode: the bundled config names the real etcd; no resources file.
    const etcdDir = join(scratch, 'etcd-worker');
    mkdirSync(etcdDir);
    writeFileSync(
      join(etcdDir, 'worker.ts'),
      `import { createWorker } from ${JSON.stringify(join(ROOT, 'runtimes/workers-handler.ts'))};
export default createWorker(${
        JSON.stringify({
          configPath: 'bundle/config.yaml',
          files: { 'bundle/config.yaml': etcdConfig(etcd.endpoint, ETCD_PREFIX) },
        })
      });
`,
    );
    writeFileSync(
      join(etcdDir, 'wrangler.toml'),
      `name = "sluice-test-etcd"\nmain = "worker.ts"\ncompatibility_date = "${compatibilityDate}"\n`,
    );
    const started = await Promise.allSettled([
      startWranglerDev(['--var', `${STATUS_TOKEN_VAR}:${STATUS_TOKEN}`], ROOT, join(scratch, 'state-shipped')),
      startWranglerDev(
        [
          '--var',
          `UPSTREAM_BASE:${upstream.base}`,
          '--var',
          `UPSTREAM_KEY:${UPSTREAM_KEY}`,
          '--var',
          `CALLER_KEY:${CALLER_KEY}`,
        ],
        scratch,
        join(scratch, 'state-generated'),
      ),
      startWranglerDev(
        ['--var', `${STATUS_TOKEN_VAR}:${STATUS_TOKEN}`, '--var', `${ETCD_POLL_VAR}:1`],
        etcdDir,
        join(scratch, 'state-etcd'),
      ),
    ]);
    if (started[0].status === 'fulfilled') shipped = started[0].value;
    if (started[1].status === 'fulfilled') generated = started[1].value;
    if (started[2].status === 'fulfilled') etcdWorker = started[2].value;
    for (const s of started) if (s.status === 'rejected') throw s.reason;
  });

  after(async () => {
    await Promise.all([shipped?.stop(), generated?.stop(), etcdWorker?.stop()]);
    await Promise.all([upstream?.close(), etcd?.stop(), br?.close(), vx?.close(), redirect?.close()]);
    rmSync(scratch, { recursive: true, force: true });
  });

  test('shipped Worker: /livez and /readyz', async () => {
    const live = await shipped!.fetch('/livez');
    assert.equal(live.status, 200);
    assert.equal(live.headers.get('x-content-type-options'), 'nosniff');
    assert.match(live.headers.get('server') ?? '', /^sluice\//);
    const ready = await shipped!.fetch('/readyz?verbose');
    assert.equal(ready.status, 200);
    assert.equal(await ready.text(), '[+]shutdown ok\n[+]config ok\nreadyz check passed\n');
  });

  test('shipped Worker: echo chat completion, JSON and SSE, with the demo key from [vars]', async () => {
    const json = await chat(shipped!, DEMO_KEY, 'echo');
    assert.equal(json.status, 200);
    assert.ok(json.headers.get('x-aisix-request-id'));
    const body = (await json.json()) as { choices: { message: { content: string } }[] };
    assert.equal(body.choices[0]!.message.content, 'hello from the edge');
    const sse = await chat(shipped!, DEMO_KEY, 'echo', true);
    assert.equal(sse.status, 200);
    assert.equal(sse.headers.get('content-type'), 'text/event-stream');
    const text = await sse.text();
    assert.equal(sseContent(text), 'hello from the edge');
    assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    assert.equal((await chat(shipped!, 'sk-not-a-key', 'echo')).status, 401);
    const line = await shipped!.waitForLog((l) => l.msg === 'proxy request completed' && l.status === 200);
    assert.equal(line.peer, '127.0.0.1', 'peer comes from cf-connecting-ip');
  });

  test('shipped Worker: status routes need the bearer token', async () => {
    const refused = await shipped!.fetch('/status/config');
    assert.equal(refused.status, 401);
    await refused.arrayBuffer();
    const auth = { headers: { authorization: `Bearer ${STATUS_TOKEN}` } };
    const cfg = await shipped!.fetch('/status/config', auth);
    assert.equal(cfg.status, 200);
    assert.match(cfg.headers.get('content-type') ?? '', /application\/json/);
    const body = (await cfg.json()) as {
      state: string;
      source: { type: string };
      applied: { resource_counts: Record<string, number> };
    };
    assert.equal(body.state, 'synced');
    assert.equal(body.source.type, 'file');
    assert.deepEqual(body.applied.resource_counts, { provider_keys: 1, models: 1, api_keys: 1 });
    const models = await shipped!.fetch('/status/models', auth);
    assert.deepEqual(((await models.json()) as { display_name: string }[]).map((m) => m.display_name), ['echo']);
    const metrics = await shipped!.fetch('/metrics', auth);
    assert.equal(metrics.status, 200);
    const text = await metrics.text();
    assert.match(text, /^aisix_config_reloads_total 1$/m);
    assert.equal(
      sumSamples(text, 'aisix_proxy_requests_total', {
        endpoint: '/v1/chat/completions',
        model: 'echo',
        status: '200',
        outcome: 'success',
      }),
      2,
    );
    assert.equal((await shipped!.fetch('/metrics', { headers: { authorization: 'Bearer wrong' } })).status, 401);
  });

  test('generated Worker: ${VAR} and key_env from --var bindings, a real upstream through workerd fetch (JSON, SSE)', async () => {
    const before = upstream.requests.length;
    const res = await chat(generated!, CALLER_KEY, 'gpt-test');
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { model: string }).model, 'gpt-test'); // the caller's name
    assert.equal(upstream.requests.at(-1)!.json?.model, 'gpt-upstream');
    const got = upstream.requests[before]!;
    assert.equal(got.url, '/v1/chat/completions');
    assert.equal(got.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    const sse = await chat(generated!, CALLER_KEY, 'gpt-test', true);
    assert.equal(sse.status, 200);
    const text = await sse.text();
    assert.equal(sseContent(text), 'hello world');
    assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    for (const secret of [UPSTREAM_KEY, CALLER_KEY]) {
      assert.ok(!generated!.output.join('\n').includes(secret), 'no secret in the Worker output');
    }
  });

  test('generated Worker: Bedrock SigV4 and Vertex service-account JWT through workerd, verified by the mocks', async () => {
    const sent = { br: br.requests.length, vx: vx.requests.length };
    const converse = await chat(generated!, CALLER_KEY, 'llama');
    const converseText = await converse.text();
    assert.equal(converse.status, 200, converseText);
    assert.equal(
      (JSON.parse(converseText) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
      'hi from converse',
    );
    // ConverseStream's binary event stream, decoded by the Worker into OpenAI SSE.
    const converseSse = await chat(generated!, CALLER_KEY, 'llama', true);
    assert.equal(converseSse.status, 200);
    const converseEvents = await converseSse.text();
    assert.equal(sseContent(converseEvents), 'Hello from Bedrock');
    assert.ok(converseEvents.trimEnd().endsWith('data: [DONE]'));
    assert.deepEqual(br.rejected, [], 'every SigV4 signature the Worker computed verified');
    assert.deepEqual(br.requests.slice(sent.br).map((r) => r.path.split('/').at(-1)), ['converse', 'converse-stream']);

    const gemini = await chat(generated!, CALLER_KEY, 'gemini');
    const geminiText = await gemini.text();
    assert.equal(gemini.status, 200, geminiText);
    assert.equal(
      (JSON.parse(geminiText) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
      'hi from gemini-2.0-flash',
    );
    const geminiSse = await chat(generated!, CALLER_KEY, 'gemini', true);
    assert.equal(geminiSse.status, 200);
    assert.equal(sseContent(await geminiSse.text()), 'Hello from Gemini');
    assert.deepEqual(vx.refusedMints, [], 'the RS256 JWT the Worker signed verified with the public key');
    const calls = vx.requests.slice(sent.vx);
    assert.equal(calls.filter((r) => r.path === '/token').length, 1, 'one mint: the token is cached in the isolate');
    assert.equal(vx.minted.length, 1);
    for (const r of calls.filter((r) => r.path !== '/token')) {
      assert.equal(r.headers.authorization, `Bearer ${vx.minted[0]}`);
    }
    const output = generated!.output.join('\n');
    for (const secret of [AWS.secret_access_key, vx.minted[0]!, 'PRIVATE KEY']) {
      assert.ok(!output.includes(secret), 'no credential in the Worker output');
    }
  });

  test("generated Worker: an upstream's 307 is not followed by workerd's fetch: 502, the target gets nothing", async () => {
    const res = await generated!.fetch('/v1/messages', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'redirected', max_tokens: 8, messages: [{ role: 'user', content: 'secret' }] }),
    });
    const text = await res.text();
    assert.equal(res.status, 502, text);
    assert.match(text, /redirect/);
    assert.equal(redirect.redirector.requests.length, 1);
    assert.equal(redirect.target.requests.length, 0, 'no x-api-key and no prompt reached the redirect target');
  });

  test('etcd Worker: range polling over workerd fetch — an empty prefix applies, the trio within a poll, a change after the next', async () => {
    const w = etcdWorker!;
    const auth = { headers: { authorization: `Bearer ${STATUS_TOKEN}` } };
    const s = seeder(etcd.endpoint);
    // An empty prefix read successfully is the first configuration: ready, state empty.
    const ready = await w.fetch('/readyz');
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();
    const early = await chat(w, CALLER_KEY, 'gpt-test');
    assert.equal(early.status, 401, 'nothing configured yet: no caller authenticates');
    await early.arrayBuffer();
    let st = (await (await w.fetch('/status/config', auth)).json()) as ConfigStatus;
    assert.equal(st.state, 'empty');
    assert.equal(st.source.type, 'etcd');

    for (const [k, v] of trio(ETCD_PREFIX, upstream.base, await sha256Hex(CALLER_KEY))) await s.put(k, v);
    const withOutput = (what: string) => () => `${what}\n${etcdWorker!.output.join('\n')}`;
    // Poll interval 1 s: visible within it (plus one request to start the poll).
    await until(
      async () => {
        const r = await chat(w, CALLER_KEY, 'gpt-test');
        return r.status === 200 && (await r.arrayBuffer(), upstream.requests.at(-1)?.json?.model === 'gpt-upstream');
      },
      3000,
      withOutput('the trio serves'),
      100,
    );

    await s.put(`${ETCD_PREFIX}/models/m1`, {
      display_name: 'gpt-test',
      model_name: 'gpt-upstream-2',
      provider_key_id: 'pk1',
    });
    await until(
      async () => {
        const r = await chat(w, CALLER_KEY, 'gpt-test');
        return r.status === 200 && (await r.arrayBuffer(), upstream.requests.at(-1)?.json?.model === 'gpt-upstream-2');
      },
      3000,
      withOutput('the changed model'),
      100,
    );

    st = (await (await w.fetch('/status/config', auth)).json()) as ConfigStatus;
    assert.equal(st.state, 'synced');
    assert.equal(st.source.type, 'etcd');
    assert.equal(st.source.connected, true);
    assert.ok((st.applied?.applied_revision ?? 0) > 0);
    assert.ok(!etcdWorker!.output.join('\n').includes(CALLER_KEY), 'no secret in the Worker output');
    // Every poll resolves only promises of its own request (workerd flags any other as an error).
    assert.ok(!etcdWorker!.output.join('\n').includes('different request context'), etcdWorker!.output.join('\n'));
  });
});
