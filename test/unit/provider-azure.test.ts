// Azure OpenAI through the proxy app (docs/configuration.md "Azure OpenAI"): deployment URLs with
// api-version, resource-key and AAD auth (one mint, cached), answers passed through with their content
// filter results, canned errors with derived codes, and no credential in any answer or log line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { azureBase } from '../../src/providers/azure.ts';
import {
  AAD,
  AZURE_KEY,
  contentPolicyRefusal,
  type MockAzure,
  startMockAzure,
  throttled,
} from '../support/mock-azure.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

const CALLER = 'sk-caller-azure-SECRET-1';
const chat = { messages: [{ role: 'user', content: 'hi' }] };

test('azureBase: resource hosts canonical, bare names expanded, other URLs kept, api-version chosen', () => {
  assert.deepEqual(azureBase('https://acme.openai.azure.com/some/path'), {
    base: 'https://acme.openai.azure.com',
    version: '2024-10-21',
  });
  assert.deepEqual(azureBase('http://acme.openai.azure.com'), {
    base: 'https://acme.openai.azure.com',
    version: '2024-10-21',
  });
  assert.deepEqual(azureBase('acme-east'), { base: 'https://acme-east.openai.azure.com', version: '2024-10-21' });
  assert.deepEqual(azureBase('https://proxy.example/azure/'), {
    base: 'https://proxy.example/azure',
    version: '2024-10-21',
  });
  assert.deepEqual(azureBase('https://acme.cognitiveservices.azure.com?api-version=2025-01-01-preview'), {
    base: 'https://acme.cognitiveservices.azure.com',
    version: '2025-01-01-preview',
  });
  for (
    const bad of [undefined, '', 'https://u:p@proxy.example', 'https://proxy.example/?x=1', 'https://h.example/#f']
  ) {
    const r = azureBase(bad);
    assert.ok('kind' in r && r.kind === 'refused', `${bad} must be refused`);
  }
});

describe('through the proxy', () => {
  let az: MockAzure;
  let g: RecordingGateway;

  before(async () => {
    az = await startMockAzure();
    const aad = JSON.stringify({ ...AAD, authority_host: az.url });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: az-key, provider: azure, adapter: azure-openai, api_key: "${AZURE_KEY}", api_base: "${az.url}" }
  - { display_name: az-aad, provider: azure, adapter: azure-openai, api_key: '${aad}', api_base: "${az.url}" }
  - { display_name: az-bad-json, adapter: azure-openai, api_key: '{"tenant_id": "t",', api_base: "${az.url}" }
  - { display_name: az-no-base, adapter: azure-openai, api_key: "${AZURE_KEY}" }
  - { display_name: az-wrong, adapter: azure-openai, api_key: "wrong-resource-key-1", api_base: "${az.url}" }
models:
  - { display_name: gpt, provider_key: az-key, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: gpt-aad, provider_key: az-aad, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: missing, provider_key: az-key, model_name: gpt-4o-gone, retries: 0 }
  - { display_name: bad-deployment, provider_key: az-key, model_name: "gpt/../x", retries: 0 }
  - { display_name: embed, provider_key: az-key, model_name: embed-prod, retries: 0 }
  - { display_name: bad-json, provider_key: az-bad-json, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: no-base, provider_key: az-no-base, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: wrong-key, provider_key: az-wrong, model_name: gpt-4o-prod, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(async () => {
    await az.close();
    const secrets = [AZURE_KEY, AAD.client_secret, AAD.client_id, CALLER, ...az.minted];
    for (const line of g.platform.logs) {
      const text = JSON.stringify(line);
      for (const s of secrets) assert.equal(text.includes(s), false, `log line carries a secret: ${text}`);
    }
  });

  test('resource key: deployment URL, api-version, api-key and no authorization; filters kept', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'gpt', ...chat }, CALLER);
    const body = await r.json() as Record<string, unknown>;
    assert.equal(r.status, 200, JSON.stringify(body));
    const sent = az.requests.at(-1)!;
    assert.equal(sent.path, '/openai/deployments/gpt-4o-prod/chat/completions');
    assert.equal(sent.query, 'api-version=2024-10-21');
    assert.equal(sent.headers['api-key'], AZURE_KEY);
    assert.equal(sent.headers.authorization, undefined);
    assert.equal(sent.json!.model, 'gpt-4o-prod');
    assert.equal(sent.body.includes(CALLER), false);
    assert.ok(Array.isArray(body.prompt_filter_results), 'content filter results reach the caller');
  });

  test('AAD: one mint for many requests, bearer and no api-key', async () => {
    const before = az.minted.length;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => g.post('/v1/chat/completions', { model: 'gpt-aad', ...chat }, CALLER)),
    );
    for (const r of answers) assert.equal(r.status, 200, await r.text());
    assert.equal(az.minted.length, before + 1);
    const sent = az.requests.at(-1)!;
    assert.equal(sent.headers.authorization, `Bearer ${az.minted.at(-1)}`);
    assert.equal(sent.headers['api-key'], undefined);
  });

  test('stream passes through until [DONE]', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'gpt', stream: true, ...chat }, CALLER);
    assert.equal(r.status, 200);
    const text = await r.text();
    assert.match(text, /hello/);
    assert.match(text, /data: \[DONE\]/);
    assert.equal(az.requests.at(-1)!.headers.accept, 'text/event-stream');
  });

  test('embeddings reach the deployment', async () => {
    const r = await g.post('/v1/embeddings', { model: 'embed', input: ['a', 'b'] }, CALLER);
    const body = await r.json() as { data: unknown[] };
    assert.equal(r.status, 200);
    assert.equal(body.data.length, 2);
    assert.equal(az.requests.at(-1)!.path, '/openai/deployments/embed-prod/embeddings');
  });

  test('/v1/messages is translated through chat', async () => {
    const r = await g.post('/v1/messages', { model: 'gpt', max_tokens: 16, ...chat }, CALLER);
    const body = await r.json() as { content: { text: string }[] };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.content[0]!.text, 'hi from azure');
  });

  test('errors: canned messages, derived codes, no upstream text', async () => {
    const cases: [string, (() => void) | undefined, number, string, string | undefined][] = [
      ['missing', undefined, 404, 'upstream deployment or model not found', 'model_not_found'],
      ['wrong-key', undefined, 401, 'upstream authentication failed', '401'],
      ['gpt', () => az.script(contentPolicyRefusal), 400, 'upstream returned 400', 'content_policy_violation'],
      ['gpt', () => az.script(throttled), 429, 'upstream rate limited', '429'],
    ];
    for (const [model, setup, status, message, code] of cases) {
      setup?.();
      const r = await g.post('/v1/chat/completions', { model, ...chat }, CALLER);
      const text = await r.text();
      assert.equal(r.status, status, text);
      const e = (JSON.parse(text) as { error: { message: string; type: string; code?: string } }).error;
      assert.equal(e.message, message);
      assert.equal(e.type, 'upstream_error');
      assert.equal(e.code, code);
      assert.equal(text.includes('SECRETNAME'), false);
      if (status === 429) assert.equal(r.headers.get('retry-after'), '7');
    }
  });

  test('a refused AAD mint is a 401 without the token endpoint’s words', async () => {
    // A second gateway whose AAD secret the token endpoint refuses.
    const wrong = JSON.stringify({ ...AAD, client_secret: 'wrong-SECRET-value', authority_host: az.url });
    const other = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: az, adapter: azure-openai, api_key: '${wrong}', api_base: "${az.url}" }
models:
  - { display_name: gpt, provider_key: az, model_name: gpt-4o-prod, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
    const r = await other.post('/v1/chat/completions', { model: 'gpt', ...chat }, CALLER);
    const text = await r.text();
    assert.equal(r.status, 401, text);
    assert.match(text, /invalid upstream credentials: azure aad token endpoint refused the credential \(HTTP 401\)/);
    assert.equal(text.includes('AADSTS'), false);
    assert.equal(other.sent.length, 1, 'only the mint was attempted');
  });

  test('malformed credential JSON loads and fails with 401; a missing api_base with 400; nothing sent', async () => {
    const before = g.sent.length;
    const bad = await g.post('/v1/chat/completions', { model: 'bad-json', ...chat }, CALLER);
    const badText = await bad.text();
    assert.equal(bad.status, 401, badText);
    assert.match(badText, /"type":"authentication_error"/);
    assert.match(badText, /looks JSON-shaped but failed to parse/);
    const anth = await g.post('/v1/messages', { model: 'bad-json', max_tokens: 8, ...chat }, CALLER);
    assert.equal(anth.status, 401);
    assert.equal((await anth.json() as { error: { type: string } }).error.type, 'authentication_error');
    const noBase = await g.post('/v1/chat/completions', { model: 'no-base', ...chat }, CALLER);
    assert.equal(noBase.status, 400);
    assert.match(await noBase.text(), /azure provider_key has no api_base/);
    const dep = await g.post('/v1/chat/completions', { model: 'bad-deployment', ...chat }, CALLER);
    assert.equal(dep.status, 400);
    assert.equal(g.sent.length, before);
  });
});
