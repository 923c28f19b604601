// The admin page through the admin app's `app.request()` (docs/admin.md "The admin page"), over an in-memory
// row store whose rows are the served snapshot: sign-in and the cookie's flags, the session's CSRF token and
// the Origin check, a read-only key refused a write, the issued key shown once and never in the list, revoke.
// Run: node --import tsx --test test/unit/admin-page.test.ts
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { type AdminView, createAdminApp } from '../../src/admin/app.ts';
import { MemoryRows } from '../../src/admin/etcd-rows.ts';
import { AUDIT_MSG, createAdminWrites } from '../../src/admin/writes.ts';
import { SESSION_COOKIE, SESSION_TTL_SECS } from '../../src/admin/page-session.ts';
import { createSpendRoute } from '../../src/admin/spend-route.ts';
import { type ApiKey, ApiKeySchema } from '../../src/resources/schema.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { gatewayWith } from '../support/platform.ts';

const READ_KEY = 'admin-read-SECRET-1';
const WRITE_KEY = 'admin-write-SECRET-2';
const ORIGIN = 'http://localhost';

function fixture(opts: { tls?: boolean } = {}) {
  const rows = new MemoryRows();
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const clock = { now: Date.parse('2026-12-05T12:00:00Z') };
  const writes = createAdminWrites({
    rows,
    writeKeys: [WRITE_KEY],
    readKeys: [READ_KEY],
    log: { info: (msg, fields) => lines.push({ msg, fields: fields ?? {} }) },
    now: () => clock.now,
  });
  const spend = createSpendRoute({
    source: {
      counters: () =>
        Promise.resolve([
          { counter: 'api_key:k1:daily:1796256000', spentMicroUsd: 1_500_000, spentTokens: 300 },
          { counter: 'api_key:k1:daily:1796342400', spentMicroUsd: 2_250_000, spentTokens: 450 },
        ]),
    },
    keys: [READ_KEY, WRITE_KEY],
    now: () => clock.now,
  });
  const view = {
    config: {
      admin: {
        admin_keys: [READ_KEY],
        write_keys: [WRITE_KEY],
        ...(opts.tls ? { tls: { cert_file: 'c', key_file: 'k' } } : {}),
      },
    },
    facts: { sourceType: 'etcd' },
    get snapshot() {
      const api_keys: ApiKey[] = [...rows.rows].map(([k, r]) => ({
        ...ApiKeySchema.parse(r.value),
        id: k.slice('api_keys/'.length),
      }));
      return new Snapshot({ provider_keys: [], models: [], api_keys });
    },
    health: { statusRow: () => ({}), consecutiveFailures: () => 0 },
    now: () => new Date(clock.now),
  } as unknown as AdminView;
  return { app: createAdminApp(view, undefined, [writes, spend]), rows, lines, clock };
}

type F = ReturnType<typeof fixture>;

async function signIn(f: F, key: string): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const res = await f.app.request('/admin/page/sign-in', {
    method: 'POST',
    headers: { origin: ORIGIN },
    body: new URLSearchParams({ key }),
  });
  assert.equal(res.status, 303);
  const setCookie = res.headers.get('set-cookie')!;
  const cookie = setCookie.split(';')[0]!;
  const page = await (await f.app.request('/admin/page', { headers: { cookie } })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
  return { cookie, csrf, setCookie };
}

function post(f: F, path: string, cookie: string, form: Record<string, string>, origin = ORIGIN) {
  return f.app.request(path, {
    method: 'POST',
    headers: { cookie, origin, host: 'localhost' },
    body: new URLSearchParams(form),
  });
}

describe('sign-in', () => {
  test('without a session the page is the sign-in form; a wrong key is 401 and sets no cookie', async () => {
    const f = fixture();
    const page = await f.app.request('/admin/page');
    assert.equal(page.status, 200);
    assert.match(await page.text(), /action="\/admin\/page\/sign-in"/);
    assert.match(page.headers.get('content-security-policy')!, /script-src 'nonce-[A-Za-z0-9_-]+'/);
    const bad = await f.app.request('/admin/page/sign-in', { method: 'POST', body: new URLSearchParams({ key: 'x' }) });
    assert.equal(bad.status, 401);
    assert.equal(bad.headers.get('set-cookie'), null);
  });

  test('the cookie is an opaque id, HttpOnly, SameSite=Strict, expiring; Secure only with TLS', async () => {
    const plain = await signIn(fixture(), WRITE_KEY);
    assert.match(
      plain.setCookie,
      new RegExp(
        `^${SESSION_COOKIE}=[A-Za-z0-9_-]{43}; Path=/admin/page; Max-Age=${SESSION_TTL_SECS}; HttpOnly; SameSite=Strict$`,
      ),
    );
    assert.ok(!plain.setCookie.includes(WRITE_KEY));
    const tls = await signIn(fixture({ tls: true }), READ_KEY);
    assert.match(tls.setCookie, /; HttpOnly; SameSite=Strict; Secure$/);
  });

  test('sign-out ends the session server-side: the old cookie no longer reads', async () => {
    const f = fixture();
    const s = await signIn(f, READ_KEY);
    const out = await post(f, '/admin/page/sign-out', s.cookie, { csrf: s.csrf });
    assert.equal(out.status, 303);
    assert.match(out.headers.get('set-cookie')!, /Max-Age=0/);
    const again = await (await f.app.request('/admin/page', { headers: { cookie: s.cookie } })).text();
    assert.match(again, /action="\/admin\/page\/sign-in"/);
  });

  test('a session expires after its lifetime', async () => {
    const f = fixture();
    const s = await signIn(f, READ_KEY);
    f.clock.now += SESSION_TTL_SECS * 1000;
    const page = await (await f.app.request('/admin/page', { headers: { cookie: s.cookie } })).text();
    assert.match(page, /action="\/admin\/page\/sign-in"/);
  });
});

describe('writes from the page', () => {
  test('issue: the plaintext on the answer page only, never in the list; one audit line', async () => {
    const f = fixture();
    const s = await signIn(f, WRITE_KEY);
    const res = await post(f, '/admin/page/keys', s.cookie, {
      csrf: s.csrf,
      id: 'ci',
      display_name: 'CI',
      allowed_models: 'gpt-4o, claude-*',
    });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const key = /id="issued-key">([^<]+)</.exec(await res.text())![1]!;
    assert.match(key, /^sk-sluice-[A-Za-z0-9_-]{43}$/);
    const list = await (await f.app.request('/admin/page', { headers: { cookie: s.cookie } })).text();
    assert.match(list, /data-key-id="ci"/);
    assert.match(list, /gpt-4o, claude-\*/);
    assert.ok(!list.includes(key), 'the plaintext is shown once');
    assert.ok(!list.includes(String(f.rows.rows.get('api_keys/ci')!.value.key_hash)), 'never a hash');
    assert.deepEqual(f.lines.map((l) => [l.msg, l.fields.action, l.fields.id, l.fields.admin_key]), [
      [AUDIT_MSG, 'issue', 'ci', 'write_keys[0]'],
    ]);
  });

  test('rotate shows the new key once; revoke disables it; each one audit line', async () => {
    const f = fixture();
    const s = await signIn(f, WRITE_KEY);
    await post(f, '/admin/page/keys', s.cookie, { csrf: s.csrf, id: 'ci', allowed_models: '*' });
    const rot = await post(f, '/admin/page/keys/ci/rotate', s.cookie, { csrf: s.csrf, grace_seconds: '60' });
    assert.equal(rot.status, 200);
    assert.match(await rot.text(), /id="issued-key">sk-sluice-/);
    assert.equal((f.rows.rows.get('api_keys/ci')!.value.previous_key_hashes as unknown[]).length, 1);
    const rev = await post(f, '/admin/page/keys/ci/revoke', s.cookie, { csrf: s.csrf });
    assert.equal(rev.status, 303);
    assert.equal(rev.headers.get('location'), '/admin/page?revoked=ci');
    assert.equal(f.rows.rows.get('api_keys/ci')!.value.disabled, true);
    const list = await (await f.app.request(rev.headers.get('location')!, { headers: { cookie: s.cookie } })).text();
    assert.match(list, /Revoked ci\./);
    assert.match(list, /badge bad">revoked/);
    assert.deepEqual(f.lines.map((l) => l.fields.action), ['issue', 'rotate', 'revoke']);
  });

  test("a POST without the session CSRF token, or with another session's, is 403 and writes nothing", async () => {
    const f = fixture();
    const s = await signIn(f, WRITE_KEY);
    const other = await signIn(f, WRITE_KEY);
    for (const csrf of [undefined, 'forged', other.csrf]) {
      const res = await post(f, '/admin/page/keys', s.cookie, { ...(csrf ? { csrf } : {}), allowed_models: '*' });
      assert.equal(res.status, 403, String(csrf));
    }
    assert.equal(f.rows.rows.size, 0);
    assert.equal(f.lines.length, 0);
  });

  test('a POST from another origin is 403 even with the right token', async () => {
    const f = fixture();
    const s = await signIn(f, WRITE_KEY);
    for (const origin of ['http://evil.test', 'null']) {
      const res = await post(f, '/admin/page/keys', s.cookie, { csrf: s.csrf, allowed_models: '*' }, origin);
      assert.equal(res.status, 403, origin);
    }
    assert.equal(f.rows.rows.size, 0);
  });

  test('a read-only key reads but its write is refused 403 by the API; no write forms shown', async () => {
    const f = fixture();
    const s = await signIn(f, READ_KEY);
    const page = await (await f.app.request('/admin/page', { headers: { cookie: s.cookie } })).text();
    assert.match(page, /read only/);
    assert.ok(!page.includes('action="/admin/page/keys"'));
    const res = await post(f, '/admin/page/keys', s.cookie, { csrf: s.csrf, allowed_models: '*' });
    assert.equal(res.status, 403);
    assert.match(await res.text(), /may only read/);
    assert.equal(f.rows.rows.size, 0);
  });

  test('without a session a write is 401 and writes nothing', async () => {
    const f = fixture();
    const res = await post(f, '/admin/page/keys', '', { csrf: 'x', allowed_models: '*' });
    assert.equal(res.status, 401);
    assert.equal(f.rows.rows.size, 0);
  });
});

test('spend: the report per key as a table and an inline SVG chart', async () => {
  const f = fixture();
  const s = await signIn(f, READ_KEY);
  const page = await (await f.app.request('/admin/page', { headers: { cookie: s.cookie } })).text();
  assert.match(page, /<svg role="img" aria-label="spend over time"/);
  assert.match(page, /<polyline [^>]*points="[\d.]+,[\d.]+ [\d.]+,[\d.]+"/);
  assert.match(page, /<td class="mono">k1<\/td>\s*<td>daily<\/td>\s*<td>3\.7500<\/td>/);
});

describe("the status page's live view behind the session", () => {
  const config = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [${READ_KEY}] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;
  const resources = `_format_version: "1"
provider_keys: [{ display_name: echo, provider: echo }]
models: [{ display_name: status-view-model, provider_key: echo, model_name: m }]
`;

  async function gatewayAdmin() {
    const { gw } = await gatewayWith(resources, { config });
    const f = { app: createAdminApp(gw, undefined, [], gw) } as unknown as F;
    return { gw, f };
  }

  test('without a session: 401 and neither the page nor its JSON reads show the gateway', async () => {
    const { gw, f } = await gatewayAdmin();
    try {
      const page = await f.app.request('/admin/page/status');
      assert.equal(page.status, 401);
      const text = await page.text();
      assert.match(text, /action="\/admin\/page\/sign-in"/);
      assert.ok(!text.includes('status-view-model'));
      for (const read of ['config', 'models', 'drain', 'ready']) {
        const res = await f.app.request(`/admin/page/status/${read}`, {
          headers: { cookie: `${SESSION_COOKIE}=not-a-session` },
        });
        assert.equal(res.status, 401, read);
        const body = await res.text();
        assert.ok(!body.includes('status-view-model'), read);
        assert.equal(JSON.parse(body).error.type, 'authentication_error');
      }
      // The admin API key is not a session: the page is for a signed-in browser.
      const bearer = await f.app.request('/admin/page/status', { headers: { authorization: `Bearer ${READ_KEY}` } });
      assert.equal(bearer.status, 401);
    } finally {
      gw.stop();
    }
  });

  test('signed in: the status page with its refresh, the nonce CSP, links to its JSON reads here', async () => {
    const { gw, f } = await gatewayAdmin();
    try {
      const { cookie } = await signIn(f, READ_KEY);
      const dashboard = await (await f.app.request('/admin/page', { headers: { cookie } })).text();
      assert.match(dashboard, /<a href="\/admin\/page\/status">Status<\/a>/, "linked from the page's navigation");
      const res = await f.app.request('/admin/page/status', { headers: { cookie } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.match(res.headers.get('content-security-policy')!, /script-src 'nonce-[A-Za-z0-9_-]{43}'/);
      const text = await res.text();
      assert.match(text, /<meta http-equiv="refresh" content="5">/);
      assert.match(text, /status-view-model[\s\S]*healthy/);
      assert.match(text, /<a href="\/admin\/page">Admin page<\/a>/);
      for (const read of ['config', 'models', 'drain', 'ready']) {
        assert.ok(text.includes(`<a href="/admin/page/status/${read}">`), read);
      }
      assert.ok(!text.includes('href="/status/'), "no link to the status listener's paths");

      // Each JSON read is the status listener's own answer.
      const status = createStatusApp(gw);
      for (const read of ['config', 'models', 'drain', 'ready']) {
        const here = await f.app.request(`/admin/page/status/${read}`, { headers: { cookie } });
        const there = await status.request(`/status/${read}`);
        assert.equal(here.status, there.status, read);
        assert.equal(here.headers.get('content-type'), there.headers.get('content-type'), read);
        assert.equal(here.headers.get('cache-control'), 'no-store', read);
        const [a, b] = [await here.text(), await there.text()];
        if (read === 'config') {
          const strip = (t: string) => ({ ...JSON.parse(t), generated_at: undefined });
          assert.deepEqual(strip(a), strip(b));
        } else assert.equal(a, b, read);
      }
      assert.equal((await f.app.request('/admin/page/status/metrics', { headers: { cookie } })).status, 404);
    } finally {
      gw.stop();
    }
  });
});
