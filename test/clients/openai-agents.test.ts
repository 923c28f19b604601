// The OpenAI Agents SDK (`@openai/agents`) through a real Sluice process to each target: an agent with a
// get_weather tool run to its final output, over Responses (`run` and `run` streamed) and over chat completions,
// and with a reasoning effort on the translated targets (docs/translation.md "Tested clients"). Tracing is off:
// it would export to OpenAI with the caller's key.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import {
  assertHighEffort,
  assertRoundTrip,
  bounded,
  CALLER_KEY,
  clientMatrix,
  type Target,
  TARGETS,
} from '../support/client-matrix.ts';
import { FINAL_ANSWER, REASONING_TEXT } from '../support/scripted-upstream.ts';

setTracingDisabled(true);
const rig = clientMatrix();

interface Mode {
  name: string;
  useResponses: boolean;
  stream: boolean;
  /** `modelSettings.reasoning` (with a summary); such a mode runs on the translated targets only. */
  effort?: 'high';
}

const modes: Mode[] = [
  { name: 'Responses, run', useResponses: true, stream: false },
  { name: 'Responses, run streamed', useResponses: true, stream: true },
  { name: 'chat completions, run streamed', useResponses: false, stream: true },
  { name: 'Responses, run streamed, reasoning effort high', useResponses: true, stream: true, effort: 'high' },
];

async function runAgent(target: Target, mode: Mode): Promise<string> {
  const weather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: ({ city }) => Promise.resolve(`Sunny in ${city}, ${rig.marker}`),
  });
  const agent = new Agent({
    name: 'weather',
    instructions: 'Answer briefly.',
    model: target.model,
    tools: [weather],
    modelSettings: mode.effort ? { reasoning: { effort: mode.effort, summary: 'auto' } } : {},
  });
  const runner = new Runner({
    modelProvider: new OpenAIProvider({
      apiKey: CALLER_KEY,
      baseURL: rig.gw.url('/v1'),
      useResponses: mode.useResponses,
    }),
    tracingDisabled: true,
  });
  if (!mode.stream) return String((await runner.run(agent, 'What is the weather in Paris?')).finalOutput);
  const streamed = await runner.run(agent, 'What is the weather in Paris?', { stream: true });
  for await (const _ of streamed) {
    // drain the events; the final output is read once the run completed
  }
  await streamed.completed;
  if (mode.effort) {
    // The SDK reads a reasoning item's summary as its content (what an app shows of the reasoning).
    const reasoning = streamed.newItems.filter((i) => i.type === 'reasoning_item');
    const shown = reasoning.flatMap((i) => (i.rawItem as { content: { text: string }[] }).content.map((c) => c.text));
    assert.ok(shown.includes(REASONING_TEXT), `reasoning the agent saw: ${JSON.stringify(shown)}`);
  }
  return String(streamed.finalOutput);
}

for (const mode of modes) {
  describe(`@openai/agents 0.20.0, ${mode.name}`, () => {
    // An effort on a native target is OpenAI's to take or refuse (gpt-4o refuses it, as it would directly).
    for (const target of TARGETS.filter((t) => !mode.effort || t.kind !== 'openai')) {
      test(`tool round trip on ${target.model}`, async () => {
        const from = rig.upstream.requests.length;
        const text = await bounded(runAgent(target, mode), 60_000, `the agent on ${target.model}`);
        assert.ok(text.includes(FINAL_ANSWER) && text.includes(rig.marker), `final output: ${text}`);
        assertRoundTrip(rig, target, from);
        if (mode.effort) assertHighEffort(rig, target, from);
      });
    }
  });
}
