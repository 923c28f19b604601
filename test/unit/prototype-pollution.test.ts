// Caller JSON cannot pollute prototypes (docs/security.md, the review's PASS 3.5): bodies with `__proto__`,
// `constructor.prototype` and `prototype` members at every depth go through the native and translated
// endpoints (OpenAI, Anthropic and Vertex targets), the guardrail walker, the response cache's fingerprint
// and the token estimate; Object.prototype and Array.prototype stay as they were and the members reach the
// upstream as plain data or not at all.
// Run: node --import tsx --test test/unit/prototype-pollution.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type CloudServer, sendJson, startCloudServer } from '../support/mock-cloud.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { geminiAnswer } from '../support/mock-vertex.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

const CALLER = 'sk-caller-proto-1111';

let up: CloudServer;
let rig: RecordingGateway;

before(async () => {
  up = await startCloudServer((req, res) => {
    if (req.path.includes(':generateContent')) return sendJson(res, 200, geminiAnswer('hi'));
    if (req.path.endsWith('/v1/messages')) {
      return sendJson(res, 200, {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-up',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 3, output_tokens: 1 },
      });
    }
    return sendJson(res, 200, chatCompletion(String(req.json?.model ?? 'x')));
  });
  const vertex = JSON.stringify({ project: 'proj-one', region: 'us-central1', access_token: 'ya29.proto-token' });
  rig = await recordingGateway(
    `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-oai-proto, api_base: "${up.url}/v1" }
  - { display_name: ant, provider: anthropic, api_key: sk-ant-proto, api_base: "${up.url}" }
  - { display_name: vtx, adapter: vertex, api_key: '${vertex}', api_base: "${up.url}" }
models:
  - { display_name: gpt, provider_key: oai, model_name: gpt-up, retries: 0 }
  - { display_name: claude, provider_key: ant, model_name: claude-up, retries: 0 }
  - { display_name: gemini, provider_key: vtx, model_name: gemini-1.5-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - { name: kw, kind: keyword, patterns: [{ kind: literal, value: forbiddenword }] }
cache_policies: [{ name: main }]
`,
    { CALLER },
  );
});
after(() => up.close());

/** `{"__proto__":{"polluted":…},"constructor":{"prototype":{"polluted":…}},"prototype":{…}}` as JSON text. */
const EVIL = '"__proto__":{"polluted":"p1","toString":"x"},"constructor":{"prototype":{"polluted":"p2"}},' +
  '"prototype":{"polluted":"p3"}';
/** A member holding EVIL, then one level deeper, `depth` times. */
const nest = (depth: number): string => depth === 0 ? `{${EVIL}}` : `{${EVIL},"inner":${nest(depth - 1)}}`;

function bodies(model: string): [string, string][] {
  const content = `[{"type":"text","text":"hello",${EVIL}}]`;
  return [
    [
      '/v1/chat/completions',
      `{"model":"${model}",${EVIL},"messages":[{"role":"user","content":${content},${EVIL}}],"metadata":${nest(4)},` +
      `"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":${nest(3)}}}],` +
      `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${nest(2)}}}}`,
    ],
    [
      '/v1/messages',
      `{"model":"${model}","max_tokens":16,${EVIL},"messages":[{"role":"user","content":${content}}],` +
      `"system":[{"type":"text","text":"sys",${EVIL}}],"metadata":${nest(2)},` +
      `"tools":[{"name":"f","description":"d","input_schema":${nest(3)}}]}`,
    ],
    [
      '/v1/responses',
      `{"model":"${model}",${EVIL},"input":[{"role":"user","content":[{"type":"input_text","text":"hi",${EVIL}}]}],` +
      `"metadata":${nest(2)},"text":{"format":{"type":"json_schema","name":"s","schema":${nest(2)}}}}`,
    ],
    ['/v1/embeddings', `{"model":"${model}",${EVIL},"input":"hello","metadata":${nest(2)}}`],
    ['/v1/messages/count_tokens', `{"model":"${model}",${EVIL},"messages":[{"role":"user","content":${content}}]}`],
  ];
}

describe('caller JSON cannot pollute prototypes', () => {
  test('every endpoint and target: no prototype changes, the members stay data', async () => {
    const objectKeys = Object.getOwnPropertyNames(Object.prototype).sort();
    const arrayKeys = Object.getOwnPropertyNames(Array.prototype).sort();
    const statuses: string[] = [];
    for (const model of ['gpt', 'claude', 'gemini']) {
      for (const [path, body] of bodies(model)) {
        for (let round = 0; round < 2; round++) { // the second round is a cache lookup
          const res = await rig.app.request(path, {
            method: 'POST',
            headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
            body,
          }, { peer: '127.0.0.1:5555' });
          statuses.push(`${model} ${path} ${res.status}`);
          await res.text();
        }
      }
    }
    const o = {} as Record<string, unknown>;
    assert.equal(o.polluted, undefined);
    assert.equal(typeof o.toString, 'function');
    assert.equal(([] as unknown as Record<string, unknown>).polluted, undefined);
    assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), objectKeys);
    assert.deepEqual(Object.getOwnPropertyNames(Array.prototype).sort(), arrayKeys);
    assert.ok(statuses.some((s) => s.endsWith(' 200')), statuses.join('\n'));
    assert.ok(!statuses.some((s) => / 5\d\d$/.test(s)), statuses.join('\n'));
    // Native requests carry the members as plain data; none became a prototype on the way.
    const native = up.requests.find((r) => r.path === '/v1/chat/completions' && r.json);
    assert.ok(native, 'the OpenAI target was called');
    assert.match(native.body, /"__proto__":\{"polluted":"p1"/);
    for (const r of up.requests) {
      if (!r.json) continue;
      assert.equal(Object.getPrototypeOf(r.json), Object.prototype);
    }
  });

  test('the guardrail walker still reads a message that carries __proto__ members', async () => {
    const res = await rig.app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: `{"model":"gpt","messages":[{"role":"user","content":"forbiddenword",${EVIL}}]}`,
    }, { peer: '127.0.0.1:5555' });
    await res.text();
    assert.equal(res.status, 422);
  });
});
