// The answers read by the official SDKs: `openai`'s `responses.create` and `responses.stream` (its snapshot
// accumulation is strict about output indexes and content parts), and `@anthropic-ai/sdk`'s
// `messages.countTokens`, against a small loopback server that answers with `callProvider` over the mock
// upstreams (a chat-only vendor for Responses, Anthropic for count_tokens).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { callProvider } from '../../src/providers/call.ts';
import { adapterFor } from '../../src/providers/index.ts';
import type { ProviderKey } from '../../src/resources/schema.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { Cancel } from '../../src/util/cancel.ts';
import { COUNTED_INPUT_TOKENS, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';

let up: MockUpstream;
let ant: MockAnthropic;
let server: http.Server;
let client: OpenAI;
let anthropic: Anthropic;

before(async () => {
  up = await startMockUpstream();
  ant = await startMockAnthropic();
  const chatKey = { id: 'k', provider: 'deepseek', adapter: 'openai', api_key: 'sk', api_base: up.base } as ProviderKey;
  const antKey = {
    id: 'a',
    provider: 'anthropic',
    adapter: 'anthropic',
    api_key: 'sk',
    api_base: ant.url,
  } as ProviderKey;
  server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
    const counting = req.url === '/v1/messages/count_tokens';
    const key = counting ? antKey : chatKey;
    const r = await callProvider(adapterFor(key.adapter)!, {
      endpoint: counting ? 'count_tokens' : 'responses',
      body: { ...body, model: 'up' },
      stream: body.stream === true,
      key,
      upstream: fetchUpstream(),
      signal: new Cancel(),
      callerModel: String(body.model),
    });
    if (r.kind === 'refused') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: r.message, type: 'invalid_request_error' } }));
    } else if (r.kind === 'response') {
      res.writeHead(r.status, { 'content-type': r.contentType });
      res.end(r.body);
    } else {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for await (const c of r.chunks) res.write(c);
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  client = new OpenAI({ apiKey: 'sk-caller', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'sk-caller', baseURL: `http://127.0.0.1:${port}`, maxRetries: 0 });
});
after(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await up.close();
  await ant.close();
});

test("messages.countTokens: the Anthropic upstream's count", async () => {
  const r = await anthropic.messages.countTokens({
    model: 'claude-alias',
    system: 'be brief',
    messages: [{ role: 'user', content: 'hello' }],
  });
  assert.deepEqual(r, { input_tokens: COUNTED_INPUT_TOKENS });
  const sent = ant.requests.at(-1)!;
  assert.equal(sent.url, '/v1/messages/count_tokens');
  assert.deepEqual(sent.json, { model: 'up', system: 'be brief', messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(sent.headers['anthropic-version'], '2023-06-01');
});

const toolChunk = (tc: Record<string, unknown>, finish: string | null = null) => ({
  id: 'c',
  model: 'up',
  choices: [{ index: 0, delta: { tool_calls: [tc] }, finish_reason: finish }],
});
const usage = {
  id: 'c',
  model: 'up',
  choices: [],
  usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
};

test("responses.create: output_text, the caller's model, usage", async () => {
  const r = await client.responses.create({ model: 'my-alias', input: 'hi', instructions: 'be brief' });
  assert.equal(r.output_text, 'hi from mock');
  assert.equal(r.model, 'my-alias');
  assert.equal(r.status, 'completed');
  assert.equal(r.usage?.total_tokens, 4);
  assert.deepEqual(up.requests.at(-1)!.json!.messages, [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hi' },
  ]);
});

test('responses.stream: text and a streamed function call accumulate into the final response', async () => {
  up.script({
    sse: [
      chunk('up', 'Let me '),
      chunk('up', 'check.'),
      toolChunk({ index: 0, id: 'call_9', type: 'function', function: { name: 'weather', arguments: '{"city"' } }),
      toolChunk({ index: 0, function: { arguments: ':"Oslo"}' } }, 'tool_calls'),
      usage,
    ],
  });
  const stream = client.responses.stream({
    model: 'my-alias',
    input: 'weather?',
    tools: [{ type: 'function', name: 'weather', parameters: { type: 'object' }, strict: false }],
  });
  const types: string[] = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalResponse();
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.completed');
  // (the SDK's stream helper leaves `output_text` to `responses.create`; read the message item)
  const message = final.output.find((o) => o.type === 'message');
  assert.ok(message && message.type === 'message');
  assert.deepEqual(message.content.map((c) => (c.type === 'output_text' ? c.text : '')), ['Let me check.']);
  const call = final.output.find((o) => o.type === 'function_call');
  assert.ok(call && call.type === 'function_call');
  assert.deepEqual([call.call_id, call.name, JSON.parse(call.arguments)], ['call_9', 'weather', { city: 'Oslo' }]);
  assert.deepEqual(
    [final.usage?.input_tokens, final.usage?.output_tokens, final.usage?.total_tokens],
    [7, 3, 10],
  );
});

test('a function call output sent back continues the conversation; previous_response_id is refused', async () => {
  const r = await client.responses.create({
    model: 'my-alias',
    input: [
      { role: 'user', content: 'weather?' },
      { type: 'function_call', call_id: 'call_9', name: 'weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: 'call_9', output: 'sunny' },
    ],
  });
  assert.equal(r.output_text, 'hi from mock');
  assert.deepEqual(up.requests.at(-1)!.json!.messages, [
    { role: 'user', content: 'weather?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
    },
    { role: 'tool', tool_call_id: 'call_9', content: 'sunny' },
  ]);
  await assert.rejects(
    client.responses.create({ model: 'my-alias', input: 'more', previous_response_id: 'resp_1' }),
    (e: unknown) => e instanceof OpenAI.BadRequestError && /`previous_response_id`/.test(e.message),
  );
});
