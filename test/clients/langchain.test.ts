// LangChain (`@langchain/openai` 1.5 on chat and on Responses, `@langchain/anthropic` 1.5) through a real Sluice
// process to each target: a streamed get_weather tool round trip with `bindTools`, the tool's ToolMessage sent
// back on the second turn (docs/translation.md "Tested clients").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { tool } from '@langchain/core/tools';
import { type AIMessageChunk, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { z } from 'zod';
import { assertRoundTrip, bounded, CALLER_KEY, clientMatrix, type Target, TARGETS } from '../support/client-matrix.ts';
import { FINAL_ANSWER } from '../support/scripted-upstream.ts';

const rig = clientMatrix();

const weather = () =>
  tool(({ city }: { city: string }) => Promise.resolve(`Sunny in ${city}, ${rig.marker}`), {
    name: 'get_weather',
    description: 'The weather in a city',
    schema: z.object({ city: z.string() }),
  });

const modes: { name: string; model: (t: Target) => BaseChatModel; limited?: boolean }[] = [
  {
    name: '@langchain/openai ChatOpenAI (chat), stream',
    model: (t) =>
      new ChatOpenAI({
        model: t.model,
        apiKey: CALLER_KEY,
        maxRetries: 0,
        configuration: { baseURL: rig.gw.url('/v1') },
      }),
  },
  {
    name: '@langchain/openai ChatOpenAI (useResponsesApi), stream',
    model: (t) =>
      new ChatOpenAI({
        model: t.model,
        apiKey: CALLER_KEY,
        maxRetries: 0,
        useResponsesApi: true,
        configuration: { baseURL: rig.gw.url('/v1') },
      }),
  },
  {
    name: '@langchain/anthropic ChatAnthropic, stream',
    model: (t) =>
      new ChatAnthropic({ model: t.model, apiKey: CALLER_KEY, maxRetries: 0, anthropicApiUrl: rig.gw.url('') }),
    limited: true,
  },
];

/** One streamed turn, its chunks folded into one message. */
async function turn(model: ReturnType<NonNullable<BaseChatModel['bindTools']>>, messages: BaseMessage[]) {
  let full: AIMessageChunk | undefined;
  for await (const chunk of await model.stream(messages)) full = full ? full.concat(chunk) : chunk;
  assert.ok(full, 'the stream carried no chunk');
  return full;
}

async function roundTrip(chat: BaseChatModel): Promise<{ text: string; inputTokens: number | undefined }> {
  const get = weather();
  const model = chat.bindTools!([get]);
  const messages: BaseMessage[] = [new HumanMessage('What is the weather in Paris?')];
  const first = await turn(model, messages);
  assert.equal(first.tool_calls?.length, 1, `no tool call on the first turn: ${JSON.stringify(first)}`);
  messages.push(first);
  for (const call of first.tool_calls!) messages.push(await get.invoke({ ...call, type: 'tool_call' }));
  const final = await turn(model, messages);
  const text = typeof final.content === 'string' ? final.content : JSON.stringify(final.content);
  return { text, inputTokens: final.usage_metadata?.input_tokens };
}

for (const mode of modes) {
  describe(mode.name, () => {
    for (const target of TARGETS) {
      test(`tool round trip on ${target.model}`, async () => {
        const from = rig.upstream.requests.length;
        const { text, inputTokens } = await bounded(
          roundTrip(mode.model(target)),
          60_000,
          `LangChain on ${target.model}`,
        );
        assert.ok(text.includes(FINAL_ANSWER) && text.includes(rig.marker), `final text: ${text}`);
        // LangChain reads input tokens where each API puts them (Anthropic: message_start), never 0.
        assert.ok((inputTokens ?? 0) > 0, `usage_metadata.input_tokens: ${inputTokens}`);
        assertRoundTrip(rig, target, from, { limited: mode.limited });
      });
    }
  });
}
