// No caller text changes an upstream URL's path (docs/security.md "Upstream URLs and credentials"): the
// shared segment check (src/providers/url-segment.ts) on its own, then the Vertex, Bedrock and Azure
// adapters through the proxy app against recording mocks — a refused value is a 400 naming the field and
// nothing reaches any upstream; the valid ids still reach the path they name.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSegment, segmentProblem, urlUnder } from '../../src/providers/url-segment.ts';
import { AWS, type MockBedrock, startMockBedrock } from '../support/mock-bedrock.ts';
import { AAD, AZURE_KEY, type MockAzure, startMockAzure } from '../support/mock-azure.ts';
import { type MockVertex, PROJECT, startMockVertex, STATIC_TOKEN } from '../support/mock-vertex.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

const VERTEX_ID = /^[A-Za-z0-9][A-Za-z0-9._@-]*$/;
const BEDROCK_ID = /^[A-Za-z0-9._:/-]+$/;

describe('segmentProblem', () => {
  test('valid model ids are one segment', () => {
    for (
      const id of ['gemini-1.5-flash', 'claude-3-5-sonnet-v2@20241022', 'text-embedding-005', 'jamba-1.5-large@001']
    ) {
      assert.equal(segmentProblem(id, VERTEX_ID), undefined, id);
    }
    for (const id of ['anthropic.claude-3-5-sonnet-20241022-v2:0', 'us.meta.llama3-2-1b-instruct-v1:0']) {
      assert.equal(segmentProblem(id, BEDROCK_ID), undefined, id);
    }
    assert.equal(
      segmentProblem('arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v2', BEDROCK_ID),
      undefined,
      'an ARN keeps its "/" inside the one (encoded) segment',
    );
  });

  test('every way to spell a path step is refused, whatever the grammar', () => {
    const any = /^.*$/s;
    const cases: [string, RegExp][] = [
      ['', /^$/],
      ['gemini-1.5-flash\\%2e%2e\\gemini-1.5-pro', any],
      ['a\\b', any],
      ['%2e%2e', any],
      ['%2E%2E', any],
      ['.%2e', any],
      ['a%2fb', any],
      ['a%2Fb', any],
      ['a%5cb', any],
      ['a%5Cb', any],
      ['%252e%252e', any],
      ['a%252fb', any],
      ['a%25252fb', any],
      ['%25%32%65', any],
      ['..', any],
      ['.', any],
      ['a/../b', any],
      ['gemini..x', any],
      ['a%zz', any],
      ['a%', any],
    ];
    for (const [v, grammar] of cases) {
      assert.ok(segmentProblem(v, grammar), `${JSON.stringify(v)} must be refused`);
    }
  });

  test('the grammar decides the rest', () => {
    for (const v of ['gemini x', 'gemini?alt=1', 'gemini#x', 'gemini:predict', 'a/b', 'gemini%20x', '-x']) {
      assert.ok(segmentProblem(v, VERTEX_ID), `${JSON.stringify(v)} must be refused`);
    }
  });

  test('encodeSegment keeps one segment: "/" and ":" encoded, "@" kept', () => {
    assert.equal(encodeSegment('claude-3-5-sonnet-v2@20241022'), 'claude-3-5-sonnet-v2@20241022');
    assert.equal(encodeSegment('arn:aws:x/y'), 'arn%3Aaws%3Ax%2Fy');
  });

  test('urlUnder refuses a URL that parsing moves off its origin or prefix', () => {
    const base = 'https://us-central1-aiplatform.googleapis.com';
    const prefix = '/v1/projects/p-123456/locations/us-central1/';
    assert.equal(
      urlUnder('vertex', base, prefix, 'publishers/google/models/gemini-1.5-flash:generateContent'),
      `${base}${prefix}publishers/google/models/gemini-1.5-flash:generateContent`,
    );
    assert.equal(
      urlUnder('vertex', base, prefix, 'publishers/google/models/gemini-1.5-flash:streamGenerateContent?alt=sse'),
      `${base}${prefix}publishers/google/models/gemini-1.5-flash:streamGenerateContent?alt=sse`,
    );
    for (const rest of ['publishers/google/models/a\\..\\b:x', 'publishers/google/models/a/%2e%2e/b:x', '../../../x']) {
      const r = urlUnder('vertex', base, prefix, rest);
      assert.ok(typeof r !== 'string' && r.kind === 'refused', rest);
      assert.doesNotMatch(r.message, /p-123456/, 'the refusal names no project');
    }
    const host = urlUnder('vertex', 'https://127.0.0.1:4903\\-aiplatform.googleapis.com', prefix, 'x');
    assert.equal(
      typeof host,
      'string',
      'the origin check compares with the base as parsed: the region check guards the host',
    );
  });
});

const CALLER = 'sk-caller-url-SECRET-1';
const NARROW = 'sk-caller-narrow-SECRET-2';
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'confidential prompt' }] });

async function refusal(r: Response): Promise<string> {
  const text = await r.text();
  assert.equal(r.status, 400, text);
  return (JSON.parse(text) as { error: { message: string } }).error.message;
}

describe('Vertex through the proxy', () => {
  let vx: MockVertex;
  let g: RecordingGateway;

  before(async () => {
    vx = await startMockVertex();
    const key = (over: Record<string, string>) =>
      JSON.stringify({ project: PROJECT, region: 'us-central1', access_token: STATIC_TOKEN, ...over });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: vertex-mock, adapter: vertex, api_key: '${key({})}', api_base: "${vx.url}" }
  - { display_name: vertex-global, adapter: vertex, api_key: '${key({ region: 'global' })}', api_base: "${vx.url}" }
  - { display_name: bad-region-host, adapter: vertex, api_key: '${key({ region: '127.0.0.1:4903\\\\' })}' }
  - { display_name: bad-region-path, adapter: vertex, api_key: '${
        key({ region: 'us-central1/../../evil' })
      }', api_base: "${vx.url}" }
  - { display_name: bad-region-escape, adapter: vertex, api_key: '${
        key({ region: 'us%2f..%2fevil' })
      }', api_base: "${vx.url}" }
  - { display_name: bad-project, adapter: vertex, api_key: '${
        key({ project: 'proj1\\\\..\\\\evil-project' })
      }', api_base: "${vx.url}" }
  - { display_name: bad-project-escape, adapter: vertex, api_key: '${
        key({ project: 'evil-project%2f' })
      }', api_base: "${vx.url}" }
models:
  - { display_name: "vtx/*", provider_key: vertex-mock, model_name: "*", retries: 0 }
  - { display_name: "gbl/*", provider_key: vertex-global, model_name: "*", retries: 0 }
  - { display_name: region-host, provider_key: bad-region-host, model_name: gemini-1.5-flash, retries: 0 }
  - { display_name: region-path, provider_key: bad-region-path, model_name: gemini-1.5-flash, retries: 0 }
  - { display_name: region-escape, provider_key: bad-region-escape, model_name: gemini-1.5-flash, retries: 0 }
  - { display_name: project, provider_key: bad-project, model_name: gemini-1.5-flash, retries: 0 }
  - { display_name: project-escape, provider_key: bad-project-escape, model_name: gemini-1.5-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: narrow, key_env: NARROW, allowed_models: ["vtx/gemini-1.5-flash*"] }
`,
      { CALLER, NARROW },
    );
  });

  after(() => vx.close());

  test("the review's reproduction: 400 naming the field, nothing sent", async () => {
    assert.equal((await g.post('/v1/chat/completions', chat('vtx/gemini-1.5-pro'), NARROW)).status, 403);
    const before = g.sent.length;
    const r = await g.post('/v1/chat/completions', chat('vtx/gemini-1.5-flash\\%2e%2e\\gemini-1.5-pro'), NARROW);
    const message = await refusal(r);
    assert.match(message, /vertex upstream model id/);
    assert.match(message, /gemini-1\.5-flash\\\\%2e%2e/, 'the refusal quotes the value');
    assert.equal(g.sent.length, before, 'no upstream request');
    assert.equal(vx.requests.length, 0, 'the mock got nothing');
  });

  test('deeper traversals, double encoding, and every endpoint: refused, nothing sent', async () => {
    const models = [
      `vtx/gemini-a${'\\%2e%2e'.repeat(7)}\\evil`,
      `vtx/gemini-a${'\\%2e%2e'.repeat(10)}\\evil`,
      'vtx/gemini-1.5-flash%2f..%2fgemini-1.5-pro',
      'vtx/gemini-1.5-flash%252f%252e%252e%252fgemini-1.5-pro',
      'vtx/gemini-1.5-flash%5c..%5cgemini-1.5-pro',
      'vtx/gemini-1.5-flash/../gemini-1.5-pro',
      'vtx/claude-3\\..\\..\\..\\anthropic\\models\\claude-opus-4',
    ];
    for (const model of models) {
      await refusal(await g.post('/v1/chat/completions', chat(model), CALLER));
      await refusal(
        await g.post('/v1/messages', { model, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, CALLER),
      );
      await refusal(await g.post('/v1/embeddings', { model, input: 'x' }, CALLER));
    }
    assert.equal(g.sent.length, 0);
    assert.equal(vx.requests.length, 0);
  });

  test('valid ids reach exactly the path they name', async () => {
    const r1 = await g.post('/v1/chat/completions', chat('vtx/gemini-1.5-flash'), NARROW);
    assert.equal(r1.status, 200, await r1.text());
    const r2 = await g.post('/v1/chat/completions', chat('vtx/claude-3-5-sonnet-v2@20241022'), CALLER);
    assert.equal(r2.status, 200, await r2.text());
    const r3 = await g.post('/v1/chat/completions', chat('gbl/gemini-1.5-flash'), CALLER);
    assert.equal(r3.status, 200, await r3.text());
    assert.deepEqual(vx.requests.map((r) => r.path), [
      `/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-1.5-flash:generateContent`,
      `/v1/projects/${PROJECT}/locations/us-central1/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict`,
      `/v1/projects/${PROJECT}/locations/global/publishers/google/models/gemini-1.5-flash:generateContent`,
    ]);
    vx.requests.length = 0;
    g.sent.length = 0;
  });

  test('region and project from the credential JSON: 400 naming the field, the token goes nowhere', async () => {
    const cases: [string, RegExp][] = [
      ['region-host', /provider_key\.api_key\.region/],
      ['region-path', /provider_key\.api_key\.region/],
      ['region-escape', /provider_key\.api_key\.region/],
      ['project', /provider_key\.api_key\.project/],
      ['project-escape', /provider_key\.api_key\.project/],
    ];
    for (const [model, field] of cases) {
      const message = await refusal(await g.post('/v1/chat/completions', chat(model), CALLER));
      assert.match(message, field, model);
      assert.doesNotMatch(message, /evil-project/, 'a project is not repeated to the caller');
    }
    assert.equal(g.sent.length, 0, 'no request, to any host');
    assert.equal(vx.requests.length, 0);
  });
});

describe('Bedrock and Azure through the proxy', () => {
  let br: MockBedrock;
  let az: MockAzure;
  let g: RecordingGateway;

  before(async () => {
    br = await startMockBedrock();
    az = await startMockAzure();
    const aws = JSON.stringify(AWS);
    const aad = (tenant: string) => JSON.stringify({ ...AAD, tenant_id: tenant, authority_host: az.url });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: aws, adapter: bedrock, api_key: '${aws}', api_base: "${br.url}" }
  - { display_name: az, adapter: azure-openai, api_key: "${AZURE_KEY}", api_base: "${az.url}" }
  - { display_name: az-tenant, adapter: azure-openai, api_key: '${aad('t1/../../evil')}', api_base: "${az.url}" }
  - { display_name: az-tenant-escape, adapter: azure-openai, api_key: '${
        aad('t1%2f..%2fevil')
      }', api_base: "${az.url}" }
models:
  - { display_name: "bed/*", provider_key: aws, model_name: "*", retries: 0 }
  - { display_name: "az/*", provider_key: az, model_name: "*", retries: 0 }
  - { display_name: tenant, provider_key: az-tenant, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: tenant-escape, provider_key: az-tenant-escape, model_name: gpt-4o-prod, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(async () => {
    await br.close();
    await az.close();
  });

  test('Bedrock: a traversal in the model id is a 400 naming the field; nothing sent', async () => {
    for (
      const model of [
        'bed/anthropic.x/../../../evil',
        'bed/anthropic.x%2f..%2fevil',
        'bed/anthropic.x%252e%252e',
        'bed/anthropic.x\\..\\evil',
      ]
    ) {
      assert.match(await refusal(await g.post('/v1/chat/completions', chat(model), CALLER)), /upstream model id/);
    }
    assert.equal(br.requests.length, 0);
    assert.equal(g.sent.length, 0);
  });

  test('Azure: a deployment or tenant that is not one segment is a 400 naming the field; nothing sent', async () => {
    for (const model of ['az/dep%2e%2e', 'az/dep\\..\\x', 'az/dep%2fx']) {
      assert.match(await refusal(await g.post('/v1/chat/completions', chat(model), CALLER)), /azure deployment/);
    }
    for (const model of ['tenant', 'tenant-escape']) {
      assert.match(await refusal(await g.post('/v1/chat/completions', chat(model), CALLER)), /tenant_id/);
    }
    assert.equal(az.requests.length, 0);
    assert.equal(g.sent.length, 0);
  });
});
