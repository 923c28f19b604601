// A caller's model name through a wildcard alias on the media, jobs and videos routes (docs/security.md "Upstream
// URLs and credentials"; docs/endpoints.md "Path parameters and upstream bases"): where the name reaches an upstream
// URL's path (an Azure deployment) one holding `\`, `..` or an escaped `.`, `/` or `\` is the 400 naming the field and
// nothing is sent; where it travels in a body or is only a routing hint, the URL the gateway builds is unmoved.
// (Realtime's query: test/unit/realtime-session.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

let up: MockJobs;
let rig: RecordingGateway;

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${url}/v1" }
  - { display_name: az, provider: azure, adapter: azure-openai, secret: az-secret, api_base: "${url}" }
models:
  - { display_name: "oai/*", provider: openai, model_name: "*", provider_key: oai }
  - { display_name: "az/*", provider: azure, model_name: "*", provider_key: az }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: ["*"] }
`;

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(resources(up.url), { APP: 'sk-app' });
});
after(() => up.close());

const TRAVERSALS = ['../x', 'a\\b', '%2e%2e', 'a%2Fb', '%5C', '%252e%252e', '..'];

describe('a model name that reaches a URL path', () => {
  test('Azure media (the deployment): 400 naming the field, nothing sent', async () => {
    const before = up.received.length;
    for (const name of TRAVERSALS) {
      for (
        const [path, body] of [
          ['/v1/audio/speech', { model: `az/${name}`, input: 'hi', voice: 'alloy' }],
          ['/v1/images/generations', { model: `az/${name}`, prompt: 'a cat' }],
        ] as const
      ) {
        const res = await rig.post(path, body, 'sk-app');
        assert.equal(res.status, 400, `${path} ${name}`);
        const message = (await res.json()).error.message as string;
        assert.match(message, /deployment \(the request's model, or the model's model_name\)/, message);
      }
    }
    assert.equal(up.received.length, before);
  });
});

describe('a model name that travels in a body or a hint', () => {
  test('OpenAI media: the URL is the endpoint, the name only in the body', async () => {
    const res = await rig.post('/v1/audio/speech', { model: 'oai/../x', input: 'hi', voice: 'alloy' }, 'sk-app');
    await res.body?.cancel();
    const sent = up.received.at(-1)!;
    assert.equal(sent.path, '/v1/audio/speech');
    assert.equal(JSON.parse(sent.body.toString()).model, '../x');
  });

  test('videos: the submit goes to /v1/videos whatever the name', async () => {
    const res = await rig.post('/v1/videos', { model: 'oai/..%2Fx', prompt: 'a cat' }, 'sk-app');
    await res.body?.cancel();
    const sent = up.received.at(-1)!;
    assert.equal(sent.path, '/v1/videos');
    assert.equal(JSON.parse(sent.body.toString()).model, '..%2Fx');
  });

  test('jobs: a `model` hint is never sent; the list URL is unmoved', async () => {
    const res = await Promise.resolve(rig.app.request(`/v1/files?model=${encodeURIComponent('oai/../../x')}`, {
      headers: { authorization: 'Bearer sk-app', 'x-aisix-model': 'oai/%2e%2e' },
    }, { peer: '127.0.0.1:1' }));
    await res.body?.cancel();
    const sent = up.received.at(-1)!;
    assert.equal(sent.path, '/v1/files');
    assert.equal(sent.headers['x-aisix-model'], undefined);
  });
});
