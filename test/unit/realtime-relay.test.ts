// The Realtime relay (src/realtime/relay.ts, docs/realtime.md "Relay") over a fake socket pair: frames both ways
// unchanged, usage summed from `response.done` and token transcriptions, close codes relayed, the idle cap and
// the drain's 1001; and the upstream URL and credential (src/realtime/upstream.ts).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { RelaySocket, WsFrame, WsHandlers } from '../../src/platform.ts';
import {
  addUsage,
  CHECK_FAILED_FRAME,
  type RealtimeUsage,
  scrubbedFrame,
  scrubbedReason,
  startRelay,
} from '../../src/realtime/relay.ts';
import { base64Copies, scrubText } from '../../src/http/scrub.ts';
import { callerWantsBeta, upstreamTarget } from '../../src/realtime/upstream.ts';
import { ProxyError } from '../../src/http/errors.ts';
import { until } from '../support/until.ts';
import type { DirectModel, ProviderKey } from '../../src/resources/schema.ts';

/** One side of the relay: what the relay sent it and how it was closed; `peer` plays the other end. */
class FakeSocket implements RelaySocket {
  sent: WsFrame[] = [];
  closedWith: { code?: number; reason?: string } | undefined;
  private h: WsHandlers | undefined;
  send(f: WsFrame) {
    this.sent.push(f);
  }
  close(code?: number, reason?: string) {
    this.closedWith ??= code === undefined ? {} : { code, reason };
  }
  listen(h: WsHandlers) {
    this.h = h;
  }
  peerSends(f: WsFrame) {
    this.h!.message(f);
  }
  peerCloses(code: number, reason = '') {
    this.h!.close(code, reason);
  }
}

/** Timers the test fires by hand. */
function manualTimers() {
  const pending = new Map<number, () => void>();
  let next = 0;
  return {
    setTimer: (fn: () => void) => {
      pending.set(++next, fn);
      return next;
    },
    clearTimer: (t: unknown) => void pending.delete(t as number),
    fireAll: () => [...pending.values()].forEach((f) => f()),
    get count() {
      return pending.size;
    },
  };
}

const SECRET = 'sk-up-echo-0123456789abcdef';
const SLASHED = 'sk-up/echo/0123456789';

const done = (usage: object) => JSON.stringify({ type: 'response.done', event_id: 'e1', response: { usage } });

describe('realtime relay', () => {
  test('frames are relayed both ways unchanged, text and binary', () => {
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    startRelay(client, upstream, { idleMs: 0 });
    const bytes = new Uint8Array([1, 2, 3]);
    client.peerSends('{"type":"session.update","session":{}}');
    client.peerSends(bytes);
    upstream.peerSends('{"type":"session.updated"}');
    assert.deepEqual(upstream.sent, ['{"type":"session.update","session":{}}', bytes]);
    assert.deepEqual(client.sent, ['{"type":"session.updated"}']);
  });

  test('usage is the sum of the response.done events', async () => {
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    const relay = startRelay(client, upstream, { idleMs: 0 });
    upstream.peerSends(done({ input_tokens: 10, output_tokens: 4, input_token_details: { cached_tokens: 2 } }));
    upstream.peerSends(done({ input_tokens: 5, output_tokens: 1 }));
    // A client frame that looks like one is never counted: only the upstream reports usage.
    client.peerSends(done({ input_tokens: 1000, output_tokens: 1000 }));
    client.peerCloses(1000);
    const end = await relay.end;
    assert.deepEqual(end, { usage: { input: 15, output: 5, cached: 2 }, status: 200, by: 'client' });
    assert.deepEqual(upstream.closedWith, {}, 'the upstream gets a close without a code');
  });

  test('token transcriptions count; duration-billed ones and other events do not', () => {
    const u: RealtimeUsage = { input: 0, output: 0, cached: 0 };
    const t = (usage: object) =>
      JSON.stringify({ type: 'conversation.item.input_audio_transcription.completed', usage });
    addUsage(u, t({ type: 'tokens', input_tokens: 3, output_tokens: 2 }));
    addUsage(u, t({ type: 'duration', seconds: 4 }));
    addUsage(u, JSON.stringify({ type: 'response.created', response: { usage: { input_tokens: 9 } } }));
    addUsage(u, '{"type":"response.done", broken');
    addUsage(u, new TextEncoder().encode(done({ input_tokens: 9 })));
    assert.deepEqual(u, { input: 3, output: 2, cached: 0 });
  });

  test("the upstream's close code and reason reach the caller; a dropped upstream is 1011", async () => {
    for (
      const [code, expected, status] of [
        [4001, { code: 4001, reason: 'bye' }, 200],
        [1005, {}, 200],
        [1006, { code: 1011, reason: 'upstream error' }, 502],
      ] as const
    ) {
      const client = new FakeSocket();
      const upstream = new FakeSocket();
      const relay = startRelay(client, upstream, { idleMs: 0 });
      upstream.peerCloses(code, 'bye');
      assert.deepEqual(client.closedWith, expected);
      assert.equal((await relay.end).status, status);
    }
  });

  test('no frame for the idle cap closes both sides with 1001; each frame restarts it', async () => {
    const timers = manualTimers();
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    const relay = startRelay(client, upstream, { idleMs: 1000, ...timers });
    client.peerSends('{}');
    upstream.peerSends('{}');
    assert.equal(timers.count, 1, 'one timer, restarted by each frame');
    timers.fireAll();
    assert.deepEqual(client.closedWith, { code: 1001, reason: 'idle timeout' });
    assert.deepEqual(upstream.closedWith, { code: 1001, reason: 'idle timeout' });
    assert.deepEqual((await relay.end).status, 504);
  });

  test('a checked frame holds the frames behind it; a refused one ends the session with 1011 and status 400', async () => {
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    let release!: (v: string | undefined) => void;
    const held = new Promise<string | undefined>((r) => (release = r));
    const checks = {
      input: (t: string) => (t === 'slow' ? held : Promise.resolve(t === 'bad' ? 'refused' : undefined)),
    };
    const relay = startRelay(client, upstream, { idleMs: 0, checks });
    client.peerSends('slow');
    client.peerSends(new Uint8Array([7]));
    client.peerSends('bad');
    client.peerSends('after');
    upstream.peerSends('unchecked way');
    assert.deepEqual(upstream.sent, [], 'nothing passes the frame waiting for its verdict');
    assert.deepEqual(client.sent, ['unchecked way'], 'the other direction has no check and does not wait');
    release(undefined);
    const end = await relay.end;
    assert.deepEqual(upstream.sent, ['slow', new Uint8Array([7])]);
    assert.deepEqual(client.sent, ['unchecked way', 'refused']);
    assert.deepEqual(client.closedWith, { code: 1011, reason: 'content policy' });
    assert.deepEqual(upstream.closedWith, {});
    assert.deepEqual(end, { usage: { input: 0, output: 0, cached: 0 }, status: 400, by: 'policy' });
  });

  test('a check that throws fails closed', async () => {
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    const relay = startRelay(client, upstream, { idleMs: 0, checks: { output: () => Promise.reject(new Error('x')) } });
    upstream.peerSends('{"type":"response.text.delta"}');
    assert.equal((await relay.end).status, 400);
    assert.deepEqual(client.sent, [CHECK_FAILED_FRAME]);
  });

  test("an upstream's error frame echoing the key reaches the caller and its check redacted, still JSON", async () => {
    const scrub = (t: string, max?: number) => scrubText(t, [SECRET], max);
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    const checked: string[] = [];
    startRelay(client, upstream, {
      idleMs: 0,
      scrub,
      checks: { output: (t) => (checked.push(t), Promise.resolve(undefined)) },
    });
    // OpenAI's realtime `error` event, the key quoted raw, upper-cased, percent-encoded and in base64.
    const echo = JSON.stringify({
      type: 'error',
      event_id: 'evt_1',
      error: {
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message: `Incorrect API key provided: ${SECRET}. ${SECRET.toUpperCase()} ${encodeURIComponent(SECRET)} ${
          base64Copies(SECRET)[0]
        }`,
        param: null,
      },
    });
    upstream.peerSends(echo);
    await until(() => client.sent.length === 1, 2000, 'the error frame relayed');
    const sent = client.sent[0] as string;
    assert.ok(!sent.toLowerCase().includes('sk-up-echo'), sent);
    assert.ok(!sent.includes(base64Copies(SECRET)[1]!), sent);
    assert.deepEqual(JSON.parse(sent), {
      type: 'error',
      event_id: 'evt_1',
      error: {
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message: 'Incorrect API key provided: [redacted]. [redacted] [redacted] [redacted]',
        param: null,
      },
    });
    assert.deepEqual(checked, [sent], 'the output check reads the scrubbed frame');
  });

  test('an error frame whose key was escaped in JSON stays JSON; frames without an error are not rewritten', () => {
    const scrub = (t: string, max?: number) => scrubText(t, [SLASHED], max);
    // The key is JSON-escaped in the frame (`\/`): a redaction of the text alone could split an escape.
    const frame = `{"type":"error","error":{"message":"bad key ${SLASHED.replace(/\//g, '\\/')}"}}`;
    assert.deepEqual(JSON.parse(scrubbedFrame(frame, scrub)), {
      type: 'error',
      error: { message: 'bad key [redacted]' },
    });
    // A failed response names its error as a member: scrubbed as well.
    const failed = JSON.stringify({
      type: 'response.done',
      response: { status: 'failed', status_details: { error: { message: SLASHED } } },
    });
    assert.ok(!scrubbedFrame(failed, scrub).includes(SLASHED));
    const same = '{"type":"response.output_text.delta","delta":"an error in the text"}';
    assert.equal(scrubbedFrame(same, scrub), same);
    const clean = '{ "type" : "error", "error": {"message":"rate limited"}, "n": 1.0 }';
    assert.equal(scrubbedFrame(clean, scrub), clean, 'no secret found: the frame as it came');
    assert.equal(scrubbedFrame(`not json "error" ${SLASHED}`, scrub), 'not json "error" [redacted]');
    const proto = `{"type":"error","__proto__":{"x":"${SLASHED.replace(/\//g, '\\/')}"}}`;
    assert.deepEqual(
      JSON.parse(scrubbedFrame(proto, scrub)),
      JSON.parse('{"type":"error","__proto__":{"x":"[redacted]"}}'),
    );
  });

  test("the upstream's close reason reaches the caller redacted, within a close frame's 123 bytes", async () => {
    const scrub = (t: string, max?: number) => scrubText(t, [SECRET], max);
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    startRelay(client, upstream, { idleMs: 0, scrub });
    upstream.peerCloses(4001, `invalid key ${SECRET}`);
    assert.deepEqual(client.closedWith, { code: 4001, reason: 'invalid key [redacted]' });
    // A 6-character secret becomes 10: a reason at the limit grows past it and is cut again.
    const short = (t: string, max?: number) => scrubText(t, ['abcdef'], max);
    const full = 'é'.repeat(55) + 'abcdef' + 'x'.repeat(7);
    assert.equal(new TextEncoder().encode(full).length, 123);
    const out = scrubbedReason(full, short);
    assert.ok(new TextEncoder().encode(out).length <= 123, out);
    assert.ok(out.startsWith('é'.repeat(55) + '[redacted]'), out);
  });

  test('goAway (the drain window ended) closes both sides with 1001', async () => {
    const client = new FakeSocket();
    const upstream = new FakeSocket();
    const relay = startRelay(client, upstream, { idleMs: 0 });
    relay.goAway();
    assert.equal(client.closedWith?.code, 1001);
    assert.equal(upstream.closedWith?.code, 1001);
    assert.deepEqual(await relay.end, { usage: { input: 0, output: 0, cached: 0 }, status: 503, by: 'drain' });
  });
});

describe('realtime upstream', () => {
  const model = { display_name: 'rt', model_name: 'gpt-realtime' } as DirectModel;
  const key = (k: Partial<ProviderKey>) => ({ id: 'k', display_name: 'pk', provider: 'openai', ...k }) as ProviderKey;

  test("OpenAI: ws(s) URL under the key's base, the provider key's bearer, no beta header", () => {
    assert.deepEqual(upstreamTarget(key({ adapter: 'openai', api_key: 'sk-up' }), model, 'gpt-realtime'), {
      url: 'wss://api.openai.com/v1/realtime?model=gpt-realtime',
      headers: { authorization: 'Bearer sk-up' },
    });
    const local = upstreamTarget(
      key({ adapter: 'openai', api_key: 'sk-up', api_base: 'http://127.0.0.1:9' }),
      model,
      'gpt-realtime',
    );
    assert.equal((local as { url: string }).url, 'ws://127.0.0.1:9/v1/realtime?model=gpt-realtime');
  });

  test("the beta header goes only with the caller's own opt-in (header or browser subprotocol)", () => {
    const openai = key({ adapter: 'openai', api_key: 'sk-up' });
    assert.deepEqual((upstreamTarget(openai, model, 'gpt-realtime', true) as { headers: unknown }).headers, {
      authorization: 'Bearer sk-up',
      'openai-beta': 'realtime=v1',
    });
    const h = (v?: string) => new Headers(v ? { 'openai-beta': v } : {});
    assert.equal(callerWantsBeta(h('realtime=v1'), []), true);
    assert.equal(callerWantsBeta(h('assistants=v2, realtime=v1'), []), true);
    assert.equal(callerWantsBeta(h(), ['realtime', 'openai-beta.realtime-v1']), true);
    assert.equal(callerWantsBeta(h('assistants=v2'), ['realtime']), false);
  });

  test("Azure: AISIX's deployment URL with api-key", () => {
    const t = upstreamTarget(
      key({ adapter: 'azure-openai', api_key: 'az', api_base: 'https://r.openai.azure.com/' }),
      model,
      'gpt-realtime',
    );
    assert.deepEqual(t, {
      url: 'wss://r.openai.azure.com/openai/realtime?api-version=2024-10-01-preview&deployment=gpt-realtime',
      headers: { 'api-key': 'az' },
    });
  });

  test('an upstream model that a server decoding the query could read as a path step is refused', () => {
    const openai = key({ adapter: 'openai', api_key: 'sk-up' });
    for (const id of ['..', '../x', 'a\\b', '%2e%2e', 'a%2Fb', '%5c', '%252e%252e', 'a b']) {
      const t = upstreamTarget(openai, model, id);
      assert.ok(t instanceof ProxyError, id);
      assert.equal(t.status, 400);
      assert.match(t.message, /^request payload is invalid: `model` query parameter names the upstream model /);
    }
    // A vendor's namespaced id stays one value in the query.
    const ok = upstreamTarget(openai, model, 'meta-llama/Llama-3@v1');
    assert.equal((ok as { url: string }).url, 'wss://api.openai.com/v1/realtime?model=meta-llama%2FLlama-3%40v1');
  });

  test('another adapter is refused with a 400 naming the provider', () => {
    // Gemini Live and Bedrock's speech sessions are other protocols (AISIX serves neither).
    for (const provider of ['anthropic', 'vertex', 'bedrock'] as const) {
      const t = upstreamTarget(key({ adapter: provider, provider, api_key: 'x' }), model, 'gpt-realtime');
      assert.ok(t instanceof ProxyError);
      assert.equal(t.status, 400);
      assert.match(
        t.message,
        new RegExp(`uses provider "${provider}" which does not speak the OpenAI Realtime protocol`),
      );
    }
  });
});
