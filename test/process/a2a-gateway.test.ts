// Black-box, on Node, Bun and Deno (docs/a2a.md): a gateway process in front of an A2A 1.0 agent built with
// @a2a-js/sdk, driven by the SDK's own client from the card the gateway serves. A send and a stream complete;
// the agent receives the gateway-held credential and pinned version and nothing of the caller's; and a stream
// open when the gateway gets SIGTERM completes through the drain, the process exiting only after its last byte.
// Run: node build.mjs && node --import tsx --test test/process/a2a-gateway.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { TaskState } from '@a2a-js/sdk';
import { type SdkAgent, sdkAgent } from '../support/a2a-sdk-agent.ts';
import { baseConfig, CALLER_KEY, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until, within } from '../support/until.ts';

const AGENT_SECRET = 'agent-held-SECRET-token';

const resources = (url: string) =>
  `_format_version: "1"
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: [], allowed_agents: ["sdk-*"] }
a2a_agents:
  - { name: sdk-echo, url: "${url}", auth_type: bearer, secret: ${AGENT_SECRET} }
`;

/** The SDK's fetch with the caller's gateway key on every request (the card's and the calls'). */
const keyed: typeof fetch = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('authorization', `Bearer ${CALLER_KEY}`);
  return fetch(input, { ...init, headers });
};

function message(text: string) {
  return {
    tenant: '',
    message: {
      messageId: crypto.randomUUID(),
      contextId: '',
      taskId: '',
      role: 1,
      parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: '' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

/** A stream event's task state, whichever of the 1.0 payloads carries one. */
function stateOf(event: unknown): number | undefined {
  const p = (event as { payload?: { $case: string; value: { status?: { state: number } } } }).payload;
  return p?.value?.status?.state;
}

let agent: SdkAgent;
before(async () => {
  agent = await sdkAgent();
});
after(() => agent.close());

describe(
  'A2A through gateway processes on node, bun, deno, with the SDK as agent and client',
  { timeout: 180_000 },
  () => {
    for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
      test(`${runtime}: send and stream; the held credential upstream; a stream completes through a SIGTERM drain`, async () => {
        const g = await spawnGateway({
          runtime,
          config: baseConfig(),
          files: { 'resources.yaml': resources(agent.url) },
          env: { CALLER_KEY },
        });
        try {
          await g.waitReady();
          const factory = new ClientFactory({
            transports: [new JsonRpcTransportFactory({ fetchImpl: keyed })],
            cardResolver: new DefaultAgentCardResolver({ fetchImpl: keyed }),
          });
          const cardUrl = g.url('/a2a/sdk-echo/.well-known/agent-card.json');
          const card = await (await keyed(cardUrl)).json();
          assert.deepEqual(card.supportedInterfaces.map((i: { url: string }) => i.url), [g.url('/a2a/sdk-echo')]);
          const client = await factory.createFromUrl(cardUrl, '');
          const seen = agent.received.length;

          const sent = await client.sendMessage(message('hello'));
          assert.match(JSON.stringify(sent), /echo: hello/, `${runtime}: ${JSON.stringify(sent)}`);

          const states: (number | undefined)[] = [];
          for await (const e of client.sendMessageStream(message('fast'))) states.push(stateOf(e));
          assert.deepEqual(states, [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED], runtime);

          const upstream = agent.received.slice(seen);
          assert.ok(upstream.length >= 2, `${runtime}: the agent was called`);
          for (const h of upstream) {
            assert.equal(h.authorization, `Bearer ${AGENT_SECRET}`);
            assert.equal(h['a2a-version'], '1.0');
            assert.ok(
              !JSON.stringify(h).includes(CALLER_KEY),
              `${runtime}: no caller key upstream: ${JSON.stringify(h)}`,
            );
          }

          // A stream in flight when SIGTERM arrives: the drain waits for it, its last event reaches the caller.
          const stream = client.sendMessageStream(message('slow task'));
          const first = await within(stream.next(), 10_000, 'the first event');
          assert.equal(stateOf(first.value), TaskState.TASK_STATE_WORKING);
          await until(() => agent.waiting() === 1, 10_000, 'the agent holding the stream');
          g.signal('SIGTERM');
          const draining = await g.waitForLog((l) =>
            l.msg === 'draining — /readyz now reports 503, still accepting new connections'
          );
          assert.equal(draining.in_flight, 1, `${runtime}: the drain counts the stream in flight`);
          assert.equal(g.exited, false, `${runtime}: the gateway waits for the stream`);
          agent.release();
          const rest: (number | undefined)[] = [];
          for await (const e of stream) rest.push(stateOf(e));
          assert.deepEqual(
            rest,
            [TaskState.TASK_STATE_COMPLETED],
            `${runtime}: the stream completed through the drain`,
          );
          assert.equal(await g.waitForExit(20_000), 0);
          const line = g.logs.find((l) =>
            l.msg === 'proxy request completed' && l.path === '/a2a' && l.ttft_ms !== undefined
          );
          assert.ok(line, `${runtime}: the stream's access-log line`);
        } finally {
          g.kill();
        }
      });
    }
  },
);
