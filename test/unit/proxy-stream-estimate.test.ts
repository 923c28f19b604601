// The local token estimate of a stream whose upstream reports no usage (docs/aisix-compatibility.md "Token
// estimation"): the same count as the equivalent JSON answer, in /metrics and the access log (marked
// estimated), and charged to a `tpm` limit before the caller's next request — for chat, /v1/messages and
// /v1/responses, native and translated, through app.request() against the mock upstreams.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicEvents, anthropicMessage, type AnthropicReply } from '../support/mock-anthropic.ts';
import { chatCompletion, chunk, type Reply } from '../support/mock-upstream.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';
import { sumSamples } from '../support/metrics.ts';
import { MAX_COLLECTED_BYTES, StreamText } from '../../src/providers/answer-text.ts';
import { StreamCount } from '../../src/proxy/stream-count.ts';
import { StreamUsage } from '../../src/proxy/usage.ts';

const CALLER = 'sk-est-caller';
const TEXT = ['hello', ' world'];

/** Each kind of request: its path, body, model (whose metrics carry it) and the upstream answers without usage. */
interface Kind {
  path: string;
  body: Record<string, unknown>;
  upstream: 'openai' | 'anthropic';
  json: () => Reply | AnthropicReply;
  stream: () => Reply | AnthropicReply;
}

function noUsage<T extends Record<string, unknown>>(o: T): T {
  const { usage: _, ...rest } = o;
  return rest as T;
}

const chatJson = (model: string) => ({ body: noUsage(chatCompletion(model, TEXT.join(''))) });
const chatStream = (model: string) => ({ sse: TEXT.map((t) => chunk(model, t)) });
const anthropicJson = () => ({ body: noUsage(anthropicMessage('claude-upstream', TEXT.join(''))) });
/** Anthropic's events without a usage anywhere (a relay that drops them). */
function anthropicStream(): AnthropicReply {
  return {
    events: anthropicEvents('claude-upstream', TEXT).map(([name, data]) => {
      const d = data as Record<string, unknown>;
      const message = d.message as Record<string, unknown> | undefined;
      return [name, message ? { ...d, message: noUsage(message) } : noUsage(d)];
    }),
  };
}
const responseItem = { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: TEXT.join('') }] };
const responsesJson = () => ({
  body: { id: 'resp_1', object: 'response', model: 'gpt-upstream', status: 'completed', output: [responseItem] },
});
function responsesStream(): Reply {
  const response = { id: 'resp_1', object: 'response', model: 'gpt-upstream' };
  return {
    sse: [
      { type: 'response.created', response: { ...response, status: 'in_progress', output: [] } },
      ...TEXT.map((delta) => ({ type: 'response.output_text.delta', item_id: 'msg_1', delta })),
      { type: 'response.output_text.done', item_id: 'msg_1', text: TEXT.join('') },
      { type: 'response.completed', response: { ...response, status: 'completed', output: [responseItem] } },
    ],
  };
}

const messages = [{ role: 'user', content: 'say hello to the world' }];
const KINDS: Record<string, Kind> = {
  'chat native': {
    path: '/v1/chat/completions',
    body: { model: 'gpt', messages },
    upstream: 'openai',
    json: () => chatJson('gpt-upstream'),
    stream: () => chatStream('gpt-upstream'),
  },
  'chat to Anthropic': {
    path: '/v1/chat/completions',
    body: { model: 'claude', messages },
    upstream: 'anthropic',
    json: anthropicJson,
    stream: anthropicStream,
  },
  'messages native': {
    path: '/v1/messages',
    body: { model: 'claude', max_tokens: 10, messages },
    upstream: 'anthropic',
    json: anthropicJson,
    stream: anthropicStream,
  },
  'messages through chat': {
    path: '/v1/messages',
    body: { model: 'deep', max_tokens: 10, messages },
    upstream: 'openai',
    json: () => chatJson('deep-upstream'),
    stream: () => chatStream('deep-upstream'),
  },
  'responses native': {
    path: '/v1/responses',
    body: { model: 'gpt', input: 'say hello to the world' },
    upstream: 'openai',
    json: responsesJson,
    stream: responsesStream,
  },
  'responses through chat': {
    path: '/v1/responses',
    body: { model: 'deep', input: 'say hello to the world' },
    upstream: 'openai',
    json: () => chatJson('deep-upstream'),
    stream: () => chatStream('deep-upstream'),
  },
};

const keyOf = (kind: string, stream: boolean) =>
  `sk-est-${kind.replaceAll(' ', '-').toLowerCase()}-${stream ? 'stream' : 'json'}`;
const envName = (key: string) => key.toUpperCase().replaceAll('-', '_');
const LIMITED = Object.keys(KINDS).flatMap((k) => [keyOf(k, false), keyOf(k, true)]);
/** Room for a few answers of these prompts, so the limit trips after some, not the first. */
const TPM = 40;

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
${
      LIMITED.map((k) =>
        `  - { display_name: ${k}, key_env: ${envName(k)}, allowed_models: ["*"], rate_limit: { tpm: ${TPM} } }\n`
      ).join('')
    }`,
  {
    env: { CALLER, ...Object.fromEntries(LIMITED.map((k) => [envName(k), k])) },
    now: () => new Date(Date.UTC(2026, 0, 1, 12, 0, 10)),
  },
);

const post = (path: string, body: unknown, key = CALLER): Promise<Response> => rig.post(path, body, key);

function script(kind: Kind, stream: boolean): void {
  const reply = stream ? kind.stream() : kind.json();
  if (kind.upstream === 'openai') rig.mock.script(reply as Reply);
  else rig.anth.script(reply as AnthropicReply);
}

const lastLog = () => rig.platform.logs.filter((l) => l.msg === 'proxy request completed').at(-1)!;
const tokensIn = (model: string) => sumSamples(rig.gw.metrics.render(), 'aisix_llm_total_tokens_total', { model }) ?? 0;

/** One answer of `kind`: the tokens its access-log line and /metrics counted, and whether marked estimated. */
async function counted(kind: Kind, stream: boolean): Promise<{ log: number; metrics: number; estimated: unknown }> {
  const model = String(kind.body.model);
  const before = tokensIn(model);
  script(kind, stream);
  const res = await post(kind.path, { ...kind.body, stream });
  assert.equal(res.status, 200);
  const text = await res.text();
  if (stream) assert.doesNotMatch(text, /"error":\{|event: error/);
  const log = lastLog();
  return { log: Number(log.total_tokens), metrics: tokensIn(model) - before, estimated: log.usage_estimated };
}

describe('a stream whose upstream reports no usage is estimated as its JSON answer is', () => {
  for (const [name, kind] of Object.entries(KINDS)) {
    test(name, async () => {
      const json = await counted(kind, false);
      const streamed = await counted(kind, true);
      assert.equal(json.estimated, true);
      assert.ok(json.log > 0, 'the JSON answer was estimated');
      assert.deepEqual(streamed, json);
    });
  }
});

describe('a tpm limit trips after as many estimated streams as estimated JSON answers', () => {
  /** How many answers a fresh key of `tpm: TPM` gets before its 429. */
  async function answersBeforeLimit(name: string, kind: Kind, stream: boolean): Promise<number> {
    const key = keyOf(name, stream);
    for (let n = 0; n < 20; n++) {
      script(kind, stream);
      const res = await post(kind.path, { ...kind.body, stream }, key);
      await res.arrayBuffer();
      if (res.status === 429) {
        // The refused request took no scripted answer: an unlimited caller takes it.
        await (await post(kind.path, { ...kind.body, stream })).arrayBuffer();
        return n;
      }
      assert.equal(res.status, 200);
    }
    throw new Error('the limit never tripped');
  }
  for (const [name, kind] of Object.entries(KINDS)) {
    test(name, async () => {
      const json = await answersBeforeLimit(name, kind, false);
      const streamed = await answersBeforeLimit(name, kind, true);
      assert.ok(json > 1, `several answers fit in ${TPM} tokens (${json})`);
      assert.equal(streamed, json);
    });
  }
});

describe('the bytes a stream keeps for its estimate', () => {
  test('past the cap only the length counts, scaling what the kept part says', async () => {
    const text = 'data: {"choices":[{"delta":{"content":"ab"}}]}\n\n';
    const event = new TextEncoder().encode(text);
    const collected = new StreamText();
    const kept = Math.ceil(MAX_COLLECTED_BYTES / event.length);
    for (let i = 0; i < kept * 3; i++) collected.observe(event, text);
    assert.equal((await collected.text()).length, kept * 2, 'the kept events only');
    assert.equal(collected.scale(), 3);
  });

  test('an event over the stream bound (short lines, long event) ends the replay, the text before it counts', async () => {
    const collected = new StreamText(200);
    const before = 'data: {"choices":[{"delta":{"content":"kept"}}]}\n\n';
    const long = `${'data: {"x":1}\n'.repeat(30)}\n`;
    for (const text of [before, long, before]) collected.observe(new TextEncoder().encode(text), text);
    assert.equal(await collected.text(), 'kept');
  });

  test("a Responses stream's terminal event past the cap is left out of the length", () => {
    const collected = new StreamText();
    collected.observe(new Uint8Array(MAX_COLLECTED_BYTES), '');
    const terminal = 'event: response.completed\ndata: {"type":"response.completed"}\n\n';
    collected.observe(new TextEncoder().encode(terminal), terminal);
    assert.equal(collected.scale(), 1);
  });
});

describe('a stream the caller leaves', () => {
  // The caller's cancel aborts the upstream first, whose failure then ends the metered stream: that end must
  // not estimate again, and the estimate builds no tokenizer table (docs/translation.md "Interrupted streams").
  test('is estimated once, without building a table, even when the upstream ends after the caller left', async () => {
    const countings: string[] = [];
    let output = 0;
    const count = new StreamCount(new StreamUsage(), undefined, async (out, counting) => {
      countings.push(counting);
      output = await out();
      return { input: 1, output, total: 1 + output, estimated: true };
    }, undefined);
    const text = 'data: {"choices":[{"delta":{"content":"partial"}}]}\n\n';
    count.observe(new TextEncoder().encode(text), text);
    assert.deepEqual(await count.final(true), { input: 1, output, total: 1 + output, estimated: true });
    await count.ended();
    assert.deepEqual(countings, ['built-only']);
    assert.ok(output > 0, 'the relayed text is counted');
  });

  test('a stream that ended by itself with no usage is estimated once', async () => {
    let estimates = 0;
    const count = new StreamCount(new StreamUsage(), undefined, () => {
      estimates++;
      return Promise.resolve({ input: 1, output: 1, total: 2, estimated: true });
    }, undefined);
    await count.ended();
    assert.deepEqual(await count.final(false), { input: 1, output: 1, total: 2, estimated: true });
    assert.equal(estimates, 1);
  });
});

describe('a stream the upstream cuts mid-way', () => {
  test('is estimated from what it sent before the cut, as a JSON answer of that text is', async () => {
    const kind = KINDS['chat native']!;
    rig.mock.script({ body: noUsage(chatCompletion('gpt-upstream', TEXT[0]!)) });
    assert.equal((await post(kind.path, { ...kind.body, stream: false })).status, 200);
    const json = lastLog();
    const completed = () => rig.platform.logs.filter((l) => l.msg === 'proxy request completed').length;
    const lines = completed();
    // The delay lets the first chunk leave the mock before its socket is destroyed.
    rig.mock.script({ sse: TEXT.map((t) => chunk('gpt-upstream', t)), dropAfterChunks: 1, chunkDelayMs: 10 });
    const res = await post(kind.path, { ...kind.body, stream: true });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /"content":"hello"/);
    assert.match(text, /"error":\{/, 'the cut reached the caller as an error event');
    // Estimated before the error event reached the caller: its line is written by then.
    assert.equal(completed(), lines + 1);
    const cut = lastLog();
    assert.equal(cut.usage_estimated, true);
    assert.ok(Number(json.total_tokens) > 0);
    assert.equal(cut.total_tokens, json.total_tokens);
    assert.equal(cut.completion_tokens, json.completion_tokens);
  });
});
