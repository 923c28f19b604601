// The pure pieces the proxy calls on answers: the caller's model name spliced into chat answers and chunks,
// the event-aligned SSE editor under every network split, the injected-usage filter, the local token
// estimate and the text it counts in each wire.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { answerText, StreamText } from '../../src/providers/answer-text.ts';
import { streamWithCallerModel, withCallerModel } from '../../src/providers/caller-model.ts';
import { estimatePromptTokens, estimateTokens, fillMissing } from '../../src/providers/estimate.ts';
import { withoutInjectedUsage } from '../../src/providers/injected-usage.ts';
import { editSse, type SseEdit } from '../../src/providers/sse-edit.ts';
import { countsOfUsage } from '../../src/providers/translate/shared.ts';
import type { TokenCounts } from '../../src/providers/types.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();
async function* bytes(...parts: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield typeof p === 'string' ? enc.encode(p) : p;
}
async function collect(it: AsyncIterable<Uint8Array>): Promise<string> {
  let s = '';
  for await (const c of it) s += dec.decode(c, { stream: true });
  return s + dec.decode();
}
/** `text` cut into pieces of `size` bytes (splitting UTF-8 characters too). */
function split(text: string, size: number): Uint8Array[] {
  const b = enc.encode(text);
  const out: Uint8Array[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
}

describe("the caller's model name in answers", () => {
  const JSON_CASES: { name: string; body: string; want: string }[] = [
    {
      name: "OpenAI's order: model after id, object, created",
      body: '{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[]}',
      want: '{"id":"c","object":"chat.completion","created":1,"model":"alias","choices":[]}',
    },
    {
      name: 'whitespace and a nested "model" key before the top-level one',
      body: '{ "meta": {"model": "inner"}, "text": "say \\"model\\": \\"x\\"",\n  "model" : "up" }',
      want: '{ "meta": {"model": "inner"}, "text": "say \\"model\\": \\"x\\"",\n  "model" : "alias" }',
    },
    {
      name: 'a model value with escapes',
      body: '{"model":"a\\"b\\\\","x":1}',
      want: '{"model":"alias","x":1}',
    },
    {
      name: 'keys that begin or end like "model" are not it',
      body: '{"model_id":"x","models":"y","xmodel":"z","model":"up"}',
      want: '{"model_id":"x","models":"y","xmodel":"z","model":"alias"}',
    },
    {
      name: 'an embeddings answer naming its model last, after a long data array',
      body: `{"object":"list","data":[${
        '0.5,'.repeat(600)
      }1],"model":"text-embedding-3-small","usage":{"total_tokens":2}}`,
      want: `{"object":"list","data":[${'0.5,'.repeat(600)}1],"model":"alias","usage":{"total_tokens":2}}`,
    },
    {
      name: 'a long answer whose last "model" key is nested: the top-level one found from the start',
      body: `{"model":"up","pad":"${'x'.repeat(2000)}","meta":{"model":"inner"}}`,
      want: `{"model":"alias","pad":"${'x'.repeat(2000)}","meta":{"model":"inner"}}`,
    },
    {
      name: 'a long answer naming its model last, after a nested one',
      body: `{"pad":"${'x'.repeat(2000)}","meta":{"model":"inner"},"model":"up"}`,
      want: `{"pad":"${'x'.repeat(2000)}","meta":{"model":"inner"},"model":"alias"}`,
    },
    {
      name: 'runs of backslashes before a quote: an even run ends the string, an odd one does not',
      body: '{"a":"x\\\\","b":"y\\\\\\"\\"model\\":\\"no","model":"up"}',
      want: '{"a":"x\\\\","b":"y\\\\\\"\\"model\\":\\"no","model":"alias"}',
    },
    { name: 'no model member: added', body: '{"id":"c"}', want: '{"id":"c","model":"alias"}' },
    { name: 'not JSON: unchanged', body: 'oops', want: 'oops' },
  ];
  for (const c of JSON_CASES) test(`JSON: ${c.name}`, () => assert.equal(withCallerModel(c.body, 'alias'), c.want));

  test('a name needing escapes is written as JSON', () => {
    assert.equal(withCallerModel('{"model":"m"}', 'a"b'), '{"model":"a\\"b"}');
  });

  test('an event without data or model is left alone, as the same bytes', async () => {
    for (const e of [': keep-alive', 'data: [DONE]', 'data: {"model":"alias"}', 'data: {"error":{"message":"x"}}']) {
      for (const sep of ['\n\n', '\r\n\r\n']) {
        const chunk = enc.encode(e + sep);
        const out: Uint8Array[] = [];
        for await (const c of streamWithCallerModel(bytes(chunk), 'alias')) out.push(c);
        assert.deepEqual(out, [chunk], JSON.stringify(e + sep));
        assert.equal(out[0], chunk);
      }
    }
  });

  test('stream: every chunk renamed under any network split, multi-byte text included', async () => {
    const chunk = (content: string) =>
      `data: ${JSON.stringify({ id: 'c', model: 'gpt-up', choices: [{ index: 0, delta: { content } }] })}\n\n`;
    const stream = chunk('héllo ✓') + ': ping\n\n' + chunk('wörld') + 'data: [DONE]\n\n';
    const want = stream.replaceAll('"gpt-up"', '"alias"');
    for (const size of [1, 2, 3, 7, 50, 10_000]) {
      assert.equal(await collect(streamWithCallerModel(bytes(...split(stream, size)), 'alias')), want, `size ${size}`);
    }
  });
});

describe("the caller's model spliced as bytes", () => {
  const event = (model: string, content: string) =>
    `data: ${
      JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model, choices: [{ delta: { content } }] })
    }\n\n`;

  test('chunks of events that open like the first spliced one are spliced as they came, not re-encoded', async () => {
    // 0xff is not UTF-8: the text path would turn it into U+FFFD, the byte path keeps the upstream's bytes.
    const raw = enc.encode(event('gpt-up', 'b?'));
    raw[raw.indexOf(0x3f)] = 0xff;
    const chunks = [enc.encode(event('gpt-up', 'a')), raw, enc.encode(event('gpt-up', 'c') + event('gpt-up', 'd'))];
    const out: Uint8Array[] = [];
    for await (const c of streamWithCallerModel(bytes(...chunks), 'alias')) out.push(c);
    assert.equal(dec.decode(out[0]), event('alias', 'a'));
    assert.ok(out[1]!.includes(0xff), 'the second chunk took the byte path');
    assert.equal(dec.decode(out[2]), event('alias', 'c') + event('alias', 'd'));
  });

  test('an event that opens otherwise (another model, a comment, CRLF, [DONE]) takes the text path', async () => {
    const parts = [
      event('gpt-up', 'a'),
      event('gpt-up', 'b') + ': ping\n\n',
      event('gpt-other', 'c'),
      event('gpt-up', 'd'),
      event('gpt-other', 'e').replace('\n\n', '\r\n\r\n'),
      event('alias', 'f'),
      'data: [DONE]\n\n',
    ];
    const want = parts.join('').replace(/"gpt-(up|other)"/g, '"alias"');
    assert.equal(await collect(streamWithCallerModel(bytes(...parts), 'alias')), want);
  });
});

describe('the SSE editor', () => {
  test('chunks of whole events the edit does not touch go out as the same bytes', async () => {
    const a = enc.encode('data: {"a":1}\n\n');
    const b = enc.encode('data: {"b":2}\n\ndata: {"c":3}\n\n');
    const seen: Uint8Array[] = [];
    for await (const c of editSse(bytes(a, b), { mayTouch: () => false, edit: () => null })) seen.push(c);
    assert.deepEqual(seen, [a, b]);
    assert.equal(seen[0], a);
    // Touched but left as they were (a stream already naming the caller's model): the same bytes too.
    const kept: Uint8Array[] = [];
    for await (const c of editSse(bytes(a, b), { mayTouch: () => true, edit: () => undefined })) kept.push(c);
    assert.equal(kept[0], a);
    assert.equal(kept[1], b);
  });

  test('CRLF and CR boundaries, a dropped event, a last event without its blank line', async () => {
    const out = await collect(editSse(bytes('data: keep\r\n\r\ndata: drop\r\rdata: x', 'y'), {
      mayTouch: (t) => t.includes('drop') || t.includes('xy'),
      edit: (e) => (e.includes('drop') ? null : e === 'data: xy' ? 'data: XY' : undefined),
    }));
    assert.equal(out, 'data: keep\r\n\r\ndata: XY');
  });
});

describe('edits stacked on one stream', () => {
  const upper: SseEdit = { mayTouch: (t) => t.includes('x'), edit: (e) => e.replaceAll('x', 'X') };
  const dropY: SseEdit = { mayTouch: (t) => t.includes('Y'), edit: (e) => (e.includes('Y') ? null : undefined) };

  test('an edit of a stream not yet read joins it: one pass, the edits in order, the source read once', async () => {
    let reads = 0;
    async function* src() {
      for (const p of ['data: x\n\n', 'data: y\n\ndata: Y\n\n']) {
        reads++;
        yield enc.encode(p);
      }
    }
    const first = editSse(src(), upper);
    const both = editSse(first, { mayTouch: (t) => t.includes('X'), edit: (e) => e + '!' });
    assert.equal(await collect(both), 'data: X!\n\ndata: y\n\ndata: Y\n\n');
    assert.equal(reads, 2);
    // The first no longer reads the source: both would get every other chunk.
    assert.throws(() => first.next(), /edited further/);
    // The second edit sees what the first made of an event.
    const dropX: SseEdit = { mayTouch: (t) => t.includes('X'), edit: () => null };
    assert.equal(await collect(editSse(editSse(bytes('data: x\n\ndata: y\n\n'), upper), dropX)), 'data: y\n\n');
    assert.equal(await collect(editSse(editSse(bytes('data: x\n\n'), dropX), upper)), 'data: X\n\n');
  });

  test('a stream already being read is wrapped, not joined', async () => {
    const first = editSse(bytes('data: x\n\n', 'data: x2\n\n'), upper);
    const head = await first.next();
    assert.equal(dec.decode(head.value as Uint8Array), 'data: X\n\n');
    assert.equal(await collect(editSse(first, dropY)), 'data: X2\n\n');
  });

  test('the tighter event bound of the two applies; 0 is no bound', async () => {
    const long = 'data: ' + 'a'.repeat(2000) + '\n\n';
    const keep: SseEdit = { mayTouch: () => false, edit: () => undefined };
    await assert.rejects(collect(editSse(editSse(bytes(...split(long, 100)), keep, 0), keep, 1000)), /1000/);
    await assert.rejects(collect(editSse(editSse(bytes(...split(long, 100)), keep, 1000), keep, 0)), /1000/);
    assert.equal(await collect(editSse(editSse(bytes(...split(long, 100)), keep, 0), keep, 0)), long);
  });

  test('in a chunk of whole events only the event the byte edit leaves to the text edit is decoded', async () => {
    // 0xff is not UTF-8: decoding its event would turn it into U+FFFD.
    const raw = enc.encode('data: {"a":"?"}\n\ndata: {"usage":{"prompt_tokens":3},"choices":[]}\n\ndata: [DONE]\n\n');
    raw[raw.indexOf(0x3f)] = 0xff;
    const seen: TokenCounts[] = [];
    const out: Uint8Array[] = [];
    for await (const c of withoutInjectedUsage(bytes(raw), (u) => seen.push(u))) out.push(c);
    assert.equal(out.length, 1);
    assert.ok(out[0]!.includes(0xff), 'the first event kept its bytes');
    assert.equal(dec.decode(out[0]).replace('\ufffd', '?'), 'data: {"a":"?"}\n\ndata: [DONE]\n\n');
    assert.deepEqual(seen, [{ input: 3, output: 0 }]);
  });
});

describe('the injected usage chunk', () => {
  const events = [
    { id: 'c', model: 'm', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }], usage: null },
    { id: 'c', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null },
    { id: 'c', model: 'm', choices: [], usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 } },
  ];
  const stream = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
  const want = events.slice(0, 2).map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
  for (const size of [1, 5, 64, 100_000]) {
    test(`withheld, and reported, under ${size}-byte network chunks`, async () => {
      const seen: TokenCounts[] = [];
      const out = await collect(withoutInjectedUsage(bytes(...split(stream, size)), (u) => seen.push(u)));
      assert.equal(out, want);
      assert.deepEqual(seen, [{ input: 4, output: 1 }]);
    });
  }
  test('withheld, and reported, with one event per network chunk (the byte path)', async () => {
    const seen: TokenCounts[] = [];
    const parts = stream.split(/(?<=\n\n)/);
    assert.equal(parts.length, 4);
    const out = await collect(withoutInjectedUsage(bytes(...parts), (u) => seen.push(u)));
    assert.equal(out, want);
    assert.deepEqual(seen, [{ input: 4, output: 1 }]);
  });
  test('a usage object after whitespace is found in bytes too', async () => {
    const e = 'data: {"choices":[],"usage" :\t {"prompt_tokens":2}}\n\n';
    const seen: TokenCounts[] = [];
    assert.equal(
      await collect(withoutInjectedUsage(bytes(e, 'data: [DONE]\n\n'), (u) => seen.push(u))),
      'data: [DONE]\n\n',
    );
    assert.deepEqual(seen, [{ input: 2, output: 0 }]);
  });
  test('a usage-only chunk with an empty-delta choice (some servers send one) is withheld too', async () => {
    const e = { choices: [{ index: 0, delta: { content: '' }, finish_reason: null }], usage: { prompt_tokens: 1 } };
    assert.equal(await collect(withoutInjectedUsage(bytes(`data: ${JSON.stringify(e)}\n\n`), () => {})), '');
  });
});

describe('local token estimation', () => {
  const TEXTS: { text: string; tokens: number }[] = [
    { text: '', tokens: 0 },
    { text: 'hello world', tokens: 2 },
    { text: 'hello world, this is a test of the tokenizer', tokens: 10 },
    { text: '<|endoftext|>', tokens: 7 }, // a special token's spelling is plain text here
  ];
  for (const c of TEXTS) {
    test(`cl100k_base: ${JSON.stringify(c.text)} → ${c.tokens}`, async () => {
      assert.equal(await estimateTokens(c.text), c.tokens);
    });
  }

  test('text beyond the encoded cap is approximated at 4 characters per token', async () => {
    const head = 'a '.repeat(1 << 19); // exactly the cap
    const encoded = await estimateTokens(head);
    assert.equal(await estimateTokens(head + 'x'.repeat(400)), encoded + 100);
  });

  const PROMPTS: { endpoint: 'chat' | 'messages' | 'responses' | 'completions' | 'embeddings'; body: object }[] = [
    { endpoint: 'chat', body: { messages: [{ role: 'user', content: 'hello world' }] } },
    { endpoint: 'messages', body: { messages: [{ role: 'user', content: [{ type: 'text', text: 'hello world' }] }] } },
    {
      endpoint: 'responses',
      body: { input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello world' }] }] },
    },
  ];
  for (const p of PROMPTS) {
    test(`a prompt of one user message "hello world" (${p.endpoint}): 3 + role + text + 3`, async () => {
      assert.equal(await estimatePromptTokens(p.endpoint, p.body as Record<string, unknown>), 3 + 1 + 2 + 3);
    });
  }

  test('images, names, tools with a system message; completions and embeddings inputs', async () => {
    const chat = await estimatePromptTokens('chat', {
      messages: [
        { role: 'system', content: 'hello world' },
        { role: 'user', name: 'bob', content: [{ type: 'image_url', image_url: { url: 'x', detail: 'low' } }] },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
    });
    const tool = await estimateTokens(JSON.stringify({ name: 'f' }));
    // system: 3 + 1 + 2; user: 3 + 1 + 85 (image) + 1 (name) + 1 ("bob"); tools: 9 - 4 + tool; priming 3
    assert.equal(chat, 6 + 91 + 5 + tool + 3);
    assert.equal(await estimatePromptTokens('completions', { prompt: ['hello world', 'hello world'] }), 4);
    assert.equal(await estimatePromptTokens('embeddings', { input: 'hello world' }), 2);
  });

  test('fillMissing: reported non-zero counters win; only zeros are estimated and marked', async () => {
    const est = { input: async () => 50, output: async () => 7 };
    assert.deepEqual(await fillMissing({ input: 3, output: 4 }, est), { input: 3, output: 4 });
    assert.deepEqual(await fillMissing({ input: 3, output: 0, cacheRead: 1 }, est), {
      input: 3,
      output: 7,
      cacheRead: 1,
      estimated: true,
    });
    assert.deepEqual(await fillMissing(undefined, est), { input: 50, output: 7, estimated: true });
  });
});

describe('the text an answer produced', () => {
  const ANSWERS: { wire: string; body: object; text: string }[] = [
    {
      wire: 'chat',
      body: {
        choices: [{
          message: {
            content: 'hi',
            reasoning_content: 'think',
            tool_calls: [{ function: { name: 'f', arguments: '{}' } }],
          },
        }],
      },
      text: 'hithinkf{}',
    },
    { wire: 'completions', body: { choices: [{ text: 'done' }] }, text: 'done' },
    {
      wire: 'messages',
      body: {
        content: [{ type: 'thinking', thinking: 't' }, { type: 'text', text: 'x' }, {
          type: 'tool_use',
          name: 'g',
          input: { a: 1 },
        }],
      },
      text: 'txg{"a":1}',
    },
    {
      wire: 'responses',
      body: {
        object: 'response',
        output: [{ type: 'message', content: [{ type: 'output_text', text: 'r' }] }, {
          type: 'function_call',
          name: 'h',
          arguments: '{}',
        }],
      },
      text: 'rh{}',
    },
  ];
  for (const a of ANSWERS) {
    test(`JSON ${a.wire}`, () => assert.equal(answerText(JSON.stringify(a.body)), a.text));
  }

  test('streams of each wire, read back from the bytes kept', async () => {
    const see = (t: StreamText, text: string) => t.observe(enc.encode(text), text);
    const chat = new StreamText();
    const decoder = new TextDecoder();
    for (
      const c of split(
        'data: {"choices":[{"delta":{"content":"he"}}]}\n\ndata: {"choices":[{"delta":{"content":"y"}}]}\n\ndata: [DONE]\n\n',
        5,
      )
    ) chat.observe(c, decoder.decode(c, { stream: true }));
    assert.equal(await chat.text(), 'hey');
    const anthropic = new StreamText();
    see(
      anthropic,
      'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}\n\n' +
        'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{}"}}\n\n',
    );
    assert.equal(await anthropic.text(), 'a{}');
    const responses = new StreamText();
    see(
      responses,
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"z"}\n\n' +
        'event: response.completed\ndata: {"type":"response.completed","response":{"object":"response","output":[{"type":"message","content":[{"text":"z"}]}]}}\n\n',
    );
    assert.equal(await responses.text(), 'z');
  });
});

describe('usage objects of every wire as counts', () => {
  const USAGES: { wire: string; usage: unknown; counts: TokenCounts | undefined }[] = [
    {
      wire: 'chat (OpenAI)',
      usage: {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        prompt_tokens_details: { cached_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: 3 },
      },
      counts: { input: 10, output: 5, cacheRead: 4, reasoning: 3 },
    },
    {
      wire: 'chat (DeepSeek cache hits)',
      usage: { prompt_tokens: 10, completion_tokens: 5, prompt_cache_hit_tokens: 6, prompt_cache_miss_tokens: 4 },
      counts: { input: 10, output: 5, cacheRead: 6 },
    },
    {
      wire: 'Anthropic',
      usage: { input_tokens: 2, cache_creation_input_tokens: 3, cache_read_input_tokens: 4, output_tokens: 5 },
      counts: { input: 9, output: 5, cacheRead: 4, cacheCreation: 3 },
    },
    {
      wire: 'Responses',
      usage: {
        input_tokens: 9,
        input_tokens_details: { cached_tokens: 4 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 14,
      },
      counts: { input: 9, output: 5, cacheRead: 4 },
    },
    { wire: 'null', usage: null, counts: undefined },
    { wire: 'empty', usage: {}, counts: undefined },
  ];
  for (const u of USAGES) test(u.wire, () => assert.deepEqual(countsOfUsage(u.usage), u.counts));
});
