// Black-box: real clients on the wire endpoints of a real bin/sluice process on each runtime
// (docs/aisix-compatibility.md "Endpoints"): the `openai` SDK's Responses calls (translated through chat and
// native), a chat stream that never asked for usage counted in /metrics (estimated when the upstream reports
// none), `@anthropic-ai/sdk`'s countTokens and a tool-use turn, and the OpenAI Agents SDK completing a
// tool-calling turn over the Responses API.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Anthropic from '@anthropic-ai/sdk';
import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import { z } from 'zod';
import { chatCompletion, chunk } from '../support/mock-upstream.ts';
import { COUNTED_INPUT_TOKENS } from '../support/mock-anthropic.ts';
import { sumSamples } from '../support/metrics.ts';
import { estimatePromptTokens, estimateTokens } from '../../src/providers/estimate.ts';
import { CALLER_KEY, type RuntimeName } from '../support/process.ts';
import { sdkGateway } from '../support/sdk-gateway.ts';

/** A chat answer calling `get_weather` once (what the scripted upstream says on the first turn). */
function toolCallAnswer(model: string): Record<string, unknown> {
  return {
    ...chatCompletion(model),
    choices: [{
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{
          id: 'call_1',
          type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
        }],
      },
      finish_reason: 'tool_calls',
    }],
  };
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: the wire endpoints through real clients`, () => {
    const rig = sdkGateway(
      (openaiBase, anthropicBase) =>
        `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-upstream-SECRET, api_base: "${openaiBase}" }
  - { display_name: ds, provider: deepseek, adapter: openai, api_key: sk-ds-SECRET, api_base: "${openaiBase}" }
  - { display_name: ant, provider: anthropic, api_key: sk-ant-SECRET, api_base: "${anthropicBase}" }
models:
  - { display_name: gpt, provider_key: oai, model_name: gpt-up, retries: 0 }
  - { display_name: deep, provider_key: ds, model_name: deep-up, retries: 0 }
  - { display_name: claude, provider_key: ant, model_name: claude-up, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`,
      runtime,
    );

    test('responses.create: translated through chat, and native on an OpenAI vendor', async () => {
      const r = await rig.openai.responses.create({ model: 'deep', instructions: 'brief', input: 'hello' });
      assert.equal(r.status, 'completed');
      assert.equal(r.model, 'deep');
      assert.equal(r.output_text, 'hi from mock');
      assert.equal(r.usage?.total_tokens, 4);
      const up = rig.oai.requests.at(-1)!;
      assert.equal(up.url, '/v1/chat/completions');
      assert.deepEqual(up.json!.messages, [{ role: 'system', content: 'brief' }, { role: 'user', content: 'hello' }]);
      const native = {
        id: 'resp_native',
        object: 'response',
        created_at: 1,
        status: 'completed',
        model: 'gpt-up',
        output: [{
          type: 'message',
          id: 'msg_1',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'native answer', annotations: [] }],
        }],
        usage: { input_tokens: 2, output_tokens: 2, total_tokens: 4 },
      };
      rig.oai.script({ body: native });
      const n = await rig.openai.responses.create({ model: 'gpt', input: 'hello' });
      assert.equal(n.output_text, 'native answer');
      assert.equal(rig.oai.requests.at(-1)!.url, '/v1/responses');
      assert.equal(rig.oai.requests.at(-1)!.json!.model, 'gpt-up');
    });

    test('responses.stream: the event sequence ends in response.completed with usage', async () => {
      rig.oai.script({
        sse: [chunk('deep-up', 'one'), chunk('deep-up', ' two'), {
          ...chunk('deep-up', ''),
          choices: [],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        }],
        chunkDelayMs: 5,
      });
      const stream = rig.openai.responses.stream({ model: 'deep', input: 'count' });
      let text = '';
      for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta;
      const final = await stream.finalResponse();
      assert.equal(text, 'one two');
      assert.equal(final.status, 'completed');
      assert.equal(final.usage?.total_tokens, 5);
    });

    test('a chat stream without include_usage: the caller sees no usage chunk, /metrics counts its tokens', async () => {
      const tokens = async () =>
        sumSamples(await (await fetch(rig.gw.url('/metrics', 'status'))).text(), 'aisix_llm_total_tokens_total', {
          model: 'gpt',
        }) ?? 0;
      const before = await tokens();
      rig.oai.script({
        sse: [chunk('gpt-up', 'hello'), {
          ...chunk('gpt-up', ''),
          choices: [],
          usage: { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 },
        }],
      });
      const stream = await rig.openai.chat.completions.create({
        model: 'gpt',
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
      });
      let text = '';
      for await (const c of stream) {
        assert.equal(c.usage ?? undefined, undefined, 'no usage chunk the caller did not ask for');
        assert.equal(c.model, 'gpt');
        text += c.choices[0]?.delta?.content ?? '';
      }
      assert.equal(text, 'hello');
      assert.deepEqual(rig.oai.requests.at(-1)!.json!.stream_options, { include_usage: true });
      // The access-log line (and the metrics with it) is written once the last byte is out.
      await rig.gw.waitForLog((l) => l.msg === 'proxy request completed' && l.total_tokens === 11);
      assert.equal((await tokens()) - before, 11);
    });

    test('a chat stream whose upstream reports no usage: /metrics counts the local estimate', async () => {
      const tokens = async () =>
        sumSamples(await (await fetch(rig.gw.url('/metrics', 'status'))).text(), 'aisix_llm_total_tokens_total', {
          model: 'gpt',
        }) ?? 0;
      const before = await tokens();
      // A relay that ignores `include_usage`: no usage chunk at all.
      rig.oai.script({ sse: [chunk('gpt-up', 'hello'), chunk('gpt-up', ' world')] });
      const messages = [{ role: 'user' as const, content: 'say hello' }];
      const stream = await rig.openai.chat.completions.create({ model: 'gpt', stream: true, messages });
      let text = '';
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
      assert.equal(text, 'hello world');
      const estimate = await estimatePromptTokens('chat', { model: 'gpt', messages }) + await estimateTokens(text);
      const log = await rig.gw.waitForLog((l) => l.msg === 'proxy request completed' && l.usage_estimated === true);
      assert.equal(log.total_tokens, estimate);
      assert.equal((await tokens()) - before, estimate);
    });

    test('messages.countTokens passes through to the Anthropic target', async () => {
      const r = await rig.anthropic.messages.countTokens({
        model: 'claude',
        messages: [{ role: 'user', content: 'how many?' }],
      });
      assert.equal(r.input_tokens, COUNTED_INPUT_TOKENS);
      assert.equal(rig.ant.requests.at(-1)!.url, '/v1/messages/count_tokens');
      assert.equal(rig.ant.requests.at(-1)!.json!.model, 'claude-up');
    });

    test('@anthropic-ai/sdk: a tool-use turn translated to an OpenAI-style model and back', async () => {
      rig.oai.script({ body: toolCallAnswer('deep-up') }, { body: chatCompletion('deep-up', 'sunny in Paris') });
      const tools: Anthropic.Tool[] = [{
        name: 'get_weather',
        description: 'the weather in a city',
        input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      }];
      const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'weather in Paris?' }];
      const first = await rig.anthropic.messages.create({ model: 'deep', max_tokens: 100, tools, messages });
      assert.equal(first.stop_reason, 'tool_use');
      const use = first.content.find((b) => b.type === 'tool_use');
      assert.ok(use && use.type === 'tool_use');
      assert.deepEqual(use.input, { city: 'Paris' });
      messages.push({ role: 'assistant', content: first.content }, {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }],
      });
      const second = await rig.anthropic.messages.create({ model: 'deep', max_tokens: 100, tools, messages });
      assert.deepEqual(second.content, [{ type: 'text', text: 'sunny in Paris' }]);
      const sent = rig.oai.requests.at(-1)!.json!.messages as Record<string, unknown>[];
      assert.deepEqual(sent.at(-1), { role: 'tool', tool_call_id: use.id, content: 'sunny' });
    });

    test('the OpenAI Agents SDK completes a tool-calling turn over the Responses API', async () => {
      rig.oai.script({ body: toolCallAnswer('deep-up') }, { body: chatCompletion('deep-up', 'It is sunny in Paris.') });
      const n = rig.oai.requests.length;
      let called: unknown;
      const weather = tool({
        name: 'get_weather',
        description: 'the weather in a city',
        parameters: z.object({ city: z.string() }),
        execute: (input: { city: string }) => {
          called = input;
          return 'sunny';
        },
      });
      const agent = new Agent({ name: 'weather', instructions: 'answer briefly', model: 'deep', tools: [weather] });
      const runner = new Runner({
        modelProvider: new OpenAIProvider({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1'), useResponses: true }),
        tracingDisabled: true,
      });
      const result = await runner.run(agent, 'weather in Paris?');
      assert.deepEqual(called, { city: 'Paris' });
      assert.equal(result.finalOutput, 'It is sunny in Paris.');
      // Both turns went through /v1/responses, translated to chat; the second carries the tool's output.
      assert.equal(rig.oai.requests.length - n, 2);
      const second = rig.oai.requests.at(-1)!.json!.messages as Record<string, unknown>[];
      assert.deepEqual(second.at(-1), { role: 'tool', tool_call_id: 'call_1', content: 'sunny' });
    });
  });
}
