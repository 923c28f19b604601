// The admin write API through the admin app's `app.request()` (docs/admin.md), over an in-memory row store with
// etcd's revision rules: issue (plaintext once, hash stored), scopes, rotation's grace, revocation, edits and
// their validation, the audit line, and AISIX's read-only answers where writes are not enabled.
// Run: node --import tsx --test test/unit/admin-writes.test.ts
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { type AdminView, createAdminApp } from '../../src/admin/app.ts';
import { MemoryRows } from '../../src/admin/etcd-rows.ts';
import { adminWritesFor } from '../../src/admin/write-setup.ts';
import { AUDIT_MSG, createAdminWrites } from '../../src/admin/writes.ts';
import { type ApiKey, ApiKeySchema } from '../../src/resources/schema.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import { authenticateKey } from '../../src/proxy/auth.ts';
import { ProxyError } from '../../src/http/errors.ts';

const READ_KEY = 'admin-read-SECRET-1';
const WRITE_KEY = 'admin-write-SECRET-2';
const T0 = Date.parse('2026-12-05T12:00:00Z');

interface Fixture {
  app: ReturnType<typeof createAdminApp>;
  rows: MemoryRows;
  lines: { msg: string; fields: Record<string, unknown> }[];
  clock: { now: number };
}

function fixture(): Fixture {
  const rows = new MemoryRows();
  const lines: Fixture['lines'] = [];
  const clock = { now: T0 };
  const writes = createAdminWrites({
    rows,
    writeKeys: [WRITE_KEY],
    readKeys: [READ_KEY],
    log: { info: (msg, fields) => lines.push({ msg, fields: fields ?? {} }) },
    now: () => clock.now,
  });
  // The write routes read nothing of the view but its admin keys; the reads are admin-api.test.ts's.
  const view = { config: { admin: { admin_keys: [READ_KEY], write_keys: [WRITE_KEY] } } } as unknown as AdminView;
  return { app: createAdminApp(view, undefined, [writes]), rows, lines, clock };
}

function send(f: Fixture, method: string, path: string, body?: unknown, key = WRITE_KEY) {
  return f.app.request(path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
}

/** The snapshot every replica would build from the rows etcd now holds. */
function snapshotOf(rows: MemoryRows): Snapshot {
  const api_keys: ApiKey[] = [...rows.rows].map(([k, r]) => ({
    ...ApiKeySchema.parse(r.value),
    id: k.slice('api_keys/'.length),
  }));
  return new Snapshot({ provider_keys: [], models: [], api_keys });
}

async function auth(rows: MemoryRows, token: string, now: number): Promise<string> {
  const r = await authenticateKey(token, snapshotOf(rows), now);
  return r instanceof ProxyError ? `${r.status} ${r.code ?? r.message}` : `ok ${r.id}`;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('issuing a key', () => {
  test('201 with the plaintext once; etcd holds only its hash; the key authenticates', async () => {
    const f = fixture();
    const res = await send(f, 'POST', '/admin/v1/api_keys', {
      id: 'team-a-ci',
      allowed_models: ['gpt-*'],
      team_id: 'team-a',
    });
    assert.equal(res.status, 201);
    const body = await res.json() as { id: string; key: string; value: Record<string, unknown>; revision: number };
    assert.equal(body.id, 'team-a-ci');
    assert.match(body.key, /^sk-sluice-[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(body.value, { key_hash: '[redacted]', allowed_models: ['gpt-*'], team_id: 'team-a' });
    assert.equal(body.revision, f.rows.revision);
    assert.deepEqual(f.rows.rows.get('api_keys/team-a-ci')?.value, {
      key_hash: sha256(body.key),
      allowed_models: ['gpt-*'],
      team_id: 'team-a',
    });
    assert.equal(await auth(f.rows, body.key, T0), 'ok team-a-ci');
    assert.deepEqual(f.lines, [{
      msg: AUDIT_MSG,
      fields: {
        action: 'issue',
        kind: 'api_keys',
        id: 'team-a-ci',
        revision: body.revision,
        admin_key: 'write_keys[0]',
        changed: 'allowed_models,team_id',
      },
    }]);
    assert.ok(!JSON.stringify(f.lines).includes(body.key) && !JSON.stringify(f.lines).includes(sha256(body.key)));
  });

  test('without an id one is generated; an existing id is 409; each issue is a different key', async () => {
    const f = fixture();
    const a = await (await send(f, 'POST', '/admin/v1/api_keys', { allowed_models: [] })).json() as {
      id: string;
      key: string;
    };
    assert.match(a.id, /^[0-9a-f-]{36}$/);
    const again = await send(f, 'POST', '/admin/v1/api_keys', { id: a.id, allowed_models: [] });
    assert.equal(again.status, 409);
    const b = await (await send(f, 'POST', '/admin/v1/api_keys', { allowed_models: [] })).json() as { key: string };
    assert.notEqual(a.key, b.key);
  });

  test('a body the key schema refuses is 400 naming the member; server members are refused', async () => {
    const f = fixture();
    const cases: [unknown, RegExp][] = [
      [{}, /allowed_models/],
      [{ allowed_models: 'gpt' }, /allowed_models/],
      [{ allowed_models: [], expires_at: 'tomorrow' }, /expires_at: must be an RFC 3339 timestamp/],
      [{ allowed_models: [], key_hash: 'abc' }, /key_hash: set by the server/],
      [{ allowed_models: [], colour: 'red' }, /colour: not a member a write may set/],
      [{ allowed_models: [], id: 'a/b' }, /^id: /],
      [[1], /JSON object/],
    ];
    for (const [body, message] of cases) {
      const res = await send(f, 'POST', '/admin/v1/api_keys', body);
      const text = await res.text();
      assert.equal(res.status, 400, text);
      assert.match((JSON.parse(text) as { error: { message: string } }).error.message, message);
    }
    assert.equal(f.rows.rows.size, 0);
    assert.equal(f.lines.length, 0);
  });
});

describe('scopes', () => {
  test('a read-only admin key reads but gets 403 on a write; no key 401; a wrong key 401', async () => {
    const f = fixture();
    assert.equal((await send(f, 'POST', '/admin/v1/api_keys', { allowed_models: [] }, READ_KEY)).status, 403);
    assert.equal((await send(f, 'POST', '/admin/v1/api_keys', { allowed_models: [] }, 'nope')).status, 401);
    const bare = await f.app.request('/admin/v1/api_keys', { method: 'POST', body: '{}' });
    assert.equal(bare.status, 401);
    assert.equal(f.rows.rows.size, 0);
  });

  test('a write key reads too; GET on rotate is 405 with Allow: POST', async () => {
    const f = fixture();
    const res = await send(f, 'GET', '/admin/v1/api_keys/k/rotate');
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'POST');
    const put = await send(f, 'PUT', '/admin/v1/api_keys/k', {});
    assert.equal(put.status, 405);
    assert.equal(put.headers.get('allow'), 'GET,HEAD,PATCH,DELETE');
  });

  test('file mode, or no write_keys: no write API (AISIX read-only answers stay)', () => {
    const base = {
      resources_file: undefined,
      etcd: { endpoints: ['http://127.0.0.1:2379'], prefix: '/aisix' },
      admin: { admin_keys: [READ_KEY], write_keys: [WRITE_KEY] },
    };
    const host = (config: unknown) => ({ config, platform: { env: {}, name: 'node' }, log: { info() {} } }) as never;
    assert.ok(adminWritesFor(host(base)));
    assert.equal(adminWritesFor(host({ ...base, resources_file: 'r.yaml', etcd: { endpoints: [] } })), undefined);
    assert.equal(adminWritesFor(host({ ...base, admin: { admin_keys: [READ_KEY], write_keys: [] } })), undefined);
  });
});

describe('rotation, revocation, edits', () => {
  async function issued(f: Fixture): Promise<string> {
    const res = await send(f, 'POST', '/admin/v1/api_keys', { id: 'k1', allowed_models: ['*'] });
    return (await res.json() as { key: string }).key;
  }

  test('rotate: new key at once, old key until the grace ends, then 401', async () => {
    const f = fixture();
    const old = await issued(f);
    const res = await send(f, 'POST', '/admin/v1/api_keys/k1/rotate', { grace_seconds: 600 });
    assert.equal(res.status, 200);
    const body = await res.json() as { key: string; value: Record<string, unknown> };
    assert.notEqual(body.key, old);
    assert.deepEqual(body.value.previous_key_hashes, [
      { key_hash: '[redacted]', expires_at: new Date(T0 + 600_000).toISOString() },
    ]);
    assert.equal(await auth(f.rows, body.key, T0), 'ok k1');
    assert.equal(await auth(f.rows, old, T0 + 599_000), 'ok k1');
    assert.equal(await auth(f.rows, old, T0 + 600_000), '401 api_key_expired');
    assert.equal(await auth(f.rows, body.key, T0 + 600_000), 'ok k1');
    assert.equal(f.lines.at(-1)?.fields.action, 'rotate');
  });

  test('rotate with grace 0 drops the old key at once; a second rotation keeps unexpired hashes', async () => {
    const f = fixture();
    const first = await issued(f);
    const r1 = await (await send(f, 'POST', '/admin/v1/api_keys/k1/rotate', {})).json() as { key: string };
    const r2 = await (await send(f, 'POST', '/admin/v1/api_keys/k1/rotate', { grace_seconds: 0 })).json() as {
      key: string;
    };
    assert.equal(await auth(f.rows, first, T0), 'ok k1', 'the default grace (an hour) still holds');
    assert.equal(await auth(f.rows, r1.key, T0), '401 invalid API key', 'grace 0');
    assert.equal(await auth(f.rows, r2.key, T0), 'ok k1');
    const bad = await send(f, 'POST', '/admin/v1/api_keys/k1/rotate', { grace_seconds: -1 });
    assert.equal(bad.status, 400);
    assert.equal((await send(f, 'POST', '/admin/v1/api_keys/nope/rotate')).status, 404);
  });

  test('revoke: the key and every hash in grace are 401 at once', async () => {
    const f = fixture();
    const old = await issued(f);
    const rotated = await (await send(f, 'POST', '/admin/v1/api_keys/k1/rotate', {})).json() as { key: string };
    const res = await send(f, 'POST', '/admin/v1/api_keys/k1/revoke');
    assert.equal(res.status, 200);
    assert.equal(await auth(f.rows, rotated.key, T0), '401 api_key_disabled');
    assert.equal(await auth(f.rows, old, T0), '401 invalid API key');
    assert.equal(f.lines.at(-1)?.fields.action, 'revoke');
  });

  test('PATCH sets allowed models, limits and budgets; null removes; DELETE removes the row', async () => {
    const f = fixture();
    const key = await issued(f);
    const budgets = [{ name: 'daily', limit_usd: 5, window: 'daily' }];
    const res = await send(f, 'PATCH', '/admin/v1/api_keys/k1', {
      allowed_models: ['gpt-4o'],
      rate_limit: { rpm: 10 },
      budgets,
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const stored = f.rows.rows.get('api_keys/k1')!.value;
    assert.deepEqual(stored.allowed_models, ['gpt-4o']);
    assert.deepEqual(stored.rate_limit, { rpm: 10 });
    assert.equal(stored.key_hash, sha256(key), 'an edit keeps the key');
    assert.equal(f.lines.at(-1)?.fields.changed, 'allowed_models,rate_limit,budgets');
    await send(f, 'PATCH', '/admin/v1/api_keys/k1', { rate_limit: null });
    assert.equal('rate_limit' in f.rows.rows.get('api_keys/k1')!.value, false);
    const bad = await send(f, 'PATCH', '/admin/v1/api_keys/k1', { rate_limit: { rpm: -1 } });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /rate_limit\.rpm/);
    assert.equal((await send(f, 'DELETE', '/admin/v1/api_keys/k1')).status, 200);
    assert.equal(f.rows.rows.size, 0);
    assert.equal((await send(f, 'DELETE', '/admin/v1/api_keys/k1')).status, 404);
  });

  test('a write that loses a race is recomputed from the row as it now is', async () => {
    const f = fixture();
    await issued(f);
    // Another writer changes the row between this write's read and its put, once.
    const put = f.rows.put.bind(f.rows);
    let raced = false;
    f.rows.put = async (kind, id, value, expected) => {
      if (!raced) {
        raced = true;
        const row = f.rows.rows.get(`${kind}/${id}`)!;
        await put(kind, id, { ...row.value, team_id: 'other-writer' }, row.modRevision);
      }
      return put(kind, id, value, expected);
    };
    const res = await send(f, 'PATCH', '/admin/v1/api_keys/k1', { user_id: 'u1' });
    assert.equal(res.status, 200);
    const stored = f.rows.rows.get('api_keys/k1')!.value;
    assert.equal(stored.team_id, 'other-writer');
    assert.equal(stored.user_id, 'u1');
  });
});

describe('models', () => {
  test("PATCH sets a model row's budgets and rate limit, keeping the rest; other members 400", async () => {
    const f = fixture();
    const model = { display_name: 'gpt', model_name: 'gpt-up', provider_key_id: 'pk1' };
    await f.rows.put('models', 'm1', model, 0);
    const budgets = [{ limit_usd: 100, window: 'monthly' }];
    const res = await send(f, 'PATCH', '/admin/v1/models/m1', { budgets, rate_limit: { tpm: 1000 } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.deepEqual(f.rows.rows.get('models/m1')!.value, { ...model, budgets, rate_limit: { tpm: 1000 } });
    assert.deepEqual(f.lines.at(-1)?.fields, {
      action: 'update',
      kind: 'models',
      id: 'm1',
      revision: f.rows.revision,
      admin_key: 'write_keys[0]',
      changed: 'budgets,rate_limit',
    });
    await send(f, 'PATCH', '/admin/v1/models/m1', { rate_limit: null });
    assert.equal('rate_limit' in f.rows.rows.get('models/m1')!.value, false);

    const cases: [unknown, RegExp][] = [
      [{ model_name: 'other' }, /model_name: a model write may set rate_limit, budgets only/],
      [{ budgets: [{ limit_usd: 1, window: 'hourly' }] }, /^budgets\.0\.window: /],
    ];
    for (const [body, message] of cases) {
      const r = await send(f, 'PATCH', '/admin/v1/models/m1', body);
      assert.equal(r.status, 400);
      assert.match((await r.json() as { error: { message: string } }).error.message, message);
    }
    assert.equal((await send(f, 'PATCH', '/admin/v1/models/nope', { budgets })).status, 404);
    assert.equal((await send(f, 'PATCH', '/admin/v1/models/m1', { budgets }, READ_KEY)).status, 403);
    assert.equal((await send(f, 'DELETE', '/admin/v1/models/m1')).status, 405, 'AISIX read-only answer');
  });
});
