// A2A calls governed like model calls, through app.request() against a raw mock agent (docs/a2a.md "Access",
// "Guardrails", "Usage"): the rate-limit policies that need no model, with their exact 429; the input
// guardrails on the message's text parts, a block as AISIX's 422 envelope and a mask written into what the
// agent receives; the usage record's task and context ids and estimated tokens, as a Datadog intake gets them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Gateway } from '../../src/gateway.ts';
import { estimateTokens } from '../../src/providers/estimate.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import { type DatadogIntake, startDatadogIntake } from '../support/datadog-intake.ts';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';
import { gatewayWith, midMinute } from '../support/platform.ts';
import { until } from '../support/until.ts';

let agent: MockA2a;
let intake: DatadogIntake;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;
/** Added to the gateway's clock: a test moves time on while the agent holds its answer. */
let skew = 0;
/** The policies' minute windows start on the minute: the clock starts mid-minute so a count cannot straddle one. */
const mid = midMinute();

const ENV = { CALLER: 'sk-a2a-caller', POLICED: 'sk-a2a-policed', DD_CRED_TEAM_A_API_KEY: 'dd-key' };

before(async () => {
  agent = await mockA2a();
  intake = await startDatadogIntake();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: [], allowed_agents: ["*"] }
  - { display_name: policed, key_env: POLICED, allowed_models: [], allowed_agents: ["*"], team_id: research }
a2a_agents:
  - { name: echo, url: "${agent.url}" }
rate_limit_policies:
  - { name: research-calls, scope: team, scope_ref: research, window: minute, max_requests: 1 }
  - { name: per-model, limits: { rpm: 1 }, group_by: [model] }
guardrails:
  - { name: words, kind: keyword, hook_point: input, patterns: [{ kind: literal, value: forbidden }] }
  - { name: pii, kind: pii, detectors: [{ type: email }] }
observability_exporters:
  - { name: dd, kind: datadog, site: "${intake.site}", credential_ref: team-a, service: gw }
`,
    { env: ENV, now: () => new Date(mid().getTime() + skew) },
  ));
  app = createProxyApp(gw);
  await estimateTokens('warm'); // the table built, so the estimate is the tokenizer's count
});
after(async () => {
  await gw.usage.close(1000);
  gw.stop();
  await agent.close();
  await intake.close();
});

function send(key: string, text: string, id: unknown = 1, method = 'message/send', params?: unknown) {
  return Promise.resolve(app.request('/a2a/echo', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: params ?? { message: { role: 'user', parts: [{ kind: 'text', text }] } },
    }),
  }, { peer: '127.0.0.1:1' }));
}

/** The usage record of the request `res` answered, once the exporter delivered it. */
async function recordOf(res: Response): Promise<Record<string, unknown>> {
  await res.text();
  const id = res.headers.get('x-aisix-request-id');
  await gw.usage.flush();
  const logs = intake.logs.filter((l) => l['aisix.request_id'] === id);
  assert.equal(logs.length, 1, JSON.stringify(logs));
  return logs[0]!;
}

describe('rate-limit policies', () => {
  test("a team's policy meters A2A calls: the second in its minute is AISIX's 429 naming the policy", async () => {
    assert.equal((await send(ENV.POLICED, 'one')).status, 200);
    const before = agent.received.length;
    const res = await send(ENV.POLICED, 'two');
    assert.equal(res.status, 429);
    assert.ok(res.headers.get('retry-after'));
    const id = uuidV5('rate_limit_policies/research-calls');
    assert.deepEqual(await res.json(), {
      error: {
        message: "request limit exceeded (requests) (policy 'research-calls')",
        type: 'rate_limit_exceeded',
        policy: { id, name: 'research-calls' },
      },
    });
    assert.equal(agent.received.length, before, 'the agent is not called');
    const m = gw.metrics.render();
    assert.match(m, new RegExp(`aisix_ratelimit_rejections_total\\{[^}]*layer="policy"[^}]*policy_id="${id}"`));
  });

  test('a policy that needs a model (group_by model) never meets an A2A call', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await send(ENV.CALLER, `call ${i}`)).status, 200);
  });
});

describe('guardrails', () => {
  test("a block: AISIX's 422 with the -32000 envelope and the call's id; the agent not called", async () => {
    const before = agent.received.length;
    const res = await send(ENV.CALLER, 'this is forbidden', 'g-1');
    assert.equal(res.status, 422);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.deepEqual(await res.json(), {
      jsonrpc: '2.0',
      id: 'g-1',
      error: { code: -32000, message: "request blocked by content policy (guardrail 'words')" },
    });
    assert.equal(agent.received.length, before);
    const rec = await recordOf(await send(ENV.CALLER, 'forbidden again', 'g-2'));
    assert.equal(rec['http.response.status_code'], 422);
    assert.equal(rec['aisix.guardrail_blocked'], true);
    assert.equal(rec['aisix.a2a_operation'], 'message/send');
  });

  test('a mask is written into the text part the agent receives; everything else as sent', async () => {
    const before = agent.received.length;
    const res = await send(ENV.CALLER, 'mail bob@example.com today', 'm-1');
    assert.equal(res.status, 200);
    const got = JSON.parse(agent.received[before]!.body);
    const text = got.params.message.parts[0].text as string;
    assert.equal(text.includes('bob@example.com'), false, text);
    assert.match(text, /^mail .+ today$/);
    const { params: _, ...rest } = got;
    assert.deepEqual(rest, { jsonrpc: '2.0', id: 'm-1', method: 'message/send' });
  });

  test('a call without a message (tasks/get) runs the chain on empty text and passes', async () => {
    const res = await send(ENV.CALLER, '', 'q-1', 'tasks/get', { id: 't-9' });
    assert.equal(res.status, 200);
  });
});

describe('usage records', () => {
  test("a send: the task and context the answer names, AISIX's estimated tokens of both sides", async () => {
    const res = await send(ENV.CALLER, 'artifact', 'u-1');
    assert.equal(res.status, 200);
    const rec = await recordOf(res);
    assert.equal(rec['aisix.a2a_task_id'], 't-2');
    assert.equal(rec['aisix.a2a_context_id'], 'ctx-1');
    assert.equal(rec['aisix.a2a_task_state'], 'completed');
    assert.equal(rec['aisix.usage_estimated'], true);
    assert.equal(rec['gen_ai.usage.input_tokens'], await estimateTokens('artifact'));
    assert.equal(rec['gen_ai.usage.output_tokens'], await estimateTokens('The answer is forty-two.\nDone.'));
    assert.equal(rec['aisix.cost_usd'], 0);
  });

  test('a read (tasks/get) names the task it asked about and counts no tokens', async () => {
    const rec = await recordOf(await send(ENV.CALLER, '', 'u-2', 'tasks/get', { id: 't-7' }));
    // The agent answers about t-1: the answer's task is the last word.
    assert.equal(rec['aisix.a2a_task_id'], 't-1');
    assert.equal(rec['gen_ai.usage.input_tokens'], 0);
    assert.equal(rec['gen_ai.usage.output_tokens'], 0);
    assert.equal(rec['aisix.usage_estimated'], true);
  });

  test('a refused call still names the task its message continues', async () => {
    const res = await send(ENV.CALLER, 'forbidden', 'u-3', 'message/send', {
      message: { role: 'user', taskId: 't-5', contextId: 'c-5', parts: [{ kind: 'text', text: 'forbidden' }] },
    });
    const rec = await recordOf(res);
    assert.equal(rec['aisix.a2a_task_id'], 't-5');
    assert.equal(rec['aisix.a2a_context_id'], 'c-5');
    assert.equal(rec['gen_ai.usage.input_tokens'], await estimateTokens('forbidden'));
  });

  test('a stream: the task from its events, the time to its first event as upstream_ttft_ms', async () => {
    const asked = agent.received.length;
    const pending = send(ENV.CALLER, 'late', 'u-4', 'message/stream');
    // The agent has the call and holds its first event: 1.5 s pass on the gateway's clock before it comes.
    await until(() => agent.received.length > asked, 5000, 'the stream to reach the agent');
    skew += 1500;
    agent.release();
    const res = await pending;
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read(); // the working event is here: let the agent finish
    agent.release();
    while (!(await reader.read()).done) { /* drain */ }
    await gw.usage.flush();
    const id = res.headers.get('x-aisix-request-id');
    const [rec] = intake.logs.filter((l) => l['aisix.request_id'] === id);
    assert.ok(rec);
    assert.equal(rec['aisix.a2a_task_id'], 't-1');
    assert.equal(rec['aisix.a2a_stream_event_count'], 2);
    assert.equal(rec['gen_ai.usage.input_tokens'], await estimateTokens('late'));
    const ttft = rec['aisix.upstream_ttft_ms'] as number;
    assert.ok(ttft >= 1500 && ttft < 1500 + 5000, String(ttft));
  });
});
