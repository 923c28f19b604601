// What the media answers and uploads say they used (docs/media-endpoints.md "Accounting"): rerank's tokens in
// each vendor's shape, a transcription's seconds from its answer, a WAV upload's duration from its header.
// Run: node --import tsx --test test/unit/media-usage.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { audioSeconds, headOf, rerankTokens, speechCharacters, wavSeconds } from '../../src/media/usage.ts';
import { wavHeader } from '../support/mock-media.ts';

describe('media usage', () => {
  test('rerank: OpenAI-compatible, Jina and Cohere shapes; none stated', () => {
    assert.equal(rerankTokens('{"usage":{"prompt_tokens":7,"total_tokens":7}}'), 7);
    assert.equal(rerankTokens('{"usage":{"total_tokens":12},"model":"jina-reranker-v2"}'), 12);
    assert.equal(rerankTokens('{"id":"x","meta":{"billed_units":{"search_units":1,"input_tokens":42}}}'), 42);
    assert.equal(rerankTokens('{"results":[]}'), undefined);
    assert.equal(rerankTokens('not json'), undefined);
  });

  test("a transcription's seconds: usage.seconds, else verbose_json's duration", () => {
    assert.equal(audioSeconds('{"text":"x","usage":{"type":"duration","seconds":3}}'), 3);
    assert.equal(audioSeconds('{"task":"transcribe","duration":8.47,"text":"x","segments":[]}'), 8.47);
    assert.equal(audioSeconds('hello\n'), undefined);
  });

  test('speech characters are code points', () => {
    assert.equal(speechCharacters({ input: 'héllo 👋' }), 7);
    assert.equal(speechCharacters({}), undefined);
  });

  test("a WAV upload's duration from its header, chunks padded; other files none", () => {
    assert.equal(wavSeconds(wavHeader(64_000)), 2);
    assert.equal(wavSeconds(wavHeader(441_000, 44_100, 2, 16)), 2.5);
    assert.equal(wavSeconds(new TextEncoder().encode('ID3\u0003 not a wav')), undefined);
    const header = wavHeader(32_000);
    const split = headOf([header.subarray(0, 5), header.subarray(5), new Uint8Array(100_000)]);
    assert.equal(split.length, 65_536);
    assert.equal(wavSeconds(split), 1);
  });
});
