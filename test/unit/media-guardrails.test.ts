// Guardrails on the audio, image and rerank endpoints (docs/media-endpoints.md "Guardrails"): the text AISIX
// scans — speech `input`, a form's or a generation's `prompt`, rerank's `query` and `documents` — blocked with
// AISIX's 422 before anything is sent, or masked in what the upstream receives (a form's prompt included);
// answers pass untouched, audio bytes included, whatever the output checks.
// Run: node --import tsx --test test/unit/media-guardrails.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { MEDIA_KEY, type MockMedia, startMockMedia } from '../support/mock-media.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-media-guarded';
let mock: MockMedia;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  mock = await startMockMedia();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${mock.base}" }
models:
  - { display_name: tts, provider_key: oa, model_name: tts-1, retries: 0 }
  - { display_name: whisper, provider_key: oa, model_name: whisper-1, retries: 0 }
  - { display_name: img, provider_key: oa, model_name: gpt-image-1, retries: 0 }
  - { display_name: rerank-en, provider_key: oa, model_name: rerank-english-v3.0, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - name: words
    kind: keyword
    created_at: "2024-01-01T00:00:00Z"
    patterns: [{ kind: literal, value: forbidden }]
  - name: pii
    kind: pii
    created_at: "2024-01-02T00:00:00Z"
    detectors: [{ type: email }]
`,
    { env: { CALLER: KEY } },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await mock.close();
});

const postJson = (path: string, body: unknown) =>
  app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const transcribe = (prompt: string) => {
  const form = new FormData();
  form.append('model', 'whisper');
  form.append('prompt', prompt);
  form.append('file', new File([new Uint8Array(10)], 'a.wav', { type: 'audio/wav' }));
  return app.request('/v1/audio/transcriptions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}` },
    body: form,
  });
};
const BLOCKED = {
  error: { message: "request blocked by content policy (guardrail 'words')", type: 'content_filter' },
};

describe('guardrails on audio, images and rerank', () => {
  test('blocked with 422 before anything is sent: speech, transcription, generation, rerank', async () => {
    const before = mock.requests.length;
    const answers = [
      await postJson('/v1/audio/speech', { model: 'tts', input: 'say forbidden', voice: 'alloy' }),
      await transcribe('a forbidden word'),
      await postJson('/v1/images/generations', { model: 'img', prompt: 'forbidden art' }),
      await postJson('/v1/rerank', { model: 'rerank-en', query: 'q', documents: ['ok', { text: 'forbidden' }] }),
    ];
    for (const res of answers) {
      assert.equal(res.status, 422);
      assert.deepEqual(await res.json(), BLOCKED);
    }
    assert.equal(mock.requests.length, before);
  });

  test("masked in what the upstream receives, a form's prompt included", async () => {
    const res = await transcribe('names: ann@example.com');
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { text: string }).text, 'heard 10 bytes (names: [EMAIL_REDACTED])');
    assert.deepEqual(mock.requests.at(-1)!.fields, [['model', 'whisper-1'], ['prompt', 'names: [EMAIL_REDACTED]']]);
    const rr = await postJson('/v1/rerank', { model: 'rerank-en', query: 'bob@example.com', documents: ['x'] });
    assert.equal(rr.status, 200);
    assert.equal(mock.requests.at(-1)!.json!.query, '[EMAIL_REDACTED]');
  });

  test('answers pass untouched: the audio bytes whole', async () => {
    const res = await postJson('/v1/audio/speech', { model: 'tts', input: 'big:200000', voice: 'alloy' });
    assert.equal(res.status, 200);
    assert.equal((await res.arrayBuffer()).byteLength, 200_000);
  });
});
