// A stream the caller leaves after its first event (docs/translation.md "Interrupted streams"): the prompt
// estimated and the completion counted from what was relayed, marked `usage_estimated` in the access log,
// counted in the token metrics and charged to a `tpm` limit; for chat, native and translated Responses, and
// `/v1/messages` translated to chat. The in-flight slot is free as soon as the caller is gone.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chunk, type Reply } from '../support/mock-upstream.ts';
import { sumSamples } from '../support/metrics.ts';
import { proxyOverMocks, threeVendors } from '../support/proxy-over-mocks.ts';
import { until, within } from '../support/until.ts';

const CALLER = 'sk-int-caller';
const PROMPT = 'tell me a long story about a lighthouse keeper and the sea';
/** The upstream's second event comes long after the first: the caller leaves in between. */
const SLOW = 2000;

interface Kind {
  path: string;
  body: Record<string, unknown>;
  /** The upstream's first event (usage only at the end, as a chat upstream sends it). */
  stream: () => Reply;
}

const chatStream = (model: string): Reply => ({
  sse: [chunk(model, 'Once upon a time, there was a keeper'), chunk(model, ' who never slept.')],
  chunkDelayMs: SLOW,
});
const KINDS: Record<string, Kind> = {
  'chat': {
    path: '/v1/chat/completions',
    body: { model: 'gpt', messages: [{ role: 'user', content: PROMPT }] },
    stream: () => chatStream('gpt-upstream'),
  },
  'responses native': {
    path: '/v1/responses',
    body: { model: 'gpt', input: PROMPT },
    stream: () => ({
      // The text first: the mock waits as long after each event.
      sse: [
        { type: 'response.output_text.delta', item_id: 'msg_1', delta: 'Once upon a time, there was a keeper' },
        { type: 'response.output_text.delta', item_id: 'msg_1', delta: ' who never slept.' },
      ],
      chunkDelayMs: SLOW,
    }),
  },
  'responses through chat': {
    path: '/v1/responses',
    body: { model: 'deep', input: PROMPT },
    stream: () => chatStream('deep-upstream'),
  },
  'messages through chat': {
    path: '/v1/messages',
    body: { model: 'deep', max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] },
    stream: () => chatStream('deep-upstream'),
  },
};

const keyOf = (kind: string) => `sk-int-${kind.replaceAll(' ', '-')}`;
const envName = (key: string) => key.toUpperCase().replaceAll('-', '_');
const LIMITED = Object.keys(KINDS).map(keyOf);

const rig = proxyOverMocks(
  (openaiBase, anthropicBase) =>
    `${threeVendors(openaiBase, anthropicBase)}
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
${
      LIMITED.map((k) =>
        `  - { display_name: ${k}, key_env: ${envName(k)}, allowed_models: ["*"], rate_limit: { tpm: 5 } }\n`
      ).join('')
    }`,
  {
    env: { CALLER, ...Object.fromEntries(LIMITED.map((k) => [envName(k), k])) },
    now: () => new Date(Date.UTC(2026, 0, 1, 12, 0, 10)),
  },
);

const completed = (id: string) =>
  rig.platform.logs.find((l) => l.msg === 'proxy request completed' && l.request_id === id);
const tokensIn = (model: string) => sumSamples(rig.gw.metrics.render(), 'aisix_llm_total_tokens_total', { model }) ?? 0;

/** The kind's stream, left by its caller once the first event arrived. */
async function leaveAfterFirstEvent(kind: Kind, key: string, id: string): Promise<void> {
  rig.mock.script(kind.stream());
  const res = await rig.app.request(kind.path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-aisix-request-id': id },
    body: JSON.stringify({ ...kind.body, stream: true }),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let got = '';
  while (!/keeper/.test(got)) {
    const { done, value } = await within(reader.read(), SLOW / 2, 'the first event');
    assert.equal(done, false);
    got += decoder.decode(value, { stream: true });
  }
  await within(reader.cancel(), SLOW / 2, 'reader.cancel()');
  // A translated stream ends once the upstream's abort reached it, well before the upstream's next event.
  await until(() => rig.gw.lifecycle.inFlight === 0, SLOW / 2, 'the in-flight slot to be free');
}

describe('a stream the caller leaves is charged its estimated tokens', () => {
  for (const [name, kind] of Object.entries(KINDS)) {
    test(name, async () => {
      const model = String(kind.body.model);
      const before = tokensIn(model);
      const id = `left-${name.replaceAll(' ', '-')}`;
      await leaveAfterFirstEvent(kind, keyOf(name), id);
      await until(() => completed(id) !== undefined, SLOW, 'the access-log line');
      const log = completed(id)!;
      assert.equal(log.error_kind, 'client_closed');
      assert.equal(log.usage_estimated, true);
      assert.ok(Number(log.prompt_tokens) > 5, `the prompt is estimated (${log.prompt_tokens})`);
      assert.ok(Number(log.completion_tokens) > 0, `the relayed text is counted (${log.completion_tokens})`);
      assert.equal(tokensIn(model) - before, Number(log.total_tokens), 'the token metrics count them');
      // The tpm limit (5) saw them: the next request is refused.
      const next = await rig.post(kind.path, kind.body, keyOf(name));
      await next.arrayBuffer();
      assert.equal(next.status, 429);
    });
  }
});
