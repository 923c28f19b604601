// `client_type` (docs/usage-events.md "Client type"): AISIX's built-in user-agent table, operator rules that
// outrank it, the boot errors in AISIX's words, and `aisix_llm_tokens_by_client_total` per client and model
// through app.request() — with no usage exporter, where the events are only counted.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.ts';
import { cleanUserAgent, ClientTypeClassifier } from '../../src/usage/client-type.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { anthropicMessage, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { gatewayWith } from '../support/platform.ts';
import { sumSamples } from '../support/metrics.ts';

describe('client type', () => {
  const builtin = new ClientTypeClassifier();
  const cases: [string, string][] = [
    ['claude-cli/1.0.83 (external, cli)', 'claude-code'],
    ['codex_cli_rs/0.20.0', 'codex'],
    ['Cline/3.2', 'cline'],
    ['RooCode/1.0', 'roo-code'],
    ['Kilo-Code/4.0', 'kilocode'],
    ['GitHubCopilotChat/0.22', 'github-copilot'],
    ['Cursor/0.42', 'cursor'],
    ['opencode/0.3', 'opencode'],
    ['QwenCode/0.0.1', 'qwen-code'],
    ['GeminiCLI/0.1.5', 'gemini-cli'],
    ['Charm-Crush/0.1', 'crush'],
    ['Zed/0.190.0', 'zed'],
    ['aider/0.80', 'aider'],
    ['OpenAI/Python 1.40.0', 'openai-python'],
    ['OpenAI/JS 4.56.0', 'openai-node'],
    ['Anthropic/Python 0.34.0', 'anthropic-python'],
    ['Anthropic/JS 0.27.0', 'anthropic-typescript'],
    ['langchain-openai/0.2', 'langchain'],
    ['llama_index/0.11', 'llamaindex'],
    ['litellm/1.50', 'litellm'],
    ['ai-sdk/provider-utils/2.0 runtime/node', 'vercel-ai-sdk'],
    ['curl/8.5.0', 'curl'],
    ['python-requests/2.32', 'python-requests'],
    ['python-httpx/0.27', 'httpx'],
    ['Python/3.12 aiohttp/3.9', 'aiohttp'],
    ['okhttp/4.12', 'okhttp'],
    ['Go-http-client/1.1', 'go-http-client'],
    ['undici', 'node'],
    ['axios/1.7', 'node'],
    ['PostmanRuntime/7.39', 'postman'],
    ['Mozilla/5.0 (X11; Linux x86_64)', 'browser'],
    ['my-own-tool/1.0', 'other'],
  ];
  for (const [ua, want] of cases) {
    test(`${ua} → ${want}`, () => assert.equal(builtin.classify(cleanUserAgent(ua)), want));
  }

  test('no agent is unknown; control characters are removed and the agent capped at 256 characters', () => {
    assert.equal(builtin.classify(cleanUserAgent(undefined)), 'unknown');
    assert.equal(builtin.classify(cleanUserAgent('   ')), 'unknown');
    assert.equal(cleanUserAgent('cu\u0000rl/8\n'), 'curl/8');
    assert.equal(cleanUserAgent('x'.repeat(300)).length, 256);
  });

  test('the first built-in in AISIX order wins (claude-code before curl)', () => {
    assert.equal(builtin.classify('claude-code/1 curl/8'), 'claude-code');
  });

  test('operator rules outrank the built-ins, first match in config order, case-insensitive', () => {
    const c = new ClientTypeClassifier([
      { pattern: '^acme-', client: 'acme' },
      { pattern: 'CURL', client: 'shell' },
      { pattern: 'curl', client: 'never' },
    ]);
    assert.equal(c.classify('ACME-agent/1 curl/8'), 'acme');
    assert.equal(c.classify('curl/8'), 'shell');
    assert.equal(c.classify('OpenAI/Python 1'), 'openai-python');
  });
});

describe('observability.metrics.client_type_rules', () => {
  const load = (rules: string, env: Record<string, string> = {}) =>
    loadConfig(
      '/c.yaml',
      `resources_file: r.yaml\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\nobservability:\n  metrics:\n    client_type_rules: ${rules}\n`,
      env,
    );
  const errors = (r: ReturnType<typeof load>) => (r.ok ? '' : r.report.format());

  test('accepted in AISIX shape, and from AISIX_OBSERVABILITY__METRICS__CLIENT_TYPE_RULES', () => {
    const r = load('[{ pattern: "^acme/", client: acme.v1 }]');
    assert.ok(r.ok, errors(r));
    assert.deepEqual(r.config.observability.metrics.client_type_rules, [{ pattern: '^acme/', client: 'acme.v1' }]);
    const e = loadConfig(
      '/c.yaml',
      'resources_file: r.yaml\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n',
      {
        AISIX_OBSERVABILITY__METRICS__CLIENT_TYPE_RULES: '[{"pattern":"^x","client":"x"}]',
      },
    );
    assert.ok(e.ok, errors(e));
    assert.deepEqual(e.config.observability.metrics.client_type_rules, [{ pattern: '^x', client: 'x' }]);
  });

  test("a bad rule stops the boot with AISIX's words", () => {
    assert.match(
      errors(load('[{ pattern: "", client: a }]')),
      /observability\.metrics\.client_type_rules\[0\]: pattern must be 1\.\.=512 bytes/,
    );
    assert.match(
      errors(load(`[{ pattern: "${'a'.repeat(513)}", client: a }]`)),
      /client_type_rules\[0\]: pattern must be 1\.\.=512 bytes/,
    );
    assert.match(errors(load('[{ pattern: "(", client: a }]')), /client_type_rules\[0\]: invalid pattern: /);
    assert.match(
      errors(load('[{ pattern: a, client: a }, { pattern: b, client: Bad }]')),
      /client_type_rules\[1\]: client "Bad" must match \[a-z0-9\]\[a-z0-9\._-\]\* and be at most 64 chars/,
    );
    assert.match(errors(load(`[{ pattern: a, client: ${'a'.repeat(65)} }]`)), /be at most 64 chars/);
    const many = `[${Array.from({ length: 65 }, (_, i) => `{ pattern: p${i}, client: c }`).join(', ')}]`;
    assert.match(
      errors(load(many)),
      /observability\.metrics\.client_type_rules: 65 rules exceed the limit of 64/,
    );
  });
});

describe('tokens by client, and the events counted with no exporter', () => {
  const KEY = 'sk-caller-client-1';
  let mock: MockUpstream;
  let anth: MockAnthropic;
  let gw: Awaited<ReturnType<typeof gatewayWith>>['gw'];
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    mock = await startMockUpstream();
    anth = await startMockAnthropic();
    ({ gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${mock.base}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anth.url}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-up, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      {
        env: { CALLER: KEY },
        config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
observability: { metrics: { client_type_rules: [{ pattern: "^acme-agent/", client: acme }] } }
`,
      },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    gw.stop();
    await mock.close();
    await anth.close();
  });

  const post = (path: string, body: unknown, ua: string) =>
    app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'user-agent': ua },
      body: JSON.stringify(body),
    });
  const by = (client_type: string, model: string, token_type: string) =>
    sumSamples(gw.metrics.render(), 'aisix_llm_tokens_by_client_total', { client_type, model, token_type });

  test('chat, /v1/responses and native /v1/messages, each under its client and model', async () => {
    assert.equal(gw.usage.active, false);
    mock.script({ body: chatCompletion('gpt-up') });
    await (await post(
      '/v1/chat/completions',
      { model: 'gpt', messages: [{ role: 'user', content: 'x' }] },
      'acme-agent/2 curl/8',
    )).text();
    assert.deepEqual([by('acme', 'gpt', 'input'), by('acme', 'gpt', 'output'), by('acme', 'gpt', 'total')], [1, 3, 4]);
    assert.equal(by('curl', 'gpt', 'total'), undefined, 'the operator rule outranked the built-in');

    mock.script({
      body: {
        id: 'resp_1',
        object: 'response',
        status: 'completed',
        model: 'gpt-up',
        output: [{ type: 'message', id: 'm', role: 'assistant', content: [{ type: 'output_text', text: 'hi' }] }],
        usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
      },
    });
    await (await post('/v1/responses', { model: 'gpt', input: 'hi' }, 'OpenAI/Python 1.50')).text();
    assert.deepEqual(
      [by('openai-python', 'gpt', 'input'), by('openai-python', 'gpt', 'output'), by('openai-python', 'gpt', 'total')],
      [3, 2, 5],
    );

    anth.script({
      body: {
        ...anthropicMessage('claude-up'),
        usage: { input_tokens: 5, output_tokens: 4, cache_read_input_tokens: 6 },
      },
    });
    await (await post(
      '/v1/messages',
      { model: 'claude', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] },
      '',
    )).text();
    assert.deepEqual([
      by('unknown', 'claude', 'input'),
      by('unknown', 'claude', 'output'),
      by('unknown', 'claude', 'total'),
    ], [5, 4, 15]);
  });

  test('no exporter: every event counted emitted and dropped as sink_disabled, none built', async () => {
    const m0 = gw.metrics.render();
    const emitted = (m: string) =>
      sumSamples(m, 'aisix_usage_events_emitted_total', { handler: 'chat', model: 'gpt' }) ?? 0;
    const dropped = (m: string) =>
      sumSamples(m, 'aisix_usage_event_drops_total', {
        reason: 'sink_disabled',
        model: 'gpt',
        provider_key_name: 'oa',
      }) ?? 0;
    mock.script({ body: chatCompletion('gpt-up') });
    await (await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'x' }] }, 'x'))
      .text();
    const m1 = gw.metrics.render();
    assert.equal(emitted(m1) - emitted(m0), 1);
    assert.equal(dropped(m1) - dropped(m0), 1);
    assert.match(
      m1,
      /^aisix_usage_events_emitted_total\{handler="chat",status_code="2xx",inbound_protocol="openai",model="gpt",provider_key_id="[0-9a-f-]{36}",provider_key_name="oa"\} \d+$/m,
    );
  });
  test('a refusal after authentication is an event too (AISIX counts it); an unauthenticated request is none', async () => {
    const count = () =>
      sumSamples(gw.metrics.render(), 'aisix_usage_events_emitted_total', {
        handler: 'chat',
        status_code: '4xx',
        model: 'unknown',
        provider_key_id: 'unknown',
      }) ?? 0;
    const before = count();
    const res = await post('/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'x' }] }, 'x');
    assert.equal(res.status, 404);
    await res.text();
    assert.equal(count() - before, 1);
    const anon = await app.request('/v1/chat/completions', { method: 'POST', body: '{}' });
    assert.equal(anon.status, 401);
    await anon.text();
    assert.equal(count() - before, 1);
  });
});
