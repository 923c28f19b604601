// The OpenAI adapter joins a provider key's `Authorization` value and URLs once per key (src/providers/openai.ts):
// what each call sends must still be the key's current secret and base, also when they change on the same object.
// Run: node --import tsx --test test/unit/openai-key-strings.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UpstreamRequest } from '../../src/platform.ts';
import { openaiAdapter } from '../../src/providers/openai.ts';
import type { ProviderCall } from '../../src/providers/types.ts';
import type { ProviderKey } from '../../src/resources/schema.ts';
import { Cancel } from '../../src/util/cancel.ts';

const ANSWER = '{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[]}';

function callWith(key: ProviderKey, endpoint: 'chat' | 'embeddings', sent: UpstreamRequest[]): ProviderCall {
  return {
    endpoint,
    body: { model: 'm' },
    stream: false,
    key,
    signal: new Cancel(),
    upstream: (req) => {
      sent.push(req);
      return Promise.resolve({
        status: 200,
        header: (name: string) => (name === 'content-type' ? 'application/json' : null),
        body: (async function* () {})(),
        text: () => Promise.resolve(ANSWER),
        discard: () => Promise.resolve(),
      });
    },
  };
}

test('each call sends the key secret and base it has now, per endpoint', async () => {
  const key = { id: 'k1', display_name: 'k', provider: 'openai', api_key: 'sk-one', api_base: 'http://a.test/v1' };
  const sent: UpstreamRequest[] = [];
  const pk = key as unknown as ProviderKey; // the members the adapter reads
  await openaiAdapter.call(callWith(pk, 'chat', sent));
  await openaiAdapter.call(callWith(pk, 'embeddings', sent));
  key.api_key = 'sk-two';
  await openaiAdapter.call(callWith(pk, 'chat', sent));
  key.api_base = 'http://b.test/v1';
  await openaiAdapter.call(callWith(pk, 'chat', sent));
  assert.deepEqual(sent.map((r) => [r.url, r.headers.authorization]), [
    ['http://a.test/v1/chat/completions', 'Bearer sk-one'],
    ['http://a.test/v1/embeddings', 'Bearer sk-one'],
    ['http://a.test/v1/chat/completions', 'Bearer sk-two'],
    ['http://b.test/v1/chat/completions', 'Bearer sk-two'],
  ]);
});

test('a key without a secret sends no Authorization header', async () => {
  const sent: UpstreamRequest[] = [];
  const key = { id: 'k2', display_name: 'k', provider: 'openai', api_base: 'http://c.test/v1' };
  await openaiAdapter.call(callWith(key as unknown as ProviderKey, 'chat', sent));
  assert.equal(sent[0]!.headers.authorization, undefined);
  assert.equal(sent[0]!.url, 'http://c.test/v1/chat/completions');
});
