// Files, batches, fine-tuning and videos carry content no guardrail step checks (docs/security.md "Where Sluice
// fails open"): where a guardrail applies, an upload, a create or a video prompt is refused before anything is
// sent, never relayed unchecked; a call that carries no content (a list) still passes.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

let up: MockJobs;
let rig: RecordingGateway;

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(
    `_format_version: "1"
provider_keys:
  - { display_name: compat, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${up.url}" }
models:
  - { display_name: batch-mini, provider: openai, model_name: gpt-4o-mini, provider_key: compat }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: [batch-mini] }
guardrails:
  - name: words
    kind: keyword
    created_at: "2024-01-01T00:00:00Z"
    patterns: [{ kind: literal, value: forbidden }]
`,
    { APP: 'sk-app' },
  );
});
after(() => up.close());

const auth = { authorization: 'Bearer sk-app' };

test('an upload under a guardrail is refused before the upstream sees it', async () => {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('model', 'batch-mini');
  form.append('file', new Blob(['{"custom_id":"1","body":"forbidden"}\n'], { type: 'application/jsonl' }), 'in.jsonl');
  const before = up.received.length;
  const res = await rig.app.request('/v1/files', { method: 'POST', headers: auth, body: form }, {
    peer: '127.0.0.1:1',
  });
  assert.equal(res.status, 400);
  const body = await res.json() as { error: { message: string } };
  assert.match(body.error.message, /guardrails apply to model "batch-mini" and cannot check \/v1\/files/);
  assert.equal(up.received.length, before, 'nothing was sent upstream');
});

test('a video prompt under a guardrail is refused before the upstream sees it', async () => {
  const before = up.received.length;
  const res = await rig.app.request('/v1/videos', {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'batch-mini', prompt: 'forbidden scene' }),
  }, { peer: '127.0.0.1:1' });
  assert.equal(res.status, 400);
  assert.equal(up.received.length, before, 'nothing was sent upstream');
});

test('a call that carries no content (a list) still passes', async () => {
  const res = await rig.app.request('/v1/files?model=batch-mini', { headers: auth }, { peer: '127.0.0.1:1' });
  assert.equal(res.status, 200);
});
