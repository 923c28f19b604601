// The official SDKs (`openai`, `@anthropic-ai/sdk`) through a real Sluice process to each target: a streamed
// two-turn get_weather round trip on chat completions, on Responses (the whole input sent again, and chained by
// `previous_response_id`) and on Messages (streamed; created with a forced tool), Messages' token count, and
// what a stream the caller leaves is charged (docs/translation.md "Tested clients").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import {
  accessLines,
  assertRoundTrip,
  bounded,
  CALLER_KEY,
  clientMatrix,
  received,
  type Target,
  TARGETS,
} from '../support/client-matrix.ts';
import { FINAL_ANSWER, SLOW_PROMPT } from '../support/scripted-upstream.ts';

const rig = clientMatrix();
const PROMPT = 'What is the weather in Paris?';
const CITY = { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] };
const weather = (args: string) => `Sunny in ${(JSON.parse(args) as { city: string }).city}, ${rig.marker}`;

const openai = () => new OpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1'), maxRetries: 0 });

async function chatLoop(target: Target): Promise<string> {
  const client = openai();
  const tools: OpenAI.ChatCompletionTool[] = [{
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city', parameters: CITY },
  }];
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: PROMPT }];
  const turn = async () => {
    const stream = await client.chat.completions.create({
      model: target.model,
      messages,
      tools,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const calls: { id: string; name: string; args: string }[] = [];
    for await (const c of stream) {
      const d = c.choices[0]?.delta;
      text += d?.content ?? '';
      for (const t of d?.tool_calls ?? []) {
        calls[t.index] ??= { id: '', name: '', args: '' };
        calls[t.index]!.id += t.id ?? '';
        calls[t.index]!.name += t.function?.name ?? '';
        calls[t.index]!.args += t.function?.arguments ?? '';
      }
    }
    return { text, calls };
  };
  const first = await turn();
  assert.equal(first.calls.length, 1, `no tool call on the first turn: ${JSON.stringify(first)}`);
  messages.push({
    role: 'assistant',
    content: first.text,
    tool_calls: first.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } })),
  });
  for (const c of first.calls) messages.push({ role: 'tool', tool_call_id: c.id, content: weather(c.args) });
  return (await turn()).text;
}

async function responsesLoop(target: Target, chained: boolean): Promise<string> {
  const client = openai();
  const tools: OpenAI.Responses.Tool[] = [{
    type: 'function',
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: CITY,
    strict: false,
  }];
  const turn = async (input: OpenAI.Responses.ResponseInput, previous?: string) => {
    const stream = await client.responses.create({
      model: target.model,
      input,
      tools,
      stream: true,
      ...(previous ? { previous_response_id: previous } : {}),
    });
    let text = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const e of stream) {
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.completed') done = e.response;
    }
    assert.ok(done, 'the stream ended without response.completed');
    return { text, response: done };
  };
  const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: PROMPT }];
  const first = await turn(input);
  const calls = first.response.output.filter((i) => i.type === 'function_call');
  assert.equal(calls.length, 1, `no function call on the first turn: ${JSON.stringify(first.response.output)}`);
  const outputs = calls.map((c) => ({
    type: 'function_call_output' as const,
    call_id: c.call_id,
    output: weather(c.arguments),
  }));
  if (chained) return (await turn(outputs, first.response.id)).text;
  return (await turn([...input, ...(first.response.output as OpenAI.Responses.ResponseInput), ...outputs])).text;
}

const anthropic = () => new Anthropic({ apiKey: CALLER_KEY, baseURL: rig.gw.url(''), maxRetries: 0 });

/** Two Messages turns; `create`: not streamed, the first turn forcing a tool (`tool_choice: any`). */
async function messagesLoop(target: Target, create = false): Promise<string> {
  const client = anthropic();
  const from = rig.upstream.requests.length;
  const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'The weather in a city', input_schema: CITY }];
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: PROMPT }];
  const first = create
    ? await client.messages.create({
      model: target.model,
      max_tokens: 1024,
      messages,
      tools,
      tool_choice: { type: 'any' },
    })
    : await client.messages.stream({ model: target.model, max_tokens: 1024, messages, tools }).finalMessage();
  if (create) {
    // The forced choice in the target's own form: chat's `required`.
    const sent = received(rig, target, from)[0]!;
    assert.deepEqual(sent.json!.tool_choice, sent.api === 'chat' ? 'required' : { type: 'any' }, sent.api);
  }
  const uses = first.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, `no tool_use on the first turn: ${JSON.stringify(first.content)}`);
  messages.push({ role: 'assistant', content: first.content });
  messages.push({
    role: 'user',
    content: uses.map((u) => ({
      type: 'tool_result' as const,
      tool_use_id: u.id,
      content: weather(JSON.stringify(u.input)),
    })),
  });
  const final = await client.messages.stream({ model: target.model, max_tokens: 1024, messages, tools }).finalMessage();
  assert.ok(final.usage.input_tokens > 0, `usage: ${JSON.stringify(final.usage)}`);
  return final.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
}

const modes: { name: string; loop: (t: Target) => Promise<string>; limited?: boolean }[] = [
  { name: 'openai 6.30.1 chat.completions, stream', loop: chatLoop },
  { name: 'openai 6.30.1 responses.create, stream, whole input', loop: (t) => responsesLoop(t, false) },
  { name: 'openai 6.30.1 responses.create, stream, previous_response_id', loop: (t) => responsesLoop(t, true) },
  { name: '@anthropic-ai/sdk 1.14.0 messages.stream', loop: (t) => messagesLoop(t), limited: true },
  {
    name: '@anthropic-ai/sdk 1.14.0 messages.create, tool_choice any',
    loop: (t) => messagesLoop(t, true),
    limited: true,
  },
];

for (const mode of modes) {
  describe(mode.name, () => {
    for (const target of TARGETS) {
      test(`tool round trip on ${target.model}`, async () => {
        const from = rig.upstream.requests.length;
        const text = await bounded(mode.loop(target), 60_000, `${mode.name} on ${target.model}`);
        assert.ok(text.includes(FINAL_ANSWER) && text.includes(rig.marker), `final text: ${text}`);
        assertRoundTrip(rig, target, from, { limited: mode.limited });
      });
    }
  });
}

// Off Anthropic the gateway counts the prompt itself and says so; an Anthropic target counts as Anthropic does.
describe('@anthropic-ai/sdk 1.14.0 messages.countTokens', () => {
  for (const target of TARGETS) {
    test(`on ${target.model}`, async () => {
      const from = rig.upstream.requests.length;
      const { data, response } = await anthropic().messages.countTokens({
        model: target.model,
        system: 'Answer briefly.',
        tools: [{ name: 'get_weather', description: 'The weather in a city', input_schema: CITY }],
        messages: [{ role: 'user', content: PROMPT }],
      }).withResponse();
      assert.ok(data.input_tokens > 10, `input_tokens ${data.input_tokens}`);
      const counted = received(rig, target, from).filter((r) => r.api === 'count_tokens');
      if (target.kind === 'anthropic') {
        assert.equal(response.headers.get('x-sluice-tokens-estimated'), null);
        assert.equal(counted.length, 1);
      } else {
        assert.equal(response.headers.get('x-sluice-tokens-estimated'), 'true');
        assert.equal(counted.length, 0);
      }
    });
  }
});

// A caller that leaves a stream after its first delta has still cost the upstream its prompt: the access log
// charges it (estimated where the upstream had reported nothing yet: an OpenAI-wire stream reports at its end;
// Anthropic reports the prompt in message_start, passed through to a Messages caller).
describe('a stream the caller leaves after its first delta', () => {
  const PROMPT_SLOW = `${SLOW_PROMPT}: tell me a long story about a lighthouse keeper and the sea`;
  const leave = async (path: string, model: string, first: (signal: AbortSignal) => Promise<void>) => {
    const logFrom = rig.gw.logs.length;
    const controller = new AbortController();
    await first(controller.signal);
    controller.abort();
    const line = () => accessLines(rig, logFrom).find((l) => l.path === path && l.model === model);
    await bounded(rig.gw.waitForLog((l) => l === line()), 20_000, 'the access-log line');
    return line()!;
  };
  for (const target of TARGETS) {
    test(`openai chat.completions on ${target.model}`, async () => {
      const log = await leave('/v1/chat/completions', target.model, async (signal) => {
        const stream = await openai().chat.completions.create(
          { model: target.model, messages: [{ role: 'user', content: PROMPT_SLOW }], stream: true },
          { signal },
        );
        for await (const c of stream) if (c.choices[0]?.delta?.content) break;
      });
      assert.equal(log.error_kind, 'client_closed', JSON.stringify(log));
      assert.ok(Number(log.prompt_tokens) > 5, JSON.stringify(log));
      assert.ok(Number(log.completion_tokens) > 0, JSON.stringify(log));
      assert.equal(log.usage_estimated, target.kind === 'anthropic' ? undefined : true, JSON.stringify(log));
    });
    test(`@anthropic-ai/sdk messages.stream on ${target.model}`, async () => {
      const log = await leave('/v1/messages', target.model, async (signal) => {
        const stream = anthropic().messages.stream(
          { model: target.model, max_tokens: 1024, messages: [{ role: 'user', content: PROMPT_SLOW }] },
          { signal },
        );
        for await (const e of stream) if (e.type === 'content_block_delta') break;
      });
      assert.equal(log.error_kind, 'client_closed', JSON.stringify(log));
      assert.ok(Number(log.prompt_tokens) > 5, JSON.stringify(log));
      assert.equal(log.usage_estimated, target.kind === 'anthropic' ? undefined : true, JSON.stringify(log));
    });
  }
});
