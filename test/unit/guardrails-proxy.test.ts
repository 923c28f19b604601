// Guardrails in the request pipeline through app.request() against a real mock upstream (docs/guardrails.md
// "Where they run"): tables per endpoint of prompts and answers that pass, are masked (exact output) or are
// blocked (exact status and body), JSON and SSE; quota, failover, monitor mode, metrics, the status page, and
// a 1 MiB prompt while other callers are served.
// Run: node --import tsx --test test/unit/guardrails-proxy.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith, midMinute, type TestPlatform } from '../support/platform.ts';
import { until, within } from '../support/until.ts';

const PEER = { peer: '127.0.0.1:5555' };
const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

function resources(base: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${base} }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0 }
  - { display_name: gpt-b, provider_key: mock, model_name: gpt-b-up, retries: 0 }
  - { display_name: embed, provider_key: mock, model_name: embed-up, retries: 0 }
  - { display_name: group, routing: { targets: [{ model: gpt }, { model: gpt-b }], fallback_on_statuses: [422] } }
api_keys:
  - { display_name: all, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: one, key_env: ONE_RPM, allowed_models: ["*"], rate_limit: { rpm: 1 } }
guardrails:
  - name: words
    kind: keyword
    created_at: "2024-01-01T00:00:00Z"
    patterns: [{ kind: literal, value: forbidden }, { kind: regex, value: "(?i)drop\\\\s+table" }]
  - name: pii
    kind: pii
    created_at: "2024-01-02T00:00:00Z"
    detectors: [{ type: email }, { type: us_ssn, action: block }]
  - name: watch
    kind: keyword
    created_at: "2024-01-03T00:00:00Z"
    enforcement_mode: monitor
    patterns: [{ kind: literal, value: suspicious }]
`;
}

const CALLER = 'sk-caller-all';
const ONE_RPM = 'sk-caller-one';
let mock: MockUpstream;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  mock = await startMockUpstream();
  ({ gw, platform } = await gatewayWith(resources(mock.base), {
    config: CONFIG,
    env: { CALLER, ONE_RPM },
    now: midMinute(),
  }));
  app = createProxyApp(gw);
});
after(() => mock.close());
beforeEach(() => {
  mock.requests.length = 0;
});

function post(path: string, body: unknown, key = CALLER): Promise<Response> {
  return Promise.resolve(app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  }, PEER));
}
const openaiBlock = (side: string, name: string) =>
  `{"error":{"message":"${side} blocked by content policy (guardrail '${name}')","type":"content_filter"}}`;
const anthropicBlock = (side: string, name: string) =>
  `{"type":"error","error":{"type":"invalid_request_error","message":"${side} blocked by content policy (guardrail '${name}')"}}`;
const user = (content: string) => [{ role: 'user', content }];

describe('input checks', () => {
  const blocked: [string, string, Record<string, unknown>, string][] = [
    [
      'chat',
      '/v1/chat/completions',
      { model: 'gpt', messages: user('a forbidden word') },
      openaiBlock('request', 'words'),
    ],
    [
      'chat, regex',
      '/v1/chat/completions',
      { model: 'gpt', messages: user('then DROP  TABLE users') },
      openaiBlock('request', 'words'),
    ],
    [
      'chat, pii block',
      '/v1/chat/completions',
      { model: 'gpt', messages: user('ssn 123-45-6789') },
      openaiBlock('request', 'pii'),
    ],
    ['completions', '/v1/completions', { model: 'gpt', prompt: 'forbidden' }, openaiBlock('request', 'words')],
    ['embeddings', '/v1/embeddings', { model: 'embed', input: ['ok', 'forbidden'] }, openaiBlock('request', 'words')],
    [
      'messages',
      '/v1/messages',
      { model: 'gpt', max_tokens: 5, messages: user('forbidden') },
      anthropicBlock('request', 'words'),
    ],
    ['responses', '/v1/responses', { model: 'gpt', input: 'a forbidden word' }, openaiBlock('request', 'words')],
    [
      'responses, instructions',
      '/v1/responses',
      { model: 'gpt', instructions: 'ssn 123-45-6789', input: [{ role: 'user', content: 'hi' }] },
      openaiBlock('request', 'pii'),
    ],
  ];
  for (const [name, path, body, want] of blocked) {
    test(`${name}: 422, the exact body, no upstream call`, async () => {
      const res = await post(path, body);
      assert.equal(res.status, 422);
      assert.equal(await res.text(), want);
      assert.equal(mock.requests.length, 0);
    });
  }

  test('a blocked prompt counts as a request (the checks run after the reservation), no upstream call', async () => {
    const blockedRes = await post('/v1/chat/completions', { model: 'gpt', messages: user('forbidden') }, ONE_RPM);
    assert.equal(blockedRes.status, 422);
    await blockedRes.text();
    const over = await post('/v1/chat/completions', { model: 'gpt', messages: user('fine') }, ONE_RPM);
    assert.equal(over.status, 429, 'rpm 1 was taken by the blocked prompt');
    await over.text();
    assert.equal(mock.requests.length, 0);
  });

  test('masks are written into the request the upstream receives', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: user('mail bob@example.com please') });
    assert.equal(res.status, 200);
    await res.text();
    assert.deepEqual((mock.requests[0]!.json!.messages as unknown[])[0], {
      role: 'user',
      content: 'mail [EMAIL_REDACTED] please',
    });
  });

  test('monitor mode changes nothing and counts would_block', async () => {
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: user('suspicious text') });
    assert.equal(res.status, 200);
    await res.text();
    assert.deepEqual((mock.requests[0]!.json!.messages as unknown[])[0], { role: 'user', content: 'suspicious text' });
    assert.match(
      gw.metrics.render(),
      /aisix_guardrail_latency_seconds_count\{env_id="unknown",guardrail="watch",kind="keyword",phase="input",result="would_block",error_type="none"\} [1-9]/,
    );
  });
});

describe('output checks', () => {
  test('a whole answer: blocked with 422 after the winning attempt, no failover; masked in place', async () => {
    mock.script({ body: chatCompletion('gpt-up', 'here is the forbidden answer') });
    const res = await post('/v1/chat/completions', { model: 'group', messages: user('hi') });
    assert.equal(res.status, 422);
    assert.equal(await res.text(), openaiBlock('response', 'words'));
    assert.equal(mock.requests.length, 1, 'no failover on an output block');
    mock.script({ body: chatCompletion('gpt-up', 'write to a@b.io') });
    const masked = await (await post('/v1/chat/completions', { model: 'gpt', messages: user('hi') })).json();
    assert.equal(masked.choices[0].message.content, 'write to [EMAIL_REDACTED]');
  });

  test('messages: the Anthropic envelope', async () => {
    mock.script({ body: chatCompletion('gpt-up', 'forbidden') });
    const res = await post('/v1/messages', { model: 'gpt', max_tokens: 5, messages: user('hi') });
    assert.equal(res.status, 422);
    assert.equal(await res.text(), anthropicBlock('response', 'words'));
  });

  test('responses: a whole answer blocked with 422; masked in place', async () => {
    const answer = (text: string) =>
      JSON.stringify({
        id: 'resp_1',
        object: 'response',
        status: 'completed',
        model: 'gpt-up',
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
        usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
      });
    mock.script({ body: answer('here is the forbidden answer') });
    const res = await post('/v1/responses', { model: 'gpt', input: 'hi' });
    assert.equal(res.status, 422);
    assert.equal(await res.text(), openaiBlock('response', 'words'));
    mock.script({ body: answer('write to a@b.io') });
    const masked = await (await post('/v1/responses', { model: 'gpt', input: 'hi' })).json();
    assert.equal(masked.output[0].content[0].text, 'write to [EMAIL_REDACTED]');
  });

  test('streams: a block after N chunks ends with the error frame and no [DONE]', async () => {
    mock.script({
      sse: [chunk('gpt-up', 'one '), chunk('gpt-up', 'two '), chunk('gpt-up', 'forbidden'), chunk('gpt-up', ' more')],
    });
    const res = await post('/v1/chat/completions', { model: 'gpt', stream: true, messages: user('hi') });
    assert.equal(res.status, 200);
    const text = await within(res.text(), 5000, 'stream');
    assert.equal(
      text.replace(/^: .*\n\n/gm, ''),
      `event: error\ndata: ${openaiBlock('response', 'words')}\n\n`,
    );
    assert.ok(!text.includes('[DONE]'));
  });

  test('streams: a mask spanning two chunks', async () => {
    mock.script({ sse: [chunk('gpt-up', 'to bob@exa'), chunk('gpt-up', 'mple.com!')] });
    const res = await post('/v1/chat/completions', { model: 'gpt', stream: true, messages: user('hi') });
    const text = await within(res.text(), 5000, 'stream');
    const contents = text.split('\n').filter((l) => l.startsWith('data: {')).map((l) =>
      JSON.parse(l.slice(6)).choices[0].delta.content
    );
    assert.deepEqual(contents, ['to [EMAIL_REDACTED]!', '']);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });
});

describe('operators see it', () => {
  test("the access log carries AISIX's usage-event guardrail fields", async () => {
    const line = async (res: Response) => {
      const id = res.headers.get('x-aisix-request-id');
      await res.text();
      let found: Record<string, unknown> | undefined;
      await until(
        () => {
          found = platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === id);
          return found !== undefined;
        },
        5000,
        'the access log line',
      );
      return found!;
    };
    mock.script({ body: chatCompletion('gpt-up', 'write to a@b.io or c@d.io') });
    const ok = await line(await post('/v1/chat/completions', { model: 'gpt', messages: user('suspicious: x@y.io') }));
    // The chain's order: created_at, oldest first (words, pii, watch).
    const each = (hook: string) => [
      { kind: 'keyword', hook },
      { kind: 'pii', hook },
      { kind: 'keyword', hook },
    ];
    assert.equal(ok.guardrail_blocked, false);
    assert.equal(ok.guardrail_bypassed_reason, undefined);
    assert.deepEqual(ok.applied_guardrails, [...each('input'), ...each('output')]);
    assert.deepEqual(ok.guardrail_monitor_hits, [
      {
        guardrail_name: 'watch',
        hook: 'input',
        action: 'would_block',
        reason: 'input blocked by literal "suspicious"',
      },
    ]);
    const enforced = ok.guardrail_enforced_hits as Record<string, unknown>[];
    assert.deepEqual(enforced.map(({ duration_us, ...rest }) => (assert.equal(typeof duration_us, 'number'), rest)), [
      { guardrail_name: 'pii', hook: 'input', action: 'masked', counts: { email: 1 } },
      { guardrail_name: 'pii', hook: 'output', action: 'masked', counts: { email: 2 } },
    ]);
    assert.deepEqual(ok.redacted_entity_counts, { email: 3 });

    const refused = await line(await post('/v1/chat/completions', { model: 'gpt', messages: user('forbidden') }));
    assert.equal(refused.guardrail_blocked, true);
    assert.deepEqual(
      refused.applied_guardrails,
      [{ kind: 'keyword', hook: 'input' }],
      'the first block ends the chain',
    );
    assert.deepEqual(
      (refused.guardrail_enforced_hits as Record<string, unknown>[]).map((h) => [h.guardrail_name, h.action, h.reason]),
      [['words', 'blocked', undefined]],
      'the reason stays in the block log line',
    );
  });

  test('metrics and the status page list each guardrail', async () => {
    const m = gw.metrics.render();
    assert.match(m, /aisix_guardrail_blocks_total [1-9]/);
    assert.match(
      m,
      /aisix_guardrail_latency_seconds_bucket\{env_id="unknown",guardrail="words",kind="keyword",phase="input",result="blocked",error_type="none",le="0.001"\}/,
    );
    const page = await (await createStatusApp(gw).request('/status')).text();
    assert.match(page, /<section id="guardrails">/);
    for (const name of ['words', 'pii', 'watch']) assert.ok(page.includes(`<strong>${name}</strong>`), name);
  });

  test('a 1 MiB prompt: other callers are served while it is checked', async () => {
    const big = 'lorem ipsum a@b.io dolor 13812345678 '.repeat(Math.ceil((1 << 20) / 37));
    const slow = post('/v1/chat/completions', { model: 'gpt', messages: user(big) });
    const latencies: number[] = [];
    let done = false;
    void slow.then(() => (done = true));
    while (!done && latencies.length < 50) {
      const t0 = performance.now();
      const r = await post('/v1/chat/completions', { model: 'gpt', messages: user('small') });
      await r.text();
      latencies.push(performance.now() - t0);
    }
    const res = await slow;
    assert.equal(res.status, 200);
    await res.text();
    assert.ok(latencies.length >= 2, `${latencies.length} other requests answered during the check`);
    assert.ok(Math.max(...latencies) < 3000, `slowest other caller ${Math.max(...latencies)} ms`);
  });
});
