// `GET /status` (issue 13): the HTML page through app.request() — content, escaping, no secret, headers —
// then in a real headless Chromium against a real gateway process: it renders what the gateway knows
// (a model in cooldown, the drain as it runs), loads nothing from anywhere else, fits a phone, refreshes
// itself. `SLUICE_UPDATE_SCREENSHOT=1` writes the screenshot the README shows (docs/img/status-page.png);
// otherwise it goes to a temporary directory.
// Run: node build.mjs && node --import tsx --test test/process/status-page.test.ts
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { createStatusApp } from '../../src/status/app.ts';
import { escapeHtml } from '../../src/status/page.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { BASE_CONFIG, gatewayWith, testPlatform } from '../support/platform.ts';
import { CALLER_KEY, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { scratchDir } from '../support/scratch.ts';

const UPSTREAM_KEY = 'sk-upstream-SECRET-page-41c9';
const SECRETS = [UPSTREAM_KEY, CALLER_KEY, createHash('sha256').update(CALLER_KEY).digest('hex')];

function resources(apiBase: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: "${apiBase}" }
  - { display_name: offline, provider: echo }
models:
  - { display_name: flaky, provider_key: mock, model_name: flaky-up, retries: 0 }
  - { display_name: steady, provider_key: offline, model_name: echo-1 }
  - { display_name: '<img src=x onerror=alert(1)>', provider_key: offline, model_name: echo-2 }
  - { display_name: smart, routing: { targets: [{ model: flaky }, { model: steady }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

function assertNoSecret(text: string): void {
  for (const s of SECRETS) assert.equal(text.includes(s), false, `the page shows a secret (${s.slice(0, 8)}…)`);
}

describe('the page, through app.request()', () => {
  test('headers, content, escaping, no secret', async () => {
    const { gw } = await gatewayWith(resources('http://127.0.0.1:9/v1'), { env: { UPSTREAM_KEY, CALLER_KEY } });
    gw.record.rejected([...gw.facts.rejected, {
      resource_kind: 'models',
      resource_id: 'bad"<script>alert(2)</script>',
      last_error_kind: 'validate',
      last_error: 'timeout: expected number, got "<b>abc</b>"',
      first_seen_at: '2026-01-01T00:00:00.000Z',
      last_seen_at: '2026-01-01T00:00:00.000Z',
    }]);
    const app = createStatusApp(gw);
    const res = await app.request('/status');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const html = await res.text();
    assert.match(html, /<meta http-equiv="refresh" content="5">/);
    assert.match(html, /<title>Sluice · serving<\/title>/);
    assert.ok(html.includes(gw.facts.applied!.config_hash));
    for (const name of ['flaky', 'steady', 'smart']) assert.ok(html.includes(`<strong>${name}</strong>`), name);
    // Every value is escaped: none of the markup smuggled in through names and errors survives as markup.
    assert.ok(!html.includes('<img src=x'), 'a model name was not escaped');
    assert.ok(html.includes(escapeHtml('<img src=x onerror=alert(1)>')));
    assert.ok(!html.includes('<script>') && !html.includes('<b>abc'), 'a rejected row was not escaped');
    assert.ok(html.includes('bad&quot;&lt;script&gt;alert(2)&lt;/script&gt;'));
    assert.doesNotMatch(html, /<script|https?:\/\/(?!127\.0\.0\.1:9)/, 'no script and no external reference');
    assertNoSecret(html);
    assert.match(html, /Not draining/);
    for (const m of ['HEAD', 'POST']) {
      const r = await app.request('/status', { method: m });
      assert.equal(r.status, m === 'HEAD' ? 200 : 405, m);
    }
  });

  test('before any configuration, and while draining', async () => {
    const platform = testPlatform({ UPSTREAM_KEY, CALLER_KEY });
    const c = loadConfig('/t/config.yaml', BASE_CONFIG, platform.env);
    assert.ok(c.ok);
    const gw = new Gateway(c.config, platform); // nothing applied
    gw.lifecycle.waitForConfig();
    const app = createStatusApp(gw);
    let html = await (await app.request('/status')).text();
    assert.match(html, /<title>Sluice · waiting<\/title>/);
    assert.match(html, /never loaded/);
    assert.match(html, /No configuration applied yet\./);
    assert.match(html, /✗ config: not ready/);

    gw.lifecycle.serve(); // serving with nothing applied: Workers' etcd mode before its first poll
    gw.lifecycle.beginDrain(30);
    gw.lifecycle.recordArrival();
    gw.lifecycle.recordReadyz({ status: 503 });
    html = await (await app.request('/status')).text();
    assert.match(html, /<title>Sluice · draining<\/title>/);
    assert.match(html, /window still open/);
    assert.match(html, /<dt>arrivals while draining<\/dt>\s*<dd>1<\/dd>/);
    assert.match(html, /<dt>\/readyz answered 503<\/dt>\s*<dd>1<\/dd>/);
    assert.match(html, /✗ shutdown: draining/);
  });
});

// -- in Chromium, against a real gateway -----------------------------------------------------------------

const CHROMIUM = '/usr/bin/chromium';
const ROOT = resolve(import.meta.dirname, '..', '..');

describe('the page in headless Chromium', () => {
  let browser: Browser;
  let mock: MockUpstream;
  let gw: GatewayProcess;
  before(async () => {
    if (!existsSync(CHROMIUM)) {
      assert.fail(`${CHROMIUM} is missing: install Debian's Chromium with \`apt-get install -y chromium\``);
    }
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    mock = await startMockUpstream();
    gw = await spawnGateway({
      config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 20 }
`,
      files: { 'resources.yaml': resources(mock.base) },
      env: { UPSTREAM_KEY, CALLER_KEY },
    });
    await gw.waitReady('/readyz', 'proxy', 30_000);
  });
  after(async () => {
    await browser?.close();
    gw?.kill();
    await mock?.close();
  });

  async function chat(model: string, stream = false): Promise<number> {
    const res = await fetch(gw.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  test('renders the gateway, loads nothing else, fits a phone, refreshes itself; then the drain', async () => {
    mock.script({ status: 502 });
    assert.equal(await chat('smart'), 200); // flaky → 502 → cooldown; steady answers
    assert.equal(await chat('steady', true), 200);

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const requested: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(String(e)));
    const url = gw.url('/status', 'status');
    const res = await page.goto(url);
    assert.equal(res?.status(), 200);
    assert.equal(await page.title(), 'Sluice · serving');
    const text = await page.locator('body').innerText();
    for (const s of ['serving', 'ready', 'synced', 'flaky', 'steady', 'smart', '<img src=x onerror=alert(1)>']) {
      assert.ok(text.includes(s), `the page does not show "${s}":\n${text}`);
    }
    assertNoSecret(await page.content());
    // The cooling model's row: its badge, reason and a cooldown end in the future.
    const flaky = await page.locator('#models tr', { hasText: 'flaky' }).first().innerText();
    assert.match(flaky, /cooldown/);
    assert.match(flaky, /upstream_server_error/);
    assert.match(flaky, /in \d+ s/);
    // The status colours are applied (the stylesheet works under the page's own CSP).
    const good = await page.locator('.badge.good').first().evaluate((e) => getComputedStyle(e).backgroundColor);
    const warn = await page.locator('.badge.warn').first().evaluate((e) => getComputedStyle(e).backgroundColor);
    assert.notEqual(good, warn);
    assert.notEqual(good, 'rgba(0, 0, 0, 0)');
    // Nothing but the page itself was requested (no asset, no font, no script) and nothing failed.
    assert.deepEqual([...new Set(requested)], [url]);
    assert.deepEqual(problems, []);
    // It fits a phone: no horizontal scrolling of the page (wide tables scroll inside their box).
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - globalThis.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than a phone`);
    await page.setViewportSize({ width: 1280, height: 900 });
    // It refreshes itself (meta refresh, every 5 s).
    const reloaded = page.waitForEvent('framenavigated', { timeout: 9000 });
    await reloaded;

    // The drain: SIGTERM, one caller arrival, the page shows the report so far.
    gw.signal('SIGTERM');
    await gw.waitForLog('draining — /readyz now reports 503, still accepting new connections');
    assert.equal(await chat('steady'), 200);
    assert.equal((await fetch(gw.url('/readyz'))).status, 503);
    await page.goto(url);
    assert.equal(await page.title(), 'Sluice · draining');
    const drain = await page.locator('#drain').innerText();
    assert.match(drain, /window still open/);
    assert.match(drain, /arrivals while draining\s+1/);
    assert.match(drain, /min_drain_secs\s+20/);
    assert.match(drain, /\/readyz answered 503\s+1/);
    const header = await page.locator('header').innerText();
    assert.match(header, /draining/);
    assert.match(header, /not ready/);
    const dir = process.env.SLUICE_UPDATE_SCREENSHOT === '1'
      ? join(ROOT, 'docs/img')
      : scratchDir('sluice-status-page');
    mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: join(dir, 'status-page.png'), fullPage: true });
    await page.close();
  });
});
