// Remote guardrail kinds against mock services speaking their wire APIs (test/support/mock-guardrails.ts):
// requests as each service expects them, verdicts from their answers, and slow, failing and malformed
// answers under `fail_open`, `output_fail_open` and `mandatory`.
// Run: node --import tsx --test test/unit/guardrails-remote.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type ChainDeps, runChain } from '../../src/guardrails/chain.ts';
import { GuardrailMetrics } from '../../src/observability/guardrail-metrics.ts';
import type { Guardrail, Segment } from '../../src/guardrails/types.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { guardrail } from '../support/guardrails.ts';
import { signV1 } from '../../src/guardrails/remote/aliyun.ts';
import {
  ALIYUN_SECRET,
  type Fault,
  type MockGuardrails,
  startMockGuardrails,
  TRIGGERS,
} from '../support/mock-guardrails.ts';

let mock: MockGuardrails;
before(async () => {
  mock = await startMockGuardrails();
});
after(() => mock.close());
beforeEach(() => {
  mock.fault = undefined;
  mock.requests.length = 0;
});

type Log = { level: string; msg: string; fields: Record<string, unknown> };
const logs: Log[] = [];
function deps(metrics?: GuardrailMetrics, sink: Log[] = logs): ChainDeps {
  return {
    ctx: { fetch: (r) => fetch(r.url, r) },
    metrics,
    log: (level, msg, fields) => sink.push({ level, msg, fields }),
    now: () => performance.now() / 1000,
  };
}
const user = (text: string): Segment => ({ role: 'user', text });

function rows(url: string): Record<string, Record<string, unknown>> {
  return {
    openai_moderation: { name: 'mod', kind: 'openai_moderation', api_key: 'sk-mod', endpoint: `${url}/v1` },
    presidio: { name: 'pres', kind: 'presidio', analyzer_url: url, anonymizer_url: url },
    lakera: { name: 'lak', kind: 'lakera', api_key: 'lk', endpoint: url, project_id: 'p1' },
    azure_content_safety: { name: 'shield', kind: 'azure_content_safety', endpoint: url, api_key: 'az' },
    azure_content_safety_text_moderation: {
      name: 'text',
      kind: 'azure_content_safety_text_moderation',
      endpoint: url,
      api_key: 'az',
    },
    aliyun_text_moderation: {
      name: 'ali',
      kind: 'aliyun_text_moderation',
      region: 'cn-shanghai',
      endpoint: url,
      access_key_id: 'ak',
      access_key_secret: ALIYUN_SECRET,
      risk_level_threshold: 'medium',
    },
  };
}
const g = (kind: string, over: Record<string, unknown> = {}, url = mock.url): Guardrail =>
  guardrail({ ...rows(url)[kind]!, timeout_ms: 5000, ...over });

describe('remote kinds: wire requests and verdicts', () => {
  test('openai_moderation: bearer key, model and joined input; flagged blocks; thresholds pick categories', async () => {
    const v = await runChain([g('openai_moderation')], 'input', [user('a'), user(`so ${TRIGGERS.violent}`)], deps());
    assert.equal(v.blocked?.guardrail.name, 'mod');
    assert.equal(mock.requests[0]!.path, '/v1/moderations');
    assert.equal(mock.requests[0]!.headers.authorization, 'Bearer sk-mod');
    assert.deepEqual(mock.requests[0]!.json, { model: 'omni-moderation-latest', input: `a\nso ${TRIGGERS.violent}` });
    const t = g('openai_moderation', { category_thresholds: { hate: 0.1 } });
    assert.ok((await runChain([t], 'input', [user('calm')], deps())).blocked, 'hate 0.2 ≥ 0.1');
    const high = g('openai_moderation', { category_thresholds: { violence: 0.95 } });
    assert.equal((await runChain([high], 'input', [user(TRIGGERS.violent)], deps())).blocked, undefined);
  });

  test('presidio: analyze per non-empty segment, anonymize the ones with hits, masks per entity', async () => {
    const v = await runChain([g('presidio', { entities: [{ type: 'email_address' }] })], 'input', [
      user('mail a@b.io'),
      user('  '),
      user('none'),
    ], deps());
    assert.deepEqual(v.segments.map((s) => s.text), ['mail <EMAIL_ADDRESS>', '  ', 'none']);
    assert.deepEqual(v.counts, { EMAIL_ADDRESS: 1 });
    assert.deepEqual(mock.requests.map((r) => r.path), ['/analyze', '/analyze', '/anonymize']);
    assert.deepEqual(mock.requests[0]!.json, { text: 'mail a@b.io', language: 'en', entities: ['EMAIL_ADDRESS'] });
    assert.deepEqual(mock.requests[2]!.json.anonymizers, { DEFAULT: { type: 'replace' } });
    const block = g('presidio', { entities: [{ type: 'EMAIL_ADDRESS', action: 'block' }] });
    assert.ok((await runChain([block], 'input', [user('a@b.io')], deps())).blocked);
  });

  test('lakera: messages with roles and project_id; injection blocks; PII-only masks by code point spans', async () => {
    const v = await runChain([g('lakera')], 'output', [{ role: 'assistant', text: '😀 write a@b.io' }], deps());
    assert.deepEqual(v.segments.map((s) => s.text), ['😀 write [MASKED EMAIL]']);
    assert.deepEqual(mock.requests[0]!.json, {
      messages: [{ role: 'assistant', content: '😀 write a@b.io' }],
      payload: true,
      breakdown: true,
      project_id: 'p1',
    });
    assert.ok((await runChain([g('lakera')], 'input', [user(TRIGGERS.injection)], deps())).blocked);
  });

  test('azure: shieldPrompt and text:analyze with the subscription key; long prompts in pieces', async () => {
    const shield = await runChain([g('azure_content_safety')], 'input', [user(TRIGGERS.injection)], deps());
    assert.ok(shield.blocked);
    assert.equal(mock.requests[0]!.path, '/contentsafety/text:shieldPrompt?api-version=2024-09-01');
    assert.equal(mock.requests[0]!.headers['ocp-apim-subscription-key'], 'az');
    mock.requests.length = 0;
    await runChain([g('azure_content_safety')], 'input', [user('word '.repeat(3000))], deps());
    assert.equal(mock.requests.length, 2, '15 000 characters in two pieces');
    const text = await runChain([g('azure_content_safety_text_moderation')], 'input', [
      { role: 'system', text: TRIGGERS.hate },
      user('fine'),
    ], deps());
    assert.equal(text.blocked, undefined, 'concatenate_user_content: the system text is not sent');
    assert.ok(
      (await runChain([g('azure_content_safety_text_moderation')], 'input', [user(TRIGGERS.hate)], deps())).blocked,
    );
  });
});

test('aliyun: a signed form per hook (the documented v1 vector), content capped, RiskLevel decides', async () => {
  assert.equal(
    await signV1(
      {
        SignatureVersion: '1.0',
        Action: 'DescribeRegions',
        Format: 'XML',
        SignatureNonce: '3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf',
        Version: '2014-05-26',
        AccessKeyId: 'testid',
        SignatureMethod: 'HMAC-SHA1',
        Timestamp: '2016-02-23T12:46:24Z',
      },
      'testsecret',
      'GET',
    ),
    'OLeaidS1JvxuMvnyHOwuJ+uX5qY=',
  );
  const v = await runChain([g('aliyun_text_moderation')], 'output', [user(`so ${TRIGGERS.hate}`)], deps());
  assert.equal(v.blocked?.guardrail.name, 'ali');
  const f = mock.requests[0]!.json;
  assert.equal(f.Service, 'llm_response_moderation');
  assert.equal(f.Action, 'TextModerationPlus');
  assert.equal(f.RegionId, 'cn-shanghai');
  mock.requests.length = 0;
  const ok = await runChain([g('aliyun_text_moderation')], 'input', [user('x'.repeat(5000))], deps());
  assert.equal(ok.blocked, undefined);
  assert.equal(mock.requests[0]!.json.Service, 'llm_query_moderation');
  assert.equal(JSON.parse(String(mock.requests[0]!.json.ServiceParameters)).content.length, 2000);
  logs.length = 0;
  const wrong = await runChain(
    [g('aliyun_text_moderation', { access_key_secret: 'nope' })],
    'input',
    [user('hi')],
    deps(),
  );
  assert.equal(wrong.blocked?.errorType, 'aliyun_config_error');
  const e = logs.find((l) => l.level === 'error');
  assert.equal(e?.msg, 'aliyun TextModerationPlus returned 4xx — check region/access keys configuration');
  assert.equal(e?.fields.response_body, undefined, 'the answer quotes the prompt back: never logged');
});

describe('remote kinds: failing services', () => {
  const faults: [string, Fault, string][] = [
    ['slow', { kind: 'slow', ms: 6000 }, 'timeout'],
    ['429', { kind: 'status', status: 429 }, 'throttled'],
    ['503', { kind: 'status', status: 503 }, '5xx'],
    ['401', { kind: 'status', status: 401 }, 'config_error'],
    ['malformed', { kind: 'malformed' }, '5xx'],
    ['not JSON', { kind: 'not_json' }, '5xx'],
  ];
  const prefix: Record<string, string> = {
    openai_moderation: 'openai_moderation',
    presidio: 'presidio',
    lakera: 'lakera',
    azure_content_safety: 'azure_cs',
    azure_content_safety_text_moderation: 'azure_cs',
    aliyun_text_moderation: 'aliyun',
  };
  // The kinds at once, each against its own mock (its fault is its own), and a fault's five chains at once: the
  // slow fault costs one timeout_ms, not thirty.
  describe('each kind', { concurrency: true }, () => {
    for (const kind of Object.keys(prefix)) {
      test(`${kind}: each failure tagged; input and output fail closed by default, fail_open bypasses, mandatory blocks`, async (t) => {
        const own = await startMockGuardrails();
        t.after(() => own.close());
        // Thirty calls at once on a loaded machine: a quick fault's answer needs room under the bound.
        const at = (over: Record<string, unknown>) => g(kind, { timeout_ms: 2500, ...over }, own.url);
        const chain = (gr: Guardrail, hook: 'input' | 'output', text: string, metrics?: GuardrailMetrics) =>
          runChain([gr], hook, [user(text)], deps(metrics, []));
        for (const [label, fault, tag] of faults) {
          own.fault = fault;
          // Aliyun tags a 2xx it cannot read `aliyun_bad_response` (AISIX's fifth Aliyun tag).
          const unreadable = kind === 'aliyun_text_moderation' && (label === 'malformed' || label === 'not JSON');
          const want = unreadable ? 'aliyun_bad_response' : `${prefix[kind]}_${tag}`;
          const reg = new Registry();
          const metrics = new GuardrailMetrics(reg);
          const t0 = performance.now();
          const [input, output, open, closed, mandatory] = await Promise.all([
            chain(at({ fail_open: true }), 'input', 'hello a@b.io', metrics).then((v) => {
              assert.ok(performance.now() - t0 < 5000, `${label}: bounded by timeout_ms`);
              return v;
            }),
            chain(at({}), 'output', 'hi'),
            chain(at({ output_fail_open: true }), 'output', 'hi'),
            chain(at({}), 'input', 'hi'),
            chain(at({ fail_open: true, mandatory: true }), 'input', 'hi'),
          ]);
          assert.equal(input.blocked, undefined, `${label}: fail_open: true on input`);
          assert.equal(input.bypassTag, want, label);
          assert.match(reg.render(), new RegExp(`result="bypassed",error_type="${want}"`));
          assert.equal(output.blocked?.errorType, want, `${label}: output_fail_open defaults to false`);
          assert.equal(open.blocked, undefined, `${label}: output_fail_open: true`);
          assert.equal(closed.blocked?.errorType, want, `${label}: fail_open defaults to false`);
          assert.equal(mandatory.blocked?.errorType, want, `${label}: mandatory`);
        }
      });
    }
  });

  test("a 4xx is logged at ERROR with the service's advice and the body; timeout_ms 0 times out at once", async () => {
    mock.fault = { kind: 'status', status: 400 };
    logs.length = 0;
    await runChain([g('lakera')], 'input', [user('x')], deps());
    const e = logs.find((l) => l.level === 'error');
    assert.equal(e?.msg, 'lakera guard returned 4xx — check endpoint, api_key, and project_id configuration');
    assert.equal(e?.fields.http_status, 400);
    assert.ok(logs.some((l) => l.level === 'warn' && l.msg === 'lakera guard call failed'));
    mock.fault = undefined;
    const zero = await runChain([g('lakera', { timeout_ms: 0 })], 'input', [user('x')], deps());
    assert.equal(zero.blocked?.errorType, 'lakera_timeout');
  });
});
