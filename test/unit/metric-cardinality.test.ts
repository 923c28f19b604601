// Callers cannot grow the metrics or the logs (docs/security.md "What callers cannot grow"): a wildcard
// alias's series are labelled by the configured row, never by the caller's text, and a model name is capped
// at admission. Through app.request() and the status app against a real mock upstream.
// Run: node --import tsx --test test/unit/metric-cardinality.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { MAX_MODEL_NAME } from '../../src/proxy/validate.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { labelsOf } from '../support/metrics.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith, type TestPlatform } from '../support/platform.ts';

const CALLER = 'sk-caller-bounds-1111';
const MESSAGES = [{ role: 'user', content: 'hi' }];

let mock: MockUpstream;
let platform: TestPlatform;
let proxy: ReturnType<typeof createProxyApp>;
let status: ReturnType<typeof createStatusApp>;

before(async () => {
  mock = await startMockUpstream();
  let gw;
  ({ gw, platform } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up-bounds, api_base: ${mock.base} }
models:
  - { display_name: gpt, provider_key: mock, model_name: gpt-up, retries: 0 }
  - { display_name: "oai/*", provider_key: mock, model_name: "*", retries: 0 }
api_keys:
  - { display_name: all, key_env: CALLER, allowed_models: ["*"] }
`,
    { env: { CALLER } },
  ));
  proxy = createProxyApp(gw);
  status = createStatusApp(gw);
});
after(() => mock.close());
beforeEach(() => {
  mock.requests.length = 0;
});

async function chat(body: unknown): Promise<{ status: number; text: string }> {
  const res = await proxy.request('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  }, { peer: '127.0.0.1:5555' });
  return { status: res.status, text: await res.text() };
}

const metrics = async () => (await status.request('/metrics')).text();

/** The series of an exposition (each sample line without its value), sorted. */
function seriesOf(text: string): string[] {
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.slice(0, l.lastIndexOf(' ')))
    .sort();
}

describe('wildcard names and long names', () => {
  test("300 names through a wildcard alias add no series: upstream_model is the row's pattern", async () => {
    assert.equal((await chat({ model: 'oai/warm-up', messages: MESSAGES })).status, 200);
    const before = await metrics();
    mock.requests.length = 0;
    for (let i = 0; i < 300; i++) {
      const r = await chat({ model: `oai/card-${i}-${'a'.repeat(200)}`, messages: MESSAGES });
      assert.equal(r.status, 200);
    }
    assert.equal(mock.requests.length, 300);
    assert.equal(mock.requests[299]!.json!.model, `card-299-${'a'.repeat(200)}`); // the upstream still gets the name
    const now = await metrics();
    assert.deepEqual(seriesOf(now), seriesOf(before));
    // Only values changed (a counter's digits): the exposition's size stays within a few bytes per series.
    assert.ok(Math.abs(now.length - before.length) < 4 * seriesOf(now).length, `${before.length} → ${now.length}`);
    const line = now.split('\n').find((l) => l.startsWith('aisix_proxy_requests_total{') && l.includes('"oai/*"'))!;
    assert.equal(labelsOf(line).upstream_model, '*');
    assert.equal(labelsOf(line).model, 'oai/*');
  });

  test(`a model name over ${MAX_MODEL_NAME} characters is a 400 naming the cap, before it is logged or counted`, async () => {
    const ok = await chat({ model: `oai/${'b'.repeat(MAX_MODEL_NAME - 4)}`, messages: MESSAGES });
    assert.equal(ok.status, 200); // exactly at the cap
    // The first refusal adds its own fixed series (`model="unresolved"`, status 400); the names add none.
    assert.equal((await chat({ model: 'x'.repeat(MAX_MODEL_NAME + 1), messages: MESSAGES })).status, 400);
    const before = await metrics();
    const logsBefore = platform.logs.length;
    for (let i = 0; i < 10; i++) {
      const r = await chat({ model: `oai/${i}${'x'.repeat(50 * 1024)}`, messages: MESSAGES });
      assert.equal(r.status, 400);
      assert.deepEqual(JSON.parse(r.text), {
        error: {
          message: `\`model\` must be at most ${MAX_MODEL_NAME} characters (it has ${4 + 1 + 50 * 1024})`,
          type: 'invalid_request_error',
        },
      });
    }
    assert.equal(mock.requests.length, 1);
    const now = await metrics();
    assert.deepEqual(seriesOf(now), seriesOf(before));
    assert.ok(Math.abs(now.length - before.length) < 4 * seriesOf(now).length, `${before.length} → ${now.length}`);
    // The access log has a line per request, none carrying the name.
    const lines = platform.logs.slice(logsBefore).filter((l) => l.msg === 'proxy request completed');
    assert.equal(lines.length, 10);
    for (const l of lines) assert.ok(JSON.stringify(l).length < 2048, `a long access-log line: ${JSON.stringify(l)}`);
  });
});
