// The wire endpoints wired into the proxy (docs/aisix-compatibility.md "Endpoints"): `POST /v1/responses`
// (native on an OpenAI vendor, translated through chat elsewhere), `POST /v1/messages/count_tokens`
// (Anthropic targets ask Anthropic, others estimate), the caller's model name and `x-aisix-served-by` on chat answers, and the usage
// a stream's adapter counted (limits, metrics) — through app.request() against the mock upstreams.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { COUNTED_INPUT_TOKENS } from '../support/mock-anthropic.ts';
import { chatCompletion, chunk } from '../support/mock-upstream.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';
import { sumSamples } from '../support/metrics.ts';
import { until } from '../support/until.ts';

const CALLER = 'sk-resp-caller';
const LIMITED = { json: 'sk-resp-limited-json', stream: 'sk-resp-limited-stream' };
/** One request of each kind that a 3-token limit must see charged, JSON and streamed. */
const KINDS = ['chat-anthropic', 'responses-translated', 'messages-native', 'messages-openai'] as const;
const tpmKey = (kind: string, stream: boolean) => `sk-tpm-${kind}-${stream ? 'stream' : 'json'}`;
const TPM_KEYS = KINDS.flatMap((k) => [tpmKey(k, false), tpmKey(k, true)]);
const envName = (key: string) => key.toUpperCase().replaceAll('-', '_');

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
  - { display_name: mixed, routing: { strategy: failover, targets: [{ model: deep }, { model: claude }] } }
  - { display_name: smart, routing: { targets: [{ model: gpt }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: limited-json, key_env: LIMITED_JSON, allowed_models: ["*"], rate_limit: { tpm: 10 } }
  - { display_name: limited-stream, key_env: LIMITED_STREAM, allowed_models: ["*"], rate_limit: { tpm: 10 } }
${
      TPM_KEYS.map((k) =>
        `  - { display_name: ${k}, key_env: ${envName(k)}, allowed_models: ["*"], rate_limit: { tpm: 3 } }\n`
      ).join('')
    }`,
  {
    env: {
      CALLER,
      LIMITED_JSON: LIMITED.json,
      LIMITED_STREAM: LIMITED.stream,
      ...Object.fromEntries(TPM_KEYS.map((k) => [envName(k), k])),
    },
    now: () => new Date(Date.UTC(2026, 0, 1, 12, 0, 10)),
  },
);

const post = (path: string, body: unknown, key = CALLER): Promise<Response> => rig.post(path, body, key);

/** The `data:` payloads of an SSE body, `[DONE]` aside, with their event names. */
function events(text: string): { event: string | undefined; data: Record<string, unknown> }[] {
  const out: { event: string | undefined; data: Record<string, unknown> }[] = [];
  for (const block of text.split('\n\n')) {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if (data && data !== '[DONE]') out.push({ event, data: JSON.parse(data) });
  }
  return out;
}

const lastLog = () => rig.platform.logs.filter((l) => l.msg === 'proxy request completed').at(-1)!;

describe('POST /v1/responses', () => {
  test('translated through chat on a non-OpenAI vendor: a Responses answer naming the caller model', async () => {
    rig.mock.script({ body: chatCompletion('deep-upstream', 'hi there') });
    const res = await post('/v1/responses', { model: 'deep', input: 'hello' });
    assert.equal(res.status, 200);
    const j = await res.json() as Record<string, unknown>;
    assert.equal(j.object, 'response');
    assert.equal(j.model, 'deep');
    assert.equal(rig.mock.requests.at(-1)!.url, '/v1/chat/completions');
    assert.equal(lastLog().path, '/v1/responses');
    assert.equal(lastLog().total_tokens, 4);
  });

  test("native on an OpenAI vendor: the upstream body goes back as it came, naming the caller's model", async () => {
    const native = {
      id: 'resp_1',
      object: 'response',
      model: 'gpt-upstream',
      output: [],
      usage: { input_tokens: 2, output_tokens: 3, total_tokens: 5 },
    };
    rig.mock.script({ body: native });
    const res = await post('/v1/responses', { model: 'gpt', input: 'hello' });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ...native, model: 'gpt' });
    assert.equal(rig.mock.requests.at(-1)!.url, '/v1/responses');
    assert.equal(lastLog().provider_request_id, 'resp_1');
  });

  test('a translated stream ends with response.completed and is recorded a success', async () => {
    const usage = { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 };
    rig.mock.script({ sse: [chunk('deep-upstream', 'hello'), { ...chunk('deep-upstream', ''), choices: [], usage }] });
    const res = await post('/v1/responses', { model: 'deep', input: 'hello', stream: true });
    assert.equal(res.status, 200);
    const evs = events(await res.text());
    assert.equal(evs.at(-1)!.event, 'response.completed');
    assert.equal((evs.at(-1)!.data.response as { model: string }).model, 'deep');
    const log = lastLog();
    assert.equal(log.status, 200);
    assert.equal(log.error_kind, undefined);
    assert.equal(log.total_tokens, 11, 'a translated stream counts its tokens');
  });

  test('a failure inside a Responses stream is a Responses error event', async () => {
    rig.mock.script({ sse: [chunk('deep-upstream', 'partial')], dropAfterChunks: 1 });
    const logged = rig.platform.logs.length;
    const res = await post('/v1/responses', { model: 'deep', input: 'hello', stream: true });
    const evs = events(await res.text());
    const last = evs.at(-1)!;
    assert.equal(last.event, 'error');
    assert.equal(last.data.type, 'error');
    assert.equal(last.data.code, 'upstream_error');
    // No usage came back: the line waits for the estimate.
    await until(
      () => rig.platform.logs.slice(logged).some((l) => l.msg === 'proxy request completed'),
      2000,
      'the access-log line',
    );
    assert.equal(lastLog().error_kind, 'upstream_error');
  });

  test('`previous_response_id` on a translated target: a 400 naming the field', async () => {
    const res = await post('/v1/responses', { model: 'deep', input: 'x', previous_response_id: 'resp_0' });
    assert.equal(res.status, 400);
    const j = await res.json() as { error: { type: string; message: string } };
    assert.equal(j.error.type, 'invalid_request_error');
    assert.match(j.error.message, /previous_response_id/);
  });

  test('no model: 400 in the OpenAI envelope; GET: 405', async () => {
    const res = await post('/v1/responses', { input: 'x' });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
    const get = await rig.app.request('/v1/responses', { headers: { authorization: `Bearer ${CALLER}` } });
    assert.equal(get.status, 405);
  });
});

describe('POST /v1/messages/count_tokens', () => {
  test('an Anthropic target counts; no tokens are charged or logged', async () => {
    const res = await post('/v1/messages/count_tokens', {
      model: 'claude',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { input_tokens: COUNTED_INPUT_TOKENS });
    assert.equal(rig.anth.requests.at(-1)!.url, '/v1/messages/count_tokens');
    assert.equal(rig.anth.requests.at(-1)!.json!.model, 'claude-upstream');
    assert.equal(lastLog().total_tokens, undefined);
  });

  test('a routing group tries only its Anthropic targets', async () => {
    const before = rig.mock.requests.length;
    const res = await post('/v1/messages/count_tokens', {
      model: 'mixed',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { input_tokens: COUNTED_INPUT_TOKENS });
    assert.equal(rig.mock.requests.length, before, 'the chat-only target is not tried');
  });

  test('no Anthropic target: a local estimate, marked estimated, never streamed, nothing charged', async () => {
    const before = rig.mock.requests.length;
    const res = await post('/v1/messages/count_tokens', {
      model: 'deep',
      stream: true,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello there, how are you?' }],
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    assert.equal(res.headers.get('x-sluice-tokens-estimated'), 'true');
    const j = await res.json() as { input_tokens: number };
    assert.deepEqual(Object.keys(j), ['input_tokens']);
    assert.ok(j.input_tokens > 5 && j.input_tokens < 40, `input_tokens ${j.input_tokens}`);
    assert.equal(rig.mock.requests.length, before, 'no upstream call');
    assert.equal(lastLog().total_tokens, undefined);
  });

  test('a routing group with no Anthropic target: its first target estimates', async () => {
    const before = rig.mock.requests.length;
    const res = await post('/v1/messages/count_tokens', {
      model: 'smart',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-sluice-tokens-estimated'), 'true');
    assert.ok(((await res.json()) as { input_tokens: number }).input_tokens > 0);
    assert.equal(rig.mock.requests.length, before);
  });

  test('an Anthropic target answers without the estimated header', async () => {
    const res = await post('/v1/messages/count_tokens', {
      model: 'claude',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.headers.get('x-sluice-tokens-estimated'), null);
    await res.arrayBuffer();
  });

  test('`messages` missing: 400 in the Anthropic envelope', async () => {
    const res = await post('/v1/messages/count_tokens', { model: 'claude' });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { type: string }).type, 'error');
  });
});

describe('/v1/messages', () => {
  test('`max_tokens` is optional', async () => {
    const res = await post('/v1/messages', { model: 'claude', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  });
});

describe('chat answers', () => {
  test('JSON and every chunk name the caller model; a routing model says which target served', async () => {
    const json = await post('/v1/chat/completions', { model: 'smart', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(json.headers.get('x-aisix-served-by'), 'gpt');
    assert.equal(((await json.json()) as { model: string }).model, 'smart');
    const direct = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(direct.headers.get('x-aisix-served-by'), null);
    await direct.arrayBuffer();
    const s = await post('/v1/chat/completions', {
      model: 'smart',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const chunks = events(await s.text());
    assert.ok(chunks.length >= 2);
    for (const c of chunks) assert.equal(c.data.model, 'smart');
  });

  test('a stream without stream_options counts the tokens the adapter asked for in /metrics', async () => {
    const sample = () => sumSamples(rig.gw.metrics.render(), 'aisix_llm_total_tokens_total', { model: 'gpt' }) ?? 0;
    const before = sample();
    rig.mock.script({
      sse: [chunk('gpt-upstream', 'hello'), {
        ...chunk('gpt-upstream', ''),
        choices: [],
        usage: { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 },
      }],
    });
    const res = await post('/v1/chat/completions', {
      model: 'gpt',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const text = await res.text();
    assert.doesNotMatch(text, /"usage"/, 'the caller does not get the usage chunk it never asked for');
    assert.deepEqual(rig.mock.requests.at(-1)!.json!.stream_options, { include_usage: true });
    assert.equal(sample() - before, 11);
    assert.equal(lastLog().total_tokens, 11);
  });

  test('no usage from the upstream: estimated for telemetry and marked in the access log', async () => {
    const body = chatCompletion('gpt-upstream', 'a few words of answer');
    delete body.usage;
    rig.mock.script({ body });
    const res = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] });
    const j = await res.json() as Record<string, unknown>;
    assert.equal(j.usage, undefined, 'the estimate is never written into the answer');
    const log = lastLog();
    assert.equal(log.usage_estimated, true);
    assert.ok(Number(log.prompt_tokens) > 0 && Number(log.completion_tokens) > 0);
  });

  for (const stream of [false, true]) {
    test(`a tpm limit trips after the same answer, ${stream ? 'streamed' : 'JSON'}`, async () => {
      // A key of its own, under a stopped clock: one answer of 11 tokens goes over the 10-token limit.
      const key = stream ? LIMITED.stream : LIMITED.json;
      const usage = { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 };
      rig.mock.script(
        stream
          ? { sse: [chunk('deep-upstream', 'hello'), { ...chunk('deep-upstream', ''), choices: [], usage }] }
          : { body: { ...chatCompletion('deep-upstream'), usage } },
      );
      const model = stream ? 'deep' : 'gpt';
      const first = await post(
        '/v1/chat/completions',
        { model, stream, messages: [{ role: 'user', content: 'a' }] },
        key,
      );
      assert.equal(first.status, 200);
      await first.arrayBuffer();
      const second = await post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'b' }] }, key);
      assert.equal(second.status, 429);
      await second.arrayBuffer();
    });
  }
});

describe('a tpm limit trips at the same point streamed as JSON, on every kind of request', () => {
  const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
  const requests: Record<(typeof KINDS)[number], { path: string; body: Record<string, unknown> }> = {
    'chat-anthropic': {
      path: '/v1/chat/completions',
      body: { model: 'claude', messages: [{ role: 'user', content: 'a' }] },
    },
    'responses-translated': { path: '/v1/responses', body: { model: 'deep', input: 'a' } },
    'messages-native': {
      path: '/v1/messages',
      body: { model: 'claude', max_tokens: 10, messages: [{ role: 'user', content: 'a' }] },
    },
    'messages-openai': { path: '/v1/messages', body: { model: 'deep', messages: [{ role: 'user', content: 'a' }] } },
  };
  for (const kind of KINDS) {
    for (const stream of [false, true]) {
      test(`${kind}, ${stream ? 'streamed' : 'JSON'}: the answer's tokens are charged before the next request`, async () => {
        // The OpenAI-wire upstream reports 5 tokens (its stream in a usage chunk); Anthropic's mock 9 / 12.
        if (requests[kind].body.model === 'deep') {
          rig.mock.script(
            stream
              ? { sse: [chunk('deep-upstream', 'hello'), { ...chunk('deep-upstream', ''), choices: [], usage }] }
              : { body: { ...chatCompletion('deep-upstream'), usage } },
          );
        }
        const key = tpmKey(kind, stream);
        const { path, body } = requests[kind];
        const first = await post(path, { ...body, stream }, key);
        assert.equal(first.status, 200);
        await first.arrayBuffer();
        assert.ok(Number(lastLog().total_tokens) > 3, 'the answer was counted');
        const second = await post(path, body, key);
        assert.equal(second.status, 429);
        await second.arrayBuffer();
      });
    }
  }
});
