// No upstream redirect is followed (docs/security.md "Upstream URLs and credentials"): the transport's
// refusal on its own, then every client of it — provider calls on three wires, the Vertex and Azure AAD
// token endpoints, a guardrail service and the OTLP exporter — against an upstream that answers 307/308
// to a second recording server, which must receive nothing (no key, no prompt).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { runChain } from '../../src/guardrails/chain.ts';
import type { UpstreamRequest, UpstreamResponse } from '../../src/platform.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { transientStatus } from '../../src/telemetry/exporter.ts';
import { postThrough } from '../../src/telemetry/telemetry.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { fetchUpstream, refuseRedirects, UpstreamRedirected } from '../../src/upstream-fetch.ts';
import { guardrail } from '../support/guardrails.ts';
import { AAD, AZURE_KEY } from '../support/mock-azure.ts';
import { type MockVertex, startMockVertex } from '../support/mock-vertex.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { type RedirectPair, startRedirectPair } from '../support/redirect-upstream.ts';

const CALLER = 'sk-caller-redirect-SECRET-1';
const OPENAI_KEY = 'sk-openai-REDIR-KEY-1111';
const ANTHROPIC_KEY = 'sk-ant-REDIR-KEY-2222';
const PROMPT = 'confidential prompt';
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: PROMPT }] });

function answer(status: number, discarded: string[]): UpstreamResponse {
  return {
    status,
    header: () => null,
    body: (async function* () {})(),
    text: () => Promise.resolve(''),
    discard: () => {
      discarded.push(String(status));
      return Promise.resolve();
    },
  };
}

describe('refuseRedirects', () => {
  test('every 3xx rejects with UpstreamRedirected after the body is discarded; other statuses pass', async () => {
    const discarded: string[] = [];
    let status = 200;
    const f = refuseRedirects(() => Promise.resolve(answer(status, discarded)));
    const req: UpstreamRequest = { url: 'http://u', method: 'POST', headers: {} };
    for (status of [300, 301, 302, 303, 304, 307, 308]) {
      await assert.rejects(f(req), (e: unknown) => {
        assert.ok(e instanceof UpstreamRedirected);
        assert.equal(e.status, status);
        assert.equal(e.caller.status, 502);
        assert.equal(e.caller.kind, 'upstream_error');
        assert.equal(e.upstreamAtFault, true);
        return true;
      });
    }
    assert.deepEqual(discarded, ['300', '301', '302', '303', '304', '307', '308']);
    for (status of [200, 204, 400, 404, 500]) assert.equal((await f(req)).status, status);
  });

  test("fetchUpstream does not follow: the 307 comes back, the redirect's target gets nothing", async () => {
    const pair = await startRedirectPair();
    try {
      const f = fetchUpstream(fetch);
      const res = await f({
        url: `${pair.redirector.url}/v1/messages`,
        method: 'POST',
        headers: { 'x-api-key': ANTHROPIC_KEY, 'content-type': 'application/json' },
        body: JSON.stringify(chat('m')),
      });
      assert.equal(res.status, 307);
      await res.discard();
      assert.equal(pair.redirector.requests.length, 1);
      assert.equal(pair.target.requests.length, 0);
    } finally {
      await pair.close();
    }
  });
});

describe('through the proxy', () => {
  let pair: RedirectPair;
  let vx: MockVertex;
  let g: RecordingGateway;

  before(async () => {
    pair = await startRedirectPair();
    vx = await startMockVertex();
    const base = pair.redirector.url;
    const sa = { ...vx.newServiceAccount(), token_uri: `${base}/token` };
    const vertex = JSON.stringify({ project: 'my-secret-proj', region: 'us-central1', service_account_json: sa });
    const aad = JSON.stringify({ ...AAD, authority_host: base });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: ${OPENAI_KEY}, api_base: "${base}/v1" }
  - { display_name: ant, provider: anthropic, api_key: ${ANTHROPIC_KEY}, api_base: "${base}" }
  - { display_name: az, adapter: azure-openai, api_key: "${AZURE_KEY}", api_base: "${base}" }
  - { display_name: az-aad, adapter: azure-openai, api_key: '${aad}', api_base: "${vx.url}" }
  - { display_name: gcp, adapter: vertex, api_key: '${vertex}', api_base: "${vx.url}" }
models:
  - { display_name: m-oai, provider_key: oai, model_name: gpt-4o, retries: 0 }
  - { display_name: m-oai-308, provider_key: oai, model_name: gpt-308, retries: 0 }
  - { display_name: m-ant, provider_key: ant, model_name: claude-3, retries: 0 }
  - { display_name: m-az, provider_key: az, model_name: dep1, retries: 0 }
  - { display_name: m-aad, provider_key: az-aad, model_name: dep1, retries: 0 }
  - { display_name: m-vertex, provider_key: gcp, model_name: gemini-1.5-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(async () => {
    await pair.close();
    await vx.close();
  });

  test('chat on the OpenAI, Anthropic and Azure wires: 502 upstream_error, nothing reaches the target', async () => {
    for (const model of ['m-oai', 'm-oai-308', 'm-ant', 'm-az']) {
      const r = await g.post('/v1/chat/completions', chat(model), CALLER);
      const text = await r.text();
      assert.equal(r.status, 502, `${model}: ${text}`);
      const body = JSON.parse(text) as { error: { type: string; message: string } };
      assert.equal(body.error.type, 'upstream_error', model);
      assert.match(body.error.message, /redirect/, model);
      assert.doesNotMatch(text, /stolen|steal/, model);
    }
    assert.equal(pair.redirector.requests.length, 4);
    assert.equal(pair.target.requests.length, 0, 'no key and no prompt reached the redirect target');
  });

  test("/v1/messages: the Anthropic envelope, and the target's answer never served", async () => {
    const r = await g.post(
      '/v1/messages',
      { model: 'm-ant', max_tokens: 5, messages: [{ role: 'user', content: PROMPT }] },
      CALLER,
    );
    const text = await r.text();
    assert.equal(r.status, 502, text);
    const body = JSON.parse(text) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, 'error');
    assert.match(body.error.message, /redirect/);
    assert.equal(pair.target.requests.length, 0);
  });

  test('a redirecting target counts against its health (cooldown)', async () => {
    const list = await (await createStatusApp(g.gw).request('/status/models')).json() as {
      display_name: string;
      status: string;
    }[];
    const oai = list.find((m) => m.display_name === 'm-oai');
    assert.equal(oai?.status, 'cooldown', JSON.stringify(oai));
  });

  test('token endpoints (Vertex service account, Azure AAD): no token minted through a redirect', async () => {
    for (const model of ['m-vertex', 'm-aad']) {
      const r = await g.post('/v1/chat/completions', chat(model), CALLER);
      const text = await r.text();
      assert.equal(r.status, 502, `${model}: ${text}`);
      assert.match(text, /redirect/, model);
    }
    assert.ok(pair.redirector.requests.some((r) => r.path === '/token'), 'the Vertex mint was tried');
    assert.ok(pair.redirector.requests.some((r) => r.path.endsWith('/oauth2/v2.0/token')), 'the AAD mint was tried');
    assert.equal(pair.target.requests.length, 0, 'no assertion and no client secret reached the target');
    assert.equal(vx.requests.length, 0, 'no model call without a token');
  });

  test('a guardrail service that redirects fails (its 5xx tag); the target gets nothing', async () => {
    const mod = guardrail({
      name: 'mod',
      kind: 'openai_moderation',
      api_key: 'sk-mod-REDIR-SECRET-4444',
      endpoint: `${pair.redirector.url}/v1`,
      timeout_ms: 5000,
      fail_open: false,
    });
    const v = await runChain([mod], 'input', [{ role: 'user', text: PROMPT }], {
      ctx: { fetch: g.gw.upstream },
      log: () => {},
      now: () => performance.now() / 1000,
    });
    assert.equal(v.blocked?.errorType, 'openai_moderation_5xx');
    assert.ok(pair.redirector.requests.some((r) => r.path === '/v1/moderations'));
    assert.equal(pair.target.requests.length, 0);
  });

  test("the OTLP exporter's POST: the redirect is the collector's answer, not retried, not followed", async () => {
    const post = postThrough(g.gw.upstream);
    const status = await post(
      `${pair.redirector.url}/v1/traces`,
      { 'content-type': 'application/json', authorization: 'Bearer otlp-REDIR-SECRET-5555' },
      '{"resourceSpans":[]}',
      new Cancel(),
    );
    assert.equal(status, 307);
    assert.equal(transientStatus(status), false, 'dropped as rejected, not retried');
    assert.ok(pair.redirector.requests.some((r) => r.path === '/v1/traces'));
    assert.equal(pair.target.requests.length, 0);
  });
});
