// The security review's URL, redirect and label guarantees on the routes added after it (docs/security.md
// "Upstream URLs and credentials", "What callers cannot grow"): audio, images, rerank, files, batches,
// fine-tuning, videos, passthrough, /mcp and /a2a. A caller value that would walk an upstream path is refused
// with nothing sent; an upstream that redirects is never followed (this transport is fetch's, Bun's and
// Workers'); no caller text becomes a metric label.
// Run: node --import tsx --test test/unit/security-routes.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { encodeRoutedId } from '../../src/endpoints/routed-id.ts';
import { encodeVideoId } from '../../src/proxy/videos.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { type CloudServer, sendJson, startCloudServer } from '../support/mock-cloud.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { type RedirectPair, startRedirectPair } from '../support/redirect-upstream.ts';

const CALLER = 'sk-caller-routes-1111';
const PEER = { peer: '127.0.0.1:5555' };

let up: CloudServer;
let pair: RedirectPair;
let rig: RecordingGateway;

function resources(base: string, red: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-oai-up-SECRET, api_base: "${base}/v1" }
  - { display_name: az, provider: azure, adapter: azure-openai, api_key: AZ-SECRET-KEY, api_base: "${base}?api-version=2025-04-01-preview" }
  - { display_name: red, provider: openai, api_key: sk-red-up-SECRET, api_base: "${red}/v1" }
  - { display_name: red-co, provider: cohere, adapter: openai, api_key: sk-red-up-SECRET, api_base: "${red}/v1" }
models:
  - { display_name: "az/*", provider_key: az, model_name: "*", retries: 0 }
  - { display_name: "oai/*", provider_key: oai, model_name: "*", retries: 0 }
  - { display_name: sora, provider: openai, provider_key: oai, model_name: sora-2, retries: 0 }
  - { display_name: batch-mini, provider: openai, provider_key: oai, model_name: gpt-4o-mini, retries: 0 }
  - { display_name: red-tts, provider_key: red, model_name: tts-1, retries: 0 }
  - { display_name: red-img, provider_key: red, model_name: gpt-image-1, retries: 0 }
  - { display_name: red-rerank, provider_key: red-co, model_name: rerank-english-v3.0, retries: 0 }
  - { display_name: red-sora, provider: openai, provider_key: red, model_name: sora-2, retries: 0 }
  - { display_name: red-batch, provider: openai, provider_key: red, model_name: gpt-4o-mini, retries: 0 }
api_keys:
  - display_name: caller
    key_env: CALLER
    allowed_models: ["*"]
    allowed_agents: ["*"]
    allowed_routes: ["*"]
    mcp_access: { allow: ["*"] }
mcp_servers:
  - { name: red-mcp, url: "${red}/mcp" }
a2a_agents:
  - { name: red-agent, url: "${red}/a2a" }
passthrough_routes:
  - { name: red-pass, path_prefix: /raw/red, target_url: "${red}/v1", provider_key: red }
`;
}

before(async () => {
  up = await startCloudServer((req, res) => sendJson(res, 200, chatCompletion(String(req.json?.model ?? 'x'))));
  pair = await startRedirectPair();
  rig = await recordingGateway(resources(up.url, pair.redirector.url), { CALLER });
});
after(async () => {
  await up.close();
  await pair.close();
});

function call(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const body = init.body === undefined
    ? undefined
    : init.body instanceof FormData
    ? init.body
    : JSON.stringify(init.body);
  const headers: Record<string, string> = { authorization: `Bearer ${CALLER}`, ...init.headers };
  if (body !== undefined && !(body instanceof FormData)) headers['content-type'] = 'application/json';
  return Promise.resolve(
    rig.app.request(path, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body }, PEER),
  );
}

/** A body for each media endpoint, naming `model`. */
function mediaBodies(model: string): [string, unknown][] {
  const form = new FormData();
  form.append('model', model);
  form.append('file', new Blob([new Uint8Array(64)], { type: 'audio/wav' }), 'a.wav');
  return [
    ['/v1/audio/speech', { model, input: 'hello', voice: 'alloy' }],
    ['/v1/audio/transcriptions', form],
    ['/v1/images/generations', { model, prompt: 'a cat' }],
  ];
}

const WALKS = ['dep\\..\\other', 'dep%2e%2e', 'dep%2f..%2fother', 'dep%252f..', '..', 'a/../b'];

describe('no caller text changes an upstream path', () => {
  test('audio and images through an Azure wildcard: a 400 naming the deployment; nothing sent', async () => {
    for (const walk of WALKS) {
      for (const [path, body] of mediaBodies(`az/${walk}`)) {
        const res = await call(path, { body });
        const text = await res.text();
        assert.equal(res.status, 400, `${path} ${walk}: ${text}`);
        assert.match(
          (JSON.parse(text) as { error: { message: string } }).error.message,
          /^invalid upstream configuration: azure deployment \(the request's model, or the model's model_name\)/,
          `${path} ${walk}`,
        );
      }
    }
    // Azure serves no rerank: refused before the deployment is read.
    const rerank = await call('/v1/rerank', { body: { model: `az/${WALKS[0]}`, query: 'q', documents: ['a'] } });
    assert.equal(rerank.status, 400, await rerank.text());
    assert.deepEqual(rig.sent.map((r) => r.url), [], 'no upstream request');
    assert.equal(up.requests.length, 0);
  });

  test('files, batches, fine-tuning and videos: an id that walks the path is a 400; nothing sent', async () => {
    const row = [...rig.gw.snapshot!.models.values()].find((m) => m.display_name === 'sora')!;
    const paths: string[] = [];
    for (const raw of ['..', '../../admin', 'a\\b', 'x%2f..', '%2e%2e']) {
      const routed = encodeRoutedId(raw, 'batch-mini');
      paths.push(
        `/v1/files/${routed}`,
        `/v1/files/${routed}/content`,
        `/v1/batches/${routed}`,
        `/v1/batches/${routed}/cancel`,
        `/v1/fine_tuning/jobs/${routed}`,
        `/v1/videos/${encodeVideoId(row.id, 'sora', raw)}`,
      );
    }
    for (const path of paths) {
      const res = await call(path, { method: path.endsWith('/cancel') ? 'POST' : 'GET' });
      const text = await res.text();
      assert.equal(res.status, 400, `${path}: ${text}`);
      assert.match(text, /malformed resource id/, path);
    }
    assert.deepEqual(rig.sent.map((r) => r.url), [], 'no upstream request');
  });

  test('a passthrough path never leaves its route target, however it is spelled', async () => {
    // The request's URL arrives normalised (`%2e%2e` climbs before any route matches); what is left is joined
    // under the target and checked to stay there (passthrough-routes.test.ts holds the check itself).
    const sent = rig.sent.length;
    for (const path of ['/raw/red/%2e%2e/admin', '/raw/red/x/..%2F/%2E%2e', '/raw/red/x%5c..%5c..%5cadmin']) {
      await (await call(path)).text();
    }
    for (const r of rig.sent.slice(sent)) assert.ok(r.url.startsWith(`${pair.redirector.url}/v1/`), r.url);
    assert.equal(pair.target.requests.length, 0);
  });
});

describe('no upstream redirect is followed on the new routes', () => {
  test('media, jobs, videos, passthrough, MCP and A2A: the redirect target receives nothing', async () => {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob(['{"custom_id":"1"}\n'], { type: 'application/jsonl' }), 'in.jsonl');
    const mcp = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const calls: [string, Parameters<typeof call>[1]][] = [
      ['/v1/audio/speech', { body: { model: 'red-tts', input: 'confidential prompt', voice: 'alloy' } }],
      ['/v1/images/generations', { body: { model: 'red-img', prompt: 'confidential prompt' } }],
      ['/v1/rerank', { body: { model: 'red-rerank', query: 'confidential prompt', documents: ['a'] } }],
      ['/v1/files?model=red-batch', { body: form }],
      ['/v1/files?model=red-batch', {}],
      ['/v1/batches', {
        body: {
          model: 'red-batch',
          input_file_id: 'file-1',
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        },
      }],
      ['/v1/fine_tuning/jobs?model=red-batch', { body: { model: 'gpt-4o-mini', training_file: 'file-1' } }],
      ['/v1/videos', { body: { model: 'red-sora', prompt: 'confidential prompt' } }],
      ['/raw/red/chat/completions', {
        body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'confidential' }] },
      }],
      ['/mcp/red-mcp', {
        headers: mcp,
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        },
      }],
      ['/mcp/red-mcp', { headers: mcp, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' } }],
      ['/a2a/red-agent', {
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'message/send',
          params: { message: { role: 'user', messageId: 'm1', parts: [{ kind: 'text', text: 'confidential' }] } },
        },
      }],
    ];
    const start = pair.redirector.requests.length;
    const answers: string[] = [];
    for (const [path, init] of calls) {
      const res = await call(path, init);
      const text = await res.text();
      answers.push(`${path} ${res.status} ${text.slice(0, 200)}`);
      assert.ok(res.status < 300 || res.status >= 400, `${path}: a ${res.status} passed on`);
      assert.equal(res.headers.get('location'), null, path);
      assert.doesNotMatch(text, /stolen|steal/, path);
    }
    const asked = new Set(pair.redirector.requests.slice(start).map((r) => `${r.method} ${r.path}`));
    const expected = [
      'POST /v1/audio/speech',
      'POST /v1/images/generations',
      'POST /v1/rerank',
      'POST /v1/files',
      'GET /v1/files',
      'POST /v1/batches',
      'POST /v1/fine_tuning/jobs',
      'POST /v1/videos',
      'POST /v1/chat/completions',
      'POST /mcp',
      'POST /a2a',
    ];
    assert.deepEqual(
      [...asked].sort(),
      expected.sort(),
      `each route asked the redirecting upstream:\n${answers.join('\n')}`,
    );
    assert.deepEqual(
      pair.target.requests.map((r) => `${r.method} ${r.path}`),
      [],
      'the redirect target received nothing',
    );
  });
});

describe('no caller text in metric labels on the new routes', () => {
  test('model names, path parameters, tool names and passthrough paths never become labels', async () => {
    const mark = (n: number) => `zzmark${n}`;
    const form = new FormData();
    form.append('model', `oai/${mark(1)}`);
    form.append('file', new Blob([new Uint8Array(64)], { type: 'audio/wav' }), 'a.wav');
    await (await call('/v1/audio/speech', { body: { model: `oai/${mark(2)}`, input: 'x', voice: 'alloy' } })).text();
    await (await call('/v1/audio/transcriptions', { body: form })).text();
    await (await call('/v1/images/generations', { body: { model: `oai/${mark(3)}`, prompt: 'x' } })).text();
    await (await call('/v1/rerank', { body: { model: `oai/${mark(4)}`, query: 'q', documents: ['a'] } })).text();
    await (await call('/v1/audio/speech', { body: { model: mark(5), input: 'x', voice: 'alloy' } })).text();
    await (await call(`/v1/files/${mark(6)}`)).text();
    await (await call(`/v1/batches/${mark(7)}`)).text();
    await (await call(`/v1/fine_tuning/jobs/${mark(8)}`)).text();
    await (await call(`/v1/videos/${mark(9)}`)).text();
    await (await call('/v1/videos', { body: { model: mark(10), prompt: 'x' } })).text();
    await (await call(`/a2a/${mark(11)}`, { body: { jsonrpc: '2.0', id: 1, method: 'message/send' } })).text();
    await (await call(`/mcp/${mark(12)}`, { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })).text();
    await (await call('/mcp', {
      headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: mark(13), arguments: {} } },
    })).text();
    await (await call(`/raw/red/${mark(14)}`)).text();
    await (await call(`/v1/${mark(15)}`)).text();
    await (await call(`/v1/realtime?model=oai/${mark(16)}`)).text();
    await (await call(`/v1/realtime?model=${mark(17)}`)).text();
    const metrics = await (await createStatusApp(rig.gw).request('/metrics')).text();
    const found = metrics.split('\n').filter((l) => l.includes('zzmark'));
    assert.deepEqual(found, [], 'no series carries the caller text');
    assert.match(metrics, /model="oai\/\*"/, 'a wildcard row is labelled by its display name');
  });
});

describe('an upstream that echoes its credential on the newer routes', () => {
  const SECRET = 'sk-ECHO-SECRET-oai-0123456789+/=';
  let echo: CloudServer;
  let e: RecordingGateway;

  before(async () => {
    echo = await startCloudServer((req, res) => {
      const cred = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
      const b64 = Buffer.from(cred).toString('base64');
      const message = `Incorrect API key provided: ${cred} b64=${b64} url=${encodeURIComponent(cred)} ` +
        `lower=${cred.toLowerCase()}`;
      sendJson(res, 401, { error: { message, type: 'invalid_request_error', code: 'invalid_api_key' } });
    });
    e = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: "${SECRET}", api_base: "${echo.url}/v1" }
models:
  - { display_name: tts, provider_key: oai, model_name: tts-1, retries: 0 }
  - { display_name: sora, provider: openai, provider_key: oai, model_name: sora-2, retries: 0 }
  - { display_name: batch, provider: openai, provider_key: oai, model_name: gpt-4o-mini, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"], allowed_routes: ["*"] }
passthrough_routes:
  - { name: pt, path_prefix: /raw, target_url: "${echo.url}/v1", provider_key: oai }
`,
      { CALLER },
    );
  });
  after(() => echo.close());

  test('audio, files, batches, fine-tuning, videos and passthrough answer it redacted, and log none of it', async () => {
    const calls: [string, string, unknown][] = [
      ['POST', '/v1/audio/speech', { model: 'tts', input: 'x', voice: 'alloy' }],
      ['GET', '/v1/files?model=batch', undefined],
      ['GET', '/v1/batches?model=batch', undefined],
      ['GET', '/v1/fine_tuning/jobs?model=batch', undefined],
      ['POST', '/v1/batches', {
        model: 'batch',
        input_file_id: 'file-1',
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      }],
      ['POST', '/v1/videos', { model: 'sora', prompt: 'x' }],
      ['GET', '/raw/models', undefined],
    ];
    const b64 = Buffer.from(SECRET).toString('base64');
    const copies = [SECRET, SECRET.toLowerCase(), encodeURIComponent(SECRET), b64, 'ECHO-SECRET', 'echo-secret'];
    for (const [method, path, body] of calls) {
      const res = await e.app.request(path, {
        method,
        headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }, PEER);
      const text = await res.text();
      assert.equal(res.status, 401, `${path}: ${text}`);
      for (const c of copies) assert.ok(!text.includes(c), `${method} ${path} answered ${c}: ${text}`);
      assert.match(text, /Incorrect API key provided: \[redacted\]/, path);
    }
    const logged = e.platform.logs.map((l) => JSON.stringify(l)).join('\n');
    for (const c of copies) assert.ok(!logged.includes(c), `a log line holds ${c}`);
  });
});
