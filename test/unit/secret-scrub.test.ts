// Secrets in answers and logs (docs/security.md "Secrets in answers and logs"): an upstream's or a service's
// words are scrubbed of every configured secret in every encoding an echo may use, before anything is cut,
// and a cut never leaves the start of a secret behind. Through app.request() against real mock upstreams.
// Run: node --import tsx --test test/unit/secret-scrub.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { upstreamErrorBody } from '../../src/http/errors.ts';
import { REDACTED, scrubberFor, scrubText } from '../../src/http/scrub.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';
import { until } from '../support/until.ts';

const KEY = 'sk-test-SECRETKEY-0123456789abcdef+/=';
const MOD_KEY = 'sk-mod-SECRET-MODERATION-9999';
const EXPORT_TOKEN = 'otlp-EXPORT-TOKEN-5555';
const CALLER = 'sk-caller-SCRUB-1111';

/** Every copy of `secret` an echo may carry, as the review's mock sent them. */
function echoes(secret: string): string {
  const b64 = Buffer.from(secret).toString('base64');
  return `raw=${secret} b64=${b64} b64url=${Buffer.from(secret).toString('base64url')} url=${
    encodeURIComponent(secret)
  } json=${JSON.stringify(secret)} lower=${secret.toLowerCase()} upper=${secret.toUpperCase()}`;
}

/** What must not appear: the secret and its copies, in any case. */
function assertNoSecret(text: string, secret: string): void {
  const lower = text.toLowerCase();
  for (const copy of [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)]) {
    assert.equal(lower.includes(copy.toLowerCase()), false, `a copy of the secret in: ${text}`);
  }
  for (const copy of [Buffer.from(secret).toString('base64'), Buffer.from(secret).toString('base64url')]) {
    assert.equal(text.includes(copy.replace(/=+$/, '')), false, `a base64 copy of the secret in: ${text}`);
  }
}

describe('the scrubber', () => {
  test('raw, base64, base64url, URL-encoded, JSON-escaped and re-cased copies are all redacted', () => {
    const out = scrubText(echoes(KEY), [KEY]);
    assertNoSecret(out, KEY);
    assert.equal(
      out,
      `raw=${REDACTED} b64=${REDACTED} b64url=${REDACTED} url=${REDACTED} json="${REDACTED}" lower=${REDACTED} upper=${REDACTED}`,
    );
    // Percent-escapes in lower case too (`%2b%2f%3d`).
    assert.equal(scrubText(`u=${encodeURIComponent(KEY).toLowerCase()}`, [KEY]), `u=${REDACTED}`);
    // The form encoding, and a JSON encoder that escapes `/`.
    assert.equal(scrubText(`f=${new URLSearchParams({ k: KEY }).toString().slice(2)}`, [KEY]), `f=${REDACTED}`);
    assert.equal(scrubText(`j=${KEY.replace('/', '\\/')}`, [KEY]), `j=${REDACTED}`);
  });

  test('overlapping secrets are covered whole, whichever is found first', () => {
    // `abcdefgh` then `efghijkl` overlapping on `efgh`: nothing of either is left.
    assert.equal(scrubText('x abcdefghijkl y', ['abcdefgh', 'efghijkl']), `x ${REDACTED} y`);
    assert.equal(scrubText('aaaaaaaa', ['aaaaaa']), REDACTED);
  });

  test('the cut comes after the scrub, and a tail that starts a secret is dropped', () => {
    const s = scrubberFor(undefined, [KEY], undefined);
    // The review's reproduction: 480 × x, then the key; the old cut at 500 left `sk-test-SECRETK`.
    const message = `${'x'.repeat(480)} key=${KEY}`;
    assert.equal(s(message, 500), `${'x'.repeat(480)} key=${REDACTED}`);
    // A text that only starts the key (an echo the upstream cut itself), cut anywhere: never a piece of it. The
    // text before it is `#`s, which no form of a secret begins with: the scrubber also knows the tokens other
    // files sharing this process minted (`ya29.…` from the Vertex tests), and a tail of `y`s begins those.
    for (let n = 1; n < KEY.length; n++) {
      const cut = s(`${'#'.repeat(20)}${KEY.slice(0, n)}${'z'.repeat(600)}`, 20 + n);
      assert.equal(cut, '#'.repeat(20), `prefix of ${n}`);
    }
    // Case folded too: a lower-cased start of the key is dropped as well.
    assert.equal(s(`${'#'.repeat(10)}${KEY.slice(0, 12).toLowerCase()}${'z'.repeat(600)}`, 22), '#'.repeat(10));
  });

  test('upstreamErrorBody: every field scrubbed whole before it is cut to 500 characters', () => {
    const s = scrubberFor(undefined, [KEY], undefined);
    const body = JSON.stringify({ error: { message: `${'x'.repeat(490)}${KEY}`, type: `t ${KEY}`, code: KEY } });
    const e = JSON.parse(upstreamErrorBody('openai', 400, body, s)).error;
    assert.equal(e.message, `${'x'.repeat(490)}${REDACTED}`.slice(0, 500));
    assert.equal(e.type, `t ${REDACTED}`);
    assert.equal(e.code, REDACTED);
  });
});

describe('through the gateway', () => {
  let mock: MockUpstream;
  let moderation: MockUpstream;
  let platform: TestPlatform;
  let app: ReturnType<typeof createProxyApp>;

  before(async () => {
    mock = await startMockUpstream();
    moderation = await startMockUpstream();
    // No attachment rows: the moderation guardrail checks every call (and passes it).
    moderation.setDefault({ body: { id: 'modr', results: [{ flagged: false, categories: {}, category_scores: {} }] } });
    const resources = `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: "${KEY}", api_base: ${mock.base} }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0 }
  - { display_name: "oai/*", provider_key: mock, model_name: "*", retries: 0 }
api_keys:
  - { display_name: all, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - { name: mod, kind: openai_moderation, api_key: "${MOD_KEY}", endpoint: ${moderation.base}, created_at: "2024-01-01T00:00:00Z" }
observability_exporters:
  - name: traces
    kind: otlp_http
    endpoint: http://127.0.0.1:9/v1/traces
    sample_rate: 0
    headers: { authorization: "Bearer ${EXPORT_TOKEN}" }
`;
    let gw;
    ({ gw, platform } = await gatewayWith(resources, {
      config: `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`,
      env: { CALLER },
    }));
    app = createProxyApp(gw);
  });
  after(async () => {
    await mock.close();
    await moderation.close();
  });
  beforeEach(() => {
    mock.requests.length = 0;
    moderation.requests.length = 0;
  });

  async function chat(model: string): Promise<{ status: number; text: string }> {
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    }, { peer: '127.0.0.1:5555' });
    return { status: res.status, text: await res.text() };
  }

  test('an upstream 401 that echoes the key in every encoding: none of it reaches the caller', async () => {
    mock.script({ status: 401, body: { error: { message: echoes(KEY), type: 'invalid_request_error' } } });
    const r = await chat('gpt');
    assert.equal(r.status, 401);
    assertNoSecret(r.text, KEY);
    assert.match(JSON.parse(r.text).error.message, /^raw=\[redacted\] b64=\[redacted\] b64url=\[redacted\] url=/);
  });

  test("the exporter's header token and the guardrail's key are scrubbed from an upstream's echo too", async () => {
    mock.script({ status: 400, body: { error: { message: `${echoes(EXPORT_TOKEN)} ${echoes(MOD_KEY)}` } } });
    const r = await chat('gpt');
    assert.equal(r.status, 400);
    assertNoSecret(r.text, EXPORT_TOKEN);
    assertNoSecret(r.text, MOD_KEY);
  });

  test('the length attack: wherever the cut falls, no piece of the key is answered', async () => {
    // The review's reproduction: n × x, then ` key=<key>`; n moves the old 500-character cut through the key
    // (a caller steers it with the length of a model name the upstream reflects).
    for (let n = 455; n <= 500; n++) {
      mock.script({ status: 400, body: { error: { message: `${'x'.repeat(n)} key=${KEY}` } } });
      const r = await chat('gpt');
      assert.equal(r.status, 400);
      const message: string = JSON.parse(r.text).error.message;
      assertNoSecret(message, KEY);
      // After `key=` comes the marker (whole, or cut) or nothing: never a character of the key.
      const tail = message.split(' key=')[1];
      if (tail !== undefined) assert.ok(REDACTED.startsWith(tail), `n=${n}: leaked after the cut: ${tail}`);
    }
  });

  test("a guardrail service's 4xx that echoes its key is logged scrubbed", async () => {
    moderation.script({ status: 401, body: { error: { message: echoes(MOD_KEY), type: 'invalid_request_error' } } });
    const before = platform.logs.length;
    const r = await chat('gpt');
    assert.equal(r.status, 422); // a remote kind fails closed by default: the failed check refuses
    await until(() => platform.logs.slice(before).some((l) => 'response_body' in l), 5000, 'the 4xx log line');
    const line = platform.logs.slice(before).find((l) => 'response_body' in l)!;
    assert.equal(line.http_status, 401);
    assertNoSecret(String(line.response_body), MOD_KEY);
    assert.match(String(line.response_body), /raw=\[redacted\] b64=\[redacted\]/);
    for (const l of platform.logs) assertNoSecret(JSON.stringify(l), MOD_KEY);
  });
});
