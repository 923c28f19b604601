// Black-box: the official `openai` and `@anthropic-ai/sdk` clients against a real bin/sluice process, JSON
// and streaming, over the three paths a request can take: straight through (OpenAI → OpenAI-style,
// Anthropic → Anthropic), and translated (Anthropic Messages → OpenAI-style or echo, OpenAI chat → Anthropic).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { chunk } from '../support/mock-upstream.ts';
import { anthropicEvents } from '../support/mock-anthropic.ts';
import { sdkGateway, streamedMessage } from '../support/sdk-gateway.ts';

const rig = sdkGateway((openaiBase, anthropicBase) =>
  `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-upstream-SECRET, api_base: "${openaiBase}" }
  - { display_name: ant, provider: anthropic, api_key: sk-ant-SECRET, api_base: "${anthropicBase}" }
  - { display_name: offline, provider: echo }
models:
  - { display_name: gpt, provider_key: oai, model_name: gpt-up, retries: 0 }
  - { display_name: claude, provider_key: ant, model_name: claude-up, retries: 0 }
  - { display_name: echo, provider_key: offline, model_name: echo-1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`
);

describe('the openai client', () => {
  test('legacy completions (/v1/completions), JSON and streaming', async () => {
    const r = await rig.openai.completions.create({ model: 'echo', prompt: 'say this back' });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0]!.text, 'say this back');
    const stream = await rig.openai.completions.create({ model: 'echo', prompt: 'one two', stream: true });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.text ?? '';
    assert.equal(text, 'one two');
  });

  test('chat to an OpenAI-style model, JSON and streaming', async () => {
    const r = await rig.openai.chat.completions.create({
      model: 'gpt',
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(r.choices[0]!.message.content, 'hi from mock');
    rig.oai.script({ sse: [chunk('gpt-up', 'one'), chunk('gpt-up', ' two')], chunkDelayMs: 10 });
    const stream = await rig.openai.chat.completions.create({
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    assert.equal(text, 'one two');
  });

  test('chat to an Anthropic model (translated), JSON and streaming with usage', async () => {
    const r = await rig.openai.chat.completions.create({
      model: 'claude',
      messages: [{ role: 'system', content: 'brief' }, { role: 'user', content: 'hello' }],
    });
    assert.equal(r.choices[0]!.message.content, 'hi from anthropic mock');
    assert.equal(r.choices[0]!.finish_reason, 'stop');
    assert.equal(r.usage?.total_tokens, 9);
    assert.equal(rig.ant.requests.at(-1)!.json!.system, 'brief');

    const stream = await rig.openai.chat.completions.create({
      model: 'claude',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    let finish: string | null | undefined;
    let total: number | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      finish ??= c.choices[0]?.finish_reason;
      total = c.usage?.total_tokens ?? total;
    }
    assert.equal(text, 'hello world');
    assert.equal(finish, 'stop');
    assert.equal(total, 12);
  });

  test('a mid-stream failure reaches the client as an error, not a silent end', async () => {
    rig.oai.script({ sse: [chunk('gpt-up', 'part'), chunk('gpt-up', 'never')], chunkDelayMs: 150, dropAfterChunks: 1 });
    const stream = await rig.openai.chat.completions.create({
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
    });
    await assert.rejects(async () => {
      for await (const c of stream) void c;
    }, /upstream stream failed/);
  });
});

describe('the @anthropic-ai/sdk client', () => {
  test('messages to an Anthropic model (passthrough), JSON and streaming', async () => {
    const m = await rig.anthropic.messages.create({
      model: 'claude',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(m.content[0]!.type, 'text');
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'hi from anthropic mock');
    const up = rig.ant.requests.at(-1)!;
    assert.equal(up.headers['x-api-key'], 'sk-ant-SECRET');
    assert.equal(up.headers['anthropic-version'], '2023-06-01');

    rig.ant.script({ events: anthropicEvents('claude-up', ['str', 'eam']), eventDelayMs: 5 });
    const { text, final } = await streamedMessage(rig.anthropic, {
      model: 'claude',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(text, 'stream');
    assert.equal(final.stop_reason, 'end_turn');
  });

  test('messages to an OpenAI-style model (translated), JSON and streaming', async () => {
    const m = await rig.anthropic.messages.create({
      model: 'gpt',
      max_tokens: 64,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'hi from mock');
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.usage.output_tokens, 3);
    assert.deepEqual(rig.oai.requests.at(-1)!.json!.messages, [{ role: 'system', content: 'be brief' }, {
      role: 'user',
      content: 'hello',
    }]);

    rig.oai.script({ sse: [chunk('gpt-up', 'tr'), chunk('gpt-up', 'anslated')], chunkDelayMs: 5 });
    const { text, final } = await streamedMessage(rig.anthropic, {
      model: 'gpt',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(text, 'translated');
    assert.equal((final.content[0] as Anthropic.TextBlock).text, 'translated');
  });

  test('messages to the echo model, JSON and streaming', async () => {
    const m = await rig.anthropic.messages.create({
      model: 'echo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'say this back' }],
    });
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'say this back');
    const stream = rig.anthropic.messages.stream({
      model: 'echo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'say this back' }],
    });
    const final = await stream.finalMessage();
    assert.equal((final.content[0] as Anthropic.TextBlock).text, 'say this back');
    assert.equal(final.usage.output_tokens, 3);
  });

  test('errors reach the client with their status and the Anthropic envelope', async () => {
    const bad = new Anthropic({ apiKey: 'sk-wrong', baseURL: rig.gw.url(''), maxRetries: 0 });
    await assert.rejects(
      bad.messages.create({ model: 'echo', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.AuthenticationError);
        const body = (e as { error?: { type?: string; error?: { type?: string } } }).error;
        assert.equal(body?.type, 'error');
        assert.equal(body?.error?.type, 'authentication_error'); // Anthropic's vocabulary (L3)
        return true;
      },
    );
    await assert.rejects(
      rig.anthropic.messages.create({ model: 'nope', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.NotFoundError);
        assert.equal((e as { error?: { error?: { type?: string } } }).error?.error?.type, 'not_found_error');
        return true;
      },
    );
  });
});
