// Black-box: the official `openai` and `@anthropic-ai/sdk` clients against a real bin/sluice process, JSON
// and streaming, over the three paths a request can take: straight through (OpenAI → OpenAI-style,
// Anthropic → Anthropic), and translated (Anthropic Messages → OpenAI-style or echo, OpenAI chat → Anthropic).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { anthropicEvents, type MockAnthropic, startMockAnthropic } from '../support/mock-anthropic.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';

let oai: MockUpstream;
let ant: MockAnthropic;
let gw: GatewayProcess;
let openai: OpenAI;
let anthropic: Anthropic;

before(async () => {
  [oai, ant] = await Promise.all([startMockUpstream(), startMockAnthropic()]);
  gw = await spawnGateway({
    config: baseConfig(),
    env: { CALLER_KEY },
    files: {
      'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-upstream-SECRET, api_base: "${oai.base}" }
  - { display_name: ant, provider: anthropic, api_key: sk-ant-SECRET, api_base: "${ant.url}" }
  - { display_name: offline, provider: echo }
models:
  - { display_name: gpt, provider_key: oai, model_name: gpt-up, retries: 0 }
  - { display_name: claude, provider_key: ant, model_name: claude-up, retries: 0 }
  - { display_name: echo, provider_key: offline, model_name: echo-1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`,
    },
  });
  await gw.waitReady();
  openai = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: CALLER_KEY, baseURL: gw.url(''), maxRetries: 0 });
});

after(async () => {
  await gw.stop();
  await Promise.all([oai.close(), ant.close()]);
});

describe('the openai client', () => {
  test('legacy completions (/v1/completions), JSON and streaming', async () => {
    const r = await openai.completions.create({ model: 'echo', prompt: 'say this back' });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0]!.text, 'say this back');
    const stream = await openai.completions.create({ model: 'echo', prompt: 'one two', stream: true });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.text ?? '';
    assert.equal(text, 'one two');
  });

  test('chat to an OpenAI-style model, JSON and streaming', async () => {
    const r = await openai.chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(r.choices[0]!.message.content, 'hi from mock');
    oai.script({ sse: [chunk('gpt-up', 'one'), chunk('gpt-up', ' two')], chunkDelayMs: 10 });
    const stream = await openai.chat.completions.create({
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    assert.equal(text, 'one two');
  });

  test('chat to an Anthropic model (translated), JSON and streaming with usage', async () => {
    const r = await openai.chat.completions.create({
      model: 'claude',
      messages: [{ role: 'system', content: 'brief' }, { role: 'user', content: 'hello' }],
    });
    assert.equal(r.choices[0]!.message.content, 'hi from anthropic mock');
    assert.equal(r.choices[0]!.finish_reason, 'stop');
    assert.equal(r.usage?.total_tokens, 9);
    assert.equal(ant.requests.at(-1)!.json!.system, 'brief');

    const stream = await openai.chat.completions.create({
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
    oai.script({ sse: [chunk('gpt-up', 'part'), chunk('gpt-up', 'never')], chunkDelayMs: 150, dropAfterChunks: 1 });
    const stream = await openai.chat.completions.create({
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
    const m = await anthropic.messages.create({
      model: 'claude',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(m.content[0]!.type, 'text');
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'hi from anthropic mock');
    const up = ant.requests.at(-1)!;
    assert.equal(up.headers['x-api-key'], 'sk-ant-SECRET');
    assert.equal(up.headers['anthropic-version'], '2023-06-01');

    ant.script({ events: anthropicEvents('claude-up', ['str', 'eam']), eventDelayMs: 5 });
    const stream = anthropic.messages.stream({
      model: 'claude',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    stream.on('text', (t) => {
      text += t;
    });
    const final = await stream.finalMessage();
    assert.equal(text, 'stream');
    assert.equal(final.stop_reason, 'end_turn');
  });

  test('messages to an OpenAI-style model (translated), JSON and streaming', async () => {
    const m = await anthropic.messages.create({
      model: 'gpt',
      max_tokens: 64,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'hi from mock');
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.usage.output_tokens, 3);
    assert.deepEqual(oai.requests.at(-1)!.json!.messages, [{ role: 'system', content: 'be brief' }, {
      role: 'user',
      content: 'hello',
    }]);

    oai.script({ sse: [chunk('gpt-up', 'tr'), chunk('gpt-up', 'anslated')], chunkDelayMs: 5 });
    const stream = anthropic.messages.stream({
      model: 'gpt',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    stream.on('text', (t) => {
      text += t;
    });
    const final = await stream.finalMessage();
    assert.equal(text, 'translated');
    assert.equal((final.content[0] as Anthropic.TextBlock).text, 'translated');
  });

  test('messages to the echo model, JSON and streaming', async () => {
    const m = await anthropic.messages.create({
      model: 'echo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'say this back' }],
    });
    assert.equal((m.content[0] as Anthropic.TextBlock).text, 'say this back');
    const stream = anthropic.messages.stream({
      model: 'echo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'say this back' }],
    });
    const final = await stream.finalMessage();
    assert.equal((final.content[0] as Anthropic.TextBlock).text, 'say this back');
    assert.equal(final.usage.output_tokens, 3);
  });

  test('errors reach the client with their status and the Anthropic envelope', async () => {
    const bad = new Anthropic({ apiKey: 'sk-wrong', baseURL: gw.url(''), maxRetries: 0 });
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
      anthropic.messages.create({ model: 'nope', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.NotFoundError);
        assert.equal((e as { error?: { error?: { type?: string } } }).error?.error?.type, 'not_found_error');
        return true;
      },
    );
  });
});
