// Vertex and Bedrock keys on the endpoints beyond the model calls (docs/media-endpoints.md, docs/endpoints.md): AISIX
// reaches neither on audio, images, rerank, videos, files, batches, fine-tuning or realtime, and neither does Sluice.
// Each route refuses before anything is sent (realtime: test/unit/realtime-relay.test.ts), so a service-account JSON or an AWS key never goes out as a
// Bearer on an OpenAI path (AISIX's audio routes have no provider gate and would send it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

let up: MockJobs;
let rig: RecordingGateway;

const VERTEX_SECRET = JSON.stringify({ project: 'proj-1', region: 'us-central1', access_token: 'ya29.SECRET-vertex' });
const AWS_SECRET = JSON.stringify({ access_key_id: 'AKIDSECRET', secret_access_key: 'aws-SECRET-key' });

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: vx, adapter: vertex, api_key: '${VERTEX_SECRET}', api_base: "${url}" }
  - { display_name: aws, adapter: bedrock, provider: bedrock, api_key: '${AWS_SECRET}', api_base: "${url}" }
models:
  - { display_name: gemini, provider_key: vx, model_name: gemini-2.0-flash }
  - { display_name: nova, provider_key: aws, model_name: amazon.nova-lite-v1:0 }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: ["*"] }
`;

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(resources(up.url), { APP: 'sk-app' });
});
after(() => up.close());

function form(model: string): FormData {
  const f = new FormData();
  f.set('model', model);
  f.set('file', new Blob([new Uint8Array(64)], { type: 'audio/wav' }), 'a.wav');
  f.set('purpose', 'batch');
  return f;
}

const request = (path: string, init: RequestInit) =>
  Promise.resolve(rig.app.request(path, {
    ...init,
    headers: { authorization: 'Bearer sk-app', ...(init.headers as Record<string, string> | undefined) },
  }, { peer: '127.0.0.1:1' }));

test('a Vertex or Bedrock model on every media route: the 400 naming the adapter, nothing sent', async () => {
  const before = up.received.length;
  for (const [model, adapter] of [['gemini', 'vertex'], ['nova', 'bedrock']] as const) {
    const json = {
      '/v1/audio/speech': { model, input: 'hi', voice: 'alloy' },
      '/v1/images/generations': { model, prompt: 'a cat' },
      '/v1/rerank': { model, query: 'q', documents: ['d'] },
    };
    for (const [path, body] of Object.entries(json)) {
      const res = await rig.post(path, body, 'sk-app');
      assert.equal(res.status, 400, `${model} ${path}`);
      assert.match((await res.json()).error.message, new RegExp(`adapter "${adapter}"\\) does not serve`));
    }
    for (const path of ['/v1/audio/transcriptions', '/v1/audio/translations', '/v1/images/edits']) {
      const res = await request(path, { method: 'POST', body: form(model) });
      assert.equal(res.status, 400, `${model} ${path}`);
      assert.match((await res.json()).error.message, new RegExp(`adapter "${adapter}"\\) does not serve`));
    }
  }
  assert.equal(up.received.length, before);
});

test('a Vertex or Bedrock model on videos and jobs: each route its own refusal, nothing sent', async () => {
  const before = up.received.length;
  for (const model of ['gemini', 'nova']) {
    const video = await rig.post('/v1/videos', { model, prompt: 'a cat' }, 'sk-app');
    assert.equal(video.status, 501, model);
    assert.match((await video.json()).error.message, /is not yet supported on \/v1\/videos/);

    const files = await request(`/v1/files?model=${model}`, { method: 'GET' });
    assert.equal(files.status, 400, model);
    assert.match((await files.json()).error.message, /not supported on the files\/batches\/fine-tuning surface yet/);
    const upload = await request('/v1/files', { method: 'POST', body: form(model) });
    assert.equal(upload.status, 400, model);
    await upload.body?.cancel();
    const batch = await request(`/v1/batches?model=${model}`, {
      method: 'POST',
      body: JSON.stringify({ input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    });
    assert.equal(batch.status, 400, model);
    await batch.body?.cancel();
  }
  assert.equal(up.received.length, before);
});
