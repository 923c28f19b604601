// `kind: semantic` without a model (docs/guardrails.md "semantic"): AISIX's rule layer — candidate spans,
// hotword groups near them, negative patterns — masks what its rules decide and releases the rest; a row that
// asks for the model is refused at load, and a node that names a model directory is refused at boot. Through
// the chain and app.request() against a real mock upstream.
// Run: node --import tsx --test test/unit/guardrail-semantic.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadBootConfig } from '../../src/boot.ts';
import { refuseLocalModel } from '../../src/guardrails/local-model.ts';
import { candidateSpans } from '../../src/guardrails/semantic.ts';
import { compilePattern } from '../../src/guardrails/regex.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { guardrail } from '../support/guardrails.ts';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith, testPlatform } from '../support/platform.ts';
import type { Guardrail } from '../../src/guardrails/types.ts';

/** AISIX's own example category: tool versions in EDA chat, with timing and size units as negative evidence. */
const VERSIONS = {
  name: 'eda_version',
  description: 'a version number of an EDA tool',
  candidate_patterns: ['\\d+(?:\\.\\d+)+[A-Za-z]*'],
  negative_patterns: [
    '^\\s*(?:ns|ps|ms|s|GHz|GiB|GB|um|minutes|seconds|纳秒|微秒|毫秒|秒)\\b',
    '(?i)[0-9](?:ns|ps|ms|s)$',
    '^\\d{1,3}(?:\\.\\d{1,3}){3}$',
  ],
  hotword_groups: [
    { terms: ['版本', '升级', 'version', 'upgraded'] },
    { terms: ['PrimeTime', 'Virtuoso', 'EDA', '仿真工具'] },
  ],
};
const g = (over: Record<string, unknown> = {}): Guardrail =>
  guardrail({ name: 'sem', kind: 'semantic', categories: [{ ...VERSIONS, ...over }] });
const out = async (gr: Guardrail, text: string) => {
  const o = await gr.check([{ role: 'user', text }], 'input', { fetch: () => Promise.reject(new Error('no calls')) });
  return o.kind === 'mask' ? o.texts[0] : o.kind;
};

describe('the rule layer', () => {
  test('an adjacent hotword masks; a unit after the number releases, even next to a hotword', async () => {
    const gr = g();
    assert.equal(
      await out(gr, '这个 EDA 软件的版本是 12.1,请确认兼容性'),
      '这个 EDA 软件的版本是 [EDA_VERSION_REDACTED],请确认兼容性',
    );
    assert.equal(await out(gr, 'we upgraded to 21.15 yesterday'), 'we upgraded to [EDA_VERSION_REDACTED] yesterday');
    assert.equal(await out(gr, 'PrimeTime 2022.03 跑不过时序'), 'PrimeTime [EDA_VERSION_REDACTED] 跑不过时序');
    assert.equal(await out(gr, '版本升级后耗时 12.5s,可以接受'), 'allow', 'the fused unit is negative evidence');
    assert.equal(await out(gr, '中断响应时间 12.5 微秒'), 'allow');
    assert.equal(await out(gr, '服务器的 IP 地址是 10.2.255.1'), 'allow');
  });

  test('the model band (no evidence, or only distant hotwords) is released without a model', async () => {
    const gr = g();
    assert.equal(await out(gr, '圆周率约等于 3.14159'), 'allow');
    assert.equal(await out(gr, 'the conversion rate is 3.5'), 'allow', '`version` inside `conversion` is no hotword');
    assert.equal(
      await out(gr, '新版本已经发布了。另外今天集群的负载均值是 3.5'),
      'allow',
      'distant: weak evidence only',
    );
  });

  test('a model-band span is counted as AISIX counts one its unavailable engine could not judge', async () => {
    const gr = g();
    const seen: string[] = [];
    const check = (text: string) =>
      gr.check([{ role: 'user', text }], 'input', {
        fetch: () => Promise.reject(new Error('no calls')),
        degraded: (r) => seen.push(r),
      });
    await check('版本升级后耗时 12.5s,可以接受');
    await check('PrimeTime 2022.03');
    assert.deepEqual(seen, [], 'spans the rules decide (masked or released) need no model');
    assert.deepEqual(await check('圆周率约等于 3.14159'), { kind: 'allow' });
    assert.deepEqual(seen, ['engine_failed', 'prototype_unavailable'], 'the first asks the engine once');
    await check('3.5 and 4.5');
    assert.deepEqual(seen, [
      'engine_failed',
      'prototype_unavailable',
      'prototype_unavailable',
      'prototype_unavailable',
    ]);
    const fresh = g();
    const again: string[] = [];
    await fresh.check([{ role: 'user', text: 'about 3.5' }], 'output', {
      fetch: () => Promise.reject(new Error('no calls')),
      degraded: (r) => again.push(r),
    });
    assert.deepEqual(again, ['engine_failed', 'prototype_unavailable'], 'each built row asks its engine once');
  });

  test('replacement, counts per category, categories in order on the previous output', async () => {
    const gr = guardrail({
      name: 'sem',
      kind: 'semantic',
      categories: [
        { ...VERSIONS, replacement: '<v>' },
        {
          name: 'ticket',
          description: 'a ticket id',
          candidate_patterns: ['[A-Z]+-\\d+'],
          hotword_groups: [{ terms: ['ticket'] }],
        },
      ],
    });
    const o = await gr.check([{ role: 'user', text: 'version 1.2.3 and ticket ABC-12, version 4.5' }], 'input', {
      fetch: () => Promise.reject(new Error('no calls')),
    });
    assert.deepEqual(o, {
      kind: 'mask',
      texts: ['version <v> and ticket [TICKET_REDACTED], version <v>'],
      counts: { eda_version: 2, ticket: 1 },
    });
  });

  test('spans: leftmost first without overlaps; a span over 64 bytes is no candidate', () => {
    const p = (s: string) => {
      const c = compilePattern(s);
      assert.ok(c.ok);
      return c.pattern;
    };
    const c = { candidates: [p('\\d+\\.\\d+'), p('\\d+\\.\\d+\\.\\d+'), p('x{65}')] };
    assert.deepEqual(candidateSpans(c, '1.2.3 9.9 ' + 'x'.repeat(65)), [{ start: 0, end: 5 }, { start: 6, end: 9 }]);
  });
});

describe('no model is ever loaded', () => {
  test('GUARDRAIL_LOCAL_MODEL_DIR refuses the boot, with what to do', async () => {
    assert.equal(refuseLocalModel({}), undefined);
    assert.equal(refuseLocalModel({ GUARDRAIL_LOCAL_MODEL_DIR: '' }), undefined);
    const platform = testPlatform({ GUARDRAIL_LOCAL_MODEL_DIR: '/usr/local/aisix/guardrail-model' });
    platform.fileMap.set('/t/config.yaml', BASE_CONFIG);
    const without = testPlatform();
    without.fileMap.set('/t/config.yaml', BASE_CONFIG);
    assert.equal(typeof await loadBootConfig(without, '/t/config.yaml', { listeners: false }), 'object');
    const r = await loadBootConfig(platform, '/t/config.yaml', { listeners: false });
    assert.equal(typeof r, 'string');
    assert.match(
      r as string,
      /^GUARDRAIL_LOCAL_MODEL_DIR is set \(\/usr\/local\/aisix\/guardrail-model\), but Sluice cannot load a local guardrail model/,
    );
    assert.match(r as string, /Cloudflare Workers/);
    assert.match(r as string, /unset GUARDRAIL_LOCAL_MODEL_DIR to start\.$/);
  });
});

describe('through the proxy', () => {
  let upstream: MockUpstream;
  before(async () => {
    upstream = await startMockUpstream();
  });
  after(() => upstream.close());

  test('the prompt is masked before it is sent and the answer before the caller reads it', async () => {
    const CALLER = 'sk-semantic';
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${upstream.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - ${JSON.stringify({ name: 'sem', kind: 'semantic', categories: [VERSIONS] })}
`,
      { env: { CALLER } },
    );
    try {
      upstream.script({ body: chatCompletion('gpt-upstream', 'after the upgraded 3.2.1 build it took 4.5 seconds') });
      const res = await createProxyApp(gw).request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'PrimeTime 2022.03 is slow' }] }),
      });
      assert.equal(res.status, 200);
      const body = await res.json() as { choices: { message: { content: string } }[] };
      assert.equal(
        body.choices[0]!.message.content,
        'after the upgraded [EDA_VERSION_REDACTED] build it took 4.5 seconds',
      );
      const sent = upstream.requests.at(-1)!.json as { messages: { content: string }[] };
      assert.equal(sent.messages[0]!.content, 'PrimeTime [EDA_VERSION_REDACTED] is slow');
    } finally {
      gw.stop();
    }
  });

  test('/metrics: aisix_guardrail_semantic_degraded_total{reason} counts unjudged spans; no model calls', async () => {
    const CALLER = 'sk-semantic';
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${upstream.base}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
guardrails:
  - ${JSON.stringify({ name: 'sem', kind: 'semantic', categories: [VERSIONS] })}
`,
      { env: { CALLER } },
    );
    const status = createStatusApp(gw);
    const chat = (content: string) =>
      createProxyApp(gw).request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content }] }),
      });
    const families = async () =>
      (await (await status.request('/metrics')).text()).split('\n').filter((l) =>
        l.includes('aisix_guardrail_semantic_')
      );
    try {
      upstream.script({ body: chatCompletion('gpt-upstream', 'PrimeTime 2022.03 is slow') });
      assert.equal((await chat('the upgraded 3.2.1 build')).status, 200);
      assert.deepEqual(await families(), [], 'nothing unjudged yet: neither family is written');
      upstream.script({ body: chatCompletion('gpt-upstream', 'pi is about 3.14159, e about 2.718') });
      assert.equal((await chat('the load average was 3.5')).status, 200);
      assert.deepEqual(await families(), [
        '# HELP aisix_guardrail_semantic_degraded_total Semantic guardrail spans left to the rule layers without a ' +
        'model judgement, by reason.',
        '# TYPE aisix_guardrail_semantic_degraded_total counter',
        'aisix_guardrail_semantic_degraded_total{reason="engine_failed"} 1',
        'aisix_guardrail_semantic_degraded_total{reason="prototype_unavailable"} 3',
      ]);
    } finally {
      gw.stop();
    }
  });
});
