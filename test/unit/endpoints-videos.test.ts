// The videos routes through app.request() against a mock OpenAI and DashScope (docs/batch-files-endpoints.md
// "Videos"): the submit as each vendor expects it, the stateless id, the poll, the content proxied (OpenAI) or
// redirected (DashScope), and the refusals, with nothing sent upstream before them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeVideoId, encodeVideoId } from '../../src/proxy/videos.ts';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

let up: MockJobs;
let rig: RecordingGateway;

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${url}/v1" }
  - { display_name: dash, provider: alibaba, adapter: openai, secret: sk-upstream, api_base: "${url}/compatible-mode/v1" }
  - { display_name: other, provider: acme, adapter: openai, secret: sk-upstream, api_base: "${url}" }
models:
  - { display_name: sora, provider: openai, model_name: sora-2, provider_key: oai }
  - { display_name: wan, provider: alibaba, model_name: wan2.1-t2v-turbo, provider_key: dash }
  - { display_name: acme, provider: acme, model_name: a, provider_key: other }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: [sora, wan, acme] }
  - { display_name: wan-only, key_env: WAN, allowed_models: [wan] }
`;

const auth = (key = 'sk-app') => ({ authorization: `Bearer ${key}` });
const get = (path: string, key = 'sk-app') =>
  Promise.resolve(rig.app.request(path, { headers: auth(key) }, { peer: '127.0.0.1:5555' }));

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(resources(up.url), { APP: 'sk-app', WAN: 'sk-wan' });
});
after(() => up.close());

test('the video id carries the row, the caller name and the task; garbage decodes to nothing', () => {
  const id = encodeVideoId('row-1', 'sora', 'video:7');
  assert.deepEqual(decodeVideoId(id), { modelId: 'row-1', asked: 'sora', task: 'video:7' });
  assert.equal(decodeVideoId('!!'), undefined);
  assert.equal(decodeVideoId(Buffer.from('row::x').toString('base64url')), undefined);
});

describe('OpenAI (Sora)', () => {
  test('submit: seconds sent as a string, the answer names the caller model; poll; content proxied', async () => {
    const res = await rig.post(
      '/v1/videos',
      { model: 'sora', prompt: 'a cat', seconds: 4, size: '1280x720' },
      'sk-app',
    );
    assert.equal(res.status, 200);
    const v = await res.json();
    assert.equal(v.object, 'video');
    assert.equal(v.model, 'sora');
    assert.equal(v.status, 'queued');
    assert.equal(v.progress, 0);
    assert.equal(v.seconds, '4');
    assert.equal(v.size, '1280x720');
    const sent = up.received.at(-1)!;
    assert.equal(sent.path, '/v1/videos');
    assert.deepEqual(JSON.parse(sent.body.toString()), {
      model: 'sora-2',
      prompt: 'a cat',
      seconds: '4',
      size: '1280x720',
    });
    const task = decodeVideoId(v.id)!.task;

    const early = await get(`/v1/videos/${v.id}/content`);
    assert.equal(early.status, 400);
    assert.equal(
      (await early.json()).error.message,
      'request payload is invalid: video is not ready for download (status: queued); poll GET /v1/videos/{video_id} until status is "completed"',
    );

    Object.assign(up.videos.get(task)!, { status: 'completed', progress: 100 });
    const poll = await get(`/v1/videos/${v.id}`);
    assert.deepEqual(await poll.json(), {
      id: v.id,
      object: 'video',
      model: 'sora',
      status: 'completed',
      progress: 100,
      created_at: 0,
      seconds: '4',
    });
    const content = await get(`/v1/videos/${v.id}/content`);
    assert.equal(content.status, 200);
    assert.equal(content.headers.get('content-type'), 'video/mp4');
    assert.equal(content.headers.get('content-disposition'), 'attachment; filename="video.mp4"');
    assert.equal(await content.text(), 'MP4-BYTES');
    assert.equal(up.received.at(-1)?.headers.authorization, 'Bearer sk-upstream');
  });

  test("a multipart submit (OpenAI's Node SDK always sends one) is read for its text fields", async () => {
    const form = new FormData();
    form.append('model', 'sora');
    form.append('prompt', 'a dog');
    form.append('seconds', '8');
    const res = await rig.app.request('/v1/videos', { method: 'POST', headers: auth(), body: form });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).seconds, '8');
    assert.deepEqual(JSON.parse(up.received.at(-1)!.body.toString()), {
      model: 'sora-2',
      prompt: 'a dog',
      seconds: '8',
    });
  });

  test('a failed video: the poll names the error, the content is a 400', async () => {
    const v = await (await rig.post('/v1/videos', { model: 'sora', prompt: 'x' }, 'sk-app')).json();
    Object.assign(up.videos.get(decodeVideoId(v.id)!.task)!, {
      status: 'failed',
      error: { code: 'moderation_blocked', message: 'blocked' },
    });
    const poll = await (await get(`/v1/videos/${v.id}`)).json();
    assert.deepEqual(poll.error, { code: 'moderation_blocked', message: 'blocked' });
    const content = await get(`/v1/videos/${v.id}/content`);
    assert.equal(content.status, 400);
    assert.equal((await content.json()).error.message, 'request payload is invalid: video generation failed: blocked');
  });
});

describe('DashScope (Alibaba)', () => {
  test('submit with the async header at the host root; the completed video is a 302 to its URL', async () => {
    const res = await rig.post(
      '/v1/videos',
      { model: 'wan', prompt: 'waves', seconds: '5', size: '832x480' },
      'sk-app',
    );
    assert.equal(res.status, 200);
    const v = await res.json();
    const sent = up.received.at(-1)!;
    assert.equal(sent.path, '/api/v1/services/aigc/video-generation/video-synthesis');
    assert.equal(sent.headers['x-dashscope-async'], 'enable');
    assert.deepEqual(JSON.parse(sent.body.toString()), {
      model: 'wan2.1-t2v-turbo',
      input: { prompt: 'waves' },
      parameters: { duration: 5, size: '832*480' },
    });
    assert.equal(v.status, 'queued');
    const task = decodeVideoId(v.id)!.task;
    Object.assign(up.videos.get(task)!, { task_status: 'SUCCEEDED', video_url: 'https://cdn.example/v.mp4?sig=1' });
    const poll = await (await get(`/v1/videos/${v.id}`)).json();
    assert.equal(poll.status, 'completed');
    assert.equal(poll.seconds, '5');
    const content = await get(`/v1/videos/${v.id}/content`);
    assert.equal(content.status, 302);
    assert.equal(content.headers.get('location'), 'https://cdn.example/v.mp4?sig=1');
  });
});

describe('refusals', () => {
  test('in order, before any upstream call', async () => {
    const before = up.received.length;
    const cases: [unknown, string, number, string][] = [
      [{ prompt: 'x' }, 'sk-app', 400, 'request payload is invalid: invalid JSON request body'],
      [{ model: 'sora', prompt: 'x' }, 'sk-wan', 403, 'this API key may not use model "sora"'],
      [{ model: 'nope', prompt: 'x' }, 'sk-app', 403, 'this API key may not use model "nope"'],
      [
        { model: 'sora', prompt: 'x', seconds: 'ten' },
        'sk-app',
        400,
        'request payload is invalid: `seconds` must be a positive integer, got "ten"',
      ],
      [
        { model: 'sora', prompt: 'x', seconds: 0 },
        'sk-app',
        400,
        'request payload is invalid: `seconds` must be a positive integer',
      ],
      [{ model: 'sora', prompt: '  ' }, 'sk-app', 400, 'request payload is invalid: `prompt` must not be empty'],
      [{ model: 'acme', prompt: 'x' }, 'sk-app', 501, 'provider "acme" is not yet supported on /v1/videos'],
      [
        { model: 'sora', prompt: 'x', size: 'big' },
        'sk-app',
        400,
        'request payload is invalid: `size` must be formatted as WIDTHxHEIGHT (e.g. "1280x720"), got "big"',
      ],
    ];
    for (const [body, key, status, message] of cases) {
      const res = await rig.post('/v1/videos', body, key);
      assert.equal(res.status, status, JSON.stringify(body));
      assert.equal((await res.json()).error.message, message);
    }
    assert.equal(up.received.length, before);
  });

  test('a video the key may not see, or that never was: the same 404', async () => {
    const v = await (await rig.post('/v1/videos', { model: 'sora', prompt: 'x' }, 'sk-app')).json();
    const before = up.received.length;
    for (const [id, key] of [[v.id, 'sk-wan'], ['nope', 'sk-app'], [encodeVideoId('no-row', 'sora', 't'), 'sk-app']]) {
      const res = await get(`/v1/videos/${id}`, key);
      assert.equal(res.status, 404);
      assert.deepEqual((await res.json()).error, { message: `video "${id}" not found`, type: 'video_not_found' });
    }
    assert.equal(up.received.length, before);
  });

  test('a vendor 4xx keeps its status with code: message', async () => {
    const id = encodeVideoId(
      decodeVideoId((await (await rig.post('/v1/videos', { model: 'sora', prompt: 'x' }, 'sk-app')).json()).id)!
        .modelId,
      'sora',
      'video_missing',
    );
    const res = await get(`/v1/videos/${id}`);
    assert.equal(res.status, 404);
    assert.deepEqual((await res.json()).error, {
      message: 'not_found: Video video_missing not found',
      type: 'upstream_error',
    });
  });
});
