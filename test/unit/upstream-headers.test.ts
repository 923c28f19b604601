// A provider key's `request.default_headers` and `request.forward_client_headers` (docs/configuration.md
// "Provider keys"; AISIX's rules in docs/aisix-compatibility.md "Upstream headers"): templates resolved from the
// request, a header with an unresolved variable dropped whole, the allowlist, operator over forwarded and the
// gateway's own over both, on every wire path (translated ones too), JSON and SSE, and the caller's credential
// and trace context never forwarded, not even under `"*"`.
// Run: node --import tsx --test test/unit/upstream-headers.test.ts
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { patternAdmits, renderHeaderValue } from '../../src/providers/upstream-headers.ts';
import { AWS, type MockBedrock, startMockBedrock } from '../support/mock-bedrock.ts';
import { AZURE_KEY, type MockAzure, startMockAzure } from '../support/mock-azure.ts';
import { type MockVertex, PROJECT, startMockVertex, STATIC_TOKEN } from '../support/mock-vertex.ts';
import { type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-headers-caller';
const NO_TEAM_KEY = 'sk-headers-loner';

/** The `request` block every key below carries (`$$` keeps the file's own `${VAR}` interpolation off). */
const REQUEST = `
    request:
      default_headers:
        x-tenant: "t=$\${request.api_key.team_id}"
        x-who: "$\${request.api_key.name}/$\${model.name}/$\${provider_key.name}"
        x-rid: "$\${ request.id }"
        x-user: "$\${request.api_key.user_id}"
        x-unknown: "$\${request.secret}"
        x-open: "$\${request.id"
        x-static: static
        x-both: operator
        anthropic-beta: operator-beta
        authorization: Bearer operator-SECRET
        content-type: text/plain
        x-aisix-request-id: spoofed
      forward_client_headers: ["x-fwd-*", "X-Both", "x-stainless-*", "cookie"]`;

const CALLER_HEADERS = {
  'x-fwd-one': 'one',
  'x-fwd-two': 'two',
  'x-both': 'client',
  'anthropic-beta': 'caller-beta',
  'x-other': 'not allowlisted',
  'x-stainless-lang': 'js',
  cookie: 'session=caller',
  'x-aisix-request-id': 'rid-headers-1',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  tracestate: 'caller=1',
  baggage: 'user=caller',
};

describe('provider key request headers', () => {
  let mock: MockUpstream;
  let ant: MockAnthropic;
  let br: MockBedrock;
  let az: MockAzure;
  let vx: MockVertex;
  let app: ReturnType<typeof createProxyApp>;

  before(async () => {
    mock = await startMockUpstream();
    ant = await startMockAnthropic();
    br = await startMockBedrock();
    az = await startMockAzure();
    vx = await startMockVertex();
    const vertexKey = JSON.stringify({ project: PROJECT, region: 'europe-west4', access_token: STATIC_TOKEN });
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - display_name: pk-oai
    provider: openai
    api_key: sk-up-oai
    api_base: "${mock.base}"${REQUEST}
  - display_name: pk-ant
    provider: anthropic
    api_key: sk-up-ant
    api_base: "${ant.url}"${REQUEST}
  - display_name: pk-aws
    adapter: bedrock
    provider: bedrock
    api_key: '${JSON.stringify(AWS)}'
    api_base: "${br.url}"${REQUEST}
  - display_name: pk-az
    adapter: azure-openai
    provider: azure
    api_key: "${AZURE_KEY}"
    api_base: "${az.url}"${REQUEST}
  - display_name: pk-gcp
    adapter: vertex
    provider: google
    api_key: '${vertexKey}'
    api_base: "${vx.url}"${REQUEST}
  - display_name: pk-all
    provider: openai
    api_key: sk-up-all
    api_base: "${mock.base}"
    request: { forward_client_headers: ["*"] }
  - { display_name: pk-plain, provider: openai, api_key: sk-up-plain, api_base: "${mock.base}" }
models:
  - { display_name: m-oai, model_name: up-oai, provider_key: pk-oai }
  - { display_name: m-ant, model_name: claude-up, provider_key: pk-ant }
  - { display_name: m-aws, model_name: "us.meta.llama3-1-70b-instruct-v1:0", provider_key: pk-aws }
  - { display_name: m-az, model_name: gpt-4o-prod, provider_key: pk-az }
  - { display_name: m-gcp, model_name: gemini-2.0-flash, provider_key: pk-gcp }
  - { display_name: m-all, model_name: up-all, provider_key: pk-all }
  - { display_name: m-plain, model_name: up-plain, provider_key: pk-plain }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"], team_id: team-7 }
  - { display_name: loner, key_env: NO_TEAM_KEY, allowed_models: ["*"] }
`,
      { env: { CALLER_KEY: KEY, NO_TEAM_KEY } },
    );
    app = createProxyApp(gw);
  });
  after(async () => {
    await Promise.all([mock.close(), ant.close(), br.close(), az.close(), vx.close()]);
  });

  const post = async (path: string, body: unknown, key = KEY) => {
    const res = await app.request(path, {
      method: 'POST',
      headers: { ...CALLER_HEADERS, authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return text;
  };
  const chat = (model: string, stream = false) => ({
    model,
    stream,
    max_tokens: 8,
    messages: [{ role: 'user', content: 'hi' }],
  });

  /** What every key with REQUEST sends, whatever the wire; `model` is the model row's display name. */
  function assertKeyHeaders(h: IncomingHttpHeaders, model: string, pk: string, sendsRequestId = true): void {
    assert.equal(h['x-tenant'], 't=team-7');
    assert.equal(h['x-who'], `caller/${model}/${pk}`);
    assert.equal(h['x-rid'], 'rid-headers-1');
    assert.equal(h['x-static'], 'static');
    for (const dropped of ['x-user', 'x-unknown', 'x-open']) assert.equal(h[dropped], undefined, dropped);
    assert.equal(h['x-both'], 'operator', 'the operator beats the caller');
    assert.equal(h['anthropic-beta'], 'operator-beta', "the operator beats the caller's beta, on Anthropic too");
    assert.equal(h['x-fwd-one'], 'one');
    assert.equal(h['x-fwd-two'], 'two');
    assert.equal(h['x-other'], undefined, 'not allowlisted');
    assert.equal(h['x-stainless-lang'], undefined, 'never forwarded');
    assert.equal(h.cookie, undefined, 'never forwarded');
    // Bedrock's wire carries no request id of the gateway's (as AISIX's): the operator's name is free there.
    const rid = sendsRequestId ? 'rid-headers-1' : 'spoofed';
    assert.equal(h['x-aisix-request-id'], rid, "the gateway's own beats the operator's");
    assert.match(String(h['content-type']), /^application\/json/, "the gateway's own beats the operator's");
    for (const trace of ['traceparent', 'tracestate', 'baggage']) assert.equal(h[trace], undefined, trace);
    assert.equal(JSON.stringify(h).includes(KEY), false, "the caller's credential never leaves");
    assert.equal(JSON.stringify(h).includes('operator-SECRET'), false, 'no operator credential slot');
  }

  test('OpenAI wire: chat JSON and SSE, embeddings, native responses', async () => {
    for (
      const [path, body] of [
        ['/v1/chat/completions', chat('m-oai')],
        ['/v1/chat/completions', chat('m-oai', true)],
        ['/v1/embeddings', { model: 'm-oai', input: 'x' }],
        ['/v1/responses', { model: 'm-oai', input: 'hi' }],
      ] as const
    ) {
      const from = mock.requests.length;
      await post(path, body);
      const h = mock.requests[from]!.headers;
      assertKeyHeaders(h, 'm-oai', 'pk-oai');
      assert.equal(h.authorization, 'Bearer sk-up-oai', path);
    }
  });

  test('translated: /v1/messages to an OpenAI-wire key, JSON and SSE', async () => {
    for (const stream of [false, true]) {
      const from = mock.requests.length;
      await post('/v1/messages', chat('m-oai', stream));
      assert.equal(mock.requests[from]!.url, '/v1/chat/completions');
      assertKeyHeaders(mock.requests[from]!.headers, 'm-oai', 'pk-oai');
    }
  });

  test('Anthropic wire: native /v1/messages JSON and SSE, and chat translated to it', async () => {
    for (
      const [path, stream] of [['/v1/messages', false], ['/v1/messages', true], ['/v1/chat/completions', false], [
        '/v1/chat/completions',
        true,
      ]] as const
    ) {
      const from = ant.requests.length;
      await post(path, chat('m-ant', stream));
      const h = ant.requests[from]!.headers;
      assertKeyHeaders(h, 'm-ant', 'pk-ant');
      assert.equal(h['x-api-key'], 'sk-up-ant');
      assert.equal(h['anthropic-version'], '2023-06-01');
    }
  });

  test('translated: /v1/responses to an Anthropic key (through chat, then Messages), JSON and SSE', async () => {
    for (const stream of [false, true]) {
      const from = ant.requests.length;
      const text = await post('/v1/responses', { model: 'm-ant', input: 'hi', max_output_tokens: 8, stream });
      assert.equal(text.includes('response.completed'), stream, text);
      assert.equal(ant.requests[from]!.url, '/v1/messages');
      assert.equal(ant.requests[from]!.json?.stream, stream || undefined);
      assertKeyHeaders(ant.requests[from]!.headers, 'm-ant', 'pk-ant');
    }
  });

  test('Bedrock: the headers are signed with the request (the mock recomputes SigV4)', async () => {
    const from = br.requests.length;
    await post('/v1/chat/completions', chat('m-aws'));
    assert.deepEqual(br.rejected, []);
    const h = br.requests[from]!.headers;
    assertKeyHeaders(h, 'm-aws', 'pk-aws', false);
    const signed = /SignedHeaders=([a-z0-9;-]+)/.exec(String(h.authorization))![1]!.split(';');
    for (const name of ['x-tenant', 'x-who', 'x-fwd-one', 'x-both']) assert.ok(signed.includes(name), name);
  });

  test('Azure and Vertex, JSON and SSE', async () => {
    for (const [server, model, pk] of [[az, 'm-az', 'pk-az'], [vx, 'm-gcp', 'pk-gcp']] as const) {
      for (const stream of [false, true]) {
        const from = server.requests.length;
        await post('/v1/chat/completions', chat(model, stream));
        assertKeyHeaders(server.requests[from]!.headers, model, pk);
      }
    }
  });

  test('a caller key without a team: only that template is dropped', async () => {
    const from = mock.requests.length;
    await post('/v1/chat/completions', chat('m-oai'), NO_TEAM_KEY);
    const h = mock.requests[from]!.headers;
    assert.equal(h['x-tenant'], undefined);
    assert.equal(h['x-who'], 'loner/m-oai/pk-oai');
  });

  test('"*" forwards the caller\'s own headers, never its credential, trace context or the gateway\'s names', async () => {
    for (const stream of [false, true]) {
      const from = mock.requests.length;
      await post('/v1/chat/completions', chat('m-all', stream));
      const h = mock.requests[from]!.headers;
      assert.equal(h['x-other'], 'not allowlisted');
      assert.equal(h['x-both'], 'client');
      assert.equal(h['anthropic-beta'], 'caller-beta');
      assert.equal(h.authorization, 'Bearer sk-up-all');
      assert.equal(h['x-aisix-request-id'], 'rid-headers-1');
      for (const name of ['traceparent', 'tracestate', 'baggage', 'cookie', 'x-stainless-lang']) {
        assert.equal(h[name], undefined, name);
      }
    }
  });

  test('a key without a request block forwards nothing', async () => {
    const from = mock.requests.length;
    await post('/v1/chat/completions', chat('m-plain'));
    const h = mock.requests[from]!.headers;
    for (const name of ['x-fwd-one', 'x-both', 'x-other', 'traceparent']) assert.equal(h[name], undefined, name);
  });
});

describe('the pieces', () => {
  const vars: Record<string, string> = { 'request.id': 'r-1', 'model.name': 'm', empty: '' };
  const lookup = (n: string) => vars[n];

  test('templates: several references, whitespace, unknown, empty, unterminated, a newline', () => {
    assert.equal(renderHeaderValue('plain', lookup), 'plain');
    assert.equal(renderHeaderValue('${request.id}/${ model.name }!', lookup), 'r-1/m!');
    assert.equal(renderHeaderValue('${nope}', lookup), undefined);
    assert.equal(renderHeaderValue('x${empty}', lookup), undefined);
    assert.equal(renderHeaderValue('${request.id', lookup), undefined);
    assert.equal(renderHeaderValue('${bad}', () => 'a\r\nx-admin: 1'), undefined);
    assert.equal(renderHeaderValue('a\nb', lookup), undefined);
  });

  test('an etcd row keeps tls and request; a request member Sluice does not implement is reported', () => {
    const r = parseDocument('provider_keys', 'pk-1', {
      display_name: 'pk',
      api_key: 'sk',
      tls: { ca_cert: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', verify: false },
      request: { default_headers: { 'x-a': '${request.id}' }, param_renames: { a: 'b' } },
    }, 'lenient');
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.resource.tls?.verify, false);
    assert.deepEqual(r.resource.request, { default_headers: { 'x-a': '${request.id}' }, forward_client_headers: [] });
    assert.deepEqual(r.ignored, ['request.param_renames']);
    const bad = parseDocument('provider_keys', 'pk-2', {
      display_name: 'pk',
      api_key: 'sk',
      tls: { ca_cert: 'not a certificate' },
    }, 'lenient');
    assert.ok(!bad.ok);
    assert.match(bad.error, /tls\.ca_cert.*holds no CERTIFICATE block/);
  });

  test('patterns: exact, one star anywhere, two stars never, case-insensitive', () => {
    assert.ok(patternAdmits('Anthropic-Beta', 'anthropic-beta'));
    assert.ok(patternAdmits('x-trace-*', 'x-trace-id'));
    assert.ok(patternAdmits('*-id', 'x-trace-id'));
    assert.ok(patternAdmits('*', 'anything'));
    assert.ok(!patternAdmits('x-*-*', 'x-a-b'));
    assert.ok(!patternAdmits('x-trace-*', 'x-tenant'));
    assert.ok(!patternAdmits('ab*ba', 'aba'), 'the head and tail may not overlap');
  });
});
