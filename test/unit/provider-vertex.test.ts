// Google Vertex AI (docs/configuration.md "Vertex AI") through the proxy app against a mock that verifies
// the service-account JWT with the key's public half: one mint for 100 concurrent first requests, a new
// one when the key file changes; Gemini JSON, SSE, tools and images; Claude through rawPredict; the
// OpenAI shim; :predict embeddings; canned errors; no credential or project id in what the caller sees.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { vertexMintWaiters } from '../../src/providers/vertex/auth.ts';
import { chatToGemini } from '../../src/providers/vertex/gemini.ts';
import { type MockVertex, PROJECT, startMockVertex, STATIC_TOKEN, vertexError } from '../support/mock-vertex.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

const CALLER = 'sk-caller-vertex-SECRET-1';
const chat = { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] };

test('chatToGemini: roles, system, tools, tool results, images, JSON mode', () => {
  const out = chatToGemini({
    model: 'gemini-2.0-flash',
    max_tokens: 20,
    temperature: 0.1,
    stop: 'END',
    response_format: { type: 'json_object' },
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }],
    tool_choice: { type: 'function', function: { name: 'lookup' } },
    messages: [
      { role: 'system', content: 'sys' },
      {
        role: 'user',
        content: [{ type: 'text', text: 'see' }, {
          type: 'image_url',
          image_url: { url: 'data:image/png;base64,AAAA' },
        }],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q":1}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'found' },
    ],
  });
  assert.deepEqual(out, {
    contents: [
      { role: 'user', parts: [{ text: 'see' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] },
      { role: 'model', parts: [{ functionCall: { name: 'lookup', args: { q: 1 } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { content: 'found' } } }] },
    ],
    systemInstruction: { role: 'user', parts: [{ text: 'sys' }] },
    generationConfig: {
      temperature: 0.1,
      maxOutputTokens: 20,
      stopSequences: ['END'],
      responseMimeType: 'application/json',
    },
    tools: [{ functionDeclarations: [{ name: 'lookup', parameters: { type: 'object', properties: {} } }] }],
    toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['lookup'] } },
  });
});

describe('through the proxy', () => {
  let vx: MockVertex;
  let g: RecordingGateway;
  let saSecret: string;
  let firstSa: ReturnType<MockVertex['newServiceAccount']>;

  before(async () => {
    vx = await startMockVertex();
    const sa = vx.newServiceAccount();
    firstSa = sa;
    saSecret = sa.private_key;
    const saKey = JSON.stringify({ project: PROJECT, region: 'us-central1', service_account_json: sa });
    const tokenKey = JSON.stringify({ project: PROJECT, region: 'europe-west4', access_token: STATIC_TOKEN });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: gcp, adapter: vertex, provider: google, api_key: '${saKey}', api_base: "${vx.url}" }
  - { display_name: gcp-token, adapter: vertex, api_key: '${tokenKey}', api_base: "${vx.url}" }
  - { display_name: gcp-both, adapter: vertex, api_key: '{"project":"p","region":"r","access_token":"t","service_account_json":{}}' }
  - { display_name: gcp-path, adapter: vertex, api_key: '${tokenKey}', api_base: "${vx.url}/v1" }
  - { display_name: gcp-stale, adapter: vertex, api_key: '${
        JSON.stringify({ project: PROJECT, region: 'us-central1', access_token: 'ya29.expired-token' })
      }', api_base: "${vx.url}" }
models:
  - { display_name: gemini, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: gemini-token, provider_key: gcp-token, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: claude, provider_key: gcp, model_name: "claude-3-5-sonnet@20241022", retries: 0 }
  - { display_name: llama, provider_key: gcp, model_name: "meta/llama-3.1-405b-instruct-maas", retries: 0 }
  - { display_name: embed, provider_key: gcp, model_name: text-embedding-005, retries: 0 }
  - { display_name: unknown, provider_key: gcp, model_name: palm-2, retries: 0 }
  - { display_name: both, provider_key: gcp-both, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: with-path, provider_key: gcp-path, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: stale, provider_key: gcp-stale, model_name: gemini-2.0-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(async () => {
    await vx.close();
    assert.deepEqual(vx.refusedMints, [], 'every assertion verified');
    const secrets = [saSecret, STATIC_TOKEN, CALLER, ...vx.minted];
    for (const line of g.platform.logs) {
      for (const s of secrets) assert.equal(JSON.stringify(line).includes(s), false, 'a log line carries a secret');
    }
  });

  test('100 concurrent first requests make one mint', async () => {
    const held = vx.holdMints();
    const answers = Array.from(
      { length: 100 },
      () => g.post('/v1/chat/completions', { model: 'gemini', ...chat }, CALLER),
    );
    await until(() => vertexMintWaiters() === 100, 5000, '100 requests waiting on the mint');
    held.release();
    for (const r of await Promise.all(answers)) assert.equal(r.status, 200, await r.text());
    assert.equal(vx.minted.length, 1);
    const calls = vx.requests.filter((r) => r.path.endsWith(':generateContent'));
    assert.equal(calls.length, 100);
    for (const c of calls) assert.equal(c.headers.authorization, `Bearer ${vx.minted[0]}`);
    const sent = calls.at(-1)!;
    assert.equal(
      sent.path,
      `/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent`,
    );
    assert.deepEqual(sent.json!.systemInstruction, { role: 'user', parts: [{ text: 'be brief' }] });
    assert.equal(sent.body.includes(CALLER), false);
  });

  test('Gemini JSON answer as a chat completion; a configured token used verbatim', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'gemini-token', ...chat }, CALLER);
    const body = await r.json() as {
      id: string;
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { total_tokens: number };
    };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0]!.message.content, 'hi from gemini-2.0-flash');
    assert.equal(body.choices[0]!.finish_reason, 'stop');
    assert.equal(body.usage.total_tokens, 6);
    assert.ok(body.id.length > 0);
    assert.equal(vx.requests.at(-1)!.headers.authorization, `Bearer ${STATIC_TOKEN}`);
    assert.match(vx.requests.at(-1)!.path, /locations\/europe-west4\//);
  });

  test('Gemini SSE (no [DONE], mixed separators) becomes chunks, one usage, [DONE]', async () => {
    const r = await g.post('/v1/chat/completions', {
      model: 'gemini',
      stream: true,
      stream_options: { include_usage: true },
      ...chat,
    }, CALLER);
    const text = await r.text();
    assert.equal(r.status, 200, text);
    const chunks = text.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello from Gemini');
    assert.equal(chunks.filter((c) => c.usage).length, 1);
    assert.equal(chunks.at(-1).usage.total_tokens, 7);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
    assert.equal(vx.requests.at(-1)!.query, 'alt=sse');
  });

  test('Claude through rawPredict and streamRawPredict', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'claude', ...chat }, CALLER);
    const body = await r.json() as { choices: { message: { content: string } }[] };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0]!.message.content, 'hi from claude on vertex');
    assert.match(vx.requests.at(-1)!.path, /publishers\/anthropic\/models\/claude-3-5-sonnet@20241022:rawPredict$/);
    // Claude's cache write (3) is in the cache-inclusive total the chat answer cannot itemise.
    const byClient = (t: string) =>
      sumSamples(g.gw.metrics.render(), 'aisix_llm_tokens_by_client_total', { model: 'claude', token_type: t });
    assert.deepEqual(['input', 'output', 'total'].map(byClient), [5, 4, 12]);
    const s = await g.post('/v1/chat/completions', { model: 'claude', stream: true, ...chat }, CALLER);
    const text = await s.text();
    assert.match(text, /claude streams/);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });

  test('/v1/messages to claude-* is native: the caller’s body reaches rawPredict, the answer is Claude’s', async () => {
    const body = {
      model: 'claude',
      max_tokens: 16,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }],
    };
    const r = await g.post('/v1/messages', body, CALLER);
    const answer = await r.json() as { id: string; content: { text: string }[] };
    assert.equal(r.status, 200, JSON.stringify(answer));
    assert.equal(answer.id, 'msg_vrtx_01');
    const sent = vx.requests.at(-1)!;
    assert.match(sent.path, /publishers\/anthropic\/models\/claude-3-5-sonnet@20241022:rawPredict$/);
    assert.deepEqual(sent.json!.thinking, body.thinking);
    assert.deepEqual(sent.json!.messages, body.messages);
    const s = await g.post('/v1/messages', { ...body, stream: true }, CALLER);
    const text = await s.text();
    assert.equal(s.status, 200, text);
    assert.match(text, /event: content_block_delta\ndata: .*"claude streams"/);
    assert.match(vx.requests.at(-1)!.path, /:streamRawPredict$/);
  });

  test('the OpenAI shim keeps the model in the body; /v1/messages translates through chat', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'llama', ...chat }, CALLER);
    assert.equal(r.status, 200);
    const sent = vx.requests.at(-1)!;
    assert.equal(sent.path, `/v1/projects/${PROJECT}/locations/us-central1/endpoints/openapi/chat/completions`);
    assert.equal(sent.json!.model, 'meta/llama-3.1-405b-instruct-maas');
    const m = await g.post('/v1/messages', {
      model: 'gemini',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    }, CALLER);
    const mb = await m.json() as { content: { text: string }[] };
    assert.equal(m.status, 200, JSON.stringify(mb));
    assert.equal(mb.content[0]!.text, 'hi from gemini-2.0-flash');
  });

  test('embeddings through :predict', async () => {
    const r = await g.post('/v1/embeddings', { model: 'embed', input: ['abc', 'de'], dimensions: 64 }, CALLER);
    const body = await r.json() as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.deepEqual(body.data.map((d) => d.embedding[0]), [3, 2]);
    assert.equal(body.usage.prompt_tokens, 4);
    assert.deepEqual(vx.requests.at(-1)!.json, {
      instances: [{ content: 'abc' }, { content: 'de' }],
      parameters: { outputDimensionality: 64 },
    });
  });

  test('errors: canned message, gRPC-derived code, no project id', async () => {
    vx.script(vertexError(429, 'RESOURCE_EXHAUSTED'));
    const r = await g.post('/v1/chat/completions', { model: 'gemini', ...chat }, CALLER);
    const text = await r.text();
    assert.equal(r.status, 429, text);
    assert.deepEqual(JSON.parse(text).error, {
      message: 'upstream rate limited',
      type: 'upstream_error',
      code: 'rate_limit_exceeded',
    });
    assert.equal(text.includes(PROJECT), false);
    const stale = await g.post('/v1/chat/completions', { model: 'stale', ...chat }, CALLER);
    const staleText = await stale.text();
    assert.equal(stale.status, 401, staleText);
    assert.deepEqual(JSON.parse(staleText).error, {
      message: 'upstream authentication failed',
      type: 'upstream_error',
      code: 'invalid_api_key',
    });
  });

  test('refused before any call: unknown publisher, both credential modes, an api_base with a path', async () => {
    const before = g.sent.length;
    const u = await g.post('/v1/chat/completions', { model: 'unknown', ...chat }, CALLER);
    assert.equal(u.status, 400);
    assert.match(await u.text(), /vertex publisher unknown/);
    const b = await g.post('/v1/chat/completions', { model: 'both', ...chat }, CALLER);
    assert.equal(b.status, 401);
    assert.match(await b.text(), /exactly one of access_token or service_account_json/);
    const p = await g.post('/v1/chat/completions', { model: 'with-path', ...chat }, CALLER);
    assert.equal(p.status, 400);
    assert.equal(g.sent.length, before);
  });

  test('a mint that outlasts the model’s deadline is a 504, and the next request mints again', async () => {
    const sa = vx.newServiceAccount();
    const slow = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: gcp, adapter: vertex, api_key: '${
        JSON.stringify({ project: PROJECT, region: 'us-central1', service_account_json: sa })
      }', api_base: "${vx.url}" }
models:
  - { display_name: gemini, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0, timeout: 150 }
  - { display_name: gemini-untimed, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
    const held = vx.holdMints();
    const r = await slow.post('/v1/chat/completions', { model: 'gemini', ...chat }, CALLER);
    assert.equal(r.status, 504, await r.text());
    assert.equal(vertexMintWaiters(), 0, 'nobody waits on the abandoned mint');
    held.release();
    // The same key through a model without the short deadline: a loaded machine may take 150 ms to mint and call.
    const again = await slow.post('/v1/chat/completions', { model: 'gemini-untimed', ...chat }, CALLER);
    assert.equal(again.status, 200, await again.text());
  });

  test('a changed private key under the same client_email mints afresh', async () => {
    const sa = vx.newServiceAccount(firstSa);
    assert.equal(sa.client_email, firstSa.client_email);
    const other = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: gcp, adapter: vertex, api_key: '${
        JSON.stringify({ project: PROJECT, region: 'us-central1', service_account_json: sa })
      }', api_base: "${vx.url}" }
models:
  - { display_name: gemini, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
    const before = vx.minted.length;
    assert.equal((await other.post('/v1/chat/completions', { model: 'gemini', ...chat }, CALLER)).status, 200);
    assert.equal((await other.post('/v1/chat/completions', { model: 'gemini', ...chat }, CALLER)).status, 200);
    assert.equal(vx.minted.length, before + 1);
  });
});
