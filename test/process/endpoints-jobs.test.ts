// Black-box: the official `openai` SDK through a gateway process on Node, Bun and Deno against a mock OpenAI with
// files, batches and videos (docs/batch-files-endpoints.md): an upload relayed as multipart with its routing
// hint removed, a batch routed by its input file's id, a file's content streamed and the file deleted, a
// fine-tuning job on a routed file, a video submitted, polled and downloaded.
// Run: node build.mjs && node --import tsx --test --test-concurrency=1 test/process/endpoints-jobs.test.ts
// (SLUICE_JOBS_RUNTIMES=bun,deno picks runtimes).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { type MockJobs, mockJobs } from '../support/mock-jobs.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_JOBS_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node', 'bun', 'deno'];

const resources = (url: string) =>
  `_format_version: "1"
provider_keys:
  - { display_name: compat, provider: openai, adapter: openai, secret: sk-upstream, api_base: "${url}" }
models:
  - { display_name: batch-mini, provider: openai, model_name: gpt-4o-mini, provider_key: compat }
  - { display_name: sora, provider: openai, model_name: sora-2, provider_key: compat }
api_keys:
  - { display_name: app, key_env: CALLER_KEY, allowed_models: [batch-mini, sora] }
`;

for (const runtime of RUNTIMES) {
  describe(`files, batches and videos on ${runtime}`, () => {
    let up: MockJobs;
    let gw: GatewayProcess;
    let client: OpenAI;

    before(async () => {
      up = await mockJobs();
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        files: { 'resources.yaml': resources(up.url) },
        env: { CALLER_KEY },
      });
      await gw.waitReady();
      client = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
    });
    after(async () => {
      await gw.stop();
      await up.close();
    });

    test('files.create with a model hint, batches.create by the routed id, batches.retrieve', async () => {
      const lines = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n';
      const file = await client.files.create(
        { file: await toFile(Buffer.from(lines), 'input.jsonl', { type: 'application/jsonl' }), purpose: 'batch' },
        { query: { model: 'batch-mini' } },
      );
      assert.match(file.id, /^aisix-/);
      assert.equal(file.filename, 'input.jsonl');
      const stored = [...up.files.values()].at(-1)!;
      assert.equal(stored.bytes.toString(), lines);
      assert.equal(stored.type, 'application/jsonl');
      const upload = up.received.find((r) => r.path === '/v1/files')!;
      assert.match(String(upload.headers['content-type']), /^multipart\/form-data; boundary=/);

      const batch = await client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      });
      assert.match(batch.id, /^aisix-/);
      assert.equal(batch.input_file_id, file.id);
      const again = await client.batches.retrieve(batch.id);
      assert.equal(again.status, 'validating');
      const content = await client.files.content(file.id);
      assert.equal(await content.text(), lines);
      const deleted = await client.files.delete(file.id);
      assert.deepEqual([deleted.id, deleted.deleted], [file.id, true]);
      assert.equal(up.received.at(-1)!.method, 'DELETE');
    });

    test('fine_tuning.jobs.create by the routed training file, cancel and retrieve', async () => {
      const file = await client.files.create(
        { file: await toFile(Buffer.from('{"messages":[]}\n'), 'train.jsonl'), purpose: 'fine-tune' },
        { query: { model: 'batch-mini' } },
      );
      const job = await client.fineTuning.jobs.create({ model: 'gpt-4o-mini', training_file: file.id });
      assert.match(job.id, /^aisix-/);
      assert.equal(job.training_file, file.id);
      assert.equal((await client.fineTuning.jobs.cancel(job.id)).status, 'cancelled');
      assert.equal((await client.fineTuning.jobs.retrieve(job.id)).status, 'cancelled');
    });

    test('videos.create, retrieve and downloadContent (proxied)', async () => {
      const v = await client.videos.create({ model: 'sora', prompt: 'a cat', seconds: '4' });
      assert.equal(v.status, 'queued');
      const raw = [...up.videos.keys()].at(-1)!;
      Object.assign(up.videos.get(raw)!, { status: 'completed', progress: 100 });
      const polled = await client.videos.retrieve(v.id);
      assert.equal(polled.status, 'completed');
      const body = await client.videos.downloadContent(v.id);
      assert.equal(body.headers.get('content-type'), 'video/mp4');
      assert.equal(await body.text(), 'MP4-BYTES');
    });
  });
}
