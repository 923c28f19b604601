// Streamed `POST /v1/responses` beyond the event sequence (docs/aisix-compatibility.md "Endpoints"): AISIX's
// `:` heartbeat while the model is silent, native and translated through chat, and guardrails on a stream —
// a blocked input and an answer blocked mid-stream, with the exact bytes the caller gets — through
// app.request() against the mock upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';
import { within } from '../support/until.ts';

const CALLER = 'sk-resp-stream';
const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
downstream: { sse_keepalive_interval_secs: 1 }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

let mock: MockUpstream;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  mock = await startMockUpstream();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${mock.base}" }
  - { display_name: ds, provider: deepseek, adapter: openai, api_key: k-ds, api_base: "${mock.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
  - { display_name: deep, provider_key: ds, model_name: deep-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - name: words
    kind: keyword
    created_at: "2024-01-01T00:00:00Z"
    patterns: [{ kind: literal, value: forbidden }]
`,
    { config: CONFIG, env: { CALLER } },
  ));
  app = createProxyApp(gw);
});

after(async () => {
  gw.stop();
  await mock.close();
});

function post(body: unknown): Promise<Response> {
  return Promise.resolve(app.request('/v1/responses', {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  }));
}

/** A native Responses stream's events (the mock writes each as a `data:` line). */
function nativeEvents(text: string): unknown[] {
  const response = { id: 'resp_1', object: 'response', model: 'gpt-upstream' };
  const usage = { input_tokens: 2, output_tokens: 1, total_tokens: 3 };
  return [
    { type: 'response.created', response: { ...response, status: 'in_progress', output: [] } },
    { type: 'response.output_text.delta', item_id: 'msg_1', delta: text },
    { type: 'response.completed', response: { ...response, status: 'completed', output: [], usage } },
  ];
}

describe('a heartbeat while the model is silent', () => {
  const paths = {
    native: { model: 'gpt', reply: (hold: Promise<void>) => ({ sse: nativeEvents('hi'), hold }) },
    'translated through chat': { model: 'deep', reply: (hold: Promise<void>) => ({ hold }) },
  };
  for (const [name, path] of Object.entries(paths)) {
    test(`${name}: \`:\\n\\n\` before the upstream answers, then the whole event sequence`, async () => {
      let answer!: () => void;
      mock.script(path.reply(new Promise<void>((r) => (answer = r))));
      const res = await post({ model: path.model, stream: true, input: 'hello' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/event-stream');
      const reader = res.body!.getReader();
      const first = await within(reader.read(), 5000, 'the first bytes');
      assert.equal(new TextDecoder().decode(first.value), ':\n\n', 'a heartbeat while the upstream is silent');
      answer();
      let rest = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
      const body = rest.replace(/^:\n\n/gm, '');
      assert.match(body, /^(event: response\.created\n)?data: \{"type":"response\.created"/);
      assert.match(body, /"type":"response\.completed"/);
      assert.doesNotMatch(body, /"error":\{|event: error/);
    });
  }
});

describe('guardrails on a stream', () => {
  const blocked = (side: string) => `${side} blocked by content policy (guardrail 'words')`;

  test('a blocked input: the 422 in the OpenAI envelope, no stream, no upstream call', async () => {
    const n = mock.requests.length;
    const res = await post({ model: 'deep', stream: true, input: 'a forbidden word' });
    assert.equal(res.status, 422);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(await res.text(), JSON.stringify({ error: { message: blocked('request'), type: 'content_filter' } }));
    assert.equal(mock.requests.length, n);
  });

  const answers = {
    'translated through chat': {
      model: 'deep',
      sse: ['one ', 'two ', 'forbidden', ' more'].map((t) => chunk('deep-upstream', t)),
    },
    native: { model: 'gpt', sse: [...nativeEvents('one '), ...nativeEvents('forbidden')] },
  };
  for (const [name, a] of Object.entries(answers)) {
    test(`${name}: an answer blocked mid-stream ends with the Responses error event, nothing else`, async () => {
      mock.script({ sse: a.sse });
      const res = await post({ model: a.model, stream: true, input: 'hi' });
      assert.equal(res.status, 200);
      const text = await within(res.text(), 5000, 'the stream');
      assert.equal(
        text.replace(/^:\n\n/gm, ''), // heartbeats, if the check took a keep-alive interval
        `event: error\ndata: ${
          JSON.stringify({ type: 'error', code: 'content_filter', message: blocked('response') })
        }\n\n`,
      );
    });
  }
});
