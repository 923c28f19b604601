// Which upstream a provider key may reach (docs/configuration.md "Provider keys", docs/aisix-compatibility.md
// "Providers"): the OpenAI and Anthropic default hosts only for their own vendor, a key of another vendor
// that names no adapter refused, `api_base` normalised — and a refused key never leaves the gateway, nor a
// JSON credential's member any operator surface.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdminApp } from '../../src/admin/app.ts';
import { resolveApiBase } from '../../src/resources/api-base.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';

const CALLER = 'sk-caller-keys-SECRET-1';
const VENDOR_KEY = 'sk-deepseek-SECRET-9f8e7d';

describe('resolveApiBase', () => {
  test('the default hosts belong to their own vendor only', () => {
    assert.equal(resolveApiBase('openai', '', undefined), 'https://api.openai.com/v1');
    assert.equal(resolveApiBase('openai', 'OpenAI ', '  '), 'https://api.openai.com/v1');
    assert.equal(resolveApiBase('openai', 'deepseek', undefined), undefined);
    assert.equal(resolveApiBase('openai', 'deepseek', ''), undefined);
    assert.equal(resolveApiBase('anthropic', 'anthropic', undefined), 'https://api.anthropic.com');
    assert.equal(resolveApiBase('anthropic', 'minimax', undefined), undefined);
    assert.equal(resolveApiBase('bedrock', 'aws', undefined), undefined);
  });

  test('OpenAI wire: one pasted endpoint stripped, /v1 only for OpenAI’s own bare host', () => {
    assert.equal(
      resolveApiBase('openai', 'deepseek', 'https://api.deepseek.com/chat/completions'),
      'https://api.deepseek.com',
    );
    assert.equal(resolveApiBase('openai', 'x', 'https://h.example/v1/embeddings/'), 'https://h.example/v1');
    assert.equal(
      resolveApiBase('openai', 'x', 'https://h.example/v1/chat/completions/completions'),
      'https://h.example/v1/chat/completions',
    );
    assert.equal(resolveApiBase('openai', 'openai', 'https://api.openai.com'), 'https://api.openai.com/v1');
    assert.equal(
      resolveApiBase('openai', 'openai', 'http://api.openai.com/chat/completions'),
      'http://api.openai.com/v1',
    );
    assert.equal(
      resolveApiBase('openai', 'google', 'https://generativelanguage.googleapis.com/v1beta/openai'),
      'https://generativelanguage.googleapis.com/v1beta/openai',
    );
    assert.equal(resolveApiBase('openai', 'qianfan', 'https://qianfan.example/v2/'), 'https://qianfan.example/v2');
  });

  test('Anthropic wire: a trailing /v1 or /v1/messages collapses', () => {
    assert.equal(resolveApiBase('anthropic', 'anthropic', 'https://api.anthropic.com/v1'), 'https://api.anthropic.com');
    assert.equal(
      resolveApiBase('anthropic', 'x', 'https://proxy.example/anthropic/v1/messages'),
      'https://proxy.example/anthropic',
    );
    assert.equal(
      resolveApiBase('anthropic', 'x', 'https://proxy.example/anthropic/'),
      'https://proxy.example/anthropic',
    );
  });
});

describe('loading', () => {
  test('keys of other vendors load; a bare name is an api_base only for Azure', async () => {
    const ok = await loadResourcesFile(
      '/t/r.yaml',
      `_format_version: "1"
provider_keys:
  - { display_name: ds, provider: deepseek, api_key: k1 }
  - { display_name: ds2, provider: deepseek, adapter: openai, api_key: k2 }
  - { display_name: az, provider: azure, adapter: azure-openai, api_key: k3, api_base: acme-east }
  - { display_name: br, adapter: bedrock, api_key: "not json" }
  - { display_name: cleared, provider: openai, api_key: k4, api_base: "" }
`,
      {},
    );
    assert.ok(ok.ok, ok.ok ? '' : ok.report.format());
    const keys = new Map(ok.snapshot.resources.provider_keys.map((k) => [k.display_name, k]));
    assert.equal(keys.get('ds')!.adapter, undefined);
    assert.equal(keys.get('ds')!.api_base, undefined);
    assert.equal(keys.get('ds2')!.api_base, undefined);
    assert.equal(keys.get('az')!.api_base, 'acme-east');
    assert.equal(keys.get('br')!.adapter, 'bedrock');
    assert.equal(keys.get('cleared')!.api_base, 'https://api.openai.com/v1');
    const bad = await loadResourcesFile(
      '/t/r.yaml',
      `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: k1, api_base: acme-east }
`,
      {},
    );
    assert.equal(bad.ok, false);
    assert.match(bad.ok ? '' : bad.report.format(), /api_base: must be an http\(s\) URL/);
  });
});

describe('dispatch', () => {
  let mock: MockUpstream;
  let g: RecordingGateway;

  before(async () => {
    mock = await startMockUpstream();
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: ds, provider: deepseek, api_key: "${VENDOR_KEY}" }
  - { display_name: ds-base, provider: deepseek, api_key: "${VENDOR_KEY}", api_base: "${mock.base}" }
  - { display_name: ds-openai, provider: deepseek, adapter: openai, api_key: "${VENDOR_KEY}" }
  - { display_name: mm-anthropic, provider: minimax, adapter: anthropic, api_key: "${VENDOR_KEY}" }
  - { display_name: ds-pasted, provider: deepseek, adapter: openai, api_key: "${VENDOR_KEY}", api_base: "${mock.base}/chat/completions" }
models:
  - { display_name: no-adapter, provider_key: ds, model_name: deepseek-chat, retries: 0 }
  - { display_name: no-adapter-with-base, provider_key: ds-base, model_name: deepseek-chat, retries: 0 }
  - { display_name: no-base, provider_key: ds-openai, model_name: deepseek-chat, retries: 0 }
  - { display_name: no-base-anthropic, provider_key: mm-anthropic, model_name: m, retries: 0 }
  - { display_name: pasted, provider_key: ds-pasted, model_name: deepseek-chat, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(() => mock.close());

  const chat = { messages: [{ role: 'user', content: 'hi' }] };

  const refusals: [string, number, RegExp][] = [
    ['no-adapter', 503, /no bridge registered for provider/],
    ['no-adapter-with-base', 503, /no bridge registered for provider/],
    ['no-base', 400, /invalid upstream configuration: provider_key for vendor \\"deepseek\\"/],
    ['no-base-anthropic', 400, /invalid upstream configuration: provider_key for vendor \\"minimax\\"/],
  ];
  for (const [model, status, message] of refusals) {
    test(`${model}: refused with ${status} before anything is sent, on every endpoint`, async () => {
      const before = g.sent.length;
      for (
        const [path, body] of [
          ['/v1/chat/completions', { model, ...chat }],
          ['/v1/chat/completions', { model, stream: true, ...chat }],
          ['/v1/messages', { model, max_tokens: 8, ...chat }],
        ] as const
      ) {
        const r = await g.post(path, body, CALLER);
        const text = await r.text();
        assert.equal(r.status, status, text);
        assert.match(text, message);
        assert.equal(text.includes(VENDOR_KEY), false);
      }
      assert.equal(g.sent.length, before, 'no upstream request at all');
    });
  }

  test('a pasted endpoint suffix is stripped, not doubled', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'pasted', ...chat }, CALLER);
    assert.equal(r.status, 200, await r.text());
    assert.equal(mock.requests.at(-1)!.url, '/v1/chat/completions');
  });
});

describe('JSON credentials on the operator surfaces', () => {
  const members = {
    secret_access_key: 'aws-secret-MEMBER-1a2b3c',
    access_key_id: 'AKIDMEMBER4d5e6f',
    session_token: 'sts-token-MEMBER-7g8h',
    client_secret: 'aad-secret-MEMBER-9i0j',
    access_token: 'ya29.MEMBER-token-kl',
  };

  test('no member appears in the admin lists, /status/*, /metrics or an error answer', async () => {
    const aws = JSON.stringify({
      access_key_id: members.access_key_id,
      secret_access_key: members.secret_access_key,
      session_token: members.session_token,
      region: 'us-east-1',
    });
    const aad = JSON.stringify({
      tenant_id: 't1',
      client_id: 'c1',
      client_secret: members.client_secret,
      authority_host: 'http://127.0.0.1:9',
    });
    const gcp = JSON.stringify({ project: 'proj-1', region: 'us-central1', access_token: members.access_token });
    const g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: aws, adapter: bedrock, api_key: '${aws}', api_base: "http://127.0.0.1:9" }
  - { display_name: az, adapter: azure-openai, api_key: '${aad}', api_base: "http://127.0.0.1:9" }
  - { display_name: gcp, adapter: vertex, api_key: '${gcp}', api_base: "http://127.0.0.1:9" }
models:
  - { display_name: b, provider_key: aws, model_name: "meta.llama3", retries: 0 }
  - { display_name: a, provider_key: az, model_name: dep, retries: 0 }
  - { display_name: v, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
    const seen: string[] = [];
    for (const model of ['b', 'a', 'v']) {
      const r = await g.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }] }, CALLER);
      seen.push(await r.text());
    }
    assert.ok(g.sent.length >= 3 && g.sent.every((r) => r.url.startsWith('http://127.0.0.1:9/')), 'loopback only');
    const admin = createAdminApp(g.gw);
    const status = createStatusApp(g.gw);
    const auth = { headers: { authorization: 'Bearer admin-secret-1' } };
    for (const path of ['/admin/v1/provider_keys', '/admin/v1/models', '/admin/v1/health']) {
      const r = await admin.request(path, auth);
      assert.equal(r.status, 200, path);
      seen.push(await r.text());
    }
    for (const path of ['/status/config', '/status/models', '/status', '/metrics']) {
      seen.push(await (await status.request(path)).text());
    }
    seen.push(...g.platform.logs.map((l) => JSON.stringify(l)));
    for (const text of seen) {
      for (const m of Object.values(members)) assert.equal(text.includes(m), false, `${m} in ${text}`);
    }
  });
});
