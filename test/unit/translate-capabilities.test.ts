// Agent clients through translation against upstreams that enforce the real APIs' rules (api-rules.ts):
// the capability table (docs/translation.md "Capabilities"), the official `@anthropic-ai/sdk` on OpenAI
// reasoning and non-reasoning targets with thinking and a tool round trip, the `openai` SDK's Responses
// with reasoning effort on Claude and on a chat-translated gpt-5, structured output both ways, `is_error`
// and `user` as the upstream sees them, and the local token counts (message_start, count_tokens) —
// through app.request() (each SDK's `fetch`).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { capabilitiesOf, claudeVersion, nearestEffort } from '../../src/providers/capabilities.ts';
import { estimatePromptTokens, estimateTokens } from '../../src/providers/estimate.ts';
import { messagesToChatRequest } from '../../src/providers/translate/messages-via-chat.ts';
import { chatToMessagesRequest } from '../../src/providers/translate/chat-via-messages.ts';
import { anthropicMessage } from '../support/mock-anthropic.ts';
import { chunk } from '../support/mock-upstream.ts';
import { proxyOverMocks } from '../support/proxy-over-mocks.ts';

type Json = Record<string, unknown>;

const CALLER = 'sk-caps-caller';
/** What Claude Code sends as `metadata.user_id`: a JSON string of about 150 characters. */
const LONG_USER = JSON.stringify({
  device_id: 'd'.repeat(64),
  account_uuid: '',
  session_id: '0b7e4c1a-5f7e-4a51-9d1e-2f6f8f0a7c3e',
}).padEnd(150, ' ');

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: or, provider: openrouter, adapter: openai, api_key: k-or, api_base: "${openaiBase}" }
  - { display_name: vl, provider: vllm, adapter: openai, api_key: k-vl, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicBase}" }
models:
  - { display_name: gpt5, provider_key: oa, model_name: gpt-5-mock, retries: 0 }
  - { display_name: gpt4o, provider_key: oa, model_name: gpt-4o-mock, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-sonnet-4-5-mock, retries: 0 }
  - { display_name: "oa/*", provider_key: oa, model_name: "*", retries: 0 }
  - { display_name: routed, provider_key: or, model_name: openai/gpt-5-mock, retries: 0 }
  - display_name: deployment
    provider_key: vl
    model_name: my-reasoner
    retries: 0
    capabilities: { token_limit_param: max_completion_tokens, reasoning_efforts: [low, high], user_max_length: 8 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
  { env: { CALLER } },
  { rules: true },
);

/** Each SDK's requests go straight into the proxy app. */
const viaApp = (input: string | URL | Request, init?: RequestInit) =>
  Promise.resolve(rig.app.request(input instanceof Request ? input : String(input), init));
const anthropic = () => new Anthropic({ apiKey: CALLER, baseURL: 'http://sluice.test', maxRetries: 0, fetch: viaApp });
const openai = () => new OpenAI({ apiKey: CALLER, baseURL: 'http://sluice.test/v1', maxRetries: 0, fetch: viaApp });

const lastChat = (): Json => rig.mock.requests.at(-1)!.json!;
const lastMessages = (): Json => rig.anth.requests.at(-1)!.json!;

const WEATHER: Anthropic.Tool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const usageChunk = (prompt: number) => ({
  id: 'c',
  model: 'up',
  choices: [],
  usage: { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5 },
});
const toolCallChunk = (id: string) => ({
  id: 'c',
  model: 'up',
  choices: [{
    index: 0,
    delta: {
      tool_calls: [{ index: 0, id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
    },
    finish_reason: 'tool_calls',
  }],
});

describe('the capability table', () => {
  const rows: [string, string | undefined, Partial<ReturnType<typeof capabilitiesOf>>][] = [
    ['gpt-5-mini', 'openai', { family: 'gpt-5', token_limit_param: 'max_completion_tokens', temperature: false }],
    ['gpt-5.1-codex', undefined, { family: 'gpt-5.1', reasoning_efforts: ['none', 'low', 'medium', 'high'] }],
    ['gpt-5-chat-latest', undefined, { family: 'gpt-5-chat', reasoning: 'none', temperature: true }],
    ['o3-mini', undefined, { family: 'o-series', reasoning_efforts: ['low', 'medium', 'high'] }],
    ['o1-mini', undefined, { family: 'o1-mini', reasoning: 'none' }],
    ['GPT-4o-2024-08-06', 'openai', { family: 'gpt-4o/gpt-4.1', reasoning: 'none', token_limit_param: 'max_tokens' }],
    ['openai/gpt-4.1', 'openrouter', { family: 'gpt-4o/gpt-4.1', user_max_length: 128 }],
    ['deepseek-reasoner', 'deepseek', { family: 'deepseek-reasoner', reasoning: 'none', structured_output: false }],
    ['claude-3-5-sonnet-20241022', 'anthropic', { family: 'claude (before 3.7)', reasoning: 'none' }],
    ['claude-sonnet-4-20250514', 'anthropic', { family: 'claude (3.7 to 4.0)', reasoning: 'thinking' }],
    ['claude-opus-4-1', 'anthropic', { family: 'claude', structured_output: true }],
    ['us.anthropic.claude-haiku-4-5-20251001-v1:0', 'bedrock', { family: 'claude', reasoning: 'thinking' }],
    ['some-anthropic-alias', 'anthropic', { family: 'claude', reasoning: 'thinking' }],
    ['llama-3.1-70b', 'vllm', { family: 'default', reasoning: 'reasoning_effort', token_limit_param: 'max_tokens' }],
  ];
  for (const [model, vendor, want] of rows) {
    test(`${model} at ${vendor ?? '-'}`, () => {
      const caps = capabilitiesOf(model, vendor);
      for (const [k, v] of Object.entries(want)) assert.deepEqual(caps[k as keyof typeof caps], v, k);
    });
  }

  test('a model resource overrides its family, member by member', () => {
    const caps = capabilitiesOf('gpt-4o', 'openai', {
      reasoning: 'reasoning_effort',
      thinking_budgets: { high: 9000 },
    });
    assert.equal(caps.reasoning, 'reasoning_effort');
    assert.equal(caps.token_limit_param, 'max_tokens', 'the family keeps what is not overridden');
    assert.deepEqual(caps.thinking_budgets, { low: 1024, medium: 2048, high: 9000, xhigh: 8192 });
  });

  test('Claude versions from either naming scheme; a date is not a minor version', () => {
    assert.equal(claudeVersion('claude-3-7-sonnet-latest'), 3.7);
    assert.equal(claudeVersion('claude-sonnet-4-20250514'), 4);
    assert.equal(claudeVersion('claude-sonnet-4-5-20250929'), 4.5);
    assert.equal(claudeVersion('gpt-5'), undefined);
  });

  test('the nearest accepted effort; a tie goes up', () => {
    assert.equal(nearestEffort('minimal', ['low', 'medium', 'high']), 'low');
    assert.equal(nearestEffort('xhigh', ['minimal', 'low', 'medium', 'high']), 'high');
    assert.equal(nearestEffort('medium', ['low', 'high']), 'high');
    assert.equal(nearestEffort('none', ['none', 'low']), 'none');
  });
});

test('a prompt piece counted again (kept with its count) counts the same, in each encoding', async () => {
  const system = 'You are a coding agent. Read files before you edit them. '.repeat(40);
  for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
    const body = (turn: string) => ({
      messages: [{ role: 'system', content: system }, { role: 'user', content: turn }],
    });
    const first = await estimatePromptTokens('chat', body('one'), encoding);
    const again = await estimatePromptTokens('chat', body('two'), encoding);
    const direct = await estimateTokens(system, encoding);
    assert.equal(first, again);
    assert.equal(first, direct + (await estimateTokens('one', encoding)) + 2 * 3 + 2 + 3);
  }
});

describe('request translation by capability', () => {
  const base = { max_tokens: 1000, messages: [{ role: 'user', content: 'q' }] };

  test('messages → o-series: max_completion_tokens, a small budget as the lowest effort it takes, no temperature', () => {
    const out = messagesToChatRequest({
      ...base,
      model: 'o3-mini',
      temperature: 0.2,
      thinking: { type: 'enabled', budget_tokens: 500 },
    });
    assert.equal(out.max_completion_tokens, 1000);
    assert.equal(out.max_tokens, undefined);
    assert.equal(out.reasoning_effort, 'low');
    assert.equal(out.temperature, undefined);
  });

  test("messages → gpt-5: output_config.effort says how hard an adaptive thinker tries; 'max' is the top", () => {
    const out = messagesToChatRequest({
      ...base,
      model: 'gpt-5',
      thinking: { type: 'adaptive' },
      output_config: { effort: 'max' },
    });
    assert.equal(out.reasoning_effort, 'high');
  });

  test('chat → Claude: a cap below the budget shrinks it; a forced tool choice or a tool turn without thinking drops it', () => {
    const capped = chatToMessagesRequest({
      ...base,
      max_tokens: 3000,
      model: 'claude-sonnet-4-5',
      reasoning_effort: 'high',
    });
    assert.deepEqual(capped.thinking, { type: 'enabled', budget_tokens: 2999 });
    assert.equal(capped.max_tokens, 3000, "the caller's cap is the whole answer's");
    const tiny = chatToMessagesRequest({
      ...base,
      max_tokens: 500,
      model: 'claude-sonnet-4-5',
      reasoning_effort: 'high',
    });
    assert.equal(tiny.thinking, undefined, 'no budget of at least 1024 fits under 500');
    const forced = chatToMessagesRequest({
      messages: base.messages,
      model: 'claude-sonnet-4-5',
      reasoning_effort: 'low',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'required',
    });
    assert.equal(forced.thinking, undefined);
    assert.deepEqual(forced.tool_choice, { type: 'any' });
    const old = chatToMessagesRequest({
      messages: base.messages,
      model: 'claude-3-5-sonnet',
      reasoning_effort: 'high',
    });
    assert.equal(old.thinking, undefined, 'a model without extended thinking');
  });

  test('chat → Claude without structured output: json_schema is refused, not dropped', () => {
    assert.throws(
      () =>
        chatToMessagesRequest({
          ...base,
          model: 'claude-3-5-sonnet',
          response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } },
        }),
      /`response_format` cannot be sent to this model/,
    );
  });
});

describe('@anthropic-ai/sdk on OpenAI targets: thinking, tools, two turns', () => {
  for (const target of ['gpt5', 'gpt4o'] as const) {
    test(`${target}: a tool round trip with thinking succeeds; is_error and the user cut reach the model`, async () => {
      const client = anthropic();
      const first: Anthropic.MessageParam = { role: 'user', content: 'What is the weather in Oslo?' };
      const params = {
        model: target,
        max_tokens: 32000,
        thinking: { type: 'enabled', budget_tokens: 10000 },
        metadata: { user_id: LONG_USER },
        tools: [WEATHER],
      } satisfies Partial<Anthropic.MessageCreateParams>;
      rig.mock.script({ sse: [chunk('up', 'Let me check.'), toolCallChunk('call_1'), usageChunk(120)] });
      const turn1 = await client.messages.stream({ ...params, messages: [first] }).finalMessage();
      assert.equal(turn1.stop_reason, 'tool_use');
      const call = turn1.content.find((b) => b.type === 'tool_use');
      assert.ok(call && call.type === 'tool_use');
      const sent1 = lastChat();
      if (target === 'gpt5') {
        assert.equal(sent1.max_completion_tokens, 32000);
        assert.equal(sent1.reasoning_effort, 'high');
      } else {
        assert.equal(sent1.max_tokens, 32000);
        assert.equal(sent1.reasoning_effort, undefined, 'a gpt-4o-class model has no reasoning knob');
      }
      assert.equal(sent1.user, LONG_USER.slice(0, 64), "cut to OpenAI's 64");

      rig.mock.script({ sse: [chunk('up', 'FINAL ANSWER. The tool returned: "timeout"'), usageChunk(150)] });
      const turn2 = await client.messages.create({
        ...params,
        messages: [
          first,
          { role: 'assistant', content: turn1.content },
          {
            role: 'user',
            content: [{ type: 'tool_result', tool_use_id: call.id, content: 'timeout', is_error: true }],
          },
        ],
        stream: true,
      });
      let text = '';
      for await (const ev of turn2) {
        if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
      }
      assert.match(text, /^FINAL ANSWER/);
      const tool = (lastChat().messages as Json[]).find((m) => m.role === 'tool');
      assert.deepEqual(tool, { role: 'tool', tool_call_id: call.id, content: 'Tool error: timeout' });
    });
  }

  test("message_start states the prompt's size, near the tokenizer's count; message_delta the upstream's", async () => {
    rig.mock.script({ sse: [chunk('up', 'hello'), usageChunk(777)] });
    const stream = anthropic().messages.stream({
      model: 'gpt4o',
      max_tokens: 100,
      system: 'You are a careful assistant who answers in one sentence.',
      tools: [WEATHER],
      messages: [{ role: 'user', content: 'Tell me about the weather patterns of the Norwegian coast in winter.' }],
    });
    let started = -1;
    stream.on('streamEvent', (ev) => {
      if (ev.type === 'message_start') started = ev.message.usage.input_tokens;
    });
    const final = await stream.finalMessage();
    assert.equal(final.usage.input_tokens, 777, "the upstream's count wins at the end");
    const sent = lastChat();
    const enc = new Tiktoken(o200k);
    const texts = (sent.messages as Json[]).map((m) => String(m.content)).join('') +
      JSON.stringify((sent.tools as Json[]).map((t) => t.function));
    // OpenAI's accounting: 3 per message and 3 to prime the reply, around the texts.
    const reference = enc.encode(texts).length + 3 * (sent.messages as Json[]).length + 3;
    assert.ok(started > 0, `message_start input_tokens ${started}`);
    assert.ok(Math.abs(started - reference) <= Math.max(12, reference * 0.25), `${started} against ${reference}`);
  });

  test('count_tokens on an OpenAI target: a count marked estimated, no upstream call, nothing charged', async () => {
    const before = rig.mock.requests.length;
    const { data, response } = await anthropic().messages.countTokens({
      model: 'gpt5',
      system: 'be brief',
      tools: [WEATHER],
      messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
    }).withResponse();
    assert.ok(data.input_tokens > 10 && data.input_tokens < 200, `input_tokens ${data.input_tokens}`);
    assert.equal(response.headers.get('x-sluice-tokens-estimated'), 'true');
    assert.equal(rig.mock.requests.length, before);
  });

  test('count_tokens on an Anthropic target passes through, unmarked', async () => {
    const { response } = await anthropic().messages.countTokens({
      model: 'claude',
      messages: [{ role: 'user', content: 'hi' }],
    }).withResponse();
    assert.equal(response.headers.get('x-sluice-tokens-estimated'), null);
    assert.equal(rig.anth.requests.at(-1)!.url, '/v1/messages/count_tokens');
  });

  test('Claude Code structured output (output_config.format) as response_format', async () => {
    rig.mock.script({ body: undefined });
    const r = await anthropic().messages.create({
      model: 'gpt4o',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'title this' }],
      output_config: {
        format: { type: 'json_schema', schema: { type: 'object', properties: { title: { type: 'string' } } } },
      },
    });
    assert.equal(r.type, 'message');
    assert.deepEqual(lastChat().response_format, {
      type: 'json_schema',
      json_schema: {
        name: 'output',
        schema: { type: 'object', properties: { title: { type: 'string' } } },
        strict: true,
      },
    });
  });
});

describe('openai SDK Responses with reasoning effort and max_output_tokens', () => {
  test('on Claude: a thinking budget on turn 1; turn 2 continues the tool turn without it, and succeeds', async () => {
    const client = openai();
    const tools: OpenAI.Responses.Tool[] = [{
      type: 'function',
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      strict: false,
    }];
    const toolUse = {
      ...anthropicMessage('claude-sonnet-4-5-mock'),
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }],
      stop_reason: 'tool_use',
    };
    rig.anth.script({ body: toolUse });
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'Weather in Oslo?' }];
    const params = { model: 'claude', reasoning: { effort: 'high' }, max_output_tokens: 16000, tools } as const;
    const turn1 = await client.responses.create({ ...params, input });
    const call = turn1.output.find((o) => o.type === 'function_call');
    assert.ok(call && call.type === 'function_call');
    const sent1 = lastMessages();
    assert.deepEqual(sent1.thinking, { type: 'enabled', budget_tokens: 4096 });
    assert.equal(sent1.max_tokens, 16000);

    rig.anth.script({ body: anthropicMessage('claude-sonnet-4-5-mock', 'FINAL ANSWER. The tool returned: "4 C"') });
    const turn2 = await client.responses.create({
      ...params,
      input: [...input, call, { type: 'function_call_output', call_id: call.call_id, output: '4 C' }],
    });
    assert.match(turn2.output_text, /^FINAL ANSWER/);
    assert.equal(lastMessages().thinking, undefined, 'a chat caller cannot send the thinking block back');
  });

  test('on a chat-translated gpt-5 (OpenRouter): max_completion_tokens, the effort as asked, user cut to 128', async () => {
    rig.mock.script({});
    const r = await openai().responses.create({
      model: 'routed',
      input: 'hi',
      reasoning: { effort: 'minimal' },
      max_output_tokens: 500,
      temperature: 0.3,
      user: LONG_USER,
    });
    assert.equal(r.status, 'completed');
    const sent = lastChat();
    assert.equal(sent.max_completion_tokens, 500);
    assert.equal(sent.max_tokens, undefined);
    assert.equal(sent.reasoning_effort, 'minimal');
    assert.equal(sent.temperature, undefined, 'a reasoning model takes only the default');
    assert.equal(sent.user, LONG_USER.slice(0, 128));
  });

  test("a model's capabilities override its family: the nearest accepted effort, its own user limit", async () => {
    rig.mock.script({});
    await openai().responses.create({
      model: 'deployment',
      input: 'hi',
      reasoning: { effort: 'medium' },
      max_output_tokens: 300,
      user: 'abcdefghijkl',
    });
    const sent = lastChat();
    assert.equal(sent.max_completion_tokens, 300);
    assert.equal(sent.reasoning_effort, 'high');
    assert.equal(sent.user, 'abcdefgh');
  });

  test('a wildcard name resolves by the upstream model it reaches', async () => {
    rig.mock.script({});
    const res = await rig.post('/v1/messages', {
      model: 'oa/gpt-5-mock',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi' }],
    }, CALLER);
    assert.equal(res.status, 200, await res.clone().text());
    await res.arrayBuffer();
    assert.equal(lastChat().max_completion_tokens, 50);
  });
});

describe('openai SDK chat on Claude', () => {
  test('reasoning_effort becomes a thinking budget; json_schema becomes output_config.format', async () => {
    rig.anth.script({});
    await openai().chat.completions.create({
      model: 'claude',
      messages: [{ role: 'user', content: 'title this' }],
      reasoning_effort: 'medium',
      temperature: 0.5,
      response_format: { type: 'json_schema', json_schema: { name: 't', schema: { type: 'object' } } },
    });
    const sent = lastMessages();
    assert.deepEqual(sent.thinking, { type: 'enabled', budget_tokens: 2048 });
    assert.equal(sent.max_tokens, 4096 + 2048);
    assert.equal(sent.temperature, undefined, 'thinking takes only the default temperature');
    assert.deepEqual(sent.output_config, { format: { type: 'json_schema', schema: { type: 'object' } } });
  });
});
