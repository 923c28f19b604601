// AWS Bedrock (docs/configuration.md "AWS Bedrock"): the event-stream decoder against AWS's framing and
// the contract's vectors, the signer against the published SigV4 suite, and the adapter through the proxy
// app against a mock that recomputes every signature: Converse, InvokeModel, ConverseStream, embeddings,
// canned errors and in-stream exceptions, and no credential or ARN in anything the caller sees.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AwsV4Signer } from 'aws4fetch';
import { crc32, decodeEventStream, EventStreamError } from '../../src/providers/bedrock/eventstream.ts';
import { signedHeaders } from '../../src/providers/bedrock/sign.ts';
import {
  ARN_TEXT,
  AWS,
  awsError,
  event,
  exception,
  type MockBedrock,
  startMockBedrock,
  streamFrames,
  textEvents,
} from '../support/mock-bedrock.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { sumSamples } from '../support/metrics.ts';

const MESSAGE_START =
  '000000760000005296d5fade0b3a6576656e742d7479706507000c6d65737361676553746172740d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b22726f6c65223a22617373697374616e74227d6fa8c599';
const BLOCK_DELTA =
  '0000009400000057b4ab9aee0b3a6576656e742d74797065070011636f6e74656e74426c6f636b44656c74610d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461223a7b2274657874223a224869227d7d1f944657';
const hex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));
const utf8 = new TextDecoder();

async function* pieces(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.slice(i, i + size);
}

async function decodeAll(chunks: AsyncIterable<Uint8Array>) {
  const out: { type: unknown; payload: string }[] = [];
  for await (const m of decodeEventStream(chunks)) {
    out.push({ type: m.headers[':event-type'], payload: utf8.decode(m.payload) });
  }
  return out;
}

describe('event-stream decoder', () => {
  test('CRC-32 check value', () => {
    assert.equal(crc32(new TextEncoder().encode('123456789')).toString(16), 'cbf43926');
  });

  test('the contract vectors, however the bytes are split', async () => {
    const both = new Uint8Array([...hex(MESSAGE_START), ...hex(BLOCK_DELTA)]);
    const want = [
      { type: 'messageStart', payload: '{"role":"assistant"}' },
      { type: 'contentBlockDelta', payload: '{"contentBlockIndex":0,"delta":{"text":"Hi"}}' },
    ];
    for (const size of [1, 5, 7, 118, 1000]) {
      assert.deepEqual(await decodeAll(pieces(both, size)), want, `chunks of ${size}`);
    }
  });

  test('a flipped payload byte, a corrupt prelude and a cut stream are errors', async () => {
    const flipped = hex(MESSAGE_START);
    flipped[100]! ^= 1;
    await assert.rejects(
      decodeAll(pieces(flipped, 1000)),
      (e) => e instanceof EventStreamError && /message CRC/.test(e.message),
    );
    const prelude = hex(MESSAGE_START);
    prelude[3]! ^= 1;
    await assert.rejects(decodeAll(pieces(prelude, 1000)), EventStreamError);
    await assert.rejects(decodeAll(pieces(hex(MESSAGE_START).slice(0, 60), 1000)), /ended inside a frame/);
  });

  test('frames from the mock’s independent encoder decode', async () => {
    const frames = textEvents(['a', 'b']);
    const all = new Uint8Array(Buffer.concat(frames));
    const got = await decodeAll(pieces(all, 3));
    assert.deepEqual(got.map((g) => g.type), [
      'messageStart',
      'contentBlockDelta',
      'contentBlockDelta',
      'contentBlockStop',
      'messageStop',
      'metadata',
    ]);
  });
});

describe('SigV4', () => {
  const EXAMPLE = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
  const DATE = '20150830T123600Z';
  const sig = (h: Headers | Record<string, string>) => {
    const auth = h instanceof Headers ? h.get('authorization')! : h.authorization!;
    return { signed: /SignedHeaders=([^,]+)/.exec(auth)![1], signature: /Signature=([0-9a-f]+)/.exec(auth)![1] };
  };

  test('the published AWS suite (aws4fetch’s signer)', async () => {
    const cases: [string, string, Record<string, string>, string, string, string, string | undefined][] = [
      [
        'get-vanilla',
        'https://example.amazonaws.com/',
        {},
        '',
        'host;x-amz-date',
        '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
        'GET',
      ],
      [
        'get-vanilla-query-order-key-case',
        'https://example.amazonaws.com/?Param2=value2&Param1=value1',
        {},
        '',
        'host;x-amz-date',
        'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500',
        'GET',
      ],
      [
        'get-utf8',
        'https://example.amazonaws.com/ሴ',
        {},
        '',
        'host;x-amz-date',
        '8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85',
        'GET',
      ],
      [
        'post-vanilla',
        'https://example.amazonaws.com/',
        {},
        '',
        'host;x-amz-date',
        '5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b',
        'POST',
      ],
      [
        'post-x-www-form-urlencoded',
        'https://example.amazonaws.com/',
        { 'content-type': 'application/x-www-form-urlencoded' },
        'Param1=value1',
        'content-type;host;x-amz-date',
        'ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a',
        'POST',
      ],
    ];
    for (const [name, url, headers, body, signed, signature, method] of cases) {
      const s = new AwsV4Signer({
        method,
        url,
        headers,
        body,
        ...EXAMPLE,
        service: 'service',
        region: 'us-east-1',
        datetime: DATE,
        allHeaders: true,
        // The suite's raw path is the character itself, encoded once; a path sent already encoded (Bedrock's
        // `%3A`) is encoded once more, as the Bedrock vectors below pin.
        singleEncode: name === 'get-utf8',
      });
      const out = await s.sign();
      assert.deepEqual(sig(out.headers), { signed, signature }, name);
    }
  });

  test('post-sts-header-before: the session token is signed', async () => {
    const token =
      'AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==';
    const h = await signedHeaders(
      'https://example.amazonaws.com/',
      '',
      {},
      { ...EXAMPLE, sessionToken: token, region: 'us-east-1' },
      'service',
      DATE,
    );
    assert.deepEqual(sig(h), {
      signed: 'host;x-amz-date;x-amz-security-token',
      signature: '85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead',
    });
    assert.equal(h['x-amz-security-token'], token);
    assert.equal(h.host, undefined, 'host is left to the HTTP client');
  });

  test('Bedrock-shaped regression vectors: the model id double-encoded, signing name bedrock', async () => {
    const url =
      'https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse';
    const body = '{"messages":[{"role":"user","content":[{"text":"hi"}]}]}';
    const cred = { ...EXAMPLE, region: 'us-east-1' };
    const h = await signedHeaders(url, body, { 'content-type': 'application/json' }, cred, 'bedrock', DATE);
    assert.deepEqual(sig(h), {
      signed: 'host;x-amz-date',
      signature: 'e08bff9fe3a403bd52bb132a03a1f0fffd1968dcb701e5531897d0f54347234a',
    });
    assert.match(
      h.authorization!,
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20150830\/us-east-1\/bedrock\/aws4_request, /,
    );
    const t = await signedHeaders(
      url,
      body,
      { 'content-type': 'application/json' },
      { ...cred, sessionToken: 'SESSIONTOKENEXAMPLE' },
      'bedrock',
      DATE,
    );
    assert.deepEqual(sig(t), {
      signed: 'host;x-amz-date;x-amz-security-token',
      signature: 'c7c3ffee60f5df34b4b777ba6535e7e122f37db2b1c33bd1566f23fa9511364e',
    });
  });
});

describe('through the proxy', () => {
  const CALLER = 'sk-caller-bedrock-SECRET-1';
  const chat = { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] };
  let br: MockBedrock;
  let g: RecordingGateway;
  const saved = process.env.AWS_ACCESS_KEY_ID;

  before(async () => {
    process.env.AWS_ACCESS_KEY_ID = 'AKIDAMBIENTNEVERUSED'; // the key's own credentials sign, never the ambient ones
    br = await startMockBedrock();
    const cred = JSON.stringify(AWS);
    const withToken = JSON.stringify({ ...AWS, session_token: 'sts-session-SECRET-token' });
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: aws, adapter: bedrock, provider: bedrock, api_key: '${cred}', api_base: "${br.url}" }
  - { display_name: aws-sts, adapter: bedrock, api_key: '${withToken}', api_base: "${br.url}" }
  - { display_name: aws-broken, adapter: bedrock, api_key: '{"access_key_id": "AKID", "secret_access_key": ', api_base: "${br.url}" }
  - { display_name: aws-no-region, adapter: bedrock, api_key: '{"access_key_id":"a","secret_access_key":"b","region":""}', api_base: "${br.url}" }
models:
  - { display_name: llama, provider_key: aws, model_name: "us.meta.llama3-1-70b-instruct-v1:0", retries: 0 }
  - { display_name: claude, provider_key: aws, model_name: "anthropic.claude-3-5-sonnet-20241022-v2:0", retries: 0 }
  - { display_name: claude-sts, provider_key: aws-sts, model_name: "anthropic.claude-3-5-sonnet-20241022-v2:0", retries: 0 }
  - { display_name: titan, provider_key: aws, model_name: "amazon.titan-embed-text-v2:0", retries: 0 }
  - { display_name: cohere, provider_key: aws, model_name: "cohere.embed-english-v3", retries: 0 }
  - { display_name: nobody, provider_key: aws, model_name: "acme.model-v1", retries: 0 }
  - { display_name: broken, provider_key: aws-broken, model_name: "meta.llama3", retries: 0 }
  - { display_name: no-region, provider_key: aws-no-region, model_name: "meta.llama3", retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      { CALLER },
    );
  });

  after(async () => {
    if (saved === undefined) delete process.env.AWS_ACCESS_KEY_ID;
    else process.env.AWS_ACCESS_KEY_ID = saved;
    await br.close();
    assert.deepEqual(br.rejected, [], 'every signature verified');
    for (const r of br.requests) {
      assert.equal(r.body.includes(CALLER) || JSON.stringify(r.headers).includes(CALLER), false);
    }
    const secrets = [AWS.secret_access_key, AWS.access_key_id, 'sts-session-SECRET-token', CALLER];
    for (const line of g.platform.logs) {
      for (const s of secrets) assert.equal(JSON.stringify(line).includes(s), false, `a log line carries ${s}`);
    }
  });

  test('Converse for a non-Anthropic model: system lifted, blocks, no inferenceConfig when no knob', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'llama', ...chat }, CALLER);
    const body = await r.json() as {
      id: string;
      choices: { message: { content: string } }[];
      usage: { total_tokens: number };
    };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0]!.message.content, 'hi from converse');
    assert.equal(body.usage.total_tokens, 7);
    assert.ok(body.id.length > 0, 'a non-empty id');
    const sent = br.requests.at(-1)!;
    assert.equal(sent.path, '/model/us.meta.llama3-1-70b-instruct-v1%3A0/converse');
    assert.deepEqual(sent.json!.system, [{ text: 'be brief' }]);
    assert.deepEqual(sent.json!.messages, [{ role: 'user', content: [{ text: 'hi' }] }]);
    assert.equal('inferenceConfig' in sent.json!, false);
    assert.match(
      String(sent.headers.authorization),
      new RegExp(`Credential=${AWS.access_key_id}/\\d{8}/us-west-2/bedrock/aws4_request`),
    );
  });

  test('Converse carries tools, tool_choice, stop, max_completion_tokens and data-URL images', async () => {
    const r = await g.post('/v1/chat/completions', {
      model: 'llama',
      max_completion_tokens: 50,
      temperature: 0.2,
      stop: ['END'],
      tools: [{
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'w',
          parameters: { type: 'object', properties: { city: { type: 'string' } } },
        },
      }],
      tool_choice: 'required',
      messages: [{
        role: 'user',
        content: [{ type: 'text', text: 'what is this' }, {
          type: 'image_url',
          image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' },
        }],
      }],
    }, CALLER);
    assert.equal(r.status, 200, await r.text());
    const j = br.requests.at(-1)!.json!;
    assert.deepEqual(j.inferenceConfig, { maxTokens: 50, temperature: 0.2, stopSequences: ['END'] });
    assert.deepEqual(j.toolConfig, {
      tools: [{
        toolSpec: {
          name: 'get_weather',
          description: 'w',
          inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } },
        },
      }],
      toolChoice: { any: {} },
    });
    assert.deepEqual((j.messages as { content: unknown[] }[])[0]!.content[1], {
      image: { format: 'png', source: { bytes: 'iVBORw0KGgo=' } },
    });
  });

  test('InvokeModel for a non-streaming anthropic.* model, with the session token signed', async () => {
    const r = await g.post('/v1/chat/completions', { model: 'claude-sts', ...chat }, CALLER);
    const body = await r.json() as { choices: { message: { content: string } }[] };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0]!.message.content, 'hi from claude on bedrock');
    const sent = br.requests.at(-1)!;
    assert.equal(sent.path, '/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke');
    assert.equal(sent.json!.anthropic_version, 'bedrock-2023-05-31');
    assert.equal(sent.json!.max_tokens, 4096);
    assert.equal(sent.headers['x-amz-security-token'], 'sts-session-SECRET-token');
    assert.match(String(sent.headers.authorization), /SignedHeaders=[a-z;-]*x-amz-security-token/);
    // Claude's cache read (2) is in the cache-inclusive total the chat answer cannot itemise.
    const byClient = (t: string) =>
      sumSamples(g.gw.metrics.render(), 'aisix_llm_tokens_by_client_total', { model: 'claude-sts', token_type: t });
    assert.deepEqual(['input', 'output', 'total'].map(byClient), [6, 5, 13]);
  });

  test('ConverseStream: binary frames split across writes become chunks, usage and [DONE]', async () => {
    const r = await g.post('/v1/chat/completions', {
      model: 'claude',
      stream: true,
      stream_options: { include_usage: true },
      ...chat,
    }, CALLER);
    assert.equal(r.status, 200);
    const text = await r.text();
    const chunks = text.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello from Bedrock');
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
    assert.equal(chunks.at(-1).usage.total_tokens, 7);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
    assert.equal(br.requests.at(-1)!.path, '/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse-stream');
  });

  test('a streamed tool call keeps its index and arguments fragments', async () => {
    br.script(streamFrames([
      event('messageStart', { role: 'assistant' }),
      event('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Let me look.' } }),
      event('contentBlockStart', {
        contentBlockIndex: 1,
        start: { toolUse: { toolUseId: 'tu_1', name: 'get_weather' } },
      }),
      event('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '{"city":' } } }),
      event('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '"Paris"}' } } }),
      event('messageStop', { stopReason: 'tool_use' }),
    ]));
    const r = await g.post('/v1/chat/completions', { model: 'llama', stream: true, ...chat }, CALLER);
    const chunks = (await r.text()).split('\n\n').filter((l) => l.startsWith('data: {')).map((l) =>
      JSON.parse(l.slice(6))
    );
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    assert.deepEqual(calls[0], {
      index: 0,
      id: 'tu_1',
      type: 'function',
      function: { name: 'get_weather', arguments: '' },
    });
    assert.equal(
      calls.slice(1).map((c: { function: { arguments: string } }) => c.function.arguments).join(''),
      '{"city":"Paris"}',
    );
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  });

  test('an in-stream exception and a bad CRC end the stream with an error event, no AWS text', async () => {
    const bad = event('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'x' } });
    bad[bad.length - 6]! ^= 0xff;
    for (
      const [frames, message] of [
        [
          [event('messageStart', { role: 'assistant' }), exception('throttlingException', { message: ARN_TEXT })],
          'upstream rate limited',
        ],
        [[event('messageStart', { role: 'assistant' }), bad], 'upstream sent a corrupt event stream'],
      ] as const
    ) {
      br.script(streamFrames([...frames]));
      const r = await g.post('/v1/chat/completions', { model: 'llama', stream: true, ...chat }, CALLER);
      const text = await r.text();
      assert.ok(text.includes(`data: {"error":{"message":"${message}","type":"upstream_error"}}`), text);
      assert.equal(text.includes('[DONE]'), false);
      assert.equal(text.includes('arn:aws'), false);
    }
  });

  test('embeddings: Titan one call per input, Cohere one batch', async () => {
    const before = br.requests.length;
    const t = await g.post('/v1/embeddings', { model: 'titan', input: ['ab', 'abcd'], dimensions: 256 }, CALLER);
    const tb = await t.json() as { data: { index: number; embedding: number[] }[]; usage: { prompt_tokens: number } };
    assert.equal(t.status, 200, JSON.stringify(tb));
    assert.deepEqual(tb.data.map((d) => d.embedding[0]), [2, 4]);
    assert.equal(tb.usage.prompt_tokens, 6);
    assert.equal(br.requests.length - before, 2);
    assert.deepEqual(br.requests.at(-1)!.json, { inputText: 'abcd', dimensions: 256 });
    const c = await g.post('/v1/embeddings', { model: 'cohere', input: 'xyz' }, CALLER);
    const cb = await c.json() as { data: { embedding: number[] }[] };
    assert.equal(c.status, 200);
    assert.deepEqual(cb.data[0]!.embedding, [3, 0.25]);
    assert.deepEqual(br.requests.at(-1)!.json, { texts: ['xyz'], input_type: 'search_document' });
  });

  test('/v1/messages to anthropic.* is native: cache_control and betas reach InvokeModel, the answer is Claude’s', async () => {
    const body = {
      model: 'claude',
      max_tokens: 32,
      system: [{ type: 'text', text: 'long context', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'hi' }],
    };
    const r = await Promise.resolve(g.app.request('/v1/messages', {
      method: 'POST',
      headers: {
        'x-api-key': CALLER,
        'content-type': 'application/json',
        'anthropic-beta': 'prompt-caching-2024-07-31, x-2',
      },
      body: JSON.stringify(body),
    }, { peer: '127.0.0.1:5555' }));
    const answer = await r.json() as { id: string; content: { text: string }[]; usage: Record<string, number> };
    assert.equal(r.status, 200, JSON.stringify(answer));
    assert.equal(answer.id, 'msg_bdrk_01');
    assert.equal(answer.usage.cache_read_input_tokens, 2);
    const sent = br.requests.at(-1)!;
    assert.equal(sent.path, '/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke');
    assert.deepEqual(sent.json!.system, body.system);
    assert.deepEqual(sent.json!.anthropic_beta, ['prompt-caching-2024-07-31', 'x-2']);
    assert.equal(sent.json!.anthropic_version, 'bedrock-2023-05-31');

    const s = await g.post('/v1/messages', { ...body, stream: true }, CALLER);
    const text = await s.text();
    assert.equal(s.status, 200, text);
    assert.match(text, /^event: message_start\ndata: \{"type":"message_start"/);
    assert.match(text, /"text":"native claude"/);
    assert.ok(
      text.endsWith(
        'event: message_stop\ndata: {"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":7,"outputTokenCount":2}}\n\n',
      ),
    );
    assert.equal(
      br.requests.at(-1)!.path,
      '/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke-with-response-stream',
    );
  });

  test('/v1/messages to another publisher goes through chat (Converse)', async () => {
    const r = await g.post('/v1/messages', {
      model: 'llama',
      max_tokens: 32,
      messages: [{ role: 'user', content: 'hi' }],
    }, CALLER);
    const body = await r.json() as { type: string; content: { text: string }[] };
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.content[0]!.text, 'hi from converse');
    assert.match(br.requests.at(-1)!.path, /\/converse$/);
  });

  test('AWS errors: canned message and derived code, Retry-After on 429, never the AWS text', async () => {
    const cases: [ReturnType<typeof awsError>, number, string, string | undefined][] = [
      [awsError(429, 'ThrottlingException', '3'), 429, 'upstream rate limited', 'rate_limit_exceeded'],
      [awsError(403, 'AccessDeniedException'), 403, 'upstream authentication failed', 'permission_denied'],
      [awsError(404, 'ResourceNotFoundException'), 404, 'upstream model not found', 'model_not_found'],
      [awsError(400, 'ValidationException'), 400, 'upstream returned 400', undefined],
    ];
    for (const [handler, status, message, code] of cases) {
      br.script(handler);
      const r = await g.post('/v1/chat/completions', { model: 'llama', ...chat }, CALLER);
      const text = await r.text();
      assert.equal(r.status, status, text);
      const e = (JSON.parse(text) as { error: { message: string; type: string; code?: string } }).error;
      assert.deepEqual([e.message, e.type, e.code], [message, 'upstream_error', code]);
      assert.equal(text.includes('arn:aws'), false);
      if (status === 429) assert.equal(r.headers.get('retry-after'), '3');
    }
  });

  test('refused before any call: malformed JSON (401), empty region and unknown publisher (400)', async () => {
    const before = g.sent.length;
    const broken = await g.post('/v1/chat/completions', { model: 'broken', ...chat }, CALLER);
    const bt = await broken.text();
    assert.equal(broken.status, 401, bt);
    assert.match(bt, /invalid upstream credentials: bedrock provider_key.api_key must be valid JSON/);
    assert.match(bt, /"type":"authentication_error"/);
    const region = await g.post('/v1/chat/completions', { model: 'no-region', ...chat }, CALLER);
    assert.equal(region.status, 400);
    assert.match(await region.text(), /region is empty/);
    const nobody = await g.post('/v1/chat/completions', { model: 'nobody', ...chat }, CALLER);
    assert.equal(nobody.status, 400);
    assert.match(await nobody.text(), /bedrock publisher unknown for model id/);
    const emb = await g.post('/v1/embeddings', { model: 'llama', input: 'x' }, CALLER);
    assert.equal(emb.status, 400);
    assert.equal(g.sent.length, before, 'nothing was sent');
  });
});
