// Streamed answers a guardrail checks, through app.request() against real mock upstreams (docs/guardrails.md
// "What the caller sees", "Streams"): `/v1/messages` text and `tool_use` arguments a keyword forbids end with
// AISIX's `content_filter` error event, native and translated; a Responses stream over the hold-back cap fails
// closed in block mode and is released live in monitor mode; a monitor member whose service is down blocks
// nothing (docs/guardrails.md "Verdicts").
// Run: node --import tsx --test test/unit/guardrails-stream-proxy.test.ts
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { anthropicEvents, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { type MockGuardrails, startMockGuardrails } from '../support/mock-guardrails.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';
import { latch, until, within } from '../support/until.ts';

const CALLER = 'sk-stream-guard-caller';
let mock: MockUpstream;
let anth: MockAnthropic;
let guards: MockGuardrails;
let stops: (() => void)[] = [];

before(async () => {
  mock = await startMockUpstream();
  anth = await startMockAnthropic();
  guards = await startMockGuardrails();
});
after(async () => {
  for (const stop of stops) stop();
  stops = [];
  await mock.close();
  await anth.close();
  await guards.close();
});

/** A gateway over the mocks with these guardrail rows, and a POST through its proxy app. */
async function gatewayGuardedBy(guardrails: string, openaiBase = mock.base) {
  const { gw, platform } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anth.url}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
${guardrails}`,
    { env: { CALLER } },
  );
  stops.push(() => gw.stop());
  const app = createProxyApp(gw);
  const post = (path: string, body: unknown) =>
    Promise.resolve(app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }));
  return { gw, platform, post };
}

/** The stream's text without the keep-alive comments a hold may interleave. */
async function streamed(res: Response): Promise<string> {
  assert.equal(res.status, 200);
  return (await within(res.text(), 5000, 'the stream')).replace(/^: .*\n\n/gm, '');
}

const WORDS = '  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbidden }] }\n';
const MESSAGES_BLOCK = 'event: error\ndata: ' +
  `{"type":"error","error":{"type":"content_filter","message":"response blocked by content policy (guardrail 'words')"}}\n\n`;
const asks = { max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] };

describe('/v1/messages streams a keyword forbids', () => {
  let post: Awaited<ReturnType<typeof gatewayGuardedBy>>['post'];
  before(async () => {
    ({ post } = await gatewayGuardedBy(WORDS));
  });

  test('text deltas, native Anthropic target: only the content_filter error event', async () => {
    anth.script({ events: anthropicEvents('claude-upstream', ['one ', 'forbid', 'den', ' more']) });
    assert.equal(await streamed(await post('/v1/messages', { model: 'claude', ...asks })), MESSAGES_BLOCK);
  });

  test('text deltas, translated from an OpenAI target: the same event', async () => {
    mock.script({
      sse: [chunk('gpt-upstream', 'one '), chunk('gpt-upstream', 'forbidden'), chunk('gpt-upstream', '!')],
    });
    assert.equal(await streamed(await post('/v1/messages', { model: 'gpt', ...asks })), MESSAGES_BLOCK);
  });

  test('tool_use input_json_delta, native: the same event, no argument reaches the caller', async () => {
    const [start, , , ...rest] = anthropicEvents('claude-upstream', []);
    const delta = (partial_json: string): [string, unknown] => [
      'content_block_delta',
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json } },
    ];
    anth.script({
      events: [
        start!,
        ['content_block_start', {
          type: 'content_block_start',
          index: 0,
          content_block: { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} },
        }],
        delta('{"q":"forb'),
        delta('idden"}'),
        ...rest,
      ],
    });
    assert.equal(await streamed(await post('/v1/messages', { model: 'claude', ...asks })), MESSAGES_BLOCK);
  });

  test('tool_use translated from OpenAI tool-call fragments: the same event', async () => {
    const call = (args: string, first = false) => ({
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'gpt-upstream',
      choices: [{
        index: 0,
        delta: {
          tool_calls: [{
            index: 0,
            ...(first ? { id: 'call_1', type: 'function' } : {}),
            function: { ...(first ? { name: 'lookup' } : {}), arguments: args },
          }],
        },
        finish_reason: null,
      }],
    });
    mock.script({ sse: [call('', true), call('{"q":"forb'), call('idden"}')] });
    assert.equal(await streamed(await post('/v1/messages', { model: 'gpt', ...asks })), MESSAGES_BLOCK);
  });
});

/** Native Responses events (`data:` lines, as the OpenAI-style mock writes them). */
const outputDelta = (delta: string) => ({
  type: 'response.output_text.delta',
  item_id: 'msg_1',
  output_index: 0,
  content_index: 0,
  delta,
});
const RESPONSE_EVENTS = [
  { type: 'response.created', response: { id: 'resp_1', status: 'in_progress' } },
  outputDelta('mail a@b.io about '),
  outputDelta('the plan, then wait'),
  {
    type: 'response.completed',
    response: { id: 'resp_1', status: 'completed', usage: { input_tokens: 3, output_tokens: 9, total_tokens: 12 } },
  },
];
const sse = (events: unknown[]) => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');

describe('a Responses stream over the hold-back cap', () => {
  test('block mode: fails closed with the nameless error event, nothing of the answer', async () => {
    const { post, platform } = await gatewayGuardedBy(
      '  - { name: pii, kind: pii, detectors: [{ type: email }], max_buffer_bytes: 16 }\n',
    );
    mock.script({ sse: RESPONSE_EVENTS });
    const text = await streamed(await post('/v1/responses', { model: 'gpt', stream: true, input: 'hi' }));
    assert.equal(
      text,
      'event: error\ndata: {"type":"error","code":"content_filter","message":"response blocked by content policy"}\n\n',
    );
    assert.ok(
      platform.logs.some((l) => l.msg === 'streaming response exceeded max_buffer_bytes; failing closed'),
      'the WARN line',
    );
  });

  test('monitor mode: released live as it comes, unmasked, no error event', async () => {
    // An upstream that sends the first delta, then waits for the test to see it at the caller.
    const seen = latch();
    const server = http.createServer(async (req, res) => {
      for await (const _ of req) { /* drain */ }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(RESPONSE_EVENTS.slice(0, 2)));
      await seen.promise;
      res.end(sse(RESPONSE_EVENTS.slice(2)) + 'data: [DONE]\n\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const { post } = await gatewayGuardedBy(
        '  - { name: pii, kind: pii, enforcement_mode: monitor, detectors: [{ type: email }], max_buffer_bytes: 16 }\n',
        base,
      );
      const res = await post('/v1/responses', { model: 'gpt', stream: true, input: 'hi' });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let text = '';
      while (!text.includes('mail a@b.io about')) {
        const r = await within(reader.read(), 5000, 'the first delta while the upstream is still open');
        assert.ok(!r.done, 'the stream ended before its first delta');
        text += dec.decode(r.value, { stream: true });
      }
      seen.resolve();
      for (;;) {
        const r = await within(reader.read(), 5000, 'the rest of the stream');
        if (r.done) break;
        text += dec.decode(r.value, { stream: true });
      }
      assert.equal(text.replace(/^: .*\n\n/gm, ''), sse(RESPONSE_EVENTS) + 'data: [DONE]\n\n');
    } finally {
      seen.resolve();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('a monitor member whose service is down', () => {
  const row = (extra: string) =>
    `  - { name: mod, kind: openai_moderation, api_key: k-mod, endpoint: "URL", enforcement_mode: monitor${extra} }\n`;

  for (const [name, extra] of [['fail_open unset (false)', ''], ['mandatory', ', mandatory: true']] as const) {
    test(`${name}: JSON and streamed answers served; a would_block hit with the failure tag`, async () => {
      guards.fault = { kind: 'status', status: 503 };
      try {
        const { gw, platform, post } = await gatewayGuardedBy(row(extra).replace('URL', `${guards.url}/v1`));
        const before = mock.requests.length;
        const res = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] });
        assert.equal(res.status, 200, await res.clone().text());
        const id = res.headers.get('x-aisix-request-id');
        await res.text();
        const text = await streamed(
          await post('/v1/chat/completions', {
            model: 'gpt',
            stream: true,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        );
        assert.ok(text.endsWith('data: [DONE]\n\n') && !text.includes('event: error'), text);
        assert.equal(mock.requests.length - before, 2, 'both calls reached the upstream');

        let line: Record<string, unknown> | undefined;
        await until(
          () => {
            line = platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === id);
            return line !== undefined;
          },
          5000,
          'the access log line',
        );
        assert.equal(line!.guardrail_blocked, false);
        const tag = 'openai_moderation_5xx';
        const hit = (hook: string) => ({
          guardrail_name: 'mod',
          hook,
          action: 'would_block',
          reason: `openai_moderation guardrail evaluation unavailable (${tag})`,
          error_type: tag,
        });
        assert.deepEqual(line!.guardrail_monitor_hits, [hit('input'), hit('output')]);
        assert.match(
          gw.metrics.render(),
          new RegExp(`guardrail="mod",kind="openai_moderation",phase="input",result="would_block",error_type="${tag}"`),
        );
      } finally {
        guards.fault = undefined;
      }
    });
  }
});
