// The Vercel AI SDK (`ai` 6 with `@ai-sdk/openai` 3 and `@ai-sdk/anthropic` 3) through a real Sluice process to
// each target: a get_weather tool loop (`stopWhen`) over Responses (the provider's default, `store: true`, and
// with `store: false`; with a reasoning effort on the translated targets), chat (`openai.chat`) and Messages
// (docs/translation.md "Tested clients").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, type LanguageModel, stepCountIs, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
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

const rig = clientMatrix();

const weather = () =>
  tool({
    description: 'The weather in a city',
    inputSchema: z.object({ city: z.string() }),
    execute: ({ city }) => Promise.resolve(`Sunny in ${city}, ${rig.marker}`),
  });

interface Mode {
  name: string;
  model: (target: Target) => LanguageModel;
  stream: boolean;
  store?: boolean;
  /** A Messages client: it always sends `max_tokens`. */
  limited?: boolean;
  /** A reasoning effort (and summary) asked; such a mode runs on the translated targets only. */
  effort?: boolean;
}

const modes: Mode[] = [
  {
    name: '@ai-sdk/openai Responses (store: true), streamText',
    model: (t) => createOpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1') })(t.model),
    stream: true,
  },
  {
    name: '@ai-sdk/openai Responses (store: false), generateText',
    model: (t) => createOpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1') })(t.model),
    stream: false,
    store: false,
  },
  {
    name: '@ai-sdk/openai chat, streamText',
    model: (t) => createOpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1') }).chat(t.model),
    stream: true,
  },
  {
    // The reasoning items go back by reference too: the store must hold Claude's signed thinking.
    name: '@ai-sdk/openai Responses (store: true), reasoning effort high, streamText',
    model: (t) => createOpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1') })(t.model),
    stream: true,
    effort: true,
  },
  {
    name: '@ai-sdk/anthropic, streamText',
    model: (t) => createAnthropic({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1') })(t.model),
    stream: true,
    limited: true,
  },
];

/** The loop's final text, and the reasoning the SDK surfaced over its steps. */
async function loop(mode: Mode, target: Target): Promise<{ text: string; reasoning: string }> {
  // The SDK sends an effort only to model names it knows reason, unless forced.
  const effort = { forceReasoning: true, reasoningEffort: 'high', reasoningSummary: 'auto' };
  const openai = { ...(mode.store === undefined ? {} : { store: mode.store }), ...(mode.effort ? effort : {}) };
  const args = {
    model: mode.model(target),
    tools: { get_weather: weather() },
    stopWhen: stepCountIs(3),
    prompt: 'What is the weather in Paris?',
    maxRetries: 0,
    providerOptions: Object.keys(openai).length === 0 ? undefined : { openai },
  };
  const reasoningOf = (steps: { reasoningText?: string }[]) => steps.map((s) => s.reasoningText ?? '').join('\n');
  if (!mode.stream) {
    const r = await generateText(args);
    return { text: r.text, reasoning: reasoningOf(r.steps) };
  }
  let error: unknown;
  const r = streamText({ ...args, onError: ({ error: e }) => void (error = e) });
  const text = await r.text;
  if (error) throw error;
  return { text, reasoning: reasoningOf(await r.steps) };
}

for (const mode of modes) {
  describe(`ai 6.0.333, ${mode.name}`, () => {
    // An effort on a native target is OpenAI's to take or refuse (gpt-4o refuses it, as it would directly).
    for (const target of TARGETS.filter((t) => !mode.effort || t.kind !== 'openai')) {
      test(`tool loop on ${target.model}`, async () => {
        const from = rig.upstream.requests.length;
        const { text, reasoning } = await bounded(loop(mode, target), 60_000, `the AI SDK loop on ${target.model}`);
        assert.ok(text.includes(FINAL_ANSWER) && text.includes(rig.marker), `final text: ${text}`);
        assertRoundTrip(rig, target, from, { limited: mode.limited });
        if (mode.effort) {
          assertHighEffort(rig, target, from);
          assert.ok(reasoning.includes(REASONING_TEXT), `the reasoning the SDK surfaced: ${reasoning}`);
        }
      });
    }
  });
}
