// The files and batches routes through app.request() against a mock OpenAI (docs/batch-files-endpoints.md):
// the upload relayed as a new form without the routing hint, routed ids out and in, model selection, refusals
// before any upstream call, upstream refusals relayed, the Azure URL rule and a completed batch's accounting.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeRoutedId, encodeRoutedId } from '../../src/endpoints/routed-id.ts';
import { sumBatchOutput } from '../../src/endpoints/batch-usage.ts';
import { urlOf } from '../../src/endpoints/jobs-url.ts';
import type { JobTarget } from '../../src/endpoints/jobs-target.ts';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { until } from '../support/until.ts';
import { BASE_CONFIG } from '../support/platform.ts';

let up: MockJobs;
let rig: RecordingGateway;

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: compat, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${url}" }
  - { display_name: claude, provider: anthropic, adapter: anthropic, secret: sk-a, api_base: "${url}" }
models:
  - { display_name: batch-mini, provider: openai, model_name: gpt-4o-mini, provider_key: compat, cost: { input_per_1k: 1, output_per_1k: 2 } }
  - { display_name: other, provider: openai, model_name: gpt-4o, provider_key: compat }
  - { display_name: claude, provider: anthropic, model_name: claude-x, provider_key: claude }
  - { display_name: group, routing: { strategy: round_robin, targets: [{ model: other }] } }
api_keys:
  - { display_name: app, key_env: APP, allowed_models: [claude, batch-mini, other, group] }
  - { display_name: only-claude, key_env: CLAUDE, allowed_models: [claude] }
  - { display_name: no-other, key_env: NOOTHER, allowed_models: [batch-mini] }
`;

const ENV = { APP: 'sk-app', CLAUDE: 'sk-claude', NOOTHER: 'sk-noother' };
const auth = (key = 'sk-app') => ({ authorization: `Bearer ${key}` });

function uploadForm(fields: Record<string, string>, content = '{"custom_id":"1"}\n') {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  form.append('file', new Blob([content], { type: 'application/jsonl' }), 'in.jsonl');
  return form;
}

async function upload(fields: Record<string, string>, query = '', key = 'sk-app', content?: string) {
  return await rig.app.request(`/v1/files${query}`, {
    method: 'POST',
    headers: auth(key),
    body: uploadForm(fields, content),
  }, { peer: '127.0.0.1:5555' });
}

const get = (path: string, key = 'sk-app', method = 'GET') =>
  Promise.resolve(rig.app.request(path, { method, headers: auth(key) }, { peer: '127.0.0.1:5555' }));

before(async () => {
  up = await mockJobs();
  rig = await recordingGateway(resources(up.url), ENV);
});
after(() => up.close());

describe('routed ids', () => {
  test("AISIX's form: aisix- + base64url(raw;model,name), and back; other ids are raw", () => {
    const id = encodeRoutedId('file-abc', 'batch-mini');
    assert.equal(id, 'aisix-' + Buffer.from('file-abc;model,batch-mini').toString('base64url'));
    assert.deepEqual(decodeRoutedId(id), { raw: 'file-abc', model: 'batch-mini' });
    assert.equal(decodeRoutedId('file-abc'), undefined);
    assert.equal(decodeRoutedId('aisix-!!'), undefined);
    assert.equal(decodeRoutedId('aisix-' + Buffer.from(';model,x').toString('base64url')), undefined);
  });
});

describe('files', () => {
  test('upload: the model field is the routing hint, never sent; the file keeps its name; the id is routed', async () => {
    const before = up.received.length;
    const res = await upload({ purpose: 'batch', model: 'batch-mini' });
    assert.equal(res.status, 200);
    const body = await res.json();
    const routed = decodeRoutedId(body.id);
    assert.ok(routed, body.id);
    assert.equal(routed.model, 'batch-mini');
    assert.equal(body.filename, 'in.jsonl');
    const sent = up.received.slice(before);
    assert.equal(sent.length, 1);
    assert.ok(sent[0]);
    assert.equal(sent[0].path, '/v1/files');
    assert.equal(sent[0].headers.authorization, 'Bearer sk-upstream');
    assert.ok(sent[0].headers['x-aisix-request-id']);
    assert.equal(up.files.get(routed.raw)?.bytes.toString(), '{"custom_id":"1"}\n');
    assert.equal(up.files.get(routed.raw)?.type, 'application/jsonl');
  });

  test('the hint by query and by header; without one, the first model the key may use on a supported key', async () => {
    const q = await upload({ purpose: 'batch' }, '?model=other');
    assert.equal(decodeRoutedId((await q.json()).id)?.model, 'other');
    const h = await rig.app.request('/v1/files', {
      method: 'POST',
      headers: { ...auth(), 'x-aisix-model': 'other' },
      body: uploadForm({ purpose: 'batch' }),
    });
    assert.equal(decodeRoutedId((await h.json()).id)?.model, 'other');
    // `claude` comes first in the key's list but its key speaks Anthropic's wire: skipped.
    const d = await upload({ purpose: 'batch' });
    assert.equal(decodeRoutedId((await d.json()).id)?.model, 'batch-mini');
  });

  test('refusals before any upstream call, in the envelope', async () => {
    const before = up.received.length;
    const none = await upload({ purpose: 'batch' }, '', 'sk-claude');
    assert.equal(none.status, 400);
    assert.match((await none.json()).error.message, /^request payload is invalid: no model specified/);
    const claude = await upload({ purpose: 'batch', model: 'claude' });
    assert.equal(claude.status, 400);
    assert.match((await claude.json()).error.message, /uses provider "anthropic" which is not supported/);
    const group = await upload({ purpose: 'batch', model: 'group' });
    assert.equal(group.status, 400);
    assert.match((await group.json()).error.message, /"group" is a virtual router/);
    const forbidden = await upload({ purpose: 'batch', model: 'other' }, '', 'sk-noother');
    assert.equal(forbidden.status, 403);
    const unknown = await upload({ purpose: 'batch', model: 'nope' }, '', 'sk-app');
    assert.equal(unknown.status, 403); // a key learns no name it may not use
    const notForm = await rig.app.request('/v1/files', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(notForm.status, 400);
    assert.equal((await notForm.json()).error.message, 'request payload is invalid: invalid multipart form data');
    const noFile = new FormData();
    noFile.append('purpose', 'batch');
    const nf = await rig.app.request('/v1/files', { method: 'POST', headers: auth(), body: noFile });
    assert.equal(nf.status, 400);
    assert.equal(
      (await nf.json()).error.message,
      'request payload is invalid: multipart body must include a `file` field',
    );
    const bad = await get('/v1/files/a%2Fb');
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.message, 'request payload is invalid: malformed resource id "a/b"');
    const undecodable = await get('/v1/files/%ff');
    assert.equal(undecodable.status, 400);
    assert.equal((await undecodable.json()).error.message, 'request payload is invalid: invalid path parameter');
    const badId = await get('/v1/files/' + encodeRoutedId('a/b', 'batch-mini'));
    assert.equal(badId.status, 400);
    assert.equal((await badId.json()).error.message, 'request payload is invalid: malformed resource id "a/b"');
    const noAuth = await rig.app.request('/v1/files', { method: 'GET' });
    assert.equal(noAuth.status, 401);
    assert.equal(up.received.length, before);
  });

  test('an upload over the body limit: 413, the upstream untouched', async () => {
    const limit = 4096;
    const small = await recordingGateway(
      resources(up.url),
      ENV,
      BASE_CONFIG.replace(
        'proxy: { addr: "127.0.0.1:0" }',
        `proxy: { addr: "127.0.0.1:0", request_body_limit_bytes: ${limit} }`,
      ),
    );
    const before = up.received.length;
    const res = await small.app.request('/v1/files?model=batch-mini', {
      method: 'POST',
      headers: auth(),
      body: uploadForm({ purpose: 'batch' }, 'x'.repeat(limit + 1)),
    });
    assert.equal(res.status, 413);
    assert.equal(up.received.length, before);
  });

  test('retrieve, content, list and delete route by the id alone', async () => {
    const made = await (await upload({ purpose: 'batch', model: 'other' }, '', 'sk-app', 'LINE\n')).json();
    const one = await get(`/v1/files/${made.id}`);
    assert.equal(one.status, 200);
    assert.equal((await one.json()).id, made.id);
    const content = await get(`/v1/files/${made.id}/content`);
    assert.equal(content.status, 200);
    assert.equal(content.headers.get('content-type'), 'application/octet-stream');
    assert.equal(await content.text(), 'LINE\n');
    const list = await get('/v1/files?model=other&limit=2');
    assert.equal(list.status, 200);
    assert.ok((await list.json()).data.some((f: { id: string }) => f.id === decodeRoutedId(made.id)?.raw));
    assert.equal(up.received.at(-1)?.path, '/v1/files?limit=2');
    // The id names `other`, which this key may not use: refused before the upstream.
    assert.equal((await get(`/v1/files/${made.id}`, 'sk-noother')).status, 403);
    const del = await get(`/v1/files/${made.id}`, 'sk-app', 'DELETE');
    assert.equal(del.status, 200);
    assert.deepEqual(await del.json(), { id: made.id, object: 'file', deleted: true });
    const gone = await get(`/v1/files/${made.id}`);
    assert.equal(gone.status, 404); // the upstream's refusal, relayed as it came
    assert.match((await gone.json()).error.message, /No such File object/);
  });

  test("other methods on the routes are 405, as AISIX's", async () => {
    assert.equal((await get('/v1/files', 'sk-app', 'PUT')).status, 405);
    assert.equal((await get('/v1/batches/x', 'sk-app', 'DELETE')).status, 405);
    assert.equal((await get('/v1/videos', 'sk-app', 'GET')).status, 405);
  });

  test('the records: endpoint labels by family, the row and its provider on success', async () => {
    await get('/v1/files?model=batch-mini');
    await get('/v1/batches?model=nope');
    const text = await rig.gw.metrics.render();
    assert.match(
      text,
      /aisix_proxy_requests_total\{[^}]*endpoint="\/v1\/files"[^}]*provider="openai"[^}]*model="batch-mini"/,
    );
    assert.match(text, /endpoint="\/v1\/files\/:id"/);
    // Refused before a row was chosen: the family names provider and model.
    assert.match(
      text,
      /aisix_proxy_requests_total\{[^}]*endpoint="\/v1\/batches"[^}]*provider="batches"[^}]*model="batches"/,
    );
    assert.doesNotMatch(text, /aisix_llm_requests_total\{[^}]*endpoint="\/v1\/files/);
  });
});

describe('batches', () => {
  test('create routes by the routed input file, sends the raw id and no model; retrieve and cancel by id', async () => {
    const file = (await (await upload({ purpose: 'batch', model: 'batch-mini' })).json()).id;
    const res = await rig.app.request('/v1/batches', {
      method: 'POST',
      headers: auth(),
      body: JSON.stringify({
        input_file_id: file,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        model: 'other',
      }),
    });
    assert.equal(res.status, 200);
    const batch = await res.json();
    assert.equal(decodeRoutedId(batch.id)?.model, 'batch-mini');
    assert.equal(batch.input_file_id, file);
    const sent = JSON.parse(up.received.at(-1)!.body.toString());
    assert.deepEqual(sent, {
      input_file_id: decodeRoutedId(file)!.raw,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const got = await get(`/v1/batches/${batch.id}`);
    assert.equal((await got.json()).status, 'validating');
    const cancel = await get(`/v1/batches/${batch.id}/cancel`, 'sk-app', 'POST');
    assert.equal(cancel.status, 200);
    assert.equal((await cancel.json()).status, 'cancelling');
    assert.equal(up.received.at(-1)?.path, `/v1/batches/${decodeRoutedId(batch.id)!.raw}/cancel`);
  });

  test('create refusals: not JSON, no input_file_id; an unknown raw file is the upstream 400 relayed', async () => {
    const notJson = await rig.app.request('/v1/batches', { method: 'POST', headers: auth(), body: '{' });
    assert.equal(notJson.status, 400);
    assert.match((await notJson.json()).error.message, /^request payload is invalid: invalid JSON body: /);
    const noFile = await rig.post('/v1/batches', { endpoint: '/v1/chat/completions' }, 'sk-app');
    assert.equal(noFile.status, 400);
    assert.equal((await noFile.json()).error.message, 'request payload is invalid: `input_file_id` is required');
    const raw = await rig.post('/v1/batches', {
      input_file_id: 'file-none',
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    }, 'sk-app');
    assert.equal(raw.status, 400);
    assert.equal((await raw.json()).error.param, 'input_file_id');
  });

  test('a completed batch: its output file summed per billed model, once', async () => {
    const jsonl = [
      { response: { body: { model: 'gpt-4o-mini-2024', usage: { prompt_tokens: 10, completion_tokens: 5 } } } },
      {
        response: {
          body: {
            model: 'gpt-4o-mini-2024',
            usage: { prompt_tokens: 3, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 1 } },
          },
        },
      },
      { response: { body: { model: 'x', usage: { prompt_tokens: 0, completion_tokens: 0 } } } },
    ].map((l) => JSON.stringify(l)).join('\n');
    assert.deepEqual(sumBatchOutput(jsonl), [{ model: 'gpt-4o-mini-2024', input: 13, output: 7, cached: 1 }]);

    const file = (await (await upload({ purpose: 'batch', model: 'batch-mini' })).json()).id;
    const out = (await (await upload({ purpose: 'batch', model: 'batch-mini' }, '', 'sk-app', jsonl)).json()).id;
    const batch = await (await rig.post('/v1/batches', {
      input_file_id: file,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    }, 'sk-app')).json();
    const raw = decodeRoutedId(batch.id)!.raw;
    Object.assign(up.batches.get(raw)!, { status: 'completed', output_file_id: decodeRoutedId(out)!.raw });
    const lines = () =>
      rig.platform.logs.map((l) => JSON.stringify(l)).filter((l) => l.includes('attributed completed batch usage'));
    const seen = lines().length;
    const got = await (await get(`/v1/batches/${batch.id}`)).json();
    assert.equal(got.output_file_id, encodeRoutedId(decodeRoutedId(out)!.raw, 'batch-mini'));
    await until(() => lines().length === seen + 1, 10_000, 'the attribution line');
    assert.match(lines().at(-1)!, /"input_tokens":"?13/);
    assert.match(lines().at(-1)!, /"cost_usd":"?0\.027/);
    await get(`/v1/batches/${batch.id}`);
    const downloads = up.received.filter((r) => r.path === `/v1/files/${decodeRoutedId(out)!.raw}/content`);
    assert.equal(downloads.length, 1);
  });
});

describe('fine-tuning', () => {
  test('create routes by training_file; validation_file sent raw; the base model sent; result files routed', async () => {
    const training = (await (await upload({ purpose: 'fine-tune', model: 'other' })).json()).id;
    const validation = (await (await upload({ purpose: 'fine-tune', model: 'other' })).json()).id;
    const res = await rig.post('/v1/fine_tuning/jobs', {
      model: 'gpt-4o-mini-2024-07-18',
      training_file: training,
      validation_file: validation,
      provider: 'openai',
    }, 'sk-app');
    assert.equal(res.status, 200);
    const job = await res.json();
    assert.equal(decodeRoutedId(job.id)?.model, 'other');
    assert.equal(job.training_file, training);
    assert.equal(job.validation_file, validation);
    assert.deepEqual(JSON.parse(up.received.at(-1)!.body.toString()), {
      model: 'gpt-4o-mini-2024-07-18',
      training_file: decodeRoutedId(training)!.raw,
      validation_file: decodeRoutedId(validation)!.raw,
    });
    const raw = decodeRoutedId(job.id)!.raw;
    up.jobs.get(raw)!.result_files = ['file-result'];
    const got = await (await get(`/v1/fine_tuning/jobs/${job.id}`)).json();
    assert.deepEqual(got.result_files, [encodeRoutedId('file-result', 'other')]);
    const cancel = await get(`/v1/fine_tuning/jobs/${job.id}/cancel`, 'sk-app', 'POST');
    assert.equal((await cancel.json()).status, 'cancelled');
    assert.equal(up.received.at(-1)?.path, `/v1/fine_tuning/jobs/${raw}/cancel`);
    const noFile = await rig.post('/v1/fine_tuning/jobs', { model: 'x' }, 'sk-app');
    assert.equal(noFile.status, 400);
    assert.equal((await noFile.json()).error.message, 'request payload is invalid: `training_file` is required');
  });
});

describe('the Azure URL rule', () => {
  test('resource-scoped /openai path, api-version added unless the caller gave one', () => {
    const t = {
      adapter: 'azure-openai',
      key: { display_name: 'az', api_base: 'https://r.openai.azure.com/' },
    } as unknown as JobTarget;
    assert.equal(urlOf(t, { path: '/files' }, ''), 'https://r.openai.azure.com/openai/files?api-version=2024-10-21');
    assert.equal(
      urlOf(t, { path: '/batches' }, 'limit=1'),
      'https://r.openai.azure.com/openai/batches?limit=1&api-version=2024-10-21',
    );
    assert.equal(
      urlOf(t, { path: '/batches' }, 'api-version=2025-01-01'),
      'https://r.openai.azure.com/openai/batches?api-version=2025-01-01',
    );
  });
});
