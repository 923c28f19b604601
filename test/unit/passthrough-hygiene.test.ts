// Path and body hygiene shared by every endpoint (docs/endpoints.md "Path parameters and upstream bases"):
// malformed `:param` encodings, AISIX's direct-HTTP upstream bases, upstream error bodies inside
// `error.message` scrubbed of secrets, and native Responses joined as AISIX joins it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodePathParam, pathParams } from '../../src/http/path-param.ts';
import { openaiEnvelope, ProxyError, rawUpstreamError } from '../../src/http/errors.ts';
import { scrubText } from '../../src/http/scrub.ts';
import { directBase, directUrl } from '../../src/providers/direct-url.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { recordingGateway } from '../support/recording-gateway.ts';

describe('path parameters', () => {
  test('a malformed percent-encoding is AISIX’s 400; a good one decodes', () => {
    for (const raw of ['%ff', 'a%', '%zz', '%e2%82']) {
      const r = decodePathParam(raw);
      assert.ok(r instanceof ProxyError, raw);
      assert.equal(r.status, 400);
      assert.equal(
        openaiEnvelope(r),
        '{"error":{"message":"request payload is invalid: invalid path parameter","type":"invalid_request_error"}}',
      );
    }
    assert.equal(decodePathParam('file-%41bc'), 'file-Abc');
    assert.equal(decodePathParam('plain'), 'plain');
    assert.deepEqual(pathParams('/v1/files/:id/content', '/v1/files/f%2D1/content'), { id: 'f-1' });
    assert.ok(pathParams('/v1/videos/:id', '/v1/videos/%ff') instanceof ProxyError);
    assert.equal(pathParams('/v1/videos/:id', '/v1/files/x'), undefined);
  });
});

describe('direct-HTTP upstream bases (AISIX build_openai_url)', () => {
  test('a path is kept, a bare host gets /v1, one pasted suffix is taken off', () => {
    assert.equal(directUrl('https://qianfan.example/v2', '/audio/speech'), 'https://qianfan.example/v2/audio/speech');
    assert.equal(
      directUrl('https://open.bigmodel.cn/api/paas/v4/', '/rerank'),
      'https://open.bigmodel.cn/api/paas/v4/rerank',
    );
    assert.equal(directUrl('https://api.deepseek.com', '/audio/speech'), 'https://api.deepseek.com/v1/audio/speech');
    assert.equal(directBase('openai', undefined), 'https://api.openai.com/v1');
    assert.equal(directBase('deepseek', '  '), undefined);
    assert.equal(directBase('x', 'https://h.example/v1/chat/completions'), 'https://h.example/v1');
    assert.equal(directBase('x', 'https://h.example/v1/'), 'https://h.example/v1');
  });
});

describe('upstream error bodies inside error.message', () => {
  test('scrubbed of secrets before the cut; 5xx becomes 502; a 429 keeps Retry-After', () => {
    const secret = 'sk-upstream-SECRET-123456';
    const scrub = (t: string, max?: number) => scrubText(t, [secret], max);
    const e = rawUpstreamError(400, `{"error":{"message":"bad key ${secret}"}}`, scrub);
    assert.equal(e.status, 400);
    assert.equal(e.type, 'upstream_error');
    assert.equal(e.message, '{"error":{"message":"bad key [redacted]"}}');
    const long = rawUpstreamError(404, `${'x'.repeat(1020)}${secret}`, scrub);
    assert.ok(!long.message.includes('sk-up'), 'no piece of the secret survives the cut');
    assert.ok(long.message.length <= 1024);
    assert.deepEqual(
      [rawUpstreamError(503, 'down', scrub).status, rawUpstreamError(503, 'down', scrub).message],
      [502, 'upstream returned 503'],
    );
    assert.deepEqual(rawUpstreamError(429, 'slow', scrub, '7').headers, { 'retry-after': '7' });
  });
});

describe('native Responses to a bare-host OpenAI-compatible key', () => {
  let mock: MockUpstream;
  before(async () => {
    mock = await startMockUpstream();
  });
  after(() => mock.close());

  test('goes to <host>/v1/responses (AISIX), while chat keeps <host>/chat/completions', async () => {
    const g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: local, provider: openai, api_key: sk-local-123456, api_base: "${mock.url}" }
models:
  - { display_name: m, provider_key: local, model_name: m-up, retries: 0 }
api_keys:
  - { display_name: c, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER: 'sk-caller-hyg-1' },
    );
    await (await g.post('/v1/responses', { model: 'm', input: 'hi' }, 'sk-caller-hyg-1')).text();
    await (await g.post(
      '/v1/chat/completions',
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      'sk-caller-hyg-1',
    ))
      .text();
    assert.deepEqual(g.sent.map((r) => r.url), [`${mock.url}/v1/responses`, `${mock.url}/chat/completions`]);
  });
});
