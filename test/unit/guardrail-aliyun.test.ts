// Aliyun's two guardrail kinds against a mock that checks requests as Aliyun does (test/support/mock-aliyun.ts):
// the signed form and its services, every 2000-character piece checked, the answer id as the session, the
// request id on every line an operator joins on, the failure tags, and Aliyun AI Guardrails' masks written
// back where they can be and refused where they cannot — in the chain and through app.request().
// Run: node --import tsx --test test/unit/guardrail-aliyun.test.ts
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type ChainDeps, runChain } from '../../src/guardrails/chain.ts';
import type { CheckContext, Guardrail, Segment } from '../../src/guardrails/types.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { guardrail } from '../support/guardrails.ts';
import {
  ALIYUN_KEY_ID,
  ALIYUN_SECRET,
  ALIYUN_WORDS,
  type MockAliyun,
  startMockAliyun,
} from '../support/mock-aliyun.ts';
import { chatCompletion, chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { gatewayWith } from '../support/platform.ts';
import { within } from '../support/until.ts';

let ali: MockAliyun;
let upstream: MockUpstream;
before(async () => {
  ali = await startMockAliyun();
  upstream = await startMockUpstream();
});
after(async () => {
  await ali.close();
  await upstream.close();
});
beforeEach(() => {
  ali.calls.length = 0;
  ali.fault = undefined;
  ali.idInBodyOnly = false;
  assert.deepEqual(ali.refused.splice(0), [], "every call passed Aliyun's checks");
});

type Log = { level: string; msg: string; fields: Record<string, unknown> };
function deps(logs: Log[] = [], ctx: Partial<CheckContext> = {}): ChainDeps {
  return {
    ctx: { fetch: (r) => fetch(r.url, r), ...ctx },
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    now: () => performance.now() / 1000,
  };
}
const user = (text: string): Segment => ({ role: 'user', text });
const bot = (text: string): Segment => ({ role: 'assistant', text });
const creds = () => ({
  region: 'cn-shanghai',
  endpoint: ali.url,
  access_key_id: ALIYUN_KEY_ID,
  access_key_secret: ALIYUN_SECRET,
});
const text = (over: Record<string, unknown> = {}): Guardrail =>
  guardrail({ name: 'tm', kind: 'aliyun_text_moderation', ...creds(), ...over });
const ai = (over: Record<string, unknown> = {}): Guardrail =>
  guardrail({ name: 'aig', kind: 'aliyun_ai_guardrail', ...creds(), ...over });

describe('aliyun_text_moderation', () => {
  test('input: llm_query_moderation with no session; output: the answer id as sessionId', async () => {
    assert.equal((await runChain([text()], 'input', [user('hello')], deps())).blocked, undefined);
    assert.equal(ali.calls[0]!.service, 'llm_query_moderation');
    assert.deepEqual(ali.calls[0]!.serviceParameters, { content: 'hello' });
    assert.equal(ali.calls[0]!.params.RegionId, 'cn-shanghai');
    await runChain([text()], 'output', [bot('hi')], deps([], { responseId: 'chatcmpl-42' }));
    assert.equal(ali.calls[1]!.service, 'llm_response_moderation');
    assert.deepEqual(ali.calls[1]!.serviceParameters, { content: 'hi', sessionId: 'chatcmpl-42' });
    await runChain([text()], 'output', [bot('hi')], deps());
    assert.match(String(ali.calls[2]!.serviceParameters.sessionId), /^[0-9a-f-]{36}$/, 'a fresh UUID without an id');
  });

  test('every 2000-character piece is checked: a risk past the first 2000 characters still blocks', async () => {
    const long = 'a'.repeat(4500) + ALIYUN_WORDS.risky;
    const logs: Log[] = [];
    const v = await runChain([text()], 'input', [user(long)], deps(logs));
    assert.equal(v.blocked?.guardrail.name, 'tm');
    assert.deepEqual(ali.calls.map((c) => [...String(c.serviceParameters.content)].length), [2000, 2000, 515]);
    const line = logs.find((l) => l.msg === 'aliyun text moderation blocked content');
    assert.deepEqual(line?.fields, {
      service: 'llm_query_moderation',
      aliyun_request_id: ali.calls[2]!.requestId,
      aliyun_code: 200,
      aliyun_risk_level: 'high',
      aliyun_labels: 'political_content',
      guardrail: 'tm',
    });
  });

  test('risk_level_threshold: medium blocks at medium, high lets medium through', async () => {
    const prompt = [user(`a ${ALIYUN_WORDS.medium}`)];
    assert.ok((await runChain([text({ risk_level_threshold: 'medium' })], 'input', prompt, deps())).blocked);
    assert.equal((await runChain([text()], 'input', prompt, deps())).blocked, undefined);
  });

  test('failures: tags, the request id on the WARN, a 4xx logged by its Code and never its body', async () => {
    const logs: Log[] = [];
    ali.fault = { kind: 'status', status: 403, body: { Code: 'Forbidden.RAM', Message: 'quoted secret prompt' } };
    const v = await runChain([text()], 'input', [user('secret prompt')], deps(logs));
    assert.equal(v.blocked?.errorType, 'aliyun_config_error', 'fail_open defaults to false on remote kinds');
    const err = logs.find((l) => l.level === 'error');
    assert.equal(err?.msg, 'aliyun TextModerationPlus returned 4xx — check region/access keys configuration');
    assert.deepEqual(err?.fields, {
      aliyun_request_id: ali.calls[0]!.requestId,
      http_status: 403,
      aliyun_code: 'Forbidden.RAM',
      guardrail: 'tm',
    });
    assert.ok(!JSON.stringify(logs).includes('quoted secret prompt'), 'the body is never logged');
    const warn = logs.find((l) => l.level === 'warn');
    assert.equal(warn?.msg, 'aliyun text moderation call failed');
    assert.equal(warn?.fields.aliyun_request_id, ali.calls[0]!.requestId);
    assert.equal(warn?.fields.failure, 'aliyun_config_error');

    const tag = async (fault: MockAliyun['fault'], over: Record<string, unknown> = {}) => {
      ali.fault = fault;
      return (await runChain([text({ fail_open: true, ...over })], 'input', [user('x')], deps())).bypassTag;
    };
    assert.equal(await tag({ kind: 'status', status: 429 }), 'aliyun_throttled');
    assert.equal(await tag({ kind: 'status', status: 503 }), 'aliyun_5xx');
    assert.equal(await tag({ kind: 'not_json' }), 'aliyun_bad_response');
    assert.equal(await tag({ kind: 'code', code: '200' }), 'aliyun_bad_response', 'a string Code');
    assert.equal(await tag({ kind: 'code', code: 401 }), 'aliyun_config_error');
    assert.equal(await tag({ kind: 'code', code: 500 }), 'aliyun_5xx');
    assert.equal(await tag({ kind: 'slow', ms: 300 }, { timeout_ms: 50 }), 'aliyun_timeout');
  });

  test('the request id comes from the body when the header is absent', async () => {
    ali.idInBodyOnly = true;
    const logs: Log[] = [];
    await runChain([text()], 'input', [user(ALIYUN_WORDS.risky)], deps(logs));
    // Found by its text: the last test's timed-out call can reach the mock after this test began.
    const call = ali.calls.find((c) => c.serviceParameters.content === ALIYUN_WORDS.risky);
    assert.equal(logs.find((l) => l.level === 'info')?.fields.aliyun_request_id, call?.requestId);
  });
});

describe('aliyun_ai_guardrail', () => {
  test('MultiModalGuard services per hook and service_level; Suggestion block blocks, pass allows', async () => {
    await runChain([ai()], 'input', [user('hi')], deps());
    await runChain([ai()], 'output', [bot('hi')], deps());
    await runChain([ai({ service_level: 'basic' })], 'input', [user('hi')], deps());
    await runChain([ai({ service_level: 'basic' })], 'output', [bot('hi')], deps());
    assert.deepEqual(ali.calls.map((c) => [c.params.Action, c.service]), [
      ['MultiModalGuard', 'query_security_check_pro'],
      ['MultiModalGuard', 'response_security_check_pro'],
      ['MultiModalGuard', 'query_security_check'],
      ['MultiModalGuard', 'response_security_check'],
    ]);
    assert.deepEqual(ali.calls[1]!.serviceParameters, { content: 'hi' }, 'a whole body is one call: no session');
    const logs: Log[] = [];
    const v = await runChain([ai()], 'input', [user(`x ${ALIYUN_WORDS.risky}`)], deps(logs));
    assert.equal(v.blocked?.reason, 'aliyun AI guardrail: suggestion block (row: aig)');
    const line = logs.find((l) => l.msg === 'aliyun AI guardrail blocked content');
    assert.equal(line?.fields.aliyun_request_id, ali.calls.at(-1)!.requestId);
    assert.equal(line?.fields.aliyun_suggestion, 'block');
  });

  test('mask: one segment takes the desensitized text; several are checked one by one, in place', async () => {
    const one = await runChain([ai()], 'input', [user(`call ${ALIYUN_WORDS.phone} now`)], deps());
    assert.deepEqual(one.segments.map((s) => s.text), ['call 138****5678 now']);
    assert.deepEqual(one.counts, { phone: 1 });
    assert.equal(ali.calls.length, 1);
    ali.calls.length = 0;
    const many = await runChain([ai()], 'input', [
      user('first, clean'),
      user(''),
      user(`mine is ${ALIYUN_WORDS.phone}`),
    ], deps());
    assert.deepEqual(many.segments.map((s) => s.text), ['first, clean', '', 'mine is 138****5678']);
    assert.deepEqual(ali.calls.map((c) => c.serviceParameters.content), [
      `first, clean\nmine is ${ALIYUN_WORDS.phone}`,
      'first, clean',
      `mine is ${ALIYUN_WORDS.phone}`,
    ]);
  });

  test('mask without a desensitized text blocks; a window that must be masked blocks with the session', async () => {
    const v = await runChain([ai()], 'input', [user(ALIYUN_WORDS.undesensitized)], deps());
    assert.match(v.blocked?.reason ?? '', /content requires masking and no desensitized text/);
    ali.calls.length = 0;
    const w = await runChain(
      [ai()],
      'output',
      [bot(`it is ${ALIYUN_WORDS.phone}`)],
      deps([], {
        writeBack: false,
        responseId: 'chatcmpl-9',
      }),
    );
    assert.equal(w.blocked?.reason, 'aliyun AI guardrail: content requires masking (row: aig)');
    assert.deepEqual(ali.calls[0]!.serviceParameters, {
      content: `it is ${ALIYUN_WORDS.phone}`,
      sessionId: 'chatcmpl-9',
      chatId: 'chatcmpl-9',
    });
  });

  test('Code 408 is a service not activated: ERROR naming the product, a config error', async () => {
    ali.fault = { kind: 'code', code: 408 };
    const logs: Log[] = [];
    const v = await runChain([ai()], 'input', [user('hi')], deps(logs));
    assert.equal(v.blocked?.errorType, 'aliyun_config_error');
    const err = logs.find((l) => l.level === 'error');
    assert.match(err?.msg ?? '', /lvwang_guardrail_public_cn/);
    assert.equal(err?.fields.service, 'query_security_check_pro');
    assert.equal(logs.find((l) => l.level === 'warn')?.msg, 'aliyun AI guardrail call failed');
  });
});

describe('through the proxy', () => {
  const CALLER = 'sk-aliyun-caller';
  async function app(rows: string) {
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${upstream.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
${rows}`,
      { env: { CALLER } },
    );
    const proxy = createProxyApp(gw);
    const post = (body: unknown) =>
      Promise.resolve(proxy.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }));
    return { gw, post };
  }
  const row = (kind: string, extra = '') =>
    `  - { name: g, kind: ${kind}, region: cn-shanghai, endpoint: "${ali.url}", access_key_id: ${ALIYUN_KEY_ID}, access_key_secret: ${ALIYUN_SECRET}${extra} }\n`;

  test('AI guardrail: the prompt is masked before it is sent, the answer before the caller reads it', async () => {
    const { gw, post } = await app(row('aliyun_ai_guardrail'));
    try {
      upstream.script({ body: chatCompletion('gpt-upstream', `yours: ${ALIYUN_WORDS.phone}`) });
      const res = await post({ model: 'gpt', messages: [{ role: 'user', content: `mine: ${ALIYUN_WORDS.phone}` }] });
      assert.equal(res.status, 200);
      const body = await res.json() as { choices: { message: { content: string } }[] };
      assert.equal(body.choices[0]!.message.content, 'yours: 138****5678');
      const sent = upstream.requests.at(-1)!.json as { messages: { content: string }[] };
      assert.equal(sent.messages[0]!.content, 'mine: 138****5678');
      assert.deepEqual(ali.calls.map((c) => c.service), ['query_security_check_pro', 'response_security_check_pro']);
    } finally {
      gw.stop();
    }
  });

  test('a stream without an id is still one session: one fresh id for all its windows', async () => {
    const { gw, post } = await app(row('aliyun_text_moderation', ', window_size: 5, window_overlap_size: 0'));
    try {
      const noId = (content: string) => {
        const { id: _id, ...rest } = chunk('gpt-upstream', content);
        return rest;
      };
      upstream.script({ sse: [noId('first part, '), noId('second part, '), noId('third part.')] });
      const res = await post({ model: 'gpt', stream: true, messages: [{ role: 'user', content: 'hi' }] });
      assert.match(await within(res.text(), 5000, 'the stream'), /third part\./);
      const sessions = new Set(
        ali.calls.filter((c) => c.service === 'llm_response_moderation').map((c) => c.serviceParameters.sessionId),
      );
      assert.equal(sessions.size, 1);
      assert.match(String([...sessions][0]), /^[0-9a-f-]{36}$/);
      assert.ok(ali.calls.filter((c) => c.service === 'llm_response_moderation').length >= 3);
    } finally {
      gw.stop();
    }
  });

  test('text moderation: a streamed answer is checked in windows with its id as the session', async () => {
    const { gw, post } = await app(row('aliyun_text_moderation', ', window_size: 10, window_overlap_size: 2'));
    try {
      upstream.script({
        sse: [
          chunk('gpt-upstream', 'hello there, '),
          chunk('gpt-upstream', 'friend. '),
          chunk('gpt-upstream', `now ${ALIYUN_WORDS.risky} talk`),
        ],
      });
      const res = await post({ model: 'gpt', stream: true, messages: [{ role: 'user', content: 'hi' }] });
      const out = (await within(res.text(), 5000, 'the stream')).replace(/^: .*\n\n/gm, '');
      assert.match(out, /hello there, /, 'the first window was released');
      assert.ok(!out.includes(ALIYUN_WORDS.risky), 'the risky window never reached the caller');
      assert.match(out, /response blocked by content policy \(guardrail 'g'\)/);
      const outputs = ali.calls.filter((c) => c.service === 'llm_response_moderation');
      assert.ok(outputs.length >= 2);
      for (const c of outputs) assert.equal(c.serviceParameters.sessionId, 'chatcmpl-mock');
    } finally {
      gw.stop();
    }
  });
});
