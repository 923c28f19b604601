// `kind: bedrock` against a mock ApplyGuardrail that verifies SigV4 as AWS does (test/support/
// mock-bedrock-guardrail.ts): the signed request and its shape, allow / block / mask verdicts, the failure
// tags under `fail_open`, `output_fail_open` and `mandatory`, `latency_mode` timed and serial, and the
// kind through the proxy app with `bedrock_endpoint_url`.
// Run: node --import tsx --test test/unit/guardrails-bedrock.test.ts
import assert from 'node:assert/strict';
import type * as http from 'node:http';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type ChainDeps, runChain } from '../../src/guardrails/chain.ts';
import { buildGuardrail } from '../../src/guardrails/build.ts';
import { GuardrailSchema } from '../../src/guardrails/schema.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import type { Guardrail, Segment } from '../../src/guardrails/types.ts';
import { GuardrailMetrics } from '../../src/observability/guardrail-metrics.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { guardrail } from '../support/guardrails.ts';
import {
  ATTACK,
  AWS,
  awsFault,
  GUARDRAIL,
  type MockBedrockGuardrail,
  startMockBedrockGuardrail,
} from '../support/mock-bedrock-guardrail.ts';
import { sendJson } from '../support/mock-cloud.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';
import { latch, until } from '../support/until.ts';

let mock: MockBedrockGuardrail;
before(async () => {
  mock = await startMockBedrockGuardrail();
});
after(() => mock.close());
beforeEach(() => {
  mock.requests.length = 0;
  mock.rejected.length = 0;
});

const logs: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
function deps(metrics?: GuardrailMetrics): ChainDeps {
  return {
    ctx: { fetch: (r) => fetch(r.url, r), bedrockEndpointUrl: mock.url },
    metrics,
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    now: () => performance.now() / 1000,
  };
}
const user = (text: string): Segment => ({ role: 'user', text });

const ROW = {
  name: 'aws',
  kind: 'bedrock',
  aws_credentials: { kind: 'static', access_key_id: AWS.access_key_id, secret_access_key: AWS.secret_access_key },
  guardrail_id: GUARDRAIL.id,
  guardrail_version: GUARDRAIL.version,
  region: AWS.region,
  latency_mode: { kind: 'timed', timeout_ms: 3000 },
};
const g = (over: Record<string, unknown> = {}): Guardrail => guardrail({ ...ROW, ...over });

describe('bedrock: the signed ApplyGuardrail call and its verdicts', () => {
  test('a clean prompt: one signed call per hook, one text block per non-empty segment; NONE allows', async () => {
    const v = await runChain([g()], 'input', [user('hello'), user(''), { role: 'system', text: 'be kind' }], deps());
    assert.equal(v.blocked, undefined);
    assert.equal(v.bypassTag, undefined);
    assert.equal(v.masked, false);
    assert.deepEqual(mock.rejected, [], 'the signature verifies');
    assert.equal(mock.requests.length, 1);
    const r = mock.requests[0]!;
    assert.equal(r.path, `/guardrail/${GUARDRAIL.id}/version/${GUARDRAIL.version}/apply`);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.match(
      String(r.headers.authorization),
      /Credential=AKIDMOCKEXAMPLE7Q\/\d{8}\/us-west-2\/bedrock\/aws4_request/,
    );
    assert.deepEqual(r.json, {
      source: 'INPUT',
      content: [{ text: { text: 'hello' } }, { text: { text: 'be kind' } }],
    });
    await runChain([g()], 'output', [{ role: 'assistant', text: 'an answer' }], deps());
    assert.equal(mock.requests[1]!.json!.source, 'OUTPUT');
  });

  test('a content filter blocks; a BLOCKED PII entity blocks; only ANONYMIZED masks by position', async () => {
    const attack = await runChain([g()], 'input', [user(ATTACK)], deps());
    assert.equal(attack.blocked?.guardrail.name, 'aws');
    assert.match(attack.blocked!.reason, /contentPolicy/);
    const ssn = await runChain([g()], 'input', [user('mine is 123-45-6789, a@b.io')], deps());
    assert.match(ssn.blocked!.reason, /sensitiveInformationPolicy/);
    const masked = await runChain([g()], 'output', [
      { role: 'assistant', text: 'write to a@b.io' },
      { role: 'assistant', text: '' },
      { role: 'assistant', text: 'or c@d.io, e@f.io' },
    ], deps());
    assert.equal(masked.blocked, undefined);
    assert.deepEqual(masked.segments.map((s) => s.text), ['write to {EMAIL}', '', 'or {EMAIL}, {EMAIL}']);
    assert.deepEqual(masked.counts, { EMAIL: 3 });
  });

  test('an intervention whose masked text cannot be mapped back is refused, never released', async () => {
    mock.script((_req, res) =>
      sendJson(res, 200, {
        action: 'GUARDRAIL_INTERVENED',
        outputs: [{ text: 'one text for two blocks' }],
        assessments: [{ sensitiveInformationPolicy: { piiEntities: [{ type: 'EMAIL', action: 'ANONYMIZED' }] } }],
      })
    );
    const v = await runChain([g()], 'input', [user('a@b.io'), user('c@d.io')], deps());
    assert.match(v.blocked!.reason, /cannot be mapped back/);
  });

  test('the row: latency_mode is required, timed bounds 100…5000, credentials static only', () => {
    const parse = (over: Record<string, unknown>) => GuardrailSchema.safeParse({ ...ROW, ...over }).success;
    assert.equal(parse({ latency_mode: undefined }), false);
    assert.equal(parse({ latency_mode: { kind: 'timed', timeout_ms: 99 } }), false);
    assert.equal(parse({ latency_mode: { kind: 'timed', timeout_ms: 5001 } }), false);
    assert.equal(parse({ latency_mode: { kind: 'serial' } }), true);
    assert.equal(parse({ aws_credentials: { kind: 'role_arn', role_arn: 'x' } }), false);
    assert.equal(parse({ guardrail_version: 'x'.repeat(17) }), false);
    const built = buildGuardrail('id', GuardrailSchema.parse(ROW));
    assert.ok(built.ok && built.guardrail);
    assert.equal(built.guardrail.outputFailOpen, false, 'output_fail_open defaults to false');
    assert.equal(built.guardrail.failOpen, false, 'fail_open defaults to false on a remote kind');
  });
});

describe('values that reach a URL are held to their grammar', () => {
  test('a region, guardrail id or version that could leave the host or path is refused, the field named', async () => {
    const bedrock = {
      kind: 'bedrock',
      aws_credentials: { kind: 'static', access_key_id: 'a', secret_access_key: 's' },
      guardrail_id: 'gr1',
      guardrail_version: '1',
      region: 'us-east-1',
      latency_mode: { kind: 'serial' },
    };
    const rows = [
      { ...bedrock, name: 'b0', region: 'evil.example#' },
      { ...bedrock, name: 'b1', guardrail_id: '..' },
      { ...bedrock, name: 'b2', guardrail_version: '../../x' },
      { ...bedrock, name: 'b3', guardrail_id: 'a/b' },
      {
        name: 'ali',
        kind: 'aliyun_text_moderation',
        access_key_id: 'a',
        access_key_secret: 's',
        region: 'cn-shanghai.evil.example/',
      },
    ];
    const r = await loadResourcesFile('/r.yaml', JSON.stringify({ _format_version: '1', guardrails: rows }), {});
    assert.equal(r.ok, false);
    if (r.ok) return;
    const region = 'must be a region name such as us-east-1 or cn-shanghai (lowercase letters, digits and single "-")';
    const id = 'must be a Bedrock guardrail id (letters, digits, "-" and "_") or its ARN';
    assert.deepEqual(r.report.format().split('\n').slice(1), [
      `  - guardrails[0] ("b0"): region: ${region}`,
      `  - guardrails[1] ("b1"): guardrail_id: ${id}`,
      '  - guardrails[2] ("b2"): guardrail_version: must be a version number (1-99999999) or DRAFT',
      `  - guardrails[3] ("b3"): guardrail_id: ${id}`,
      `  - guardrails[4] ("ali"): region: ${region}`,
    ]);
  });

  test('AWS and Aliyun names, an ARN and DRAFT still load', () => {
    const parse = (over: Record<string, unknown>) => GuardrailSchema.safeParse({ ...ROW, ...over }).success;
    assert.equal(parse({ region: 'ap-southeast-1', guardrail_id: 'abc123xyz', guardrail_version: '12' }), true);
    assert.equal(parse({ guardrail_id: 'arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123' }), true);
    assert.equal(parse({ guardrail_version: 'DRAFT' }), true);
    for (const bad of ['', '.', 'us-east-1.', 'US-EAST-1', 'us_east_1', 'us--east']) {
      assert.equal(parse({ region: bad }), false, bad);
    }
    for (const bad of ['0', 'draft', '1.0', '%2e%2e']) assert.equal(parse({ guardrail_version: bad }), false, bad);
  });
});

// Room for a quick fault's answer on a loaded machine; the slow fault waits it out once.
const TIMED_1S = { kind: 'timed', timeout_ms: 1000 };

describe('bedrock: failing service', () => {
  /** A handler that answers only when the test says so (or the server closes). */
  const held = (release: Promise<void>) => async (_req: unknown, res: http.ServerResponse) => {
    await release;
    if (!res.destroyed) sendJson(res, 200, { action: 'NONE', outputs: [], assessments: [] });
  };
  const faults: [string, () => void, string][] = [
    ['slow', () => mock.script(held(new Promise(() => {}))), 'bedrock_timeout'],
    ['429', () => mock.script(awsFault(429, 'ThrottlingException')), 'bedrock_throttled'],
    ['500', () => mock.script(awsFault(500, 'InternalServerException')), 'bedrock_5xx'],
    ['403', () => mock.script(awsFault(403, 'AccessDeniedException')), 'bedrock_5xx'],
    ['not JSON', () => mock.script((_r, res) => void res.end('<html>')), 'bedrock_5xx'],
    ['no action', () => mock.script((_r, res) => sendJson(res, 200, { outputs: [] })), 'bedrock_5xx'],
  ];
  test('each failure tagged; both hooks fail closed by default, fail_open bypasses, mandatory blocks', async () => {
    const g = (over: Record<string, unknown> = {}) => guardrail({ ...ROW, latency_mode: TIMED_1S, ...over });
    for (const [label, fault, want] of faults) {
      const reg = new Registry();
      // One scripted fault per call, and the five calls at once: a slow fault costs one timeout, not five.
      for (let i = 0; i < 5; i++) fault();
      const t0 = performance.now();
      const [input, output, open, closed, mandatory] = await Promise.all([
        runChain([g({ fail_open: true })], 'input', [user('hi')], deps(new GuardrailMetrics(reg))).then((v) => {
          assert.ok(performance.now() - t0 < 2500, `${label}: bounded by timeout_ms`);
          return v;
        }),
        runChain([g()], 'output', [user('hi')], deps()),
        runChain([g({ output_fail_open: true })], 'output', [user('hi')], deps()),
        runChain([g()], 'input', [user('hi')], deps()),
        runChain([g({ fail_open: true, mandatory: true })], 'input', [user('hi')], deps()),
      ]);
      assert.equal(input.blocked, undefined, `${label}: fail_open: true on input`);
      assert.equal(input.bypassTag, want, label);
      assert.match(reg.render(), new RegExp(`kind="bedrock",phase="input",result="bypassed",error_type="${want}"`));
      assert.equal(output.blocked?.errorType, want, `${label}: output_fail_open defaults to false`);
      assert.equal(open.blocked, undefined, `${label}: output_fail_open: true`);
      assert.equal(closed.blocked?.errorType, want, `${label}: fail_open defaults to false`);
      assert.equal(mandatory.blocked?.errorType, want, `${label}: mandatory`);
    }
    assert.ok(logs.some((l) => l.level === 'warn' && l.msg === 'bedrock ApplyGuardrail call failed'));
  });

  test('latency_mode serial waits for the answer past a timed bound', async () => {
    const release = latch();
    mock.script(held(release.promise), held(new Promise(() => {})));
    let settled = false;
    const serial = runChain([g({ latency_mode: { kind: 'serial' } })], 'input', [user('hi')], deps()).finally(() => {
      settled = true;
    });
    await until(() => mock.requests.length === 1, 5000, 'the serial call to arrive');
    const timed = await runChain(
      [g({ latency_mode: { kind: 'timed', timeout_ms: 100 } })],
      'input',
      [user('hi')],
      deps(),
    );
    assert.equal(timed.blocked?.errorType, 'bedrock_timeout', 'a timed row gave up meanwhile');
    assert.equal(settled, false, 'the serial row still waits');
    release.resolve();
    const r = await serial;
    assert.equal(r.blocked, undefined);
    assert.equal(r.bypassTag, undefined, 'no timeout of its own');
  });
});

describe('bedrock through the proxy app (bedrock_endpoint_url)', () => {
  test('input masked before the upstream; output checked; an attack refused with 422', async () => {
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: local, provider: echo }]
models: [{ display_name: e, model_name: echo-1, provider_key: local }]
api_keys: [{ display_name: caller, key_env: CALLER, allowed_models: ["*"] }]
guardrails:
  - name: aws
    kind: bedrock
    aws_credentials: { kind: static, access_key_id: ${AWS.access_key_id}, secret_access_key: ${AWS.secret_access_key} }
    guardrail_id: ${GUARDRAIL.id}
    guardrail_version: ${GUARDRAIL.version}
    region: ${AWS.region}
    latency_mode: { kind: timed, timeout_ms: 2000 }
`,
      { config: `${BASE_CONFIG}bedrock_endpoint_url: ${mock.url}\n`, env: { CALLER: 'sk-in-process' } },
    );
    const app = createProxyApp(gw);
    const ask = (content: string) =>
      app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer sk-in-process', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'e', messages: [{ role: 'user', content }] }),
      });
    const ok = await ask('mail me at a@b.io');
    assert.equal(ok.status, 200);
    const answer = await ok.json() as { choices: { message: { content: string } }[] };
    assert.equal(answer.choices[0]!.message.content, 'mail me at {EMAIL}', 'the echo upstream saw the masked prompt');
    assert.deepEqual(mock.requests.map((r) => r.json!.source), ['INPUT', 'OUTPUT']);
    assert.deepEqual(mock.rejected, []);
    const refused = await ask(ATTACK);
    assert.equal(refused.status, 422);
    assert.equal(
      await refused.text(),
      `{"error":{"message":"request blocked by content policy (guardrail 'aws')","type":"content_filter"}}`,
    );
    gw.stop();
  });
});
