// The A2A relay's deadlines, quota and failures through app.request() (docs/a2a.md "Relay", "Access"): a unary
// call is bounded by `timeout_ms` while a stream outlives it, a stream holds the key's concurrency slot to its
// last byte, a stream cut after its 200 ends with one -32000 event, a credential sent in clear is warned about
// once, and the card's scheme comes from X-Forwarded-Proto only when a trusted proxy sent it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type MockA2a, mockA2a } from '../support/mock-a2a.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { until } from '../support/until.ts';

let agent: MockA2a;
let rig: RecordingGateway;

const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0", request_body_limit_bytes: 4096, real_ip: { trusted_proxies: ["10.1.0.0/16"] } }
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

const resources = (url: string) =>
  `_format_version: "1"
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: [], allowed_agents: ["*"] }
  - { display_name: one, key_env: ONE, allowed_models: [], allowed_agents: ["*"], rate_limit: { concurrency: 1 } }
a2a_agents:
  - { name: quick, url: "${url}", timeout_ms: 1000, auth_type: bearer, secret: quick-secret }
  - { name: nocard, url: "${url.replace('/agent', '/elsewhere')}" }
  - { name: patient, url: "${url}", timeout_ms: 60000 }
`;

const text = (method: string, t: string, id: unknown = 1) => ({
  jsonrpc: '2.0',
  id,
  method,
  params: { message: { role: 'user', parts: [{ kind: 'text', text: t }] } },
});

before(async () => {
  agent = await mockA2a();
  rig = await recordingGateway(resources(agent.url), { CALLER: 'sk-caller', ONE: 'sk-one' }, CONFIG);
});
after(() => agent.close());

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let out = '';
  for (;;) {
    const r = await reader.read();
    if (r.done) return out;
    out += new TextDecoder().decode(r.value);
  }
}

describe('deadlines', () => {
  test('a unary call past timeout_ms is a 502 -32000; a stream opened before it outlives the same deadline', async () => {
    const stream = await rig.post('/a2a/quick', text('message/stream', 'wait', 's'), 'sk-caller');
    assert.equal(stream.status, 200);
    const reader = stream.body!.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /"working"/);

    // The same agent, the same 1000 ms: a send that gets no answer is cut there.
    const hung = await rig.post('/a2a/quick', text('message/send', 'hang', 'u'), 'sk-caller');
    assert.equal(hung.status, 502);
    assert.deepEqual(await hung.json(), {
      jsonrpc: '2.0',
      id: 'u',
      error: { code: -32000, message: 'failed to reach upstream A2A agent: timed out after 1000 ms' },
    });
    assert.equal(agent.openStreams(), 1, 'the stream, opened first, is still open past the deadline');
    agent.release();
    assert.match(await readAll(reader), /"completed"/);
  });
});

describe('what streams', () => {
  test('tasks/resubscribe streams like message/stream, asked upstream with Accept: text/event-stream', async () => {
    const seen = agent.received.length;
    const res = await rig.post('/a2a/quick', {
      jsonrpc: '2.0',
      id: 3,
      method: 'tasks/resubscribe',
      params: { id: 't-1' },
    }, 'sk-caller');
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    await reader.read();
    agent.release();
    assert.match(await readAll(reader), /"completed"/);
    assert.equal(agent.received[seen]!.headers.accept, 'text/event-stream');
    await rig.post('/a2a/quick', text('tasks/get', 'x'), 'sk-caller').then((r) => r.arrayBuffer());
    assert.equal(agent.received.at(-1)!.headers.accept, 'application/json');
  });

  test('a stream the agent answers with one JSON body reaches the caller as one SSE event', async () => {
    const res = await rig.post('/a2a/quick', text('message/stream', 'json', 4), 'sk-caller');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const body = await res.text();
    assert.match(body, /^data: \{.*"completed".*\}\n\n$/);
    assert.equal(JSON.parse(body.slice(6)).id, 4);
  });

  test('a body over proxy.request_body_limit_bytes: 413 in the OpenAI envelope, the agent not called', async () => {
    const seen = agent.received.length;
    const res = await rig.post('/a2a/quick', text('message/send', 'x'.repeat(5000)), 'sk-caller');
    assert.equal(res.status, 413);
    assert.equal((await res.json()).error.message, 'request body exceeds 4096-byte limit');
    assert.equal(agent.received.length, seen);
  });
});

describe('caller gone', () => {
  test('a caller that leaves during a unary call cancels the call to the agent', async () => {
    const seen = agent.received.length;
    const gone = new AbortController();
    const pending = Promise.resolve(rig.app.request('/a2a/patient', {
      method: 'POST',
      headers: { authorization: 'Bearer sk-caller', 'content-type': 'application/json' },
      body: JSON.stringify(text('message/send', 'hang')),
      signal: gone.signal,
    }, { peer: '127.0.0.1:5555' })).catch(() => undefined);
    await until(() => agent.received.length > seen, 2000, 'the call at the agent');
    const before = agent.abandoned();
    gone.abort();
    await until(() => agent.abandoned() > before, 2000, 'the agent connection closed long before timeout_ms');
    await pending;
    agent.release();
  });
});

describe('quota', () => {
  test("a stream holds the key's concurrency slot until its last byte", async () => {
    const stream = await rig.post('/a2a/quick', text('message/stream', 'wait'), 'sk-one');
    const reader = stream.body!.getReader();
    await reader.read();
    const second = await rig.post('/a2a/quick', text('message/send', 'x'), 'sk-one');
    assert.equal(second.status, 429, 'the slot is held while the stream runs');
    await second.arrayBuffer();
    agent.release();
    await readAll(reader);
    await until(
      async () => {
        const r = await rig.post('/a2a/quick', text('message/send', 'x'), 'sk-one');
        await r.arrayBuffer();
        return r.status === 200;
      },
      2000,
      'the slot given back at the stream end',
    );
  });
});

describe('failures', () => {
  test('a stream cut after its 200 ends with one -32000 event and a WARN', async () => {
    const res = await rig.post('/a2a/quick', text('message/stream', 'break', 'b'), 'sk-caller');
    assert.equal(res.status, 200);
    const all = await readAll(res.body!.getReader());
    const events = all.split('\n\n').filter((e) => e.startsWith('data:')).map((e) => JSON.parse(e.slice(5)));
    assert.equal(events.length, 2, all);
    assert.equal(events[0].result.status.state, 'working');
    assert.equal(events[1].id, 'b');
    assert.equal(events[1].error.code, -32000);
    assert.match(events[1].error.message, /^upstream A2A request failed: /);
    await until(() => rig.platform.logs.some((l) => l.msg === 'A2A stream failed mid-flight'), 2000, 'the WARN');
  });

  test('a credential sent over http is warned about once per agent and URL', () => {
    const warns = rig.platform.logs.filter((l) => String(l.msg).startsWith('the gateway-held A2A agent credential'));
    assert.equal(warns.length, 1);
    assert.equal(warns[0]!.agent, 'quick');
    assert.equal(warns[0]!.url, agent.url);
  });
});

describe('card', () => {
  test('no candidate answers with a card: 502 text naming the last reason', async () => {
    const before = agent.received.length;
    const res = await rig.app.request('/a2a/nocard/.well-known/agent-card.json', {
      headers: { authorization: 'Bearer sk-caller' },
    });
    assert.equal(res.status, 502);
    assert.equal(await res.text(), 'failed to reach upstream A2A agent: agent card fetch returned HTTP 404');
    assert.deepEqual(agent.received.slice(before).map((r) => r.path), [
      '/elsewhere/.well-known/agent-card.json',
      '/.well-known/agent-card.json',
      '/elsewhere/.well-known/agent.json',
      '/.well-known/agent.json',
    ]);
  });
});

describe('card scheme', () => {
  const card = (peer: string, proto: string) =>
    rig.app.request('http://gw.example/a2a/quick/.well-known/agent-card.json', {
      headers: { authorization: 'Bearer sk-caller', host: 'gw.example', 'x-forwarded-proto': proto },
    }, { peer });

  test('X-Forwarded-Proto from a trusted proxy names the scheme; from anyone else it is ignored', async () => {
    const trusted = await (await card('10.1.2.3:4000', 'https')).json();
    assert.equal(trusted.supportedInterfaces[0].url, 'https://gw.example/a2a/quick');
    const other = await (await card('192.0.2.9:4000', 'https')).json();
    assert.equal(other.supportedInterfaces[0].url, 'http://gw.example/a2a/quick');
  });
});
