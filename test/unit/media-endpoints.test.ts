// The audio, image and rerank endpoints through app.request() (docs/media-endpoints.md) against a mock that
// checks what OpenAI's and Cohere's APIs check: the model names the caller's alias resolves to, multipart forms
// re-encoded with their files' names and types, AISIX's refusals in its words with the upstream untouched, the
// usage the upstream reports committed to the caller's limits, and the audio basis on the access-log line.
// Run: node --import tsx --test test/unit/media-endpoints.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { MEDIA_KEY, type MockMedia, startMockMedia, wavHeader } from '../support/mock-media.ts';
import { sumSamples } from '../support/metrics.ts';
import { BASE_CONFIG, gatewayWith, midMinute, type TestPlatform } from '../support/platform.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-media-caller';
const LIMITED = 'sk-media-limited';
const TPM = 'sk-media-tpm';
const ONE = 'sk-media-one-at-a-time';
const LIMIT = 262_144;

let mock: MockMedia;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

const resources = (base: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${base}" }
  - { display_name: co, provider: cohere, adapter: openai, api_key: ${MEDIA_KEY}, api_base: "${base}" }
  - { display_name: strict, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${base}", drop_body_fields: [language, user] }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "http://127.0.0.1:9" }
  - display_name: az
    provider: azure
    adapter: azure-openai
    api_key: ${MEDIA_KEY}
    api_base: "${base.replace(/\/v1$/, '')}?api-version=2025-04-01-preview"
models:
  - { display_name: tts, provider_key: oa, model_name: tts-1, retries: 0 }
  - { display_name: whisper, provider_key: oa, model_name: whisper-1, retries: 0 }
  - { display_name: transcribe, provider_key: oa, model_name: gpt-4o-transcribe, retries: 0 }
  - { display_name: img, provider_key: oa, model_name: gpt-image-1, retries: 0 }
  - { display_name: dalle, provider_key: oa, model_name: dall-e-3, retries: 0 }
  - { display_name: rerank-en, provider_key: co, model_name: rerank-english-v3.0, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-x, retries: 0 }
  - { display_name: down, provider_key: oa, model_name: broken, retries: 0 }
  - { display_name: whisper-strict, provider_key: strict, model_name: whisper-1, retries: 0 }
  - { display_name: tts-quick, provider_key: oa, model_name: tts-1, retries: 0, stream_timeout: 300 }
  - { display_name: az-whisper, provider_key: az, model_name: whisper-1, retries: 0 }
  - { display_name: az-tts, provider_key: az, model_name: tts-1, retries: 0 }
  - { display_name: az-rerank, provider_key: az, model_name: rerank-english-v3.0, retries: 0 }
  - { display_name: ears, routing: { targets: [{ model: down, priority: 0 }, { model: whisper, priority: -1 }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: limited, key_env: LIMITED, allowed_models: [tts] }
  - { display_name: tpm, key_env: TPM, allowed_models: ["*"], rate_limit: { tpm: 30 } }
  - { display_name: one, key_env: ONE, allowed_models: ["*"], rate_limit: { concurrency: 1 } }
`;

before(async () => {
  mock = await startMockMedia();
  ({ gw, platform } = await gatewayWith(resources(mock.base), {
    config: `${BASE_CONFIG}\nupstream: { retries: 0 }\n`.replace(
      'proxy: { addr: "127.0.0.1:0" }',
      `proxy: { addr: "127.0.0.1:0", request_body_limit_bytes: ${LIMIT} }`,
    ),
    env: { CALLER: KEY, LIMITED, TPM, ONE },
    now: midMinute(),
  }));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await mock.close();
});

const postJson = (path: string, body: unknown, key = KEY) =>
  app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const postForm = (path: string, form: FormData, key = KEY) =>
  app.request(path, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
const accessLine = (id: string | null) =>
  platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === id);
const tokens = (model: string) => sumSamples(gw.metrics.render(), 'aisix_llm_total_tokens_total', { model }) ?? 0;
const audio = (size: number, name = 'call.wav', type = 'audio/wav') =>
  new File([new Uint8Array(size).fill(7)], name, { type });

/** A multipart body written by hand (raw bytes where a FormData could not carry them). */
function rawForm(parts: { name: string; filename?: string; type?: string; data: Uint8Array | string }[]) {
  const boundary = 'raw-boundary-1';
  const enc = new TextEncoder();
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename) head += `; filename="${p.filename}"`;
    head += `\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`;
    chunks.push(enc.encode(head), typeof p.data === 'string' ? enc.encode(p.data) : p.data, enc.encode('\r\n'));
  }
  chunks.push(enc.encode(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

describe('POST /v1/audio/speech', () => {
  test('relays the audio bytes with their content type; the alias resolves to the upstream name', async () => {
    const res = await postJson('/v1/audio/speech', { model: 'tts', input: 'big:300000', voice: 'alloy' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(bytes.length, 300_000);
    assert.ok(bytes.every((b) => b === 0x55));
    const seen = mock.requests.at(-1)!;
    assert.equal(seen.path, '/v1/audio/speech');
    assert.deepEqual(seen.json, { model: 'tts-1', input: 'big:300000', voice: 'alloy' });
    const line = accessLine(res.headers.get('x-aisix-request-id'))!;
    assert.equal(line.status, 200);
    assert.equal(line.model, 'tts');
    assert.equal(line.input_characters, 10);
  });

  test('counted in the LLM families under its own endpoint, by the alias', () => {
    const text = gw.metrics.render();
    const n = sumSamples(text, 'aisix_llm_requests_total', { endpoint: '/v1/audio/speech', model: 'tts' }) ?? 0;
    assert.ok(n >= 1, 'no aisix_llm_requests_total sample for /v1/audio/speech');
  });

  test('a caller that leaves mid-audio: its concurrency slot free again, the request recorded as left', async () => {
    const res = await postJson('/v1/audio/speech', { model: 'tts', input: 'big:50000000', voice: 'alloy' }, ONE);
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    const again = await postJson('/v1/audio/speech', { model: 'tts', input: 'hi', voice: 'alloy' }, ONE);
    assert.equal(again.status, 200);
    assert.equal((await again.arrayBuffer()).byteLength, 8);
    const line = accessLine(res.headers.get('x-aisix-request-id'))!;
    assert.equal(line.error_kind, 'client_closed');
  });

  test('no head within the stream budget: 504; silence after it: the body cut short, recorded', async () => {
    const hang = await postJson('/v1/audio/speech', { model: 'tts-quick', input: 'hang', voice: 'alloy' });
    assert.equal(hang.status, 504);
    assert.equal(
      ((await hang.json()) as { error: { message: string } }).error.message,
      'upstream request timed out after 300ms',
    );
    const stall = await postJson('/v1/audio/speech', { model: 'tts-quick', input: 'stall', voice: 'alloy' });
    assert.equal(stall.status, 200);
    await assert.rejects(stall.arrayBuffer());
    const id = stall.headers.get('x-aisix-request-id');
    await until(() => accessLine(id) !== undefined, 5000, 'the access-log line of the stalled answer');
    assert.equal(accessLine(id)!.error_kind, 'upstream_timeout');
  });

  test('another format: its own content type', async () => {
    const res = await postJson('/v1/audio/speech', {
      model: 'tts',
      input: 'hi',
      voice: 'alloy',
      response_format: 'wav',
    });
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    assert.equal((await res.arrayBuffer()).byteLength, 8);
  });

  test("the upstream's 400 in the error envelope, with its message", async () => {
    const res = await postJson('/v1/audio/speech', { model: 'tts', input: 'hi' });
    assert.equal(res.status, 400);
    const body = await res.json() as { error: { message: string; type: string } };
    assert.match(body.error.message, /voice is required/);
  });

  test('a body that is not JSON: AISIX 400, nothing sent', async () => {
    const before = mock.requests.length;
    const res = await app.request('/v1/audio/speech', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'text/plain' },
      body: 'model=tts',
    });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      error: { message: 'request payload is invalid: invalid JSON request body', type: 'invalid_request_error' },
    });
    assert.equal(mock.requests.length, before);
  });

  test('a model the key may not use: 403; an unknown one: 404; no key: 401', async () => {
    assert.equal(
      (await postJson('/v1/audio/speech', { model: 'whisper', input: 'x', voice: 'a' }, LIMITED)).status,
      403,
    );
    assert.equal((await postJson('/v1/audio/speech', { model: 'nope', input: 'x', voice: 'a' })).status, 404);
    const res = await app.request('/v1/audio/speech', { method: 'POST', body: '{}' });
    assert.equal(res.status, 401);
  });

  test('an adapter that cannot serve it: the 400 the other endpoints give, nothing sent', async () => {
    const res = await postJson('/v1/audio/speech', { model: 'claude', input: 'x', voice: 'a' });
    assert.equal(res.status, 400);
    const body = await res.json() as { error: { message: string } };
    assert.match(body.error.message, /adapter "anthropic"\) does not serve audio_speech/);
  });
});

describe('POST /v1/audio/transcriptions and translations', () => {
  test('the form is re-encoded: every field, the file with its name and type, the upstream model', async () => {
    const form = new FormData();
    form.append('file', audio(50_000));
    form.append('model', 'whisper');
    form.append('prompt', 'Ünïcode names');
    form.append('timestamp_granularities[]', 'word');
    form.append('timestamp_granularities[]', 'segment');
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /application\/json/);
    const body = await res.json() as { text: string };
    assert.equal(body.text, 'heard 50000 bytes (Ünïcode names)');
    const seen = mock.requests.at(-1)!;
    assert.match(seen.contentType, /^multipart\/form-data; boundary=/);
    assert.deepEqual(seen.fields, [
      ['model', 'whisper-1'],
      ['prompt', 'Ünïcode names'],
      ['timestamp_granularities[]', 'word'],
      ['timestamp_granularities[]', 'segment'],
    ]);
    assert.deepEqual(seen.files, [{ field: 'file', filename: 'call.wav', type: 'audio/wav', size: 50_000 }]);
    const line = accessLine(res.headers.get('x-aisix-request-id'))!;
    assert.equal(line.model, 'whisper');
    assert.equal(line.audio_duration_seconds, 3); // whisper's `usage.seconds`
  });

  test("a WAV upload whose answer states no duration: the header's", async () => {
    const form = new FormData();
    form.append('model', 'whisper');
    form.append('response_format', 'text');
    form.append('file', new File([wavHeader(96_000), new Uint8Array(96_000)], 'speech.wav', { type: 'audio/wav' }));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(accessLine(res.headers.get('x-aisix-request-id'))!.audio_duration_seconds, 3);
  });

  test('a text answer is relayed as text; verbose_json gives its duration', async () => {
    const form = new FormData();
    form.append('model', 'whisper');
    form.append('response_format', 'text');
    form.append('file', audio(10, 'a.mp3', 'audio/mpeg'));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/plain/);
    assert.equal(await res.text(), 'heard 10 bytes\n');
    const verbose = new FormData();
    verbose.append('model', 'whisper');
    verbose.append('response_format', 'verbose_json');
    verbose.append('file', audio(10));
    const v = await postForm('/v1/audio/translations', verbose);
    assert.equal(((await v.json()) as { task: string }).task, 'translate');
    assert.equal(accessLine(v.headers.get('x-aisix-request-id'))!.audio_duration_seconds, 8.5);
  });

  test("a token-billed model's usage is counted and committed to the caller's tpm", async () => {
    const before = tokens('transcribe');
    const form = () => {
      const f = new FormData();
      f.append('model', 'transcribe');
      f.append('file', audio(100));
      return f;
    };
    const first = await postForm('/v1/audio/transcriptions', form(), TPM);
    assert.equal(first.status, 200);
    await first.text();
    assert.equal(tokens('transcribe') - before, 20);
    const second = await postForm('/v1/audio/transcriptions', form(), TPM);
    assert.equal(second.status, 200);
    await second.text();
    // 30 tokens a minute: 40 used, so the third is over the limit.
    const third = await postForm('/v1/audio/transcriptions', form(), TPM);
    assert.equal(third.status, 429);
  });

  test('a routing model fails over from an upstream that answers 500: the form is sent again whole', async () => {
    const before = mock.requests.length;
    const form = new FormData();
    form.append('model', 'ears');
    form.append('file', audio(4096));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { text: string }).text, 'heard 4096 bytes');
    const tried = mock.requests.slice(before);
    assert.deepEqual(tried.map((r) => r.files?.[0]?.size), [undefined, 4096]);
    assert.deepEqual(tried.map((r) => r.fields?.find(([k]) => k === 'model')?.[1]), [undefined, 'whisper-1']);
    assert.equal(res.headers.get('x-aisix-served-by'), 'whisper');
  });

  test('stream=true: the SSE relayed as it came; its usage read from the last event', async () => {
    const before = tokens('transcribe');
    const form = new FormData();
    form.append('model', 'transcribe');
    form.append('stream', 'true');
    form.append('file', audio(77));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const text = await res.text();
    assert.match(text, /^data: \{"type":"transcript.text.delta","delta":"heard"\}\n\n/);
    assert.match(text, /"type":"transcript.text.done"/);
    assert.equal(tokens('transcribe') - before, 13);
  });

  test('a content type that is not multipart: AISIX 400 after authentication, nothing sent', async () => {
    const before = mock.requests.length;
    const res = await postJson('/v1/audio/transcriptions', { model: 'whisper' });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      error: { message: 'request payload is invalid: invalid multipart form data', type: 'invalid_request_error' },
    });
    const unauthenticated = await app.request('/v1/audio/transcriptions', { method: 'POST', body: 'x' });
    assert.equal(unauthenticated.status, 401);
    assert.equal(mock.requests.length, before);
  });

  test('a prompt that is not UTF-8: 400, the upstream untouched', async () => {
    const before = mock.requests.length;
    const { body, contentType } = rawForm([
      { name: 'model', data: 'whisper' },
      { name: 'prompt', data: new Uint8Array([0x68, 0xff, 0xfe, 0x69]) },
      { name: 'file', filename: 'a.wav', type: 'audio/wav', data: new Uint8Array(10) },
    ]);
    const res = await app.request('/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': contentType },
      body,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      error: {
        message: 'request payload is invalid: `prompt` field is not valid UTF-8',
        type: 'invalid_request_error',
      },
    });
    assert.equal(mock.requests.length, before);
  });

  test('repeated fields reach the upstream as sent, a first one that is not UTF-8 included', async () => {
    const { body, contentType } = rawForm([
      { name: 'model', data: 'whisper' },
      { name: 'tag', data: new Uint8Array([0xff, 0x61]) },
      { name: 'tag', data: 'second' },
      { name: 'file', filename: 'a.wav', type: 'audio/wav', data: new Uint8Array(10) },
    ]);
    const res = await app.request('/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': contentType },
      body,
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.deepEqual(mock.requests.at(-1)!.fields, [['model', 'whisper-1'], ['tag', '\ufffda'], ['tag', 'second']]);
  });

  test("the key's drop_body_fields drop a form's fields, every part of the name", async () => {
    const form = new FormData();
    form.append('model', 'whisper-strict');
    form.append('language', 'en');
    form.append('user', 'u1');
    form.append('user', 'u2');
    form.append('prompt', 'kept');
    form.append('file', audio(12));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.deepEqual(mock.requests.at(-1)!.fields, [['model', 'whisper-1'], ['prompt', 'kept']]);
  });

  test('no model field: AISIX 400; a broken form: 400', async () => {
    const form = new FormData();
    form.append('file', audio(10));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 400);
    assert.equal(
      ((await res.json()) as { error: { message: string } }).error.message,
      'request payload is invalid: `model` field missing from form',
    );
    const broken = await app.request('/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'multipart/form-data; boundary=xyz' },
      body: '--xyz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n',
    });
    assert.equal(broken.status, 400);
    assert.match(((await broken.json()) as { error: { message: string } }).error.message, /multipart read error/);
  });

  test('an undeclared length over the limit: 413 once the limit is passed, the rest never read', async () => {
    const before = mock.requests.length;
    let pulled = 0;
    const chunk = new Uint8Array(16_384);
    const head = new TextEncoder().encode(
      '--b\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n',
    );
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(head);
      },
      pull(c) {
        pulled += chunk.length;
        if (pulled > 100 * LIMIT) c.close();
        else c.enqueue(chunk);
      },
    });
    const res = await app.request('/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'multipart/form-data; boundary=b' },
      body,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
    assert.ok(pulled < 2 * LIMIT, `read ${pulled} bytes of an over-limit body`);
    assert.equal(mock.requests.length, before);
  });
});

describe('POST /v1/images/generations and /v1/images/edits', () => {
  test("generations: the upstream's JSON, its tokens counted", async () => {
    const before = tokens('img');
    const res = await postJson('/v1/images/generations', { model: 'img', prompt: 'a cat', size: '1024x1024' });
    assert.equal(res.status, 200);
    const body = await res.json() as { data: { b64_json: string }[] };
    assert.equal(Buffer.from(body.data[0]!.b64_json, 'base64').toString(), 'image of a cat');
    assert.deepEqual(mock.requests.at(-1)!.json, { model: 'gpt-image-1', prompt: 'a cat', size: '1024x1024' });
    assert.equal(tokens('img') - before, 1067);
  });

  test('generations with stream=true: 400, nothing sent', async () => {
    const before = mock.requests.length;
    const res = await postJson('/v1/images/generations', { model: 'img', prompt: 'a cat', stream: true });
    assert.equal(res.status, 400);
    assert.equal(
      ((await res.json()) as { error: { message: string } }).error.message,
      'request payload is invalid: `stream` is not supported on /v1/images/generations',
    );
    assert.equal(mock.requests.length, before);
  });

  test('an answer without usage (dall-e) charges nothing', async () => {
    const before = tokens('dalle');
    const res = await postJson('/v1/images/generations', { model: 'dalle', prompt: 'a dog' });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(tokens('dalle'), before);
  });

  test('edits: repeated images and the mask re-sent as files', async () => {
    const form = new FormData();
    form.append('model', 'img');
    form.append('image[]', new File([new Uint8Array(64)], 'a.png', { type: 'image/png' }));
    form.append('image[]', new File([new Uint8Array(32)], 'b.png', { type: 'image/png' }));
    form.append('mask', new File([new Uint8Array(16)], 'mask.png', { type: 'image/png' }));
    form.append('prompt', 'add a hat');
    const res = await postForm('/v1/images/edits', form);
    assert.equal(res.status, 200);
    assert.equal(
      Buffer.from(((await res.json()) as { data: { b64_json: string }[] }).data[0]!.b64_json, 'base64').toString(),
      'edited 2',
    );
    const seen = mock.requests.at(-1)!;
    assert.deepEqual(seen.fields, [['model', 'gpt-image-1'], ['prompt', 'add a hat']]);
    assert.deepEqual(seen.files!.map((f) => [f.field, f.filename, f.type, f.size]), [
      ['image[]', 'a.png', 'image/png', 64],
      ['image[]', 'b.png', 'image/png', 32],
      ['mask', 'mask.png', 'image/png', 16],
    ]);
  });

  test('edits with stream=true: AISIX 400', async () => {
    const form = new FormData();
    form.append('model', 'img');
    form.append('stream', 'true');
    form.append('image', new File([new Uint8Array(4)], 'a.png', { type: 'image/png' }));
    const res = await postForm('/v1/images/edits', form);
    assert.equal(res.status, 400);
    assert.equal(
      ((await res.json()) as { error: { message: string } }).error.message,
      'request payload is invalid: `stream` is not supported on /v1/images/edits',
    );
  });
});

describe('POST /v1/rerank', () => {
  test("relays the answer; Cohere's billed input tokens are counted", async () => {
    const before = tokens('rerank-en');
    const res = await postJson('/v1/rerank', { model: 'rerank-en', query: 'q', documents: ['a', 'b'], top_n: 2 });
    assert.equal(res.status, 200);
    const body = await res.json() as { id: string; results: unknown[] };
    assert.equal(body.id, 'rr-1');
    assert.equal(body.results.length, 2);
    assert.equal(mock.requests.at(-1)!.json!.model, 'rerank-english-v3.0');
    assert.equal(tokens('rerank-en') - before, 42);
    const line = accessLine(res.headers.get('x-aisix-request-id'))!;
    assert.equal(line.total_tokens, 42);
  });

  test('no model: 400 naming the field', async () => {
    const res = await postJson('/v1/rerank', { query: 'q', documents: [] });
    assert.equal(res.status, 400);
  });
});

describe('Azure OpenAI', () => {
  test('transcriptions and speech on the deployment URL with api-key and api-version', async () => {
    const form = new FormData();
    form.append('model', 'az-whisper');
    form.append('file', audio(321));
    const res = await postForm('/v1/audio/transcriptions', form);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { text: string }).text, 'heard 321 bytes');
    const seen = mock.requests.at(-1)!;
    assert.deepEqual(seen.azure, { deployment: 'whisper-1', apiVersion: '2025-04-01-preview' });
    assert.equal(seen.path, '/v1/audio/transcriptions');
    const speech = await postJson('/v1/audio/speech', { model: 'az-tts', input: 'hello', voice: 'alloy' });
    assert.equal(speech.status, 200);
    assert.equal((await speech.arrayBuffer()).byteLength, 20);
    assert.deepEqual(mock.requests.at(-1)!.azure, { deployment: 'tts-1', apiVersion: '2025-04-01-preview' });
  });

  test('rerank is no Azure endpoint: the 400 of an adapter that cannot serve it, nothing sent', async () => {
    const before = mock.requests.length;
    const res = await postJson('/v1/rerank', { model: 'az-rerank', query: 'q', documents: ['a'] });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /does not serve rerank/);
    assert.equal(mock.requests.length, before);
  });
});
