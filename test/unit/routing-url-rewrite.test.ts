// URL rewrites (docs/routing.md "URL rewrites"): the boot checks in AISIX's words, and the proxy app through
// app.request() serving a rewritten path as if the client had sent it, against a mock upstream that records
// each call.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.ts';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { compileRewrites, rewritePath } from '../../src/routing/url-rewrite.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith, type TestPlatform } from '../support/platform.ts';

const CALLER = 'sk-caller-rewrite-SECRET-1';
const REST = 'resources_file: r.yaml\nadmin: { enabled: false }\n';

/** The boot report for `rules` (YAML lines under `url_rewrites:`), or 'ok'. */
function boot(rules: string, env: Record<string, string> = {}): string {
  const config = `proxy:\n  addr: "127.0.0.1:0"\n  url_rewrites:\n${rules}\n${REST}`;
  const r = loadConfig('/t/config.yaml', rules === '' ? config.replace('  url_rewrites:\n', '') : config, env);
  return r.ok ? 'ok' : r.report.format();
}

describe('boot checks', () => {
  test('a valid rule, braced and named references, a literal $$ and a bare trailing $', () => {
    assert.equal(boot('    - { name: compat, match: "^/mcp-servers/([^/]+)/mcp$", rewrite: "/mcp/$1" }'), 'ok');
    assert.equal(
      boot('    - { match: "^/gw/(?P<server>[^/]+)/v(\\\\d+)$", rewrite: "/mcp/${server}-v${2}$$x$" }'),
      'ok',
    );
  });

  test("each mistake stops the boot in AISIX's words, naming the rule", () => {
    const cases: [string, string][] = [
      ['    - { match: "^/a/([^/+/mcp$", rewrite: "/b" }', 'proxy.url_rewrites[0]: invalid match regex: '],
      ['    - { name: opt, match: "(x)?", rewrite: "/y" }', 'opt: match must not match the empty string'],
      [
        '    - { match: "^/a$", rewrite: "/v1/chat?model=x" }',
        "proxy.url_rewrites[0]: rewrite must not contain '?' (the template is a path; the query string is preserved automatically)",
      ],
      ['    - { match: "^/a$", rewrite: "/v1/models#frag" }', "rewrite must not contain '#'"],
      ['    - { match: "^/a$", rewrite: "/v1/a b" }', "rewrite must not contain ' '"],
      [
        '    - { match: "^/m/([^/]+)/mcp$", rewrite: "/mcp/$2" }',
        'proxy.url_rewrites[0]: rewrite references unknown capture group `$2` (write `${N}text` to follow group N with literal text)',
      ],
      ['    - { match: "^/m/([^/]+)$", rewrite: "/mcp/$1x" }', 'unknown capture group `$1x`'],
      [
        '    - { match: "^/gw/(?P<server>[^/]+)$", rewrite: "/mcp/${srv}" }',
        'proxy.url_rewrites[0]: rewrite references unknown capture group `${srv}`',
      ],
      ['    - { match: "^/gw/(x)$", rewrite: "/mcp/${1" }', 'rewrite has an unterminated `${…}` group reference'],
    ];
    for (const [rule, want] of cases) {
      const report = boot(rule);
      assert.ok(report.includes(want), `${rule}\nwanted ${want}\ngot ${report}`);
    }
  });

  test('AISIX_PROXY__URL_REWRITES: the list as one JSON string', () => {
    const json = '[{"name":"compat","match":"^/openai/(.*)$","rewrite":"/$1"}]';
    const r = loadConfig('/t/config.yaml', `proxy: { addr: "127.0.0.1:0" }\n${REST}`, {
      AISIX_PROXY__URL_REWRITES: json,
    });
    assert.ok(r.ok);
    assert.deepEqual(r.config.proxy.url_rewrites, [{ name: 'compat', match: '^/openai/(.*)$', rewrite: '/$1' }]);
    const inFile = loadConfig(
      '/t/config.yaml',
      `proxy: { addr: "127.0.0.1:0", url_rewrites: '${json}' }\n${REST}`,
      {},
    );
    assert.ok(inFile.ok);
    const broken = loadConfig(
      '/t/config.yaml',
      `proxy: { addr: "127.0.0.1:0", url_rewrites: '[{"match": broken' }\n${REST}`,
      {},
    );
    assert.ok(!broken.ok);
    assert.match(broken.report.format(), /url_rewrites JSON string: /);
  });
});

describe('the rewrite of one path', () => {
  const rules = compileRewrites([
    { match: '/legacy', rewrite: '/cur' },
    { match: '^/first$', rewrite: '/one' },
    { match: '^/first$', rewrite: '/two' },
    { match: '^/bad$', rewrite: 'relative' },
  ]);
  test('the first match only, the unmatched parts kept; the first matching rule wins; no cascading', () => {
    assert.deepEqual(rewritePath(rules, '/api/legacy/legacy'), {
      kind: 'rewritten',
      rule: 'proxy.url_rewrites[0]',
      to: '/api/cur/legacy',
    });
    assert.deepEqual(rewritePath(rules, '/first'), { kind: 'rewritten', rule: 'proxy.url_rewrites[1]', to: '/one' });
    assert.deepEqual(rewritePath(rules, '/other'), { kind: 'none' });
  });
  test('a result that is not a path is reported, not used', () => {
    assert.equal(rewritePath(rules, '/bad').kind, 'invalid');
  });
});

describe('rewrites on the proxy listener', () => {
  let up: MockUpstream;
  let gw: Gateway;
  let platform: TestPlatform;
  let app: ReturnType<typeof createProxyApp>;
  before(async () => {
    up = await startMockUpstream();
    ({ gw, platform } = await gatewayWith(
      `_format_version: "1"
provider_keys:
  - { display_name: p, provider: openai, api_key: up-key, api_base: ${up.base} }
models:
  - { display_name: m, provider_key: p, model_name: up-m, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
      {
        env: { CALLER },
        config: BASE_CONFIG.replace(
          'observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }',
          'observability: { log_level: debug, metrics: { prometheus: { addr: "127.0.0.1:0" } } }',
        ).replace(
          'proxy: { addr: "127.0.0.1:0" }',
          `proxy:
  addr: "127.0.0.1:0"
  url_rewrites:
    - { name: openai-prefix, match: "^/openai/v1/(?P<rest>.*)$", rewrite: "/v1/\${rest}" }
    - { match: "^/legacy/health$", rewrite: /livez }
    - { name: broken, match: "^/make-relative$", rewrite: livez }
`,
        ),
      },
    ));
    app = createProxyApp(gw);
  });
  after(async () => {
    gw.stop();
    await up.close();
  });

  test('a rewritten path is served as the path it became, its query and body kept', async () => {
    const res = await app.request('/openai/v1/chat/completions?probe=1', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.body?.cancel();
    const last = up.requests.at(-1)!;
    assert.equal(last.url, '/v1/chat/completions');
    assert.equal(last.json?.model, 'up-m');
    const line = platform.logs.find((l) => l.msg === 'url rewrite applied');
    assert.ok(line, 'a DEBUG line names the rule');
    assert.equal(line.rule, 'openai-prefix');
    assert.equal(line.from, '/openai/v1/chat/completions');
    assert.equal(line.to, '/v1/chat/completions');
  });

  test('GET routes too; a miss, and a percent-encoded variant, pass through unrewritten', async () => {
    assert.equal((await app.request('/legacy/health')).status, 200);
    assert.equal((await app.request('/legacy/other')).status, 404);
    assert.equal((await app.request('/legac%79/health')).status, 404);
    assert.equal((await app.request('/livez')).status, 200);
  });

  test('a rewrite that is not a path: WARN, and the original path is served', async () => {
    assert.equal((await app.request('/make-relative')).status, 404);
    const line = platform.logs.find((l) =>
      l.msg === 'url rewrite produced an invalid path; leaving the request unrewritten'
    );
    assert.ok(line);
    assert.equal(line.rule, 'broken');
    assert.equal(line.rewritten, 'livez');
  });
});
