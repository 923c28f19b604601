// Usage events of the callers and kinds of call the first event builder did not know (docs/usage-events.md): a
// JWT-authenticated request's `jwt_subject`, `jwt_provider` and `jwt_claim_mapping`, an MCP tool call's and an A2A
// call's one record, as a real Datadog intake on 127.0.0.1 receives them from a gateway trusting a real OIDC
// issuer and fronting a real MCP server and A2A agent, all on 127.0.0.1.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';
import { MEDIA_KEY, type MockMedia, startMockMedia } from '../support/mock-media.ts';
import { type McpUpstream, startSdkUpstream } from '../support/mcp-upstream.ts';
import { type MockOidc, startMockOidc } from '../support/mock-oidc.ts';
import { gatewayWith } from '../support/platform.ts';

const KEY = 'sk-plain-usage-wiring';
let oidc: MockOidc;
let tools: McpUpstream;
let agent: MockA2a;
let media: MockMedia;
let intake: DatadogIntake;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  oidc = await startMockOidc();
  tools = await startSdkUpstream('tools', { json: true });
  agent = await mockA2a();
  media = await startMockMedia();
  intake = await startDatadogIntake();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
  - { display_name: media, provider: openai, api_key: ${MEDIA_KEY}, api_base: "${media.base}" }
passthrough_routes:
  - { name: raw, path_prefix: /raw, target_url: "${media.base}", provider_key: media, identity_header: x-end-user }
  - { name: open, path_prefix: /open, target_url: "${media.base}", provider_key: media, auth_mode: anonymous, anonymous_key: plain, source_cidrs: [127.0.0.0/8] }
models:
  - { display_name: echo, provider: echo, model_name: echo, provider_key: offline }
  - { display_name: whisper, provider_key: media, model_name: whisper-1, retries: 0 }
api_keys:
  - { display_name: alice, key_hash: h-alice, allowed_models: ["*"], jwt_subject: alice, jwt_provider: corp }
  - { display_name: eng, key_hash: h-eng, allowed_models: ["*"] }
  - { display_name: plain, key_env: KEY, allowed_models: ["*"], mcp_access: { allow: ["*"] }, allowed_agents: ["*"], allowed_routes: [raw, open] }
mcp_servers: [{ name: tools, url: "${tools.url}" }]
a2a_agents: [{ name: echo, url: "${agent.url}" }]
oidc_providers:
  - { name: corp, issuer: "${oidc.issuer}", audiences: [sluice] }
claim_mappings:
  - name: engineers
    jwt_provider: corp
    priority: 10
    match: [{ claim: groups, op: contains, values: [eng] }]
    resolve: { api_key: eng }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: team-a, service: gw }
`,
    { env: { KEY, DD_CRED_TEAM_A_API_KEY: 'dd-key' } },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  await gw.usage.close(1000);
  gw.stop();
  await oidc.close();
  await tools.close();
  await agent.close();
  await media.close();
  await intake.close();
});

const token = (claims: Record<string, unknown>) =>
  oidc.sign({ iss: oidc.issuer, aud: 'sluice', exp: Math.floor(Date.now() / 1000) + 60, ...claims });

async function chat(bearer: string): Promise<Response> {
  return await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
  }, { peer: '127.0.0.1:1' });
}

/** The logs of the request `res` answered, once the exporter delivered them. */
async function logsOf(res: Response): Promise<Record<string, unknown>[]> {
  await res.text();
  const id = res.headers.get('x-aisix-request-id');
  await gw.usage.flush();
  return intake.logs.filter((l) => l['aisix.request_id'] === id);
}

const jwtFields = (log: Record<string, unknown> | undefined) =>
  Object.fromEntries(Object.entries(log ?? {}).filter(([k]) => k.startsWith('aisix.jwt_')));

describe('JWT callers', () => {
  test('a directly bound subject: its subject and provider, no claim mapping', async () => {
    const res = await chat(await token({ sub: 'alice' }));
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.deepEqual(jwtFields(log), { 'aisix.jwt_subject': 'alice', 'aisix.jwt_provider': 'corp' });
  });

  test('a subject a claim mapping resolved: the mapping is named too', async () => {
    const res = await chat(await token({ sub: 'carol', groups: ['eng'] }));
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.deepEqual(jwtFields(log), {
      'aisix.jwt_subject': 'carol',
      'aisix.jwt_provider': 'corp',
      'aisix.jwt_claim_mapping': 'engineers',
    });
  });

  test('a plaintext key: no JWT field', async () => {
    const res = await chat(KEY);
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.ok(log);
    assert.deepEqual(jwtFields(log), {});
  });
});

describe('MCP tool calls', () => {
  const call = (name: string) =>
    Promise.resolve(app.request('/mcp', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text: 'x' } } }),
    }, { peer: '127.0.0.1:1' }));

  test('one record per tools/call: caller, server, tool, outcome, latency; zero tokens and cost', async () => {
    const res = await call('tools__echo');
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.ok(log);
    const key = [...gw.snapshot!.apiKeys.values()].find((k) => k.display_name === 'plain')!.id;
    assert.equal(typeof log['aisix.upstream_latency_ms'], 'number');
    const { 'aisix.occurred_at': _o, 'aisix.upstream_latency_ms': _u, 'aisix.downstream_latency_ms': _d, ...fixed } =
      log;
    const id = res.headers.get('x-aisix-request-id')!;
    assert.deepEqual(fixed, {
      ddsource: 'aisix-ai-gateway',
      service: 'gw',
      message: `ai-gateway request ${id} model=- status=200`,
      schema_version: '1.0',
      'aisix.request_id': id,
      'aisix.api_key_id': key,
      'gen_ai.usage.input_tokens': 0,
      'gen_ai.usage.output_tokens': 0,
      'http.response.status_code': 200,
      'aisix.cost_usd': 0,
      'aisix.guardrail_blocked': false,
      'aisix.inbound_protocol': 'mcp',
      'aisix.attempt_index': 0,
      'aisix.client_source_ip': '127.0.0.1',
      'aisix.mcp_server_name': 'tools',
      'aisix.mcp_tool_name': 'echo',
    });
    const emitted = gw.metrics.registry.render().split('\n').filter((l) => l.includes('handler="mcp"'));
    assert.ok(
      emitted.some((l) => l.startsWith('aisix_usage_events_emitted_total{') && l.includes('inbound_protocol="mcp"')),
    );
  });

  test('a tool call the ACL refuses still leaves its record; other methods leave none', async () => {
    const refused = await call('nowhere__echo');
    const [log] = await logsOf(refused);
    assert.equal(log?.['aisix.mcp_server_name'], 'nowhere');
    const list = await app.request('/mcp', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    }, { peer: '127.0.0.1:1' });
    assert.deepEqual(await logsOf(list), []);
  });
});

describe('A2A calls', () => {
  test('one record per call: the agent, its method and operation, the task state, the outcome', async () => {
    const res = await app.request('/a2a/echo', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'message/send',
        params: { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] } },
      }),
    }, { peer: '127.0.0.1:1' });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.ok(log);
    const surface = Object.fromEntries(
      Object.entries(log).filter(([k]) => k.startsWith('aisix.a2a_') || k === 'aisix.inbound_protocol'),
    );
    assert.deepEqual(surface, {
      'aisix.inbound_protocol': 'a2a',
      'aisix.a2a_agent_name': 'echo',
      'aisix.a2a_method': 'message/send',
      'aisix.a2a_operation': 'message/send',
      'aisix.a2a_protocol_version': '1.0',
      'aisix.a2a_task_id': 't-1',
      'aisix.a2a_context_id': 'ctx-1',
      'aisix.a2a_task_state': 'completed',
    });
    assert.equal(log['http.response.status_code'], 200);
    assert.equal(log['aisix.cost_usd'], 0);
    const text = gw.metrics.registry.render();
    assert.match(text, /aisix_usage_events_emitted_total\{handler="a2a",status_code="2xx",inbound_protocol="other"/);
  });
});

describe('passthrough requests', () => {
  test('one record per request: the route, the client identity, the reported tokens', async () => {
    const res = await app.request('/raw/images/generations', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-end-user': 'u-42' },
      body: JSON.stringify({ model: 'gpt-image-1', prompt: 'a lighthouse' }),
    }, { peer: '127.0.0.1:1' });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.ok(log);
    assert.equal(log['aisix.inbound_protocol'], 'passthrough');
    assert.equal(log['aisix.passthrough_route_name'], 'raw');
    assert.equal(log['aisix.client_identity'], 'u-42');
    assert.equal(log['gen_ai.usage.input_tokens'], 11);
    assert.equal(log['gen_ai.usage.output_tokens'], 1056);
    assert.equal(log['http.response.status_code'], 200);
    const text = gw.metrics.registry.render();
    assert.match(
      text,
      /aisix_usage_events_emitted_total\{handler="passthrough_route",status_code="2xx",inbound_protocol="other"/,
    );
    assert.equal(log['aisix.auth_type'], undefined);
  });

  test('an anonymous route records auth_type anonymous', async () => {
    const res = await app.request('/open/images/generations', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-image-1', prompt: 'a lighthouse' }),
    }, { peer: '127.0.0.1:1' });
    assert.equal(res.status, 200);
    const [log] = await logsOf(res);
    assert.equal(log?.['aisix.auth_type'], 'anonymous');
    assert.equal(log?.['aisix.passthrough_route_name'], 'open');
  });
});

describe('media calls', () => {
  test('a transcription leaves one event with the audio it covered, counted as handler audio', async () => {
    const form = new FormData();
    form.append('file', new File([new Uint8Array(2_000).fill(7)], 'call.wav', { type: 'audio/wav' }));
    form.append('model', 'whisper');
    const res = await app.request('/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}` },
      body: form,
    }, { peer: '127.0.0.1:1' });
    assert.equal(res.status, 200);
    const [log, ...rest] = await logsOf(res);
    assert.deepEqual(rest, []);
    assert.equal(log?.['aisix.audio_duration_seconds'], 3, 'the mock whisper-1 answer states usage.seconds 3');
    assert.equal(log?.['aisix.model_id'], gw.snapshot!.modelByName('whisper')!.id);
    const text = gw.metrics.registry.render();
    assert.match(text, /aisix_usage_events_emitted_total\{handler="audio",status_code="2xx",inbound_protocol="openai"/);
  });
});
