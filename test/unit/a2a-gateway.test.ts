// The A2A gateway through app.request() against a raw mock agent (docs/a2a.md): the refusals in AISIX's order
// and words, the relay of a unary call and of a live stream, the held credential and pinned version sent
// upstream with nothing of the caller's, the agent card rewritten to the gateway, the quota, the labels.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { BASE_CONFIG, midMinute } from '../support/platform.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

let agent: MockA2a;
let rig: RecordingGateway;

const resources = (url: string) =>
  `_format_version: "1"
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: [], allowed_agents: ["echo*"] }
  - { display_name: limited, key_env: LIMITED, allowed_models: [], allowed_agents: ["*"], rate_limit: { rpm: 1 } }
  - { display_name: none, key_env: NONE, allowed_models: ["*"] }
a2a_agents:
  - { name: echo, url: "${url}", auth_type: bearer, secret: agent-secret }
  - { name: echo-old, url: "${url}", protocol_version: "0.3", auth_type: api_key, secret: agent-key }
  - { name: echo-off, url: "${url}", enabled: false }
`;

const ENV = { CALLER: 'sk-caller', LIMITED: 'sk-limited', NONE: 'sk-none' };

function rpc(method: string, id: unknown = 1) {
  return { jsonrpc: '2.0', id, method, params: { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] } } };
}

before(async () => {
  agent = await mockA2a();
  rig = await recordingGateway(resources(agent.url), ENV, BASE_CONFIG, midMinute());
});
after(() => agent.close());

describe('refusals, in AISIX order', () => {
  test('no key: 401 envelope, before the agent is looked up', async () => {
    const res = await rig.app.request('/a2a/nope', { method: 'POST', body: '{}' });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.type, 'invalid_api_key');
  });

  test('unknown and disabled agents: 404 text after authentication', async () => {
    for (const name of ['nope', 'echo-off']) {
      const res = await rig.post(`/a2a/${name}`, rpc('message/send'), 'sk-caller');
      assert.equal(res.status, 404);
      assert.equal(await res.text(), `unknown A2A agent: ${name}`);
    }
  });

  test('a key without the agent in allowed_agents: 403 text; no allowed_agents reaches none', async () => {
    const res = await rig.post('/a2a/echo', rpc('message/send'), 'sk-none');
    assert.equal(res.status, 403);
    assert.equal(await res.text(), 'this key may not reach A2A agent: echo');
  });

  test('a body that is not JSON: 400 text', async () => {
    const res = await rig.app.request('/a2a/echo', {
      method: 'POST',
      headers: { authorization: 'Bearer sk-caller' },
      body: '{nope',
    });
    assert.equal(res.status, 400);
    assert.equal(await res.text(), 'invalid JSON-RPC body');
  });

  test('other methods on the route: 405; the card under another name: 404', async () => {
    const get = await rig.app.request('/a2a/echo', { headers: { authorization: 'Bearer sk-caller' } });
    assert.equal(get.status, 405);
    const old = await rig.app.request('/a2a/echo/.well-known/agent.json', {
      headers: { authorization: 'Bearer sk-caller' },
    });
    assert.equal(old.status, 404);
  });
});

describe('relay', () => {
  test('message/send: the answer verbatim; the held credential and pinned version upstream, no caller header', async () => {
    const before = agent.received.length;
    const res = await rig.app.request('/a2a/echo', {
      method: 'POST',
      headers: {
        authorization: 'Bearer sk-caller',
        'content-type': 'application/json',
        'a2a-version': '0.3',
        'x-api-key': 'sk-caller',
        'a2a-extensions': 'https://ext',
      },
      body: JSON.stringify(rpc('message/send', 'r-1')),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      jsonrpc: '2.0',
      id: 'r-1',
      result: { kind: 'task', id: 't-1', contextId: 'ctx-1', status: { state: 'completed' } },
    });
    const got = agent.received.slice(before);
    assert.equal(got.length, 1);
    assert.equal(got[0]!.headers.authorization, 'Bearer agent-secret');
    assert.equal(got[0]!.headers['a2a-version'], '1.0');
    assert.equal(got[0]!.headers['x-api-key'], undefined);
    assert.equal(got[0]!.headers['a2a-extensions'], undefined);
    assert.ok(!JSON.stringify(got[0]!.headers).includes('sk-caller'), 'no caller credential upstream');
    assert.deepEqual(JSON.parse(got[0]!.body), rpc('message/send', 'r-1'));
  });

  test('an agent pinned to 0.3 with an api key: x-api-key and A2A-Version 0.3', async () => {
    const before = agent.received.length;
    assert.equal((await rig.post('/a2a/echo-old', rpc('tasks/get'), 'sk-caller')).status, 200);
    const h = agent.received[before]!.headers;
    assert.equal(h['x-api-key'], 'agent-key');
    assert.equal(h['a2a-version'], '0.3');
    assert.equal(h.authorization, undefined);
  });

  test('message/stream: each event reaches the caller before the agent sends the next', async () => {
    const res = await rig.post('/a2a/echo', rpc('message/stream', 7), 'sk-caller');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /"state":"working"/);
    assert.equal(agent.openStreams(), 1, 'the agent still holds the stream open');
    agent.release();
    let rest = '';
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      rest += new TextDecoder().decode(r.value);
    }
    assert.match(rest, /"state":"completed"/);
    const m = rig.gw.metrics.render();
    assert.equal(sumSamples(m, 'aisix_a2a_stream_events_total', { agent: 'echo', operation: 'message/stream' }), 2);
    assert.ok((sumSamples(m, 'aisix_a2a_task_state_total', { agent: 'echo', state: 'completed' }) ?? 0) >= 1);
    // AISIX's SLO histogram sees the whole stream, labelled by the fixed sentinels.
    const e2e = sumSamples(m, 'aisix_request_e2e_latency_seconds_count', {
      endpoint: '/a2a',
      model: 'a2a',
      provider: 'a2a',
      streaming: 'true',
    });
    assert.equal(e2e, 1);
  });

  test('an agent that answers non-2xx: 502 with the -32000 envelope, never its body', async () => {
    agent.failWith = 500;
    try {
      const res = await rig.post('/a2a/echo', rpc('message/send', 9), 'sk-caller');
      assert.equal(res.status, 502);
      assert.deepEqual(await res.json(), {
        jsonrpc: '2.0',
        id: 9,
        error: { code: -32000, message: 'upstream A2A request failed: upstream returned HTTP 500' },
      });
    } finally {
      agent.failWith = 0;
    }
  });
});

describe('agent card', () => {
  test('fetched from the agent, every interface URL pointing at the gateway; a 1.0 card without url accepted', async () => {
    const res = await rig.app.request('http://gw.example:8080/a2a/echo/.well-known/agent-card.json', {
      headers: { authorization: 'Bearer sk-caller', host: 'gw.example:8080', 'x-forwarded-proto': 'https' },
    }, { peer: '127.0.0.1:5555' });
    assert.equal(res.status, 200);
    const card = await res.json();
    assert.equal(card.name, 'Echo');
    assert.equal(card.url, undefined, 'no url is invented on a 1.0 card');
    // No trusted proxy is configured, so X-Forwarded-Proto is not believed: the listener's own scheme.
    assert.deepEqual(card.supportedInterfaces, [
      { url: 'http://gw.example:8080/a2a/echo', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    ]);
    const fetched = agent.received.filter((r) => r.method === 'GET').at(-1)!;
    assert.equal(fetched.headers.authorization, 'Bearer agent-secret');
  });

  test('the card needs a key that may reach the agent', async () => {
    const path = '/a2a/echo/.well-known/agent-card.json';
    assert.equal((await rig.app.request(path)).status, 401);
    assert.equal((await rig.app.request(path, { headers: { authorization: 'Bearer sk-none' } })).status, 403);
  });
});

describe('governance', () => {
  test("the key's rate limit: the second call in the minute is a 429 envelope, the agent not called", async () => {
    assert.equal((await rig.post('/a2a/echo', rpc('message/send'), 'sk-limited')).status, 200);
    const before = agent.received.length;
    const res = await rig.post('/a2a/echo', rpc('message/send'), 'sk-limited');
    assert.equal(res.status, 429);
    assert.equal((await res.json()).error.type, 'rate_limit_exceeded');
    assert.equal(agent.received.length, before);
  });

  test('metrics: endpoint /a2a, inbound_protocol a2a, provider and model a2a; the access log path /a2a', async () => {
    const m = rig.gw.metrics.render();
    const n = sumSamples(m, 'aisix_proxy_requests_total', {
      endpoint: '/a2a',
      inbound_protocol: 'a2a',
      provider: 'a2a',
      model: 'a2a',
      status: '200',
    });
    assert.ok(n !== undefined && n >= 1, m);
    await until(
      () => rig.platform.logs.some((l) => l.path === '/a2a' && l.provider === 'a2a'),
      2000,
      () => JSON.stringify(rig.platform.logs.filter((l) => String(l.path).startsWith('/a2a')).slice(-3)),
    );
    const raw = rig.platform.logs.filter((l) =>
      typeof l.path === 'string' && l.path.startsWith('/a2a/') && l.error_kind !== 'not_found'
    );
    assert.deepEqual(raw, [], 'no line of a routed request names the raw path');
    assert.ok(
      (sumSamples(m, 'aisix_a2a_requests_total', { agent: 'echo', operation: 'message/send', status: '2xx' }) ?? 0) >=
        1,
    );
  });
});
