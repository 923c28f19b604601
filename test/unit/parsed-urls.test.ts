// runtimes/undici-upstream.ts `ParsedUrls`: an upstream URL split as undici's `request` takes it, parsed once per
// distinct URL and never more than `MAX_PARSED_URLS` of them kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_PARSED_URLS, ParsedUrls } from '../../runtimes/undici-upstream.ts';

test('origin and path, the query kept and the fragment left out, as new URL gives them', () => {
  const urls = new ParsedUrls();
  assert.deepEqual(urls.partsOf('https://api.openai.com/v1/chat/completions'), {
    origin: 'https://api.openai.com',
    path: '/v1/chat/completions',
  });
  assert.deepEqual(urls.partsOf('http://127.0.0.1:8080/v1beta/models/g:generateContent?alt=sse#x'), {
    origin: 'http://127.0.0.1:8080',
    path: '/v1beta/models/g:generateContent?alt=sse',
  });
  assert.deepEqual(urls.partsOf('https://h.example:443/a%20b/'), { origin: 'https://h.example', path: '/a%20b/' });
});

test('a URL seen before is not parsed again; a malformed one throws as new URL does', () => {
  const urls = new ParsedUrls();
  const first = urls.partsOf('https://api.openai.com/v1/embeddings');
  assert.equal(urls.partsOf('https://api.openai.com/v1/embeddings'), first);
  assert.throws(() => urls.partsOf('not a url'), TypeError);
});

test(`at most ${MAX_PARSED_URLS} URLs are kept: past them it starts again, and answers stay right`, () => {
  const urls = new ParsedUrls();
  const kept = (urls as unknown as { parsed: Map<string, unknown> }).parsed;
  for (let i = 0; i < 3 * MAX_PARSED_URLS; i++) {
    assert.equal(urls.partsOf(`http://up.example/p?i=${i}`).path, `/p?i=${i}`);
    assert.ok(kept.size <= MAX_PARSED_URLS, `${kept.size} kept`);
  }
  assert.equal(urls.partsOf('http://up.example/p?i=0').path, '/p?i=0');
});
