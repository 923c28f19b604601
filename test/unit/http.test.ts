// src/http: the one place callers' errors are built — envelopes, re-wrapped upstream errors, SSE error
// events, bearer parsing, timing-safe comparison, secret scrubbing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bearerToken, parseBearer, timingSafeEqual } from '../../src/http/auth.ts';
import {
  anthropicEnvelope,
  envelopeFor,
  errorResponse,
  errors,
  fromFailure,
  openaiEnvelope,
  upstreamErrorBody,
} from '../../src/http/errors.ts';
import { base64Copies, REDACTED, scrubberFor, scrubText } from '../../src/http/scrub.ts';
import { anthropicSseErrorEvent, sseErrorEvent } from '../../src/http/sse.ts';
import { meteredChunks, StreamUsage } from '../../src/proxy/usage.ts';

const same = (s: string) => s;

test('parseBearer: the scheme in any case, one token, blanks around it; anything else is no token', () => {
  assert.equal(parseBearer('Bearer sk-1'), 'sk-1');
  assert.equal(parseBearer('bearer   sk-1  '), 'sk-1');
  assert.equal(parseBearer('BEARER sk-1'), 'sk-1');
  assert.equal(parseBearer('Bearer'), undefined);
  assert.equal(parseBearer('Bearer a b'), undefined);
  assert.equal(parseBearer('Basic dXNlcjpwYXNz'), undefined);
  assert.equal(parseBearer(null), undefined);
  assert.equal(parseBearer(''), undefined);
});

test('bearerToken: Authorization wins; x-api-key (trimmed) without it; a bad Authorization is no token', () => {
  assert.equal(bearerToken(new Headers({ authorization: 'Bearer a1', 'x-api-key': 'b2' })), 'a1');
  assert.equal(bearerToken(new Headers({ 'x-api-key': ' b2 ' })), 'b2');
  assert.equal(bearerToken(new Headers({ authorization: 'Token a1', 'x-api-key': 'b2' })), undefined);
  assert.equal(bearerToken(new Headers({ 'x-api-key': '  ' })), undefined);
  assert.equal(bearerToken(new Headers()), undefined);
});

test('timingSafeEqual: equal strings only', async () => {
  assert.equal(await timingSafeEqual('admin-key-1', 'admin-key-1'), true);
  assert.equal(await timingSafeEqual('admin-key-1', 'admin-key-2'), false);
  assert.equal(await timingSafeEqual('admin-key-1', 'admin-key-10'), false);
  assert.equal(await timingSafeEqual('', 'x'), false);
});

test('scrubText: every occurrence of every secret; a longer secret containing a shorter one goes whole', () => {
  const secrets = ['sk-long-secret-abc', 'sk-long'].sort((a, b) => b.length - a.length);
  assert.equal(
    scrubText('key sk-long-secret-abc and sk-long, again sk-long-secret-abc', secrets),
    `key ${REDACTED} and ${REDACTED}, again ${REDACTED}`,
  );
  assert.equal(scrubText('nothing here', secrets), 'nothing here');
});

test('scrubberFor: a base64 or base64url copy of a configured secret is redacted too', () => {
  const secret = 'admin-key-SECRET>?~value';
  const [padded, bare, url] = base64Copies(secret);
  assert.equal(padded, Buffer.from(secret).toString('base64'));
  assert.equal(url, Buffer.from(secret).toString('base64url'));
  assert.notEqual(bare, url); // this secret's encoding has `+` or `/`, so both forms are exercised
  const s = scrubberFor(undefined, [secret], undefined);
  assert.equal(
    s(`plain ${secret}; b64 ${padded}; bare ${bare}x; url ${url}`),
    `plain ${REDACTED}; b64 ${REDACTED}; bare ${REDACTED}x; url ${REDACTED}`,
  );
  assert.equal(s('nothing here'), 'nothing here');
});

test("upstreamErrorBody: OpenAI's fields kept (param/code only when sent), Anthropic's type by status", () => {
  const openai = '{"error":{"message":"bad temp","type":"invalid_request_error","param":"temperature","code":null}}';
  assert.equal(upstreamErrorBody('openai', 400, openai, same), openai);
  const anthropic = '{"type":"error","error":{"type":"overloaded_error","message":"busy"}}';
  assert.equal(
    upstreamErrorBody('openai', 429, anthropic, same),
    '{"error":{"message":"busy","type":"overloaded_error"}}',
  );
  assert.deepEqual(JSON.parse(upstreamErrorBody('anthropic', 429, openai, same)), {
    type: 'error',
    error: { type: 'rate_limit_error', message: 'bad temp' },
  });
  // Plain text, a bare string error, extra members: only the message survives, in our envelope.
  assert.equal(
    upstreamErrorBody('openai', 404, '<html>nope</html>', same),
    '{"error":{"message":"<html>nope</html>","type":"upstream_error"}}',
  );
  assert.equal(
    upstreamErrorBody('openai', 400, '{"error":"quota","debug":{"host":"10.0.0.1"}}', same),
    '{"error":{"message":"quota","type":"upstream_error"}}',
  );
  assert.equal(
    JSON.parse(
      upstreamErrorBody(
        'openai',
        400,
        JSON.stringify({ error: { message: 'x'.repeat(2000) } }),
        scrubberFor(undefined, [], undefined),
      ),
    )
      .error.message.length,
    500,
  );
  // The scrubber sees the message and the type.
  assert.equal(
    upstreamErrorBody(
      'openai',
      401,
      '{"error":{"message":"Incorrect API key provided: Bearer sk-1234567"}}',
      (s) => scrubText(s, ['sk-1234567']),
    ),
    `{"error":{"message":"Incorrect API key provided: Bearer ${REDACTED}","type":"upstream_error"}}`,
  );
});

test('envelopes and SSE error events of both wires', () => {
  assert.equal(
    openaiEnvelope(errors.expiredKey()),
    '{"error":{"message":"API key has expired","type":"invalid_api_key","code":"api_key_expired"}}',
  );
  assert.equal(
    anthropicEnvelope(errors.unknownModel('m')),
    '{"type":"error","error":{"type":"not_found_error","message":"model \\"m\\" not found"}}',
  );
  const dec = new TextDecoder();
  assert.equal(
    dec.decode(sseErrorEvent('upstream_timeout', 'slow')),
    'data: {"error":{"message":"slow","type":"upstream_timeout"}}\n\n',
  );
  assert.equal(
    dec.decode(anthropicSseErrorEvent('upstream_error', 'cut')),
    'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"cut"}}\n\n',
  );
});

test('the Workers not-configured 503 (for runtimes/workers-handler.ts): both wires, Retry-After', async () => {
  const e = errors.notConfigured('2');
  const openai = errorResponse(e, envelopeFor('openai'));
  assert.equal(openai.status, 503);
  assert.equal(openai.headers.get('retry-after'), '2');
  assert.deepEqual(await openai.json(), {
    error: {
      message: 'no configuration has been applied yet: the etcd source has not delivered one',
      type: 'service_unavailable',
    },
  });
  const anthropic = errorResponse(e, envelopeFor('anthropic'));
  assert.equal(((await anthropic.json()) as { error: { type: string } }).error.type, 'overloaded_error');
});

test("fromFailure: routing's failure values as the caller's errors", () => {
  const e = fromFailure({ kind: 'all_candidates_unavailable', status: 503, message: 'none', retryAfterSecs: 30 });
  assert.deepEqual([e.status, e.type, e.message, e.headers], [503, 'all_candidates_unavailable', 'none', {
    'retry-after': '30',
  }]);
  const bad = fromFailure({ kind: 'invalid_request', status: 400, message: 'cannot translate' });
  assert.deepEqual([bad.status, bad.type, bad.headers], [400, 'invalid_request_error', undefined]);
});

// ---- meteredChunks: secrets in a streamed upstream error event -------------------------------------------

const SECRET = 'sk-upstream-STREAM-SECRET-0a1b2c';
const scrubSecret = () => (text: string) => scrubText(text, [SECRET]);
const enc = new TextEncoder();

async function run(parts: (string | Uint8Array)[]): Promise<{ out: Uint8Array[]; inputs: Uint8Array[] }> {
  const inputs = parts.map((p) => (typeof p === 'string' ? enc.encode(p) : p));
  async function* source(): AsyncGenerator<Uint8Array> {
    yield* inputs;
  }
  const out: Uint8Array[] = [];
  for await (const c of meteredChunks(source(), new StreamUsage(), scrubSecret)) out.push(c);
  return { out, inputs };
}
const text = (cs: Uint8Array[]): string => new TextDecoder().decode(Buffer.concat(cs));

test('meteredChunks: a stream that never mentions an error passes chunk for chunk, untouched', async () => {
  const { out, inputs } = await run(['data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', 'data: [DONE]\n\n']);
  assert.equal(out.length, 2);
  out.forEach((c, i) => assert.equal(c, inputs[i])); // the same objects: no copy
});

test('meteredChunks: a secret split across two chunks of an error event is redacted whole', async () => {
  const first = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n';
  const { out, inputs } = await run([
    first,
    `data: {"error":{"message":"invalid key ${SECRET.slice(0, 12)}`,
    `${SECRET.slice(12)} for this org"}}\n\n`,
    'data: [DONE]\n\n',
  ]);
  assert.equal(out[0], inputs[0]); // before the error: as it came
  const all = text(out);
  assert.ok(!all.includes(SECRET.slice(0, 12)) && !all.includes(SECRET.slice(12)), all);
  assert.equal(all, `${first}data: {"error":{"message":"invalid key ${REDACTED} for this org"}}\n\ndata: [DONE]\n\n`);
});

test('meteredChunks: `error` split across chunks still switches to scrubbing; an unfinished last line is sent', async () => {
  const { out } = await run(['data: {"err', `or":{"message":"key ${SECRET}"}}\n\n`, `data: {"x":"${SECRET}"}`]);
  assert.equal(text(out), `data: {"error":{"message":"key ${REDACTED}"}}\n\ndata: {"x":"${REDACTED}"}`);
});

test('meteredChunks: an error event sent a byte at a time is still scrubbed', async () => {
  const stream = `data: {"x":1}\n\ndata: {"error":{"message":"key ${SECRET}"}}\n\n`;
  const { out } = await run([...enc.encode(stream)].map((b) => Uint8Array.of(b)));
  assert.equal(text(out), `data: {"x":1}\n\ndata: {"error":{"message":"key ${REDACTED}"}}\n\n`);
});

test('meteredChunks: a character split across the switch is neither lost nor doubled', async () => {
  const bytes = enc.encode(`data: {"content":"é"}\n\ndata: {"error":{"message":"${SECRET}"}}\n\n`);
  const cut = bytes.indexOf(0xc3) + 1; // after the first byte of é
  const { out } = await run([bytes.subarray(0, cut), bytes.subarray(cut)]);
  assert.equal(text(out), `data: {"content":"é"}\n\ndata: {"error":{"message":"${REDACTED}"}}\n\n`);
});
