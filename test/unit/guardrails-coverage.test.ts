// Guardrails read every field the model reads (docs/guardrails.md "What is scanned"): a keyword placed in
// each field is refused, on input before any upstream call and on output before the caller reads it, JSON
// and streamed — through app.request() against the OpenAI-style and Anthropic mocks.
// Run: node --import tsx --test test/unit/guardrails-coverage.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { anthropicMessage } from '../support/mock-anthropic.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';

const CALLER = 'sk-coverage-caller';
const WORD = 'forbiddenword';
const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: ${WORD} }] }
`,
  { env: { CALLER } },
);

const said = `it says ${WORD} here`;
const user = [{ role: 'user', content: 'hi' }];

describe('input: every field the model reads', () => {
  const cases: [string, string, Record<string, unknown>][] = [
    ['messages: a document block with a text source', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: [{
        role: 'user',
        content: [
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: said } },
          { type: 'text', text: 'summarise' },
        ],
      }],
    }],
    ['messages: a document block with content blocks', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: [{
        role: 'user',
        content: [{ type: 'document', source: { type: 'content', content: [{ type: 'text', text: said }] } }],
      }],
    }],
    ['messages: a replayed tool_use input', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: [
        { role: 'user', content: 'look it up' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 't1', name: 'search', input: { query: { terms: ['x', said] } } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'none' }] },
      ],
    }],
    ['messages: a tool description', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: user,
      tools: [{ name: 'search', description: said, input_schema: { type: 'object' } }],
    }],
    ['chat: a tool description', '/v1/chat/completions', {
      model: 'gpt',
      messages: user,
      tools: [{ type: 'function', function: { name: 'search', description: said, parameters: {} } }],
    }],
    ['chat: prediction.content', '/v1/chat/completions', {
      model: 'gpt',
      messages: user,
      prediction: { type: 'content', content: said },
    }],
    ['chat: prediction text parts', '/v1/chat/completions', {
      model: 'gpt',
      messages: user,
      prediction: { type: 'content', content: [{ type: 'text', text: said }] },
    }],
    ['completions: suffix', '/v1/completions', { model: 'gpt', prompt: 'def f():', suffix: said }],
    // Behind benign flat content: the word sits in a later block, or in a field beside a clean `content`.
    ['chat: a text part after a clean flat message and a clean part', '/v1/chat/completions', {
      model: 'gpt',
      messages: [{ role: 'user', content: 'hi' }, {
        role: 'user',
        content: [{ type: 'text', text: 'clean' }, { type: 'text', text: said }],
      }],
    }],
    ['chat: a replayed refusal part', '/v1/chat/completions', {
      model: 'gpt',
      messages: [{ role: 'assistant', content: [{ type: 'refusal', refusal: said }] }, ...user],
    }],
    ['chat: replayed reasoning_content beside clean content', '/v1/chat/completions', {
      model: 'gpt',
      messages: [{ role: 'assistant', content: 'fine', reasoning_content: said }, ...user],
    }],
    ['chat: a replayed tool call name beside clean content', '/v1/chat/completions', {
      model: 'gpt',
      messages: [
        {
          role: 'assistant',
          content: 'fine',
          tool_calls: [{ id: 't1', type: 'function', function: { name: WORD, arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 't1', content: 'none' },
        ...user,
      ],
    }],
    ['chat: a replayed legacy function_call', '/v1/chat/completions', {
      model: 'gpt',
      messages: [
        { role: 'assistant', content: null, function_call: { name: 'search', arguments: JSON.stringify({ q: said }) } },
        { role: 'function', name: 'search', content: 'none' },
        ...user,
      ],
    }],
    ['messages: a text block after a clean flat message and a clean block', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok' }, {
        role: 'user',
        content: [{ type: 'text', text: 'clean' }, { type: 'text', text: said }],
      }],
    }],
    ['messages: a search_result block inside a tool_result', '/v1/messages', {
      model: 'claude',
      max_tokens: 5,
      messages: [
        { role: 'user', content: 'look it up' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'search', input: {} }] },
        {
          role: 'user',
          content: [{
            type: 'tool_result',
            tool_use_id: 't1',
            content: [{
              type: 'search_result',
              source: 'https://example.com',
              title: 'r',
              content: [{ type: 'text', text: said }],
            }],
          }],
        },
      ],
    }],
    ['responses: an input_text part after a clean flat message', '/v1/responses', {
      model: 'gpt',
      input: [{ role: 'user', content: 'hi' }, {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'clean' }, { type: 'input_text', text: said }],
      }],
    }],
    ['responses: a replayed refusal part', '/v1/responses', {
      model: 'gpt',
      input: [{ type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal: said }] }, {
        role: 'user',
        content: 'hi',
      }],
    }],
    ['responses: a tool description', '/v1/responses', {
      model: 'gpt',
      input: 'hi',
      tools: [{ type: 'function', name: 'search', description: said, parameters: {} }],
    }],
  ];
  for (const [name, path, body] of cases) {
    test(`${name}: 422, no upstream call`, async () => {
      const before = rig.mock.requests.length + rig.anth.requests.length;
      const res = await rig.post(path, body, CALLER);
      assert.equal(res.status, 422, await res.clone().text());
      assert.match(await res.text(), /request blocked by content policy \(guardrail 'words'\)/);
      assert.equal(rig.mock.requests.length + rig.anth.requests.length, before);
    });
  }
});

describe('output: reasoning the caller reads', () => {
  test('chat: reasoning_content in a whole answer', async () => {
    const answer = chatCompletion('gpt-upstream', 'fine');
    (answer.choices as { message: Record<string, unknown> }[])[0]!.message.reasoning_content = said;
    rig.mock.script({ body: answer });
    const res = await rig.post('/v1/chat/completions', { model: 'gpt', messages: user }, CALLER);
    assert.equal(res.status, 422);
    assert.match(await res.text(), /response blocked by content policy/);
  });

  test('chat: reasoning_content deltas in a stream', async () => {
    const delta = (d: Record<string, unknown>) => ({
      id: 'c1',
      object: 'chat.completion.chunk',
      model: 'gpt-upstream',
      choices: [{ index: 0, delta: d, finish_reason: null }],
    });
    rig.mock.script({ sse: [delta({ reasoning_content: 'it says forbidden' }), delta({ reasoning_content: 'word' })] });
    const res = await rig.post('/v1/chat/completions', { model: 'gpt', messages: user, stream: true }, CALLER);
    const text = await res.text();
    assert.match(text, /event: error\ndata: .*response blocked by content policy/);
    assert.ok(!text.includes(WORD), 'the reasoning never reached the caller');
  });

  test('messages: an Anthropic thinking block in a whole answer', async () => {
    const answer = anthropicMessage('claude-upstream', 'fine');
    answer.content = [{ type: 'thinking', thinking: said, signature: 'sig' }, { type: 'text', text: 'fine' }];
    rig.anth.script({ body: answer });
    const res = await rig.post('/v1/messages', { model: 'claude', max_tokens: 5, messages: user }, CALLER);
    assert.equal(res.status, 422);
    assert.match(await res.text(), /response blocked by content policy/);
  });

  test('messages: thinking deltas in a stream', async () => {
    const events: [string, unknown][] = [
      ['message_start', {
        type: 'message_start',
        message: { ...anthropicMessage('claude-upstream'), content: [], usage: { input_tokens: 5, output_tokens: 1 } },
      }],
      ['content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'thinking', thinking: '' },
      }],
      ['content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'thinking_delta', thinking: said },
      }],
      ['content_block_stop', { type: 'content_block_stop', index: 0 }],
      ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }],
      ['message_stop', { type: 'message_stop' }],
    ];
    rig.anth.script({ events });
    const res = await rig.post(
      '/v1/messages',
      { model: 'claude', max_tokens: 5, messages: user, stream: true },
      CALLER,
    );
    const text = await res.text();
    assert.match(text, /response blocked by content policy/);
    assert.ok(!text.includes(WORD), 'the thinking never reached the caller');
  });
});
