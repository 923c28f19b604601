// Black-box: the Realtime WebSocket relay through a real gateway process on Node and Bun (Deno: docs/realtime.md),
// with the official `openai` SDK's `OpenAIRealtimeWebSocket` client as the caller, against a mock upstream that
// checks the credential, the subprotocols and the retired beta header; usage from `response.done` committed to the
// key's tokens-per-minute limit and written to the access log; close codes relayed; the drain window's 1001.
// Run: node build.mjs && node --import tsx --test --test-concurrency=1 test/process/realtime-relay.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { OpenAIRealtimeWebSocket } from 'openai/realtime/websocket';
import { WebSocket } from 'ws';
import {
  type MockRealtime,
  REALTIME_UPSTREAM_KEY,
  startMockRealtime,
  UPSTREAM_USAGE,
} from '../support/mock-realtime.ts';
import {
  baseConfig,
  CALLER_KEY,
  deadEndpoint,
  type GatewayProcess,
  type LogLine,
  resourcesFor,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';
import { roomInMinute, until } from '../support/until.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_REALTIME_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node', 'bun', 'deno'];
const LIMITED_KEY = 'sk-limited-realtime-key';

// The SDK's browser-style client needs a global WebSocket (Node 20 has none): ws's has the same event API.
(globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;

/** Every frame a caller received, from before `open` resolved (frames can come in the 101's own read). */
const received = new WeakMap<WebSocket, { frames: Record<string, unknown>[]; waiters: (() => void)[] }>();

/** Resolves with the first frame of `type` `ws` received and no earlier call took. */
async function nextEvent(ws: WebSocket, type: string): Promise<Record<string, unknown>> {
  const log = received.get(ws)!;
  for (;;) {
    const i = log.frames.findIndex((e) => e.type === type);
    if (i >= 0) return log.frames.splice(i, 1)[0]!;
    await new Promise<void>((r) => log.waiters.push(r));
  }
}

/** The close `ws` saw, however early (kept from its creation). */
const closes = new WeakMap<WebSocket, Promise<{ code: number; reason: string }>>();

function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return closes.get(ws)!;
}

/** A `ws` caller; resolves once open, or with the HTTP status the gateway refused the upgrade with. */
function connect(url: string, headers: Record<string, string>, protocols: string[] = []): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    const log = { frames: [] as Record<string, unknown>[], waiters: [] as (() => void)[] };
    received.set(ws, log);
    closes.set(ws, new Promise((r) => ws.once('close', (code, reason) => r({ code, reason: reason.toString() }))));
    ws.on('message', (d) => {
      log.frames.push(JSON.parse(d.toString()) as Record<string, unknown>);
      for (const w of log.waiters.splice(0)) w();
    });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (req, res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    ws.once('error', reject);
  });
}

for (const runtime of RUNTIMES) {
  describe(`realtime relay on ${runtime}`, () => {
    let upstream: MockRealtime;
    let gw: GatewayProcess;
    let wsBase: string;

    before(async () => {
      upstream = await startMockRealtime();
      const dead = await deadEndpoint();
      gw = await spawnGateway({
        runtime,
        config: baseConfig().replace('min_drain_secs: 0', 'min_drain_secs: 2'),
        files: {
          'resources.yaml': resourcesFor(
            upstream.base,
            `  - { display_name: limited, key_env: LIMITED_KEY, allowed_models: ["*"], rate_limit: { tpm: 15 } }\n`,
          )
            // A second provider key where nothing listens, and a model on it.
            .replace(
              'provider_keys:\n',
              `provider_keys:\n  - { display_name: dead, provider: openai, api_key: sk-dead, api_base: "${dead}" }\n`,
            )
            .replace(
              'models:\n',
              'models:\n  - { display_name: gpt-dead, model_name: gpt-upstream, provider_key: dead }\n',
            )
            // A guardrail on every model: a frame naming the word ends the session.
            .concat(
              'guardrails:\n  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden }] }\n',
            ),
        },
        env: { CALLER_KEY, LIMITED_KEY },
      });
      await gw.waitReady('/readyz');
      wsBase = gw.url('/v1/realtime').replace(/^http/, 'ws');
    });
    after(async () => {
      gw?.kill();
      await upstream?.close();
    });

    test('a plain GET is refused before authentication with websocket_upgrade_required', async () => {
      const res = await fetch(gw.url('/v1/realtime?model=gpt-test'));
      assert.equal(res.status, 400);
      const body = await res.json() as { error: { type: string; message: string } };
      assert.equal(body.error.type, 'websocket_upgrade_required');
      assert.match(body.error.message, /^this endpoint requires a WebSocket upgrade: /);
    });

    test('an h2c upgrade is still served as a plain request, body included, sized or chunked', async () => {
      const body = JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] });
      for (const sized of [true, false]) {
        const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
          const req = httpRequest(gw.url('/v1/chat/completions'), {
            method: 'POST',
            headers: {
              authorization: `Bearer ${CALLER_KEY}`,
              'content-type': 'application/json',
              ...(sized ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
              connection: 'Upgrade, HTTP2-Settings',
              upgrade: 'h2c',
              'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA',
            },
          }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => {
              resolve({ status: res.statusCode!, text });
            });
          });
          req.on('error', reject);
          // Without a length node:http sends the body chunked.
          if (sized) req.end(body);
          else {
            req.write(body.slice(0, 10));
            req.end(body.slice(10));
          }
        });
        // The model named in the body was read: 404 for it, not a refused upgrade.
        assert.equal(answer.status, 404, `${sized ? 'sized' : 'chunked'}: ${answer.text}`);
        assert.match(answer.text, /model \\"nope\\" not found/);
      }
    });

    test('a wrong key, a missing model and a forbidden model are HTTP refusals', async () => {
      assert.equal(await connect(`${wsBase}?model=gpt-test`, { authorization: 'Bearer sk-wrong' }), 401);
      assert.equal(await connect(wsBase, { authorization: `Bearer ${CALLER_KEY}` }), 400);
      assert.equal(await connect(`${wsBase}?model=nope`, { authorization: `Bearer ${CALLER_KEY}` }), 404);
    });

    test('the SDK client: session.update and response.create relayed, usage in the access log', async () => {
      const seenBefore = upstream.handshakes.length;
      const client = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1') });
      const rt = new OpenAIRealtimeWebSocket({
        model: 'gpt-test',
        // The SDK always asks for wss; the gateway under test listens in cleartext.
        onURL: (url) => void (url.protocol = 'ws:'),
      }, client);
      const updated = new Promise<unknown>((r) => rt.on('session.updated', r));
      const done = new Promise<{ response: { usage?: unknown } }>((r) => rt.on('response.done', r));
      const errors: unknown[] = [];
      rt.on('error', (e) => errors.push(e));
      await new Promise<void>((r) => rt.socket.addEventListener('open', () => r()));
      assert.equal(rt.socket.protocol, 'realtime', 'the gateway selects the realtime subprotocol');
      rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'be brief' } });
      await updated;
      rt.send({ type: 'response.create' });
      const event = await done;
      assert.deepEqual(event.response.usage, UPSTREAM_USAGE);
      rt.close();
      assert.deepEqual(errors, []);

      const hs = upstream.handshakes[seenBefore]!;
      assert.equal(hs.url, '/v1/realtime?model=gpt-upstream');
      assert.equal(hs.authorization, 'Bearer sk-upstream-SECRET-value', "the provider key's credential");
      assert.equal(hs.beta, undefined, 'no retired OpenAI-Beta header');
      assert.equal(hs.protocols, undefined, "none of the caller's subprotocols (its key) reach the upstream");
      const frames = upstream.received.slice(-2).map((f) => JSON.parse(f) as { type: string });
      assert.deepEqual(frames.map((f) => f.type), ['session.update', 'response.create']);

      const line = await gw.waitForLog((l) => l.path === '/v1/realtime' && l.status === 200, 10_000);
      assert.equal(line.method, 'GET');
      assert.equal(line.model, 'gpt-test');
      assert.equal(line.prompt_tokens, 11);
      assert.equal(line.completion_tokens, 7);
      assert.equal(line.total_tokens, 18);
    });

    test("the SDK client: a frame a guardrail blocks is AISIX's error event and 1011, never relayed", async () => {
      const sentBefore = upstream.received.length;
      const client = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1') });
      const rt = new OpenAIRealtimeWebSocket(
        { model: 'gpt-test', onURL: (url) => void (url.protocol = 'ws:') },
        client,
      );
      const refused = new Promise<{ error?: unknown }>((r) => rt.on('error', (e) => r(e as { error?: unknown })));
      const closedWith = new Promise<{ code: number; reason: string }>((r) =>
        rt.socket.addEventListener('close', (e) => r({ code: e.code, reason: e.reason }))
      );
      await new Promise<void>((r) => rt.socket.addEventListener('open', () => r()));
      rt.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a forbidden plan' }] },
      });
      assert.deepEqual((await refused).error, {
        type: 'invalid_request_error',
        code: 'content_filtered',
        message: "request blocked by content policy (guardrail 'words')",
      });
      assert.deepEqual(await closedWith, { code: 1011, reason: 'content policy' });
      assert.ok(!upstream.received.slice(sentBefore).some((f) => f.includes('forbidden')), 'never sent upstream');
      const line = await gw.waitForLog((l) => l.path === '/v1/realtime' && l.error_kind === 'content_filter', 10_000);
      assert.equal(line.status, 400);
      assert.equal(line.guardrail_blocked, true);
    });

    test('an upstream that cannot be reached: the error frame, then 1011', async () => {
      const ws = await connect(`${wsBase}?model=gpt-dead`, { authorization: `Bearer ${CALLER_KEY}` });
      assert.ok(ws instanceof WebSocket);
      assert.deepEqual(await closed(ws), { code: 1011, reason: 'upstream connect failed' });
      assert.deepEqual(received.get(ws)!.frames, [{
        type: 'error',
        error: { type: 'upstream_error', message: 'failed to connect to the upstream realtime endpoint' },
      }]);
    });

    test("a caller's own beta opt-in goes upstream; OpenAI's 4000 for it reaches the caller", async () => {
      const seenBefore = upstream.handshakes.length;
      const ws = await connect(`${wsBase}?model=gpt-test`, {
        authorization: `Bearer ${CALLER_KEY}`,
        'openai-beta': 'realtime=v1',
      });
      assert.ok(ws instanceof WebSocket);
      assert.deepEqual(await closed(ws), { code: 4000, reason: 'beta_api_shape_disabled' });
      assert.equal(upstream.handshakes[seenBefore]!.beta, 'realtime=v1');
    });

    test('an upstream close code reaches the caller', async () => {
      const ws = await connect(`${wsBase}?model=gpt-test`, { authorization: `Bearer ${CALLER_KEY}` });
      assert.ok(ws instanceof WebSocket);
      await nextEvent(ws, 'session.created');
      const end = closed(ws);
      ws.send(JSON.stringify({ type: 'test.close' }));
      assert.deepEqual(await end, { code: 4001, reason: 'bye' });
    });

    test("an upstream's error frame and close reason echoing the provider key reach the caller redacted", async () => {
      const isSession = (l: LogLine) => l.path === '/v1/realtime';
      const sessionsBefore = gw.logs.filter(isSession).length;
      const ws = await connect(`${wsBase}?model=gpt-test`, { authorization: `Bearer ${CALLER_KEY}` });
      assert.ok(ws instanceof WebSocket);
      await nextEvent(ws, 'session.created');
      const end = closed(ws);
      ws.send(JSON.stringify({ type: 'test.echo_key' }));
      const error = await nextEvent(ws, 'error');
      assert.deepEqual(error.error, {
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message: 'Incorrect API key provided: [redacted].',
        param: null,
      });
      assert.deepEqual(await end, { code: 4001, reason: 'invalid key [redacted]' });
      await until(() => gw.logs.filter(isSession).length > sessionsBefore, 10_000, "the session's access log");
      const output = JSON.stringify(gw.logs) + gw.rawErr.join('\n');
      assert.ok(!output.includes(REALTIME_UPSTREAM_KEY), 'no log line holds the key');
    });

    test("a session's tokens are charged to the key's tokens-per-minute limit", async () => {
      await roomInMinute();
      const auth = { authorization: `Bearer ${LIMITED_KEY}` };
      const ws = await connect(`${wsBase}?model=gpt-test`, auth);
      assert.ok(ws instanceof WebSocket);
      const done = nextEvent(ws, 'response.done');
      ws.send(JSON.stringify({ type: 'response.create' }));
      await done;
      const end = closed(ws);
      ws.close();
      await end;
      await gw.waitForLog((l) => l.path === '/v1/realtime' && l.api_key_id !== undefined && l.total_tokens === 18);
      // 18 tokens charged against a limit of 15 a minute: the next session is refused at the upgrade.
      assert.equal(await connect(`${wsBase}?model=gpt-test`, auth), 429);
    });

    test('a drain lets an open session run for the drain window, then closes it with 1001', async () => {
      const ws = await connect(`${wsBase}?model=gpt-test`, { authorization: `Bearer ${CALLER_KEY}` });
      assert.ok(ws instanceof WebSocket);
      await nextEvent(ws, 'session.created');
      const end = closed(ws);
      const signalled = Date.now();
      gw.signal('SIGTERM');
      // Still relaying inside the window.
      const done = nextEvent(ws, 'response.done');
      ws.send(JSON.stringify({ type: 'response.create' }));
      await done;
      const { code } = await end;
      assert.equal(code, 1001);
      assert.ok(Date.now() - signalled >= 1_500, 'closed at the end of the 2 s window, not before');
      assert.equal(await gw.waitForExit(15_000), 0);
    });
  });
}
