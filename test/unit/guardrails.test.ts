// Guardrails as pure parts (docs/guardrails.md): pattern translation, keyword and pii tables, attachment
// resolution, the chain's verdicts (monitor, fail_open, mandatory), the caller's frames, the loading rules.
// Run: node --import tsx --test test/unit/guardrails.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AttachmentIndex, type GuardrailEntry, type Scope } from '../../src/guardrails/attachments.ts';
import { buildGuardrail } from '../../src/guardrails/build.ts';
import { type ChainDeps, runChain } from '../../src/guardrails/chain.ts';
import { blockBody, streamBlockFrame } from '../../src/guardrails/frames.ts';
import { checkAnswer, checkRequest } from '../../src/guardrails/guard.ts';
import { GuardrailMetrics } from '../../src/observability/guardrail-metrics.ts';
import { chinaIdChecksum, luhn } from '../../src/guardrails/pii.ts';
import { compilePattern, translate } from '../../src/guardrails/regex.ts';
import { GuardrailSchema } from '../../src/guardrails/schema.ts';
import type { Guardrail, Outcome, Segment } from '../../src/guardrails/types.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { parseRow } from '../../src/sources/etcd/rows.ts';
import { guardrail } from '../support/guardrails.ts';

const logs: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
function deps(metrics?: GuardrailMetrics): ChainDeps {
  return {
    ctx: { fetch: () => Promise.reject(new Error('no network in this test')) },
    metrics,
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    now: () => performance.now() / 1000,
  };
}

const user = (text: string): Segment => ({ role: 'user', text });
const check = (g: Guardrail, text: string, hook: 'input' | 'output' = 'input') =>
  g.check([user(text)], hook, deps().ctx) as Outcome;

describe('patterns: Rust regex syntax on a linear-time engine', () => {
  test('translated or refused, naming what', () => {
    const refused: [string, RegExp][] = [
      ['(?=a)b', /look-around/],
      ['(?<!a)b', /look-around/],
      ['(a)\\1', /backreferences/],
      ['(?x)a b', /inline flag `x`/],
      ['[a-z&&[^b]]', /set operation `&&`/],
      ['[\\W]', /\\W inside a character class/],
      ['\\bfoo\\b{start}', /\\b\{…\}/],
    ];
    for (const [src, why] of refused) {
      const r = compilePattern(src);
      assert.equal(r.ok, false, src);
      if (!r.ok) assert.match(r.error, why, src);
    }
    assert.deepEqual(translate('\\d+'), { ok: true, source: '\\p{Nd}+' });
    assert.deepEqual(translate('[\\d-]'), { ok: true, source: '[\\p{Nd}-]' });
    for (const ok of ['(?i)abc', '(?s)a.b', '(?P<n>x)', '\\Aab\\z', '\\x{41}', '\\pL', '[[:alpha:]]', '(?i:x)y']) {
      assert.equal(compilePattern(ok).ok, true, ok);
    }
  });

  test('Unicode classes as Rust reads them: full-width digits, letters in \\w, no boundary inside CJK text', () => {
    const m = (src: string, text: string) => {
      const c = compilePattern(src);
      assert.ok(c.ok);
      return c.pattern.matches(text).map((x) => text.slice(x.start, x.end));
    };
    assert.deepEqual(m('\\d+', '１２３ 45'), ['１２３', '45']);
    assert.deepEqual(m('\\w+', 'héllo 世界'), ['héllo', '世界']);
    assert.deepEqual(m('\\b1[3-9]\\d{9}\\b', '号13812345678 与 13812345678'), ['13812345678']);
    assert.deepEqual(m('(?i)secret', 'a SeCrEt b'), ['SeCrEt']);
  });

  test('a catastrophic-backtracking pattern on a 1 MiB prompt stays linear', () => {
    const c = compilePattern('(a+)+$');
    assert.ok(c.ok);
    const text = `${'a'.repeat(1 << 20)}!`;
    const t0 = performance.now();
    assert.equal(c.pattern.test(text), false);
    assert.ok(performance.now() - t0 < 5000, 'bounded (a backtracking engine never returns here)');
  });
});

describe('a 1 MiB prompt', () => {
  test('every pii detector and a catastrophic keyword pattern: bounded time, the event loop keeps turning', async () => {
    const pii = guardrail({
      name: 'pii',
      kind: 'pii',
      detectors: [
        'email',
        'china_mobile',
        'china_id_card',
        'bank_card',
        'us_ssn',
        'ip_address',
        'api_key',
        'jwt',
        'private_key',
      ]
        .map((type) => ({ type })),
    });
    const kw = guardrail({ name: 'kw', kind: 'keyword', patterns: [{ kind: 'regex', value: '(a+)+$' }] });
    const unit = 'Lorem ipsum 12345 dolor sit amet, mail someone@example.com or call 13812345678. aaaaaaaaaaaa ';
    const text = unit.repeat(Math.ceil((1 << 20) / unit.length));
    const lags: number[] = [];
    let running = true;
    const sampler = (async () => {
      while (running) {
        const t = performance.now();
        await new Promise((r) => setTimeout(r, 1));
        lags.push(performance.now() - t);
      }
    })();
    const t0 = performance.now();
    const body = { messages: [{ role: 'user', content: text }] };
    const r = await checkRequest([kw, pii], 'chat', 'openai', body, deps(), 'm');
    const took = performance.now() - t0;
    running = false;
    await sampler;
    assert.equal(r.refusal, undefined);
    assert.equal(r.verdict?.counts.email, Math.ceil((1 << 20) / unit.length));
    assert.ok(took < 20_000, `took ${took} ms`);
    assert.ok(lags.length > 20, `the event loop turned ${lags.length} times during ${took} ms`);
    assert.ok(Math.max(...lags) < 2000, `longest stall ${Math.max(...lags)} ms`);
  });
});

describe('keyword', () => {
  const g = guardrail({
    name: 'kw',
    kind: 'keyword',
    patterns: [{ kind: 'literal', value: 'Forbidden Word' }, { kind: 'regex', value: '(?i)drop\\s+table' }],
  });
  test('literals case-insensitive, regexes as written; the first match blocks; reasons for logs', () => {
    assert.deepEqual(check(g, 'a FORBIDDEN word here'), {
      kind: 'block',
      reason: 'input blocked by literal "Forbidden Word"',
    });
    assert.deepEqual(check(g, 'please DROP   TABLE x', 'output'), {
      kind: 'block',
      reason: 'output blocked by regex /(?i)drop\\s+table/',
    });
    assert.deepEqual(check(g, 'forbidden, word'), { kind: 'allow' });
  });
  test('regexes are case-sensitive without (?i); an empty pattern list is inert', () => {
    const cs = guardrail({ name: 'cs', kind: 'keyword', patterns: [{ kind: 'regex', value: 'Secret' }] });
    assert.equal(check(cs, 'secret').kind, 'allow');
    assert.equal(check(cs, 'Secret').kind, 'block');
    const b = buildGuardrail('e', GuardrailSchema.parse({ name: 'e', kind: 'keyword', patterns: [] }));
    assert.deepEqual(b, { ok: true, guardrail: undefined, warnings: [] });
  });
});

describe('pii', () => {
  const all = guardrail({
    name: 'pii',
    kind: 'pii',
    detectors: [
      { type: 'email' },
      { type: 'china_mobile' },
      { type: 'china_id_card' },
      { type: 'bank_card' },
      { type: 'us_ssn' },
      { type: 'ip_address' },
      { type: 'api_key' },
      { type: 'jwt' },
      { type: 'private_key' },
    ],
  });
  const masked = (g: Guardrail, text: string) => {
    const o = check(g, text);
    return o.kind === 'mask' ? o.texts[0] : o.kind;
  };
  test('every built-in detector masks with its token (exact output)', () => {
    const table: [string, string][] = [
      ['mail bob@example.com now', 'mail [EMAIL_REDACTED] now'],
      ['call 13812345678', 'call [CHINA_MOBILE_REDACTED]'],
      ['id 11010519491231002X ok', 'id [CHINA_ID_CARD_REDACTED] ok'],
      ['card 4111111111111111 ok', 'card [BANK_CARD_REDACTED] ok'],
      ['ssn 123-45-6789', 'ssn [US_SSN_REDACTED]'],
      ['host 192.168.1.20 up', 'host [IP_ADDRESS_REDACTED] up'],
      ['key sk-abcdefghijklmnopqrstuvwx1234', 'key [API_KEY_REDACTED]'],
      ['AKIAABCDEFGHIJKLMNOP', '[API_KEY_REDACTED]'],
      ['t eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl', 't [JWT_REDACTED]'],
      [
        'k -----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY----- end',
        'k [PRIVATE_KEY_REDACTED] end',
      ],
    ];
    for (const [text, want] of table) assert.equal(masked(all, text), want, text);
  });
  test('validators: Luhn and the MOD 11-2 check digit; no match glued to Chinese text; 999.1.1.1 is no address', () => {
    assert.equal(luhn('4111111111111111'), true);
    assert.equal(luhn('4111111111111112'), false);
    assert.equal(chinaIdChecksum('11010519491231002X'), true);
    assert.equal(chinaIdChecksum('110105194912310021'), false);
    assert.equal(masked(all, 'card 4111111111111112 ok'), 'allow');
    assert.equal(masked(all, '号码13812345678'), 'allow');
    assert.equal(masked(all, 'v 999.1.1.1'), 'allow');
  });
  test('custom patterns: group 1 only, verbatim replacement, "" deletes; rules in order, counts per name', () => {
    const g = guardrail({
      name: 'c',
      kind: 'pii',
      detectors: [{ type: 'email' }],
      custom_patterns: [
        { name: 'version', regex: '"version"\\s*:\\s*"([^"]*)"', replacement: '***' },
        { name: 'ticket id', regex: 'T-\\d+' },
        { name: 'gone', regex: 'DELETE-ME', replacement: '' },
      ],
    });
    const o = check(g, '{"version": "12.1"} T-42 a@b.io DELETE-ME.');
    assert.deepEqual(o, {
      kind: 'mask',
      texts: ['{"version": "***"} [TICKET_ID_REDACTED] [EMAIL_REDACTED] .'],
      counts: { email: 1, version: 1, 'ticket id': 1, gone: 1 },
    });
  });
  test('block rules first: the first block-action rule that matches blocks; default_action applies', () => {
    const g = guardrail({
      name: 'b',
      kind: 'pii',
      default_action: 'block',
      detectors: [{ type: 'email', action: 'mask' }, { type: 'us_ssn' }],
    });
    assert.deepEqual(check(g, 'a@b.io 123-45-6789'), {
      kind: 'block',
      reason: "input blocked by pii detector 'us_ssn'",
    });
    assert.equal(masked(g, 'a@b.io'), '[EMAIL_REDACTED]');
  });
});

describe('loading: a row that cannot be built is rejected and reported, never skipped', () => {
  test('file: errors name the row and field', async () => {
    const r = await loadResourcesFile(
      '/r.yaml',
      `_format_version: "1"
guardrails:
  - { name: ok, kind: keyword, patterns: [{ kind: literal, value: x }] }
  - { name: look, kind: keyword, patterns: [{ kind: regex, value: "(?=a)" }] }
  - { name: rep, kind: pii, custom_patterns: [{ name: n, regex: x, action: block, replacement: y }] }
  - { name: mod, kind: openai_moderation, api_key: k, category_thresholds: { hate: 1.5 } }
  - { name: sem, kind: semantic, categories: [{ name: v, description: d, candidate_patterns: ["\\\\d+"], threshold: 0.8 }] }
  - { name: open, kind: semantic, fail_open: false, categories: [{ name: v, description: d, candidate_patterns: [x] }] }
`,
      {},
    );
    assert.equal(r.ok, false);
    if (r.ok) return;
    const lines = r.report.format().split('\n').slice(1);
    assert.deepEqual(lines, [
      '  - guardrails[1] ("look"): patterns[0].value: invalid regex: look-around assertions are not supported (Rust regex has none either)',
      '  - guardrails[2] ("rep"): custom_patterns[0].replacement: not allowed on a pattern whose action is block',
      '  - guardrails[3] ("mod"): category_thresholds.hate: must be between 0 and 1',
      `  - guardrails[4] ("sem"): categories[0].threshold: sets the embedding model's similarity threshold, but Sluice loads no guardrail model on any runtime (Node, Bun, Deno or Workers) and never downloads one; remove threshold to run the category's rule layer only (spans the rules cannot decide are released)`,
      '  - guardrails[5] ("open"): fail_open: must be true for kind semantic (it masks, never blocks)',
    ]);
  });
  test('file: guardrails load and apply environment-wide', async () => {
    const r = await loadResourcesFile(
      '/r.yaml',
      '_format_version: "1"\nguardrails:\n  - { name: kw, kind: keyword, patterns: [{ kind: literal, value: x }] }\n',
      {},
    );
    assert.ok(r.ok);
    if (!r.ok) return;
    assert.deepEqual(r.snapshot.counts(), { guardrails: 1 });
    const index = new AttachmentIndex(r.snapshot.guardrails, r.snapshot.guardrailAttachments);
    assert.deepEqual(index.resolve({ modelId: 'm', apiKeyId: 'k', teamId: undefined }).map((g) => g.name), ['kw']);
  });
  test('etcd: unknown members dropped and reported; a bad pattern is schema_failed; secrets never in messages', () => {
    const ok = parseRow(
      '/a',
      '/a/guardrails/g1',
      JSON.stringify({ name: 'p', kind: 'pii', detectors: [{ type: 'email', x: 1 }] }),
    );
    assert.ok(ok.ok);
    if (ok.ok) assert.deepEqual(ok.unknownFields, ['detectors.[].x']);
    const bad = parseRow(
      '/a',
      '/a/guardrails/g2',
      JSON.stringify({ name: 'k', kind: 'keyword', patterns: [{ kind: 'regex', value: '(' }] }),
    );
    assert.equal(bad.ok, false);
    if (!bad.ok) {
      assert.equal(bad.errorKind, 'schema_failed');
      assert.match(bad.error, /^patterns\[0\]\.value: invalid regex: missing closing \)/);
    }
    const att = parseRow(
      '/a',
      '/a/guardrail_attachments/a1',
      JSON.stringify({ guardrail_id: 'g1', scope_type: 'galaxy', priority: 1 }),
    );
    assert.equal(att.ok, false);
  });
  test('unknown enforcement_mode enforces, with a warning to log', () => {
    const b = buildGuardrail(
      'g',
      GuardrailSchema.parse({
        name: 'g',
        kind: 'keyword',
        enforcement_mode: 'audit',
        patterns: [{ kind: 'literal', value: 'x' }],
      }),
    );
    assert.ok(b.ok && b.guardrail);
    if (b.ok) {
      assert.deepEqual(b.warnings, ['unknown_enforcement_mode']);
      assert.equal(b.guardrail!.monitor, false);
    }
  });
});

describe('attachments', () => {
  const kw = (name: string, createdAt?: string): GuardrailEntry => ({
    id: `id-${name}`,
    name,
    createdAt,
    guardrail: guardrail({ name, kind: 'keyword', patterns: [{ kind: 'literal', value: name }] }, `id-${name}`),
  });
  const scope: Scope = { modelId: 'm1', apiKeyId: 'k1', teamId: 't1' };
  const names = (i: AttachmentIndex, s: Scope = scope) => i.resolve(s).map((g) => g.name);

  test('no attachment rows: every guardrail env-wide at priority 0, oldest created_at first, undated last', () => {
    const logged: string[] = [];
    const i = new AttachmentIndex(
      [kw('c'), kw('b', '2026-02-01T00:00:00Z'), kw('a', '2026-01-01T00:00:00Z')],
      [],
      (m) => logged.push(m),
    );
    assert.deepEqual(names(i), ['a', 'b', 'c']);
    assert.deepEqual(logged, ['implicitEnv', 'implicitEnv', 'implicitEnv']);
  });

  test('priority, then specificity (api_key > team > model > env); first entry per guardrail; scopes must match', () => {
    const at = (
      id: string,
      guardrail_id: string,
      scope_type: string,
      scope_id: string | null,
      priority: number,
      enabled = true,
    ) => ({
      id,
      guardrail_id,
      scope_type: scope_type as 'env',
      scope_id,
      priority,
      enabled,
    });
    const i = new AttachmentIndex([kw('env'), kw('model'), kw('key'), kw('team'), kw('other'), kw('off'), kw('dup')], [
      at('1', 'id-env', 'env', null, 0),
      at('2', 'id-model', 'model', 'm1', 0),
      at('3', 'id-key', 'api_key', 'k1', 0),
      at('4', 'id-team', 'team', 't1', 0),
      at('5', 'id-other', 'model', 'm2', 100),
      at('6', 'id-off', 'env', null, 100, false),
      at('7', 'id-dup', 'env', null, 50),
      at('8', 'id-dup', 'api_key', 'k1', -5),
      at('9', 'id-missing', 'env', null, 0),
    ]);
    assert.deepEqual(names(i), ['dup', 'key', 'team', 'model', 'env']);
    assert.deepEqual(names(i, { modelId: 'm2', apiKeyId: 'k2', teamId: undefined }), ['other', 'dup', 'env']);
  });
});

describe('chain: verdicts, monitor, failure policies', () => {
  const fake = (name: string, outcome: Outcome, over: Partial<Guardrail> = {}): Guardrail => ({
    id: name,
    name,
    kind: 'lakera',
    input: true,
    output: true,
    monitor: false,
    failOpen: true,
    outputFailOpen: false,
    mandatory: false,
    createdAt: undefined,
    stream: { kind: 'end' },
    check: () => outcome,
    ...over,
  });
  const down: Outcome = { kind: 'unavailable', tag: 'lakera_timeout', reason: 'slow' };

  test('monitor: would_block and would_mask recorded, nothing changed, later members still run', async () => {
    const reg = new Registry();
    const metrics = new GuardrailMetrics(reg);
    const v = await runChain(
      [
        fake('m1', { kind: 'block', reason: 'r' }, { monitor: true }),
        fake('m2', { kind: 'mask', texts: ['X'], counts: { email: 1 } }, { monitor: true }),
      ],
      'input',
      [user('a@b.io')],
      deps(metrics),
    );
    assert.equal(v.blocked, undefined);
    assert.equal(v.masked, false);
    assert.deepEqual(v.segments, [user('a@b.io')]);
    assert.deepEqual(v.hits.map((h) => h.action), ['would_block', 'would_mask']);
    const text = reg.render();
    assert.match(
      text,
      /aisix_guardrail_latency_seconds_count\{env_id="unknown",guardrail="m1",kind="lakera",phase="input",result="would_block",error_type="none"\} 1/,
    );
    assert.match(text, /result="would_mask"/);
  });

  test('fail_open on input, output_fail_open on output, mandatory overrides both', async () => {
    const input = await runChain([fake('a', down)], 'input', [user('x')], deps());
    assert.equal(input.blocked, undefined);
    assert.equal(input.bypassTag, 'lakera_timeout');
    const output = await runChain([fake('a', down)], 'output', [user('x')], deps());
    assert.equal(output.blocked?.errorType, 'lakera_timeout', 'output_fail_open defaults to false');
    const closed = await runChain([fake('a', down, { failOpen: false })], 'input', [user('x')], deps());
    assert.equal(closed.blocked?.guardrail.name, 'a');
    const mandatory = await runChain([fake('a', down, { mandatory: true, outputFailOpen: true })], 'output', [
      user('x'),
    ], deps());
    assert.equal(mandatory.blocked?.guardrail.name, 'a');
    assert.ok(
      logs.some((l) =>
        l.msg === 'mandatory guardrail could not evaluate; blocking (mandatory=true overrides fail_open)'
      ),
    );
  });

  test('the first block stops the chain; a bypass does not; masks feed the next member', async () => {
    let seen = '';
    const v = await runChain(
      [
        fake('bypass', down),
        fake('mask', { kind: 'mask', texts: ['masked'], counts: { n: 1 } }),
        fake('reads', { kind: 'allow' }, { check: (s) => ((seen = s[0]!.text), { kind: 'block', reason: 'r' }) }),
        fake('never', { kind: 'allow' }, { check: () => assert.fail('after a block') }),
      ],
      'input',
      [user('orig')],
      deps(),
    );
    assert.equal(seen, 'masked');
    assert.equal(v.blocked?.guardrail.name, 'reads');
    assert.equal(v.bypassTag, 'lakera_timeout');
  });
});

describe('what the caller sees', () => {
  test('422 bodies and stream error frames, exactly', () => {
    assert.equal(
      blockBody('openai', 'request', 'kw'),
      `{"error":{"message":"request blocked by content policy (guardrail 'kw')","type":"content_filter"}}`,
    );
    assert.equal(
      blockBody('openai', 'response', 'kw'),
      `{"error":{"message":"response blocked by content policy (guardrail 'kw')","type":"content_filter"}}`,
    );
    assert.equal(
      blockBody('anthropic', 'request', 'kw'),
      `{"type":"error","error":{"type":"invalid_request_error","message":"request blocked by content policy (guardrail 'kw')"}}`,
    );
    assert.equal(
      streamBlockFrame('openai', 'kw'),
      `event: error\ndata: {"error":{"message":"response blocked by content policy (guardrail 'kw')","type":"content_filter"}}\n\n`,
    );
    assert.equal(
      streamBlockFrame('anthropic', 'kw'),
      `event: error\ndata: {"type":"error","error":{"type":"content_filter","message":"response blocked by content policy (guardrail 'kw')"}}\n\n`,
    );
    assert.equal(
      streamBlockFrame('openai', undefined),
      `event: error\ndata: {"error":{"message":"response blocked by content policy","type":"content_filter"}}\n\n`,
    );
  });

  const pii = guardrail({ name: 'pii', kind: 'pii', detectors: [{ type: 'email' }] });
  const kw = guardrail({ name: 'kw', kind: 'keyword', patterns: [{ kind: 'literal', value: 'bomb' }] });
  test('input masks are written into every endpoint body in place', async () => {
    const bodies: [Parameters<typeof checkRequest>[1], Record<string, unknown>, unknown][] = [
      [
        'chat',
        {
          messages: [
            { role: 'system', content: 'to a@b.io' },
            { role: 'user', content: [{ type: 'text', text: 'me c@d.io' }, { type: 'image_url', image_url: {} }] },
            { role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{"to":"e@f.io"}' } }] },
          ],
        },
        {
          messages: [
            { role: 'system', content: 'to [EMAIL_REDACTED]' },
            {
              role: 'user',
              content: [{ type: 'text', text: 'me [EMAIL_REDACTED]' }, { type: 'image_url', image_url: {} }],
            },
            { role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{"to":"[EMAIL_REDACTED]"}' } }] },
          ],
        },
      ],
      ['completions', { prompt: ['x a@b.io', 'y'] }, { prompt: ['x [EMAIL_REDACTED]', 'y'] }],
      ['embeddings', { input: 'a@b.io' }, { input: '[EMAIL_REDACTED]' }],
      [
        'messages',
        { system: 'a@b.io', messages: [{ role: 'user', content: [{ type: 'text', text: 'c@d.io' }] }] },
        {
          system: '[EMAIL_REDACTED]',
          messages: [{ role: 'user', content: [{ type: 'text', text: '[EMAIL_REDACTED]' }] }],
        },
      ],
      [
        'responses',
        { instructions: 'a@b.io', input: [{ role: 'user', content: [{ type: 'input_text', text: 'c@d.io' }] }] },
        {
          instructions: '[EMAIL_REDACTED]',
          input: [{ role: 'user', content: [{ type: 'input_text', text: '[EMAIL_REDACTED]' }] }],
        },
      ],
    ];
    for (const [endpoint, body, want] of bodies) {
      const r = await checkRequest([pii], endpoint, 'openai', body, deps(), 'm');
      assert.equal(r.refusal, undefined);
      assert.deepEqual(body, want, endpoint);
    }
    const blocked = await checkRequest([kw], 'embeddings', 'openai', { input: ['a bomb'] }, deps(), 'm');
    assert.equal(blocked.refusal?.body, blockBody('openai', 'request', 'kw'));
    assert.ok(logs.some((l) => l.msg === 'guardrail blocked /v1/embeddings request'));
  });

  test('output: masked answers re-serialised, clean ones byte for byte, blocks refused', async () => {
    const text = '{"choices":[{"index":0,"message":{"role":"assistant","content":"mail a@b.io"}}],  "usage":{}}';
    const m = await checkAnswer([pii], 'chat', 'openai', text, deps(), 'm');
    assert.equal(
      m.body,
      '{"choices":[{"index":0,"message":{"role":"assistant","content":"mail [EMAIL_REDACTED]"}}],"usage":{}}',
    );
    const clean = text.replace('a@b.io', 'nobody');
    assert.equal((await checkAnswer([pii], 'chat', 'openai', clean, deps(), 'm')).body, clean);
    const b = await checkAnswer(
      [kw],
      'messages',
      'anthropic',
      '{"content":[{"type":"text","text":"bomb"}]}',
      deps(),
      'm',
    );
    assert.equal(b.refusal?.body, blockBody('anthropic', 'response', 'kw'));
  });
});
