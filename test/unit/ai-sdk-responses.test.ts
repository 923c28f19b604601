// The real AI SDK (`ai` 6 + `@ai-sdk/openai` 3, whose `openai(model)` speaks Responses with `store: true` and
// replays the assistant's earlier text by `item_reference`) through app.request() in a two-step tool loop on
// translated targets (docs/routing.md "Responses state"), against mocks that enforce the real tool pairing.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { anthropicMessage } from '../support/mock-anthropic.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';

const KEY = 'sk-ai-sdk';
const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: sdk, key_env: KEY, allowed_models: ["*"] }
`,
  { env: { KEY } },
  { rules: true },
);

type Json = Record<string, unknown>;

const provider = () =>
  createOpenAI({
    apiKey: KEY,
    baseURL: 'http://sluice.test/v1',
    fetch: (input, init) => Promise.resolve(rig.app.request(String(input), init)),
  });

const weather = tool({
  description: 'the weather in a city',
  inputSchema: z.object({ city: z.string() }),
  execute: () => Promise.resolve('sunny'),
});

const TEXT = 'Let me check with a tool.';
const ARGS = '{"city":"Oslo"}';

function chatToolCall(model: string): Json {
  return {
    ...chatCompletion(model),
    choices: [{
      index: 0,
      message: {
        role: 'assistant',
        content: TEXT,
        tool_calls: [{ id: 'call_sdk', type: 'function', function: { name: 'weather', arguments: ARGS } }],
      },
      finish_reason: 'tool_calls',
    }],
  };
}

/** The chat chunks of the same turn: text, then the call in two argument fragments. */
function chatToolCallChunks(model: string): Json[] {
  const delta = (d: Json, finish: string | null = null) => ({
    id: 'chatcmpl-sdk',
    object: 'chat.completion.chunk',
    created: 1,
    model,
    choices: [{ index: 0, delta: d, finish_reason: finish }],
  });
  return [
    delta({ role: 'assistant', content: TEXT }),
    delta({
      tool_calls: [{ index: 0, id: 'call_sdk', type: 'function', function: { name: 'weather', arguments: '{"ci' } }],
    }),
    delta({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Oslo"}' } }] }),
    delta({}, 'tool_calls'),
    { ...delta({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 } },
  ];
}

describe('AI SDK Responses tool loop on translated targets', () => {
  test('OpenAI-wire target, generateText: step 2 carries the text, the call and its output', async () => {
    rig.mock.script({ body: chatToolCall('deep-upstream') }, { body: chatCompletion('deep-upstream', 'Sunny.') });
    const r = await generateText({
      model: provider()('deep'),
      tools: { weather },
      stopWhen: stepCountIs(2),
      prompt: 'weather in Oslo?',
    });
    assert.equal(r.text, 'Sunny.');
    const step2 = rig.mock.requests.at(-1)!.json!;
    assert.deepEqual(step2.messages, [
      { role: 'user', content: 'weather in Oslo?' },
      {
        role: 'assistant',
        content: TEXT,
        tool_calls: [{ id: 'call_sdk', type: 'function', function: { name: 'weather', arguments: ARGS } }],
      },
      { role: 'tool', tool_call_id: 'call_sdk', content: 'sunny' },
    ]);
  });

  test('OpenAI-wire target, streamText: the streamed first step is kept and resolved', async () => {
    rig.mock.script({ sse: chatToolCallChunks('deep-upstream') }, {
      sse: [{ ...chatToolCallChunks('deep-upstream')[0], choices: [{ index: 0, delta: { content: 'Sunny.' } }] }],
    });
    const r = streamText({
      model: provider()('deep'),
      tools: { weather },
      stopWhen: stepCountIs(2),
      prompt: 'weather in Oslo?',
    });
    assert.equal(await r.text, 'Sunny.');
    const messages = rig.mock.requests.at(-1)!.json!.messages as Json[];
    assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'tool']);
    assert.equal(messages[1]!.content, TEXT);
  });

  test('Anthropic target, generateText: tool_use and tool_result pair, the text before the call is kept', async () => {
    rig.anth.script({
      body: {
        ...anthropicMessage('claude-upstream'),
        content: [
          { type: 'text', text: TEXT },
          { type: 'tool_use', id: 'toolu_sdk', name: 'weather', input: { city: 'Oslo' } },
        ],
        stop_reason: 'tool_use',
      },
    }, { body: anthropicMessage('claude-upstream', 'Sunny.') });
    const r = await generateText({
      model: provider()('claude'),
      tools: { weather },
      stopWhen: stepCountIs(2),
      prompt: 'weather in Oslo?',
    });
    assert.equal(r.text, 'Sunny.');
    const sent = rig.anth.requests.at(-1)!.json!.messages as Json[];
    assert.deepEqual(sent.slice(1), [
      {
        role: 'assistant',
        content: [
          { type: 'text', text: TEXT },
          { type: 'tool_use', id: 'toolu_sdk', name: 'weather', input: { city: 'Oslo' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_sdk', content: 'sunny' }] },
    ]);
  });
});
