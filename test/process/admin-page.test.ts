// The admin page (docs/admin.md "The admin page") in a real headless Chromium against a real gateway process on
// a real etcd: sign in with the write key, issue a key (shown once, and served by the proxy once the watch
// applied it), see it listed without its plaintext, spend from budget counters in a real Redis as a table and
// a chart, revoke it (the proxy answers 401). The audit lines are the API's. `SLUICE_UPDATE_SCREENSHOT=1` writes docs/img/admin-page.png; otherwise it goes to a temporary dir.
// Run: node build.mjs && node --import tsx --test test/process/admin-page.test.ts
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { seeder } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { scratchDir } from '../support/scratch.ts';
import { redisCli, type RedisServer, startRedis } from '../support/redis.ts';
import { until } from '../support/until.ts';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = resolve(import.meta.dirname, '..', '..');
const P = '/adminpage';
const READ_KEY = 'admin-read-SECRET-page';
const WRITE_KEY = 'admin-write-SECRET-page';
const CALLER_KEY = 'sk-caller-SECRET-page';

let etcd: EtcdServer;
let redis: RedisServer;
let gw: GatewayProcess;
let browser: Browser;

before(async () => {
  if (!existsSync(CHROMIUM)) {
    assert.fail(`${CHROMIUM} is missing: install Debian's Chromium with \`apt-get install -y chromium\``);
  }
  etcd = await startEtcd();
  redis = await startRedis();
  const s = seeder(etcd.endpoint);
  await s.put(`${P}/provider_keys/pk1`, { display_name: 'echo', provider: 'echo' });
  await s.put(`${P}/models/m1`, {
    display_name: 'gpt-test',
    model_name: 'gpt-upstream',
    provider_key_id: 'pk1',
    budgets: [{ limit_usd: 50, window: 'monthly' }],
  });
  // Nothing listens on port 9: a call to this model fails and starts its cooldown, which the status view shows.
  await s.put(`${P}/provider_keys/pk2`, {
    display_name: 'dead',
    provider: 'openai',
    api_key: 'sk-unused',
    api_base: 'http://127.0.0.1:9/v1',
  });
  await s.put(`${P}/models/m2`, {
    display_name: 'dead-model',
    model_name: 'gpt-upstream',
    provider_key_id: 'pk2',
    cooldown: { default_seconds: 600 },
  });
  await s.put(`${P}/api_keys/k1`, {
    display_name: 'caller',
    key_hash: createHash('sha256').update(CALLER_KEY).digest('hex'),
    allowed_models: ['dead-model'],
  });
  gw = await spawnGateway({
    config: `etcd: { endpoints: ["${etcd.endpoint}"], prefix: ${P} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [${READ_KEY}], write_keys: [${WRITE_KEY}] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
budgets: { backend: redis, redis: { url: "${redis.url}" } }
shutdown: { min_drain_secs: 0 }
`,
  });
  await gw.waitReady('/readyz');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
});
after(async () => {
  await browser?.close();
  await gw?.stop();
  await etcd?.stop();
  await redis?.close();
});

/** Budget counters as the budgets write them (src/budgets/store-redis.ts): one per day of the last week. */
function seedSpend(subject: string, usdPerDay: number[]): void {
  const today = Math.floor(Date.now() / 86_400_000) * 86_400;
  usdPerDay.forEach((usd, i) => {
    const start = today - (usdPerDay.length - 1 - i) * 86_400;
    const key = `sluice:budget:{b}:${subject}:daily:${start}`;
    redisCli(redis.port, 'HSET', key, 's', String(Math.round(usd * 1e6)), 't', String(Math.round(usd * 20_000)));
  });
}

async function proxyStatus(key: string): Promise<number> {
  const r = await fetch(gw.url('/v1/models'), { headers: { authorization: `Bearer ${key}` } });
  await r.body?.cancel();
  return r.status;
}

test('sign in, issue a key, see it listed, revoke it', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('dialog', (d) => void d.accept()); // the revoke button's confirm()
  await page.goto(gw.url('/admin/page', 'admin'));
  await page.fill('input[name="key"]', WRITE_KEY);
  await page.click('button:has-text("Sign in")');
  await page.waitForSelector('#keys');
  const cookies = await page.context().cookies();
  assert.equal(cookies.length, 1);
  assert.equal(cookies[0]!.httpOnly, true);
  assert.equal(cookies[0]!.sameSite, 'Strict');
  assert.ok(!cookies[0]!.value.includes(WRITE_KEY));
  assert.match(await page.locator('#models').innerText(), /gpt-test[\s\S]*healthy[\s\S]*\$50 \/ monthly/);

  await page.fill('input[name="id"]', 'browser-ci');
  await page.fill('input[name="display_name"]', 'Browser CI');
  await page.fill('input[name="allowed_models"]', 'gpt-test');
  await page.fill('input[name="team_id"]', 'platform');
  await page.click('button:has-text("Issue")');
  const key = (await page.locator('#issued-key').innerText()).trim();
  assert.match(key, /^sk-sluice-[A-Za-z0-9_-]{43}$/);
  await until(async () => (await proxyStatus(key)) === 200, 5_000, 'the issued key served by the proxy');

  // The list reads the snapshot: the row is there once this replica's watch applied the write.
  await until(
    async () => {
      await page.goto(gw.url('/admin/page', 'admin'));
      return await page.locator('tr[data-key-id="browser-ci"]').count() === 1;
    },
    5_000,
    'the issued key listed',
  );
  const row = page.locator('tr[data-key-id="browser-ci"]');
  assert.match(await row.innerText(), /Browser CI[\s\S]*gpt-test[\s\S]*active/);
  assert.ok(!(await page.content()).includes(key), 'the plaintext is shown once');

  seedSpend('api_key:browser-ci', [1.2, 2.5, 1.8, 3.1, 2.2, 4.0, 2.7]);
  seedSpend('api_key:batch-jobs', [0.4, 0.9, 1.5, 1.1, 2.0, 1.6, 2.4]);
  seedSpend('team:platform', [1.6, 3.4, 3.3, 4.2, 4.2, 5.6, 5.1]);
  await page.goto(gw.url('/admin/page', 'admin'));
  assert.equal(await page.locator('#spend svg polyline').count(), 3, 'a line per key and one for the team');
  assert.match(await page.locator('#spend').innerText(), /browser-ci\s+daily\s+17\.5000/);

  await row.locator('button:has-text("Revoke")').click();
  await page.waitForURL(/revoked=browser-ci/);
  assert.match(await page.locator('[role="status"]').innerText(), /Revoked browser-ci/);
  await until(async () => (await proxyStatus(key)) === 401, 5_000, 'the revoked key refused by the proxy');
  await until(
    async () => {
      await page.goto(gw.url('/admin/page', 'admin'));
      return /revoked/.test(await page.locator('tr[data-key-id="browser-ci"]').innerText());
    },
    5_000,
    'the key listed as revoked',
  );

  const audit = gw.logs.filter((l) => l.msg === 'admin write');
  assert.deepEqual(audit.map((l) => [l.action, l.id, l.admin_key]), [
    ['issue', 'browser-ci', 'write_keys[0]'],
    ['revoke', 'browser-ci', 'write_keys[0]'],
  ]);
  assert.ok(!JSON.stringify([gw.logs, gw.rawErr]).includes(key));

  const dir = process.env.SLUICE_UPDATE_SCREENSHOT === '1' ? join(ROOT, 'docs/img') : scratchDir('sluice-admin-page');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, 'admin-page.png'), fullPage: true });
  await page.close();
});

test("the status page's live view on the admin page: behind the session, model health as it changes", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(gw.url('/admin/page/status', 'admin'));
  assert.equal(await page.locator('input[name="key"]').count(), 1, 'without a session: the sign-in form');
  assert.equal(await page.locator('#models').count(), 0);
  await page.fill('input[name="key"]', READ_KEY);
  await page.click('button:has-text("Sign in")');
  await page.waitForSelector('#keys');
  await page.click('nav a:has-text("Status")');
  await page.waitForSelector('#models');
  assert.match(await page.locator('#models').innerText(), /dead-model[\s\S]*healthy/);
  let loads = 0;
  page.on('load', () => loads++);

  const r = await fetch(gw.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dead-model', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await r.body?.cancel();
  assert.equal(r.status, 502);

  // No navigation by the test: the view refreshes itself and shows the cooldown.
  await until(
    async () => {
      const text = await page.locator('#models').innerText().catch(() => '');
      return /dead-model[\s\S]*cooldown[\s\S]*transport_error/.test(text);
    },
    15_000,
    'the live view showing the cooldown',
  );
  assert.ok(loads >= 1, 'the page reloaded itself');
  assert.match(page.url(), /\/admin\/page\/status$/);

  // Its JSON reads, behind the same session.
  await page.click('footer a:has-text("/admin/page/status/models")');
  const rows = JSON.parse(await page.locator('body').innerText()) as { display_name: string; status: string }[];
  assert.equal(rows.find((m) => m.display_name === 'dead-model')?.status, 'cooldown');
  const anonymous = await fetch(gw.url('/admin/page/status/models', 'admin'));
  assert.equal(anonymous.status, 401);
  assert.ok(!(await anonymous.text()).includes('dead-model'));
  await page.close();
});
