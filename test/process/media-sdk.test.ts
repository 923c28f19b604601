// Black-box: the official `openai` client's audio and image calls, and a rerank request, through a real gateway
// process on Node, Bun and Deno (docs/media-endpoints.md), against a mock that checks what OpenAI checks; and
// uploads past `proxy.request_body_limit_bytes` refused with 413 after at most the limit's bytes, with the gateway's
// resident memory measured from /proc before and after.
// Run: node build.mjs && node --import tsx --test --test-concurrency=1 test/process/media-sdk.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import OpenAI, { toFile } from 'openai';
import { MEDIA_KEY, type MockMedia, startMockMedia } from '../support/mock-media.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

const RUNTIMES: RuntimeName[] = (process.env.SLUICE_MEDIA_RUNTIMES?.split(',') as RuntimeName[] | undefined) ??
  ['node', 'bun', 'deno'];
const LIMIT = 16 * 1_048_576;
const LARGE = 100 * 1_048_576;

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

/** What the uploading caller saw: the answer's status (0 without one), how many bytes it sent, its write error. */
interface Uploaded {
  status: number;
  sent: number;
  error?: string;
}

/**
 * `size` bytes of multipart upload to `url` in 1 MiB chunks, chunked (no Content-Length) unless `declared`,
 * written only as fast as the gateway reads them, until it answers: what the caller saw (a write error that came
 * before the answer is status 0 with its code).
 */
function upload(url: string, size: number, declared: boolean): Promise<Uploaded> {
  const boundary = 'big-upload';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="long.wav"\r\n` +
      'Content-Type: audio/wav\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const chunk = Buffer.alloc(1_048_576, 3);
  return new Promise((resolve) => {
    let written = 0;
    let done = false;
    const headers: Record<string, string> = {
      authorization: `Bearer ${CALLER_KEY}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
    };
    if (declared) headers['content-length'] = String(head.length + size + tail.length);
    const req = request(url, { method: 'POST', headers }, (res) => {
      done = true;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, sent: written }));
    });
    // The gateway may close the connection once it answered: what matters is its answer.
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (done) return;
      done = true;
      resolve({ status: 0, sent: written, ...(e.code ? { error: e.code } : {}) });
    });
    const pump = () => {
      while (!done && written < size) {
        const n = Math.min(chunk.length, size - written);
        written += n;
        if (!req.write(chunk.subarray(0, n))) return void req.once('drain', pump);
      }
      if (!done) req.end(tail);
    };
    req.write(head);
    pump();
  });
}

for (const runtime of RUNTIMES) {
  describe(`audio, images and rerank through the openai client on ${runtime}`, { timeout: 300_000 }, () => {
    let mock: MockMedia;
    let gw: GatewayProcess;
    let openai: OpenAI;

    before(async () => {
      mock = await startMockMedia();
      gw = await spawnGateway({
        runtime,
        config: baseConfig().replace(
          'proxy: { addr: "127.0.0.1:{{proxy}}" }',
          `proxy: { addr: "127.0.0.1:{{proxy}}", request_body_limit_bytes: ${LIMIT} }`,
        ),
        env: { CALLER_KEY },
        files: {
          'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${mock.base}" }
models:
  - { display_name: tts, provider_key: oa, model_name: tts-1, retries: 0 }
  - { display_name: whisper, provider_key: oa, model_name: whisper-1, retries: 0 }
  - { display_name: img, provider_key: oa, model_name: gpt-image-1, retries: 0 }
  - { display_name: rerank-en, provider_key: oa, model_name: rerank-english-v3.0, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`,
        },
      });
      await gw.waitReady();
      openai = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
    });
    after(async () => {
      await gw?.stop();
      await mock?.close();
    });

    test('audio.speech.create: the audio bytes as the upstream sent them', async () => {
      const res = await openai.audio.speech.create({ model: 'tts', voice: 'alloy', input: 'big:1000000' });
      assert.equal(res.headers.get('content-type'), 'audio/mpeg');
      const bytes = new Uint8Array(await res.arrayBuffer());
      assert.equal(bytes.length, 1_000_000);
      assert.deepEqual(mock.requests.at(-1)!.json, { model: 'tts-1', voice: 'alloy', input: 'big:1000000' });
    });

    test('audio.transcriptions.create with a file: the form re-sent with the upstream model', async () => {
      const file = await toFile(Buffer.alloc(200_000, 1), 'meeting.mp3', { type: 'audio/mpeg' });
      const r = await openai.audio.transcriptions.create({ file, model: 'whisper', prompt: 'Zoë, Ångström' });
      assert.equal(r.text, 'heard 200000 bytes (Zoë, Ångström)');
      const seen = mock.requests.at(-1)!;
      assert.deepEqual(seen.files, [{ field: 'file', filename: 'meeting.mp3', type: 'audio/mpeg', size: 200_000 }]);
      assert.deepEqual(Object.fromEntries(seen.fields!), { model: 'whisper-1', prompt: 'Zoë, Ångström' });
      const text = await openai.audio.transcriptions.create({ file, model: 'whisper', response_format: 'text' });
      assert.equal(String(text).trim(), 'heard 200000 bytes');
    });

    test('images.generate and images.edit', async () => {
      const g = await openai.images.generate({ model: 'img', prompt: 'a lighthouse' });
      assert.equal(Buffer.from(g.data![0]!.b64_json!, 'base64').toString(), 'image of a lighthouse');
      assert.equal(g.usage?.total_tokens, 1067);
      const image = await toFile(Buffer.alloc(1024, 9), 'photo.png', { type: 'image/png' });
      const e = await openai.images.edit({ model: 'img', image, prompt: 'add a boat' });
      assert.equal(Buffer.from(e.data![0]!.b64_json!, 'base64').toString(), 'edited 1');
      const seen = mock.requests.at(-1)!;
      assert.equal(seen.files!.length, 1);
      assert.equal(seen.files![0]!.type, 'image/png');
      assert.equal(Object.fromEntries(seen.fields!).model, 'gpt-image-1');
    });

    test('rerank', async () => {
      const res = await fetch(gw.url('/v1/rerank'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'rerank-en', query: 'q', documents: ['a', 'b', 'c'] }),
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { results: unknown[] }).results.length, 3);
    });

    test('100 MB of audio past the limit: 413, and the gateway did not hold it', async () => {
      const pid = gw.proc.pid!;
      const baseline = rssKiB(pid);
      const chunked = await upload(gw.url('/v1/audio/transcriptions'), LARGE, false);
      assert.equal(chunked.status, 413, `chunked: ${JSON.stringify(chunked)}`);
      const declared = await upload(gw.url('/v1/audio/transcriptions'), LARGE, true);
      assert.equal(declared.status, 413, `declared: ${JSON.stringify(declared)}`);
      const grown = rssKiB(pid) - baseline;
      console.log(`${runtime}: RSS ${baseline} KiB before, +${grown} KiB after two ${LARGE}-byte uploads`);
      // Held: at most the limit's bytes (and the runtime's buffers), never the upload.
      assert.ok(grown < (2 * LIMIT) / 1024 + 64 * 1024, `RSS grew ${grown} KiB`);
      // Under the limit, a large upload goes through.
      const form = new FormData();
      form.append('model', 'whisper');
      form.append('file', new File([new Uint8Array(LIMIT - 4096)], 'long.wav', { type: 'audio/wav' }));
      const ok = await fetch(gw.url('/v1/audio/transcriptions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}` },
        body: form,
      });
      assert.equal(ok.status, 200);
      assert.equal(((await ok.json()) as { text: string }).text, `heard ${LIMIT - 4096} bytes`);
      console.log(`${runtime}: RSS +${rssKiB(pid) - baseline} KiB after a ${LIMIT - 4096}-byte transcription`);
    });
  });
}
