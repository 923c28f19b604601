// A Realtime session through app.request() (docs/realtime.md "Guardrails", "Accounting"): the handler with the
// runtime's upgrade and upstream sockets played by fakes. Guardrails on text frames both ways (AISIX's error event
// and 1011, nothing relayed, audio-only frames not checked), the rate-limit policies at the handshake, the one
// usage event per session (and the access log's status) stating how the session ended.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import type { RelaySocket, WebSocketConnect, WsFrame, WsHandlers } from '../../src/platform.ts';
import { frameChecks, scannedText } from '../../src/proxy/realtime-guard.ts';
import { CHECK_FAILED_FRAME } from '../../src/realtime/relay.ts';
import type { ChainDeps } from '../../src/guardrails/chain.ts';
import type { Guardrail } from '../../src/guardrails/types.ts';
import type { RequestRecord } from '../../src/proxy/record.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-caller-realtime-1';
const TEAM_KEY = 'sk-caller-realtime-team';
const DD_KEY = 'dd-api-key-realtime-1';

/** One end of a WebSocket as the relay sees it; the test plays the peer. */
class FakeSocket implements RelaySocket {
  sent: WsFrame[] = [];
  closedWith: { code?: number; reason?: string } | undefined;
  private h: WsHandlers | undefined;
  send(f: WsFrame) {
    this.sent.push(f);
  }
  close(code?: number, reason?: string) {
    if (this.closedWith) return;
    this.closedWith = code === undefined ? {} : { code, reason };
    // The peer's close handshake answers at once.
    queueMicrotask(() => this.h?.close(code ?? 1005, reason ?? ''));
  }
  listen(h: WsHandlers) {
    this.h = h;
  }
  peerSends(f: WsFrame) {
    this.h!.message(f);
  }
  peerCloses(code: number, reason = '') {
    this.closedWith ??= { code };
    this.h!.close(code, reason);
  }
}

const resources = (intake: DatadogIntake) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: sk-up-realtime, api_base: "http://realtime.test/v1" }
models:
  - { display_name: rt, provider_key: oa, model_name: gpt-realtime, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: rt-team, provider_key: oa, model_name: gpt-realtime }
  - { display_name: "wild/*", provider_key: oa, model_name: "*" }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: team, key_env: TEAM, allowed_models: ["*"], team_id: t-rt }
rate_limit_policies:
  - { name: team-sessions, scope: team, scope_ref: t-rt, window: minute, max_requests: 1 }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden }] }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: rt, service: gw }
`;

interface Session {
  status: number;
  client: FakeSocket;
  upstream: FakeSocket;
  requestId: string | null;
}

describe('a realtime session', () => {
  let gw: Gateway;
  let platform: TestPlatform;
  let app: ReturnType<typeof createProxyApp>;
  let intake: DatadogIntake;
  const opened: WebSocketConnect[] = [];
  let nextUpstream: FakeSocket;

  before(async () => {
    intake = await startDatadogIntake();
    ({ gw, platform } = await gatewayWith(resources(intake), {
      env: { CALLER: KEY, TEAM: TEAM_KEY, DD_CRED_RT_API_KEY: DD_KEY },
    }));
    platform.connectWebSocket = (spec) => {
      opened.push(spec);
      return Promise.resolve(nextUpstream);
    };
    app = createProxyApp(gw);
  });
  after(async () => {
    await gw.usage.close(1000);
    gw.stop();
    await intake.close();
  });

  /** Opens a session for `model` with `key`; resolves once the relay runs (the upstream was asked for). */
  async function open(model: string, key = KEY): Promise<Session> {
    const client = new FakeSocket();
    const upstream = nextUpstream = new FakeSocket();
    const before = opened.length;
    const res = await app.request(`/v1/realtime?model=${model}`, {
      headers: {
        authorization: `Bearer ${key}`,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    }, {
      peer: '203.0.113.9:5000',
      upgradeWebSocket: () => ({ response: new Response(null, { status: 200 }), socket: Promise.resolve(client) }),
    });
    if (res.status === 200) await until(() => opened.length > before, 2000, 'the upstream socket');
    return { status: res.status, client, upstream, requestId: res.headers.get('x-aisix-request-id') };
  }

  async function eventOf(s: Session): Promise<Record<string, unknown>> {
    await until(() => platform.logs.some((l) => l.request_id === s.requestId && l.path), 2000, 'the access log');
    await gw.usage.flush();
    const events = intake.logs.filter((l) => l['aisix.request_id'] === s.requestId);
    assert.equal(events.length, 1, 'one event per session');
    return events[0]!;
  }

  const accessLine = (s: Session) => platform.logs.find((l) => l.request_id === s.requestId && l.path)!;

  test("a caller's frame a guardrail blocks: AISIX's error event, 1011, nothing relayed; status 400", async () => {
    const s = await open('rt');
    s.client.peerSends(JSON.stringify({ type: 'session.update', session: { instructions: 'be brief' } }));
    s.client.peerSends(
      JSON.stringify({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a forbidden plan' }] },
      }),
    );
    s.client.peerSends(JSON.stringify({ type: 'response.create' }));
    await until(() => s.client.closedWith !== undefined, 2000, 'the caller closed');
    assert.deepEqual(s.client.sent, [JSON.stringify({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        code: 'content_filtered',
        message: "request blocked by content policy (guardrail 'words')",
      },
    })]);
    assert.deepEqual(s.client.closedWith, { code: 1011, reason: 'content policy' });
    assert.equal(s.upstream.sent.length, 1, 'only the frame before the blocked one went upstream');
    assert.match(String(s.upstream.sent[0]), /session\.update/);
    assert.ok(s.upstream.closedWith, 'the upstream is let go');

    const line = accessLine(s);
    assert.equal(line.status, 400);
    assert.equal(line.error_kind, 'content_filter');
    assert.equal(line.guardrail_blocked, true);
    const e = await eventOf(s);
    assert.equal(e['http.response.status_code'], 400);
    assert.equal(e['aisix.guardrail_blocked'], true);
  });

  test('an upstream frame a guardrail blocks never reaches the caller; its usage still counts', async () => {
    const s = await open('rt');
    s.upstream.peerSends(JSON.stringify({ type: 'session.created' }));
    s.upstream.peerSends(JSON.stringify({
      type: 'response.done',
      response: { output: [{ content: [{ transcript: 'the forbidden answer' }] }], usage: USAGE },
    }));
    await until(() => s.client.closedWith !== undefined, 2000, 'the caller closed');
    assert.equal(s.client.sent.length, 2);
    assert.match(String(s.client.sent[0]), /session\.created/);
    assert.match(String(s.client.sent[1]), /response blocked by content policy \(guardrail 'words'\)/);
    assert.deepEqual(s.client.closedWith, { code: 1011, reason: 'content policy' });
    const e = await eventOf(s);
    assert.equal(e['gen_ai.usage.input_tokens'], 11);
    assert.equal(e['gen_ai.usage.output_tokens'], 7);
  });

  test('frames that pass are relayed in order; a frame of audio only is not checked', async () => {
    const s = await open('rt');
    // Not base64, to show it is not read: a whole-frame check would block it.
    const audio = JSON.stringify({ type: 'input_audio_buffer.append', audio: 'forbidden' });
    const text = JSON.stringify({ type: 'conversation.item.create', item: { content: 'hello' } });
    s.client.peerSends(audio);
    s.client.peerSends(new Uint8Array([1, 2]));
    s.client.peerSends(text);
    await until(() => s.upstream.sent.length === 3, 2000, 'three frames relayed');
    assert.deepEqual(s.upstream.sent, [audio, new Uint8Array([1, 2]), text]);
    s.client.peerCloses(1000);
    await eventOf(s);
  });

  test('the one usage event of a session: tokens, cached tokens, cost, its model; the status of its end', async () => {
    const s = await open('rt');
    s.upstream.peerSends(JSON.stringify({ type: 'response.done', response: { usage: USAGE } }));
    s.upstream.peerSends(JSON.stringify({ type: 'response.done', response: { usage: USAGE } }));
    await until(() => s.client.sent.length === 2, 2000, 'two frames relayed');
    s.client.peerCloses(1000);
    const e = await eventOf(s);
    const model = gw.snapshot!.modelByName('rt')!;
    assert.equal(e['aisix.model_id'], model.id);
    assert.equal(e['aisix.requested_model'], 'rt');
    assert.equal(e['gen_ai.usage.input_tokens'], 22);
    assert.equal(e['gen_ai.usage.output_tokens'], 14);
    assert.equal(e['aisix.cached_prompt_tokens'], 6);
    // 22 × $1/1K + 14 × $2/1K
    assert.equal(e['aisix.cost_usd'], 0.05);
    assert.equal(e['aisix.inbound_protocol'], 'realtime');
    assert.equal(e['http.response.status_code'], 200);
    assert.equal(accessLine(s).status, 200);

    const metrics = gw.metrics.render();
    assert.match(
      metrics,
      /aisix_usage_events_emitted_total\{handler="realtime",status_code="2xx",inbound_protocol="other",model="rt",/,
    );
  });

  test("an upstream's error frame and close reason echoing the provider key reach the caller redacted", async () => {
    const s = await open('rt');
    s.upstream.peerSends(JSON.stringify({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message: 'Incorrect API key provided: sk-up-realtime.',
      },
    }));
    await until(() => s.client.sent.length === 1, 2000, 'the error frame relayed');
    assert.deepEqual(JSON.parse(String(s.client.sent[0])), {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message: 'Incorrect API key provided: [redacted].',
      },
    });
    s.upstream.peerCloses(4001, 'key sk-up-realtime refused');
    await until(() => s.client.closedWith !== undefined, 2000, 'the caller closed');
    assert.deepEqual(s.client.closedWith, { code: 4001, reason: 'key [redacted] refused' });
    await eventOf(s);
  });

  test('a failed upstream connect is logged with the provider key redacted', async () => {
    const connect = platform.connectWebSocket;
    platform.connectWebSocket = (spec) => {
      opened.push(spec);
      return Promise.reject(new Error('Unexpected server response: 401 Incorrect API key provided: sk-up-realtime'));
    };
    try {
      const s = await open('rt');
      await until(() => s.client.closedWith !== undefined, 2000, 'the caller closed');
      const isWarn = (l: Record<string, unknown>) => l.msg === 'realtime upstream connect failed';
      await until(() => platform.logs.some(isWarn), 2000, 'the WARN');
      const warn = platform.logs.find(isWarn)!;
      assert.equal(warn.error, 'Error: Unexpected server response: 401 Incorrect API key provided: [redacted]');
      assert.ok(!JSON.stringify(platform.logs).includes('sk-up-realtime'), 'no log line holds the key');
      await eventOf(s);
    } finally {
      platform.connectWebSocket = connect;
    }
  });

  test('a dropped upstream: status 502 in the access log and the event', async () => {
    const s = await open('rt-team');
    s.upstream.peerCloses(1006);
    const e = await eventOf(s);
    assert.equal(e['http.response.status_code'], 502);
    assert.equal(accessLine(s).status, 502);
  });

  test("through a wildcard alias the caller's name is the upstream model; one that could be a path step is refused", async () => {
    const s = await open('wild/gpt-realtime-mini');
    assert.equal(s.status, 200);
    assert.equal(opened.at(-1)!.url, 'ws://realtime.test/v1/realtime?model=gpt-realtime-mini');
    s.client.peerCloses(1000);
    await eventOf(s);
    const before = opened.length;
    for (const bad of ['wild/..', 'wild/..%2Fx', 'wild/a%5Cb', 'wild/%252e%252e', 'wild/a%252Fb']) {
      const refused = await open(bad);
      assert.equal(refused.status, 400, bad);
    }
    assert.equal(opened.length, before, 'no upstream socket was opened');
  });

  test("a rate-limit policy the caller meets is reserved at the handshake: the team's second session is 429", async () => {
    const first = await open('rt-team', TEAM_KEY);
    assert.equal(first.status, 200);
    first.client.peerCloses(1000);
    const second = await open('rt-team', TEAM_KEY);
    assert.equal(second.status, 429);
    // The refusal past authentication leaves a zero-token event too (AISIX's).
    const e = await eventOf(second);
    assert.equal(e['http.response.status_code'], 429);
    assert.equal(e['aisix.inbound_protocol'], 'realtime');
    assert.equal(e['aisix.requested_model'], 'rt-team');
  });

  test('a session refused before its model resolves names the model the caller asked for', async () => {
    const missing = await open('no-such-realtime-model');
    assert.equal(missing.status, 404);
    const e = await eventOf(missing);
    assert.equal(e['http.response.status_code'], 404);
    assert.equal(e['aisix.requested_model'], 'no-such-realtime-model');
  });
});

const USAGE = { input_tokens: 11, output_tokens: 7, input_token_details: { cached_tokens: 3 } };

describe('the text of a frame the guardrails read', () => {
  test('a frame as it is; an audio event with nothing but its audio and ids, nothing', () => {
    const item = JSON.stringify({ type: 'conversation.item.create', item: { content: 'hi' } });
    assert.equal(scannedText(item), item);
    assert.equal(scannedText(JSON.stringify({ type: 'input_audio_buffer.append', audio: 'AAAA' })), undefined);
    assert.equal(
      scannedText(JSON.stringify({ type: 'response.output_audio.delta', response_id: 'r', item_id: 'i', delta: 'AA' })),
      undefined,
    );
    // Any other member keeps an audio event checked whole.
    const smuggled = JSON.stringify({ type: 'input_audio_buffer.append', audio: 'AA', note: 'forbidden' });
    assert.equal(scannedText(smuggled), smuggled);
    assert.equal(scannedText('not json, audio'), 'not json, audio');
  });

  test('a check that throws refuses the frame, named on the record (fail closed)', async () => {
    const g = { name: 'g', kind: 'keyword', input: true, output: false, check: () => ({ kind: 'allow' }) };
    const deps = {
      ctx: {},
      log: () => {},
      now: () => 0,
      metrics: {
        observe() {
          throw new Error('a broken metrics sink');
        },
      },
    } as unknown as ChainDeps;
    const failed: string[] = [];
    const rec = {
      failed: (kind: string) => failed.push(kind),
      facet: () => ({ ran() {} }),
    } as unknown as RequestRecord;
    const checks = frameChecks([g as unknown as Guardrail], deps, 'rt', rec)!;
    assert.equal(checks.output, undefined, 'no member checks answers');
    assert.equal(await checks.input!('{"type":"response.create"}'), CHECK_FAILED_FRAME);
    assert.deepEqual(failed, ['guardrail_error']);
  });
});
