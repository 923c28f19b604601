// Passthrough routes served through app.request() against a provider mock that checks credentials as the real
// API does (docs/endpoints.md "Passthrough routes"): matching and rewriting, credential injection per wire,
// the body relayed as sent, streamed answers, the caller's key and trace context stripped, the special
// statuses, limits charged with the tokens the upstream reported, metrics and the access log.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import { MESSAGE_USAGE, type ProviderMock, startProviderMock } from '../support/passthrough-upstream.ts';
import { sumSamples } from '../support/metrics.ts';
import { targetUrl } from '../../src/passthrough/target.ts';

const CALLER = 'sk-caller-passthrough-1';
const OTHER = 'sk-caller-no-routes-2';
const ANTHROPIC_KEY = 'sk-ant-upstream-SECRET-77';
const OPENAI_KEY = 'sk-openai-upstream-SECRET-88';

let mock: ProviderMock;
let gw: Gateway;
let platform: TestPlatform;
let app: ReturnType<typeof createProxyApp>;

function resources(url: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: anthropic-main, provider: anthropic, secret: ${ANTHROPIC_KEY} }
  - { display_name: openai-main, provider: openai, secret: ${OPENAI_KEY}, api_base: ${url}/v1 }
models:
  - display_name: claude
    provider: anthropic
    model_name: claude-sonnet-4
    provider_key: anthropic-main
    rate_limit: { tpm: 1000 }
api_keys:
  - { display_name: app, key_env: CALLER, allowed_models: [], allowed_routes: ["raw-*", copilot, header-route], rate_limit: { rpm: 1000 } }
  - { display_name: other, key_env: OTHER, allowed_models: [claude] }
  - { display_name: office, key_hash: "0000", allowed_models: [], allowed_routes: [anon] }
passthrough_routes:
  - { name: raw-anthropic, path_prefix: /raw/anthropic, target_url: "${url}", provider_key: anthropic-main }
  - { name: raw-openai, path_prefix: /raw/openai, target_url: "${url}/v1", provider_key: openai-main, timeout_ms: 300 }
  - { name: raw-openai-deep, path_prefix: /raw/openai/deep, target_url: "${url}/deep", provider_key: openai-main }
  - name: copilot
    hosts: ["*.githubcopilot.test"]
    target_url: "${url}"
    credential_mode: forward_client
  - name: header-route
    path_prefix: /hdr
    target_url: "${url}/v1"
    auth_mode: header_key
    auth_header_name: x-gateway-key
    credential_mode: forward_client
  - name: anon
    path_prefix: /anon
    target_url: "${url}/v1"
    auth_mode: anonymous
    anonymous_key: office
    source_cidrs: [10.0.0.0/8]
    provider_key: openai-main
    identity_header: x-user
  - name: disabled-route
    path_prefix: /off
    target_url: "${url}"
    provider_key: openai-main
    enabled: false
`;
}

before(async () => {
  mock = await startProviderMock({ anthropic: ANTHROPIC_KEY, bearer: OPENAI_KEY });
  // The gateway's clock starts 5 s into a minute, so the tpm test's minute bucket cannot end while it spends it.
  const skew = 5_000 - (Date.now() % 60_000);
  const now = () => new Date(Date.now() + skew);
  ({ gw, platform } = await gatewayWith(resources(mock.url), { env: { CALLER, OTHER }, now }));
  app = createProxyApp(gw);
});
after(() => mock.close());

function ask(path: string, init: RequestInit & { key?: string | null; peer?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (init.key !== null) headers.set('authorization', `Bearer ${init.key ?? CALLER}`);
  return Promise.resolve(app.request(path, { ...init, headers }, { peer: init.peer ?? '127.0.0.1:5555' }));
}

const last = () => mock.requests[mock.requests.length - 1]!;

describe('passthrough routes: relay', () => {
  test('Anthropic wire: x-api-key and anthropic-version injected, the caller key and trace stripped, body verbatim', async () => {
    const body = '{"model":"claude-sonnet-4","max_tokens":5,  "messages":[{"role":"user","content":"hi"}]}';
    const res = await ask('/raw/anthropic/v1/messages?beta=true', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': CALLER,
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'a=b',
        'x-aisix-request-id': 'spoofed',
        'x-custom': 'kept',
        expect: '100-continue',
      },
      body,
    });
    assert.equal(res.status, 200);
    const answer = await res.json() as { usage: unknown };
    assert.deepEqual(answer.usage, MESSAGE_USAGE);
    const seen = last();
    assert.equal(seen.url, '/v1/messages?beta=true');
    assert.equal(seen.headers['x-api-key'], ANTHROPIC_KEY);
    assert.equal(seen.headers['anthropic-version'], '2023-06-01');
    assert.equal(seen.headers.authorization, undefined);
    assert.equal(seen.headers.traceparent, undefined);
    assert.equal(seen.headers.tracestate, undefined);
    assert.equal(seen.headers['x-custom'], 'kept');
    assert.equal(seen.headers.expect, undefined);
    // The gateway's one request id (an accepted inbound id is adopted, never sent twice).
    assert.equal(seen.headers['x-aisix-request-id'], res.headers.get('x-aisix-request-id'));
    assert.equal(seen.body.toString('utf8'), body, 'the bytes as sent, spacing included');
    assert.equal(res.headers.get('request-id'), 'req_upstream_1');
    assert.match(res.headers.get('server') ?? '', /^sluice/);
  });

  test('an Anthropic SSE answer is relayed as it arrives, frames intact', async () => {
    const res = await ask('/raw/anthropic/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4', max_tokens: 5, stream: true, messages: [] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(res.headers.get('content-length'), null);
    const text = await res.text();
    assert.match(text, /^event: message_start\n/);
    assert.match(text, /"text":"Hello"/);
    assert.match(text, /event: message_stop\ndata: \{"type":"message_stop"\}\n\n$/);
  });

  test('Bearer wire, the mount stripped, a repeated /v1 dropped once, any method, query kept', async () => {
    const res = await ask('/raw/openai/v1/files/abc?purpose=x&y=%20z', { method: 'DELETE' });
    assert.equal(res.status, 200);
    await res.text();
    const seen = last();
    assert.equal(seen.method, 'DELETE');
    assert.equal(seen.url, '/v1/files/abc?purpose=x&y=%20z');
    assert.equal(seen.headers.authorization, `Bearer ${OPENAI_KEY}`);
    assert.equal(seen.headers['x-api-key'], undefined);
    assert.deepEqual(res.headers.getSetCookie(), ['a=1', 'b=2'], 'repeated headers kept');
    assert.equal(res.headers.get('x-upstream'), 'yes');
    // The longer prefix wins; a target without /vN keeps the remainder's v1.
    await (await ask('/raw/openai/deep/v1/x')).text();
    assert.equal(last().url, '/deep/v1/x');
    await (await ask('/raw/openai')).text();
    assert.equal(last().url, '/v1');
  });

  test('a host route relays even a typed path; the gateway key it read never goes upstream', async () => {
    const res = await ask('/v1/chat/completions', {
      method: 'POST',
      key: null,
      headers: { host: 'API.githubcopilot.test:443', 'x-api-key': CALLER },
      body: '{}',
    });
    // forward_client sends no credential of the gateway's: the upstream's own 401 comes back as it is.
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), {
      error: { message: 'Incorrect API key provided', type: 'invalid_request_error' },
    });
    const seen = last();
    assert.equal(seen.url, '/v1/chat/completions');
    assert.equal(seen.headers.authorization, undefined);
    assert.equal(seen.headers['x-api-key'], undefined, 'gateway_key mode strips the slot it read');
    // `*.` matches exactly one more label.
    const deeper = await ask('/v1/models', { headers: { host: 'a.b.githubcopilot.test' } });
    assert.equal(deeper.status, 200, 'not claimed: the typed route answers');
    await deeper.text();
  });

  test('header_key: the gateway key from its own header, Authorization left for the upstream', async () => {
    const res = await ask('/hdr/models', {
      key: null,
      headers: { 'x-gateway-key': `Bearer ${CALLER}`, authorization: `Bearer ${OPENAI_KEY}` },
    });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(last().headers.authorization, `Bearer ${OPENAI_KEY}`);
    assert.equal(last().headers['x-gateway-key'], undefined);
    const missing = await ask('/hdr/models', { key: null, headers: { authorization: `Bearer ${OPENAI_KEY}` } });
    assert.equal(missing.status, 401);
    assert.deepEqual(await missing.json(), {
      error: {
        message: "missing or malformed x-gateway-key header (this route's gateway API key header)",
        type: 'invalid_api_key',
      },
    });
  });

  test('upstream errors relayed verbatim; a gzip answer decoded once; 204 without body', async () => {
    const boom = await ask('/raw/openai/boom');
    assert.equal(boom.status, 500);
    // Verbatim, but for the injected key an upstream echoed back.
    assert.deepEqual(await boom.json(), { error: 'boom', leaked: '[redacted]' });
    const z = await ask('/raw/openai/gzip');
    assert.deepEqual(await z.json(), { zipped: true });
    const empty = await ask('/raw/openai/empty');
    assert.equal(empty.status, 204);
    assert.equal(await empty.text(), '');
  });
});

describe('passthrough routes: refusals', () => {
  test('no key 401, a key without the route 403, in the OpenAI envelope; nothing sent', async () => {
    const before = mock.requests.length;
    const none = await ask('/raw/openai/v1/models', { key: null });
    assert.equal(none.status, 401);
    const denied = await ask('/raw/openai/v1/models', { key: OTHER });
    assert.equal(denied.status, 403);
    assert.deepEqual(await denied.json(), {
      error: { message: 'API key is not allowed to use passthrough route "raw-openai"', type: 'permission_denied' },
    });
    assert.equal(mock.requests.length, before);
  });

  test('anonymous: source_cidrs first (403 ip_restricted), then the bound key; the identity header stays home', async () => {
    const outside = await ask('/anon/models', { key: null });
    assert.equal(outside.status, 403);
    assert.deepEqual(await outside.json(), {
      error: {
        message: 'Access denied: your client IP is not allowed to access this route',
        type: 'permission_denied',
        code: 'ip_restricted',
      },
    });
    assert.ok(platform.logs.some((l) => l.msg === 'request rejected: client IP not in passthrough route source_cidrs'));
    const inside = await ask('/anon/models', { key: null, peer: '10.1.2.3:4000', headers: { 'x-user': 'alice' } });
    assert.equal(inside.status, 200);
    await inside.text();
    assert.equal(last().headers.authorization, `Bearer ${OPENAI_KEY}`);
    assert.equal(last().headers['x-user'], undefined);
    const line = platform.logs.filter((l) => l.msg === 'proxy request completed' && l.path === '/anon/models').at(-1)!;
    assert.equal(line.client_identity, 'alice', 'the end user recorded for audit');
  });

  test('/passthrough/* unclaimed: 410 before authentication, AISIX envelope; other paths the JSON 404', async () => {
    const gone = await ask('/passthrough/openai/v1/chat/completions', { method: 'POST', key: null, body: '{}' });
    assert.equal(gone.status, 410);
    assert.deepEqual(await gone.json(), {
      error: {
        message:
          'the implicit /passthrough/:provider tunnel has been removed; configure an explicit passthrough_route resource for this path (see the provider passthrough documentation for the migration)',
        type: 'invalid_request_error',
        code: 'endpoint_removed',
      },
    });
    assert.ok(platform.logs.some((l) => String(l.msg).startsWith('removed /passthrough tunnel hit')));
    const off = await ask('/off/x');
    assert.equal(off.status, 404, 'a disabled route matches nothing');
    assert.equal((await off.json() as { error: { type: string } }).error.type, 'not_found');
    assert.equal((await ask('/raw/openaix')).status, 404, 'prefixes match on a segment boundary');
  });

  test('a remainder URL parsing would move out of the target is refused (requests arrive normalised)', async () => {
    const route = gw.snapshot!.of('passthrough_routes').find((r) => r.name === 'raw-openai')!;
    const m = (remainder: string) => ({ route, remainder, mounted: true, host: undefined });
    assert.deepEqual(targetUrl(m('/v1/files'), 'a=1'), { url: `${mock.url}/v1/files?a=1` });
    for (const bad of ['/%2e%2e/admin', '/x/..%2F/%2E%2e', '\\evil.test/x', '/x/./y']) {
      assert.ok('refused' in targetUrl(m(bad), ''), bad);
    }
    // Over the app, the request's own URL was normalised already: no route claims the climbed path.
    assert.equal((await ask('/raw/openai/%2e%2e/admin')).status, 404);
  });

  test('an upstream redirect is a 502, never followed', async () => {
    const res = await ask('/raw/openai/redirect');
    assert.equal(res.status, 502);
    assert.equal((await res.json() as { error: { type: string } }).error.type, 'upstream_error');
  });

  test('timeout_ms bounds the header phase: 504 in AISIX words', async () => {
    let release!: () => void;
    mock.holdNext(new Promise<void>((r) => release = r));
    const res = await ask('/raw/openai/slow');
    release();
    assert.equal(res.status, 504);
    assert.deepEqual(await res.json(), {
      error: { message: 'upstream request timed out after 300ms', type: 'timeout' },
    });
  });
});

describe('passthrough routes: accounting', () => {
  test('counted as a proxy request under /passthrough_route, never in the llm or token families', async () => {
    const text = gw.metrics.registry.render();
    const labels = { endpoint: '/passthrough_route', inbound_protocol: 'passthrough', model: 'passthrough' };
    assert.ok((sumSamples(text, 'aisix_proxy_requests_total', { ...labels, provider: 'anthropic' }) ?? 0) >= 2);
    assert.ok((sumSamples(text, 'aisix_proxy_requests_total', { ...labels, provider: 'byo' }) ?? 0) >= 1);
    assert.equal(sumSamples(text, 'aisix_llm_requests_total', { endpoint: '/passthrough_route' }), undefined);
    assert.equal(sumSamples(text, 'aisix_llm_input_tokens_total', { endpoint: '/passthrough_route' }), undefined);
    const gone = sumSamples(text, 'aisix_proxy_requests_total', {
      endpoint: '/passthrough_route',
      provider: 'unresolved',
    });
    assert.ok((gone ?? 0) >= 1);
  });

  test('the access log names the route as provider and carries the upstream-reported tokens', async () => {
    await ask('/raw/anthropic/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4', max_tokens: 5, stream: true, messages: [] }),
    }).then((r) => r.text());
    const line = platform.logs.filter((l) =>
      l.msg === 'proxy request completed' && l.path === '/raw/anthropic/v1/messages'
    )
      .at(-1)!;
    assert.equal(line.provider, 'raw-anthropic');
    assert.equal(line.model, undefined);
    assert.equal(Number(line.prompt_tokens), MESSAGE_USAGE.input_tokens);
    assert.equal(Number(line.completion_tokens), MESSAGE_USAGE.output_tokens);
  });

  test("the tokens the upstream reports are charged to the body model's tpm (shared with typed calls)", async () => {
    // `claude` has tpm 1000: 12 + 7 tokens per answer; the 429 comes once the minute's bucket is spent.
    let status = 200;
    let n = 0;
    while (status === 200 && n < 80) {
      const res = await ask('/raw/anthropic/v1/messages', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'claude', max_tokens: 5, messages: [] }),
      });
      await res.text();
      status = res.status;
      n++;
    }
    assert.equal(status, 429);
    assert.ok(n > 40 && n < 60, `refused after ${n} answers of 19 tokens`);
  });
});

describe('passthrough routes: rate-limit policies', () => {
  test("a policy on the caller's key counts route requests (429 naming the policy), nothing sent past it", async () => {
    const { gw: g } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, secret: ${OPENAI_KEY}, api_base: "${mock.url}/v1" }
api_keys:
  - { display_name: app, key_env: CALLER, allowed_models: [], allowed_routes: ["*"] }
rate_limit_policies:
  - { name: one-a-minute, scope: api_key, scope_ref: app, window: minute, max_requests: 1 }
passthrough_routes:
  - { name: raw, path_prefix: /raw, target_url: "${mock.url}/v1", provider_key: oai }
`,
      { env: { CALLER } },
    );
    const a = createProxyApp(g);
    const call = () => Promise.resolve(a.request('/raw/x', { headers: { authorization: `Bearer ${CALLER}` } }));
    const first = await call();
    assert.equal(first.status, 200);
    await first.text();
    const before = mock.requests.length;
    const second = await call();
    assert.equal(second.status, 429);
    assert.match((await second.json() as { error: { message: string } }).error.message, /one-a-minute/);
    assert.equal(mock.requests.length, before);
  });
});
