// The etcd configuration source in-process (a Gateway on the test platform) against a real etcd:
// per-row rejection, partially compatible rows, last-known-good pins, cross-references, state
// derivation, docs/etcd.md hashes, compaction, fetch failures, the snapshot cache, and no secret anywhere.
// Run: node --import tsx --test test/integration/etcd-source.test.ts
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { EtcdFetch } from '../../src/sources/etcd/client.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { createStatusApp } from '../../src/status/app.ts';
import { type EtcdTestGateway, seeder, startEtcdGateway } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { testPlatform } from '../support/platform.ts';
import { deadEndpoint } from '../support/process.ts';
import { latch } from '../support/until.ts';

const UPSTREAM_SECRET = 'sk-upstream-SECRET-value';
const CALLER_HASH = createHash('sha256').update('sk-caller-test-key').digest('hex');
const ETCD_PASSWORD = 'etcd-PASSWORD-secret';

// -- independent reference implementations of docs/operations.md -----------------------------------------------

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** FNV-1a (32-bit) of `bytes`. */
function fnv1a(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

/**
 * docs/etcd.md "Hashes and status": an entry's bucket is the top 12 bits of FNV-1a-32 of its key's UTF-8 bytes; a
 * bucket's digest is sha256 over its entries sorted by key bytes, each `key \0 canonical-json(value) \n` (raw text
 * when not JSON); the hash is sha256 over the digests of the non-empty buckets in bucket order.
 */
function expectedHash(entries: [string, string][]): string {
  const buckets = new Map<number, [string, string][]>();
  for (const e of entries) {
    const b = fnv1a(Buffer.from(e[0])) >>> 20;
    buckets.set(b, [...(buckets.get(b) ?? []), e]);
  }
  const top = createHash('sha256');
  for (const b of [...buckets.keys()].sort((x, y) => x - y)) {
    const sorted = buckets.get(b)!.sort(([x], [y]) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    const h = createHash('sha256');
    for (const [k, raw] of sorted) {
      let value: string;
      try {
        value = canonical(JSON.parse(raw));
      } catch {
        value = raw;
      }
      h.update(`${k}\0${value}\n`);
    }
    top.update(h.digest());
  }
  return top.digest('hex');
}

// -- helpers ---------------------------------------------------------------------------------------

// deno-lint-ignore no-explicit-any -- JSON under test
async function statusConfig(t: EtcdTestGateway): Promise<Record<string, any>> {
  const res = await createStatusApp(t.gw).request('/status/config');
  assert.equal(res.status, 200);
  // deno-lint-ignore no-explicit-any -- JSON under test
  return (await res.json()) as Record<string, any>;
}

async function metrics(t: EtcdTestGateway): Promise<string> {
  return (await createStatusApp(t.gw).request('/metrics')).text();
}

function rejectedByKey(t: EtcdTestGateway): Map<string, (typeof t.gw.facts.rejected)[number]> {
  return new Map(t.gw.facts.rejected.map((r) => [`${r.resource_kind}/${r.resource_id}`, r]));
}

/** Everything an operator can see: status, metrics, every log line. */
async function visibleText(t: EtcdTestGateway): Promise<string> {
  const status = await (await createStatusApp(t.gw).request('/status/config')).text();
  const models = await (await createStatusApp(t.gw).request('/status/models')).text();
  return `${status}\n${models}\n${await metrics(t)}\n${t.platform.logs.map((l) => JSON.stringify(l)).join('\n')}`;
}

function assertNoSecrets(text: string, extra: string[] = []): void {
  for (const s of [UPSTREAM_SECRET, CALLER_HASH, ETCD_PASSWORD, ...extra]) {
    assert.ok(!text.includes(s), `a secret (${s.slice(0, 8)}…) is visible`);
  }
}

/** A fetch whose Nth call to `path` waits for `release()`. */
function gatedFetch(path: string, n: number): { fetch: EtcdFetch; reached: Promise<void>; release(): void } {
  let calls = 0;
  const reached = latch();
  const release = latch();
  return {
    fetch: async (url, init) => {
      if (url.endsWith(path) && ++calls === n) {
        reached.resolve();
        await release.promise;
      }
      return fetch(url, init);
    },
    reached: reached.promise,
    release: release.resolve,
  };
}

/** A fetch that can be cut: requests fail and open streams break, as when etcd goes away. */
function cuttableFetch(): { fetch: EtcdFetch; cut(): void; heal(): void } {
  let broken = false;
  const open = new Set<AbortController>();
  return {
    fetch: async (url, init) => {
      if (broken) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED (test cut)') });
      const ctrl = new AbortController();
      init.signal?.addEventListener('abort', () => ctrl.abort(), { once: true });
      open.add(ctrl);
      try {
        return await fetch(url, { ...init, signal: ctrl.signal });
      } finally {
        if (!url.endsWith('/v3/watch')) open.delete(ctrl);
      }
    },
    cut() {
      broken = true;
      for (const c of open) c.abort(new Error('connection reset (test cut)'));
      open.clear();
    },
    heal() {
      broken = false;
    },
  };
}

const pk = (name = 'mock', extra: Record<string, unknown> = {}) => ({
  display_name: name,
  provider: 'openai',
  api_key: UPSTREAM_SECRET,
  api_base: 'http://127.0.0.1:9/v1',
  ...extra,
});
const model = (name: string, pkId = 'pk1', extra: Record<string, unknown> = {}) => ({
  display_name: name,
  model_name: `${name}-upstream`,
  provider_key_id: pkId,
  ...extra,
});

describe('etcd source (in-process, real etcd)', { timeout: 60_000 }, () => {
  let etcd: EtcdServer;
  let s: ReturnType<typeof seeder>;
  const gateways: EtcdTestGateway[] = [];
  const open = (o: Parameters<typeof startEtcdGateway>[0]): EtcdTestGateway => {
    const t = startEtcdGateway(o);
    gateways.push(t);
    return t;
  };

  before(async () => {
    etcd = await startEtcd();
    s = seeder(etcd.endpoint);
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await etcd?.stop();
  });

  test('each kind of bad row is rejected alone; unknown fields at any depth load and are counted', async () => {
    const P = '/rk';
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/provider_keys/pk2`, { display_name: 'broken', provider: 7, api_key: UPSTREAM_SECRET });
    await s.put(`${P}/models/m1`, model('m1', 'pk1', { future_field: 1, other: 'x', cooldown: { sticky: 1 } }));
    await s.put(`${P}/models/m3`, model('m3', 'pk1', { future_field: true }));
    await s.put(`${P}/models/a/b`, model('nested'));
    await s.put(`${P}/lonely`, '{}');
    await s.put(`${P}/routes/r1`, { x: 1 });
    await s.put(`${P}/models/m2`, `${UPSTREAM_SECRET} is not JSON`);
    await s.put(`${P}/models/m4`, '[1,2]');
    await s.put(`${P}/api_keys/k1`, { display_name: 'k', key_hash: 'NOT-A-HASH' });
    await s.put(`${P}/models/m5`, { ...model('m5'), id: 'other-id' });
    await s.put(`${P}2/models/zz`, model('outside the prefix'));

    const t = open({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const rejected = rejectedByKey(t);
    const kinds = Object.fromEntries([...rejected].map(([k, r]) => [k, r.last_error_kind]));
    assert.deepEqual(kinds, {
      'provider_keys/pk2': 'schema_failed',
      '/lonely': 'bad_key',
      'routes/r1': 'unknown_kind',
      'models/m2': 'non_json',
      'models/m4': 'schema_failed',
      'api_keys/k1': 'schema_failed',
    });
    assert.match(rejected.get('routes/r1')!.last_error, /unknown resource kind "routes"/);
    assert.match(rejected.get('api_keys/k1')!.last_error, /^allowed_models: /, 'allowed_models is required');
    assert.match(rejected.get('provider_keys/pk2')!.last_error, /^provider: /);
    for (const r of rejected.values()) {
      assert.match(r.first_seen_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'RFC 3339 UTC, whole seconds');
      assert.match(r.last_seen_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal(r.serving_stale_since, undefined);
    }
    assert.deepEqual(t.gw.facts.partiallyCompatible, [
      { resource_kind: 'models', field: 'cooldown.sticky', count: 1 },
      { resource_kind: 'models', field: 'future_field', count: 2 },
      { resource_kind: 'models', field: 'other', count: 1 },
    ]);
    const body = await statusConfig(t);
    assert.equal(body.state, 'degraded');
    assert.deepEqual(body.applied.resource_counts, { provider_keys: 1, models: 4 });
    assert.equal(t.gw.snapshot!.models.has('a/b'), true, 'a key id may contain /');
    assert.equal(t.gw.snapshot!.models.get('m5')!.id, 'm5', 'an id member is ignored');
    assert.equal('future_field' in t.gw.snapshot!.models.get('m1')!, false, 'unknown fields are dropped');
    const m = await metrics(t);
    assert.match(m, /aisix_config_rejected_resources\{kind="models"\} 2/);
    assert.match(m, /aisix_config_partially_compatible_resources\{kind="models"\} 2/, 'rows, not fields');
    assert.ok(t.platform.logs.some((l) => l.msg === 'etcd resource rejected' && l.key === `${P}/routes/r1`));
    assertNoSecrets(await visibleText(t));
  });

  test('last-known-good: a bad value pins the old one (serving_stale_since) until a clean put or a delete', async () => {
    const P = '/lkg';
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/models/m1`, model('m1', 'pk1', { model_name: 'v1' }));
    const t = open({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const served = () => t.gw.snapshot!.models.get('m1');
    assert.equal(served()?.kind === 'direct' && served()!.model_name, 'v1');

    await s.put(`${P}/models/m1`, 'oops {');
    await t.until(() => rejectedByKey(t).get('models/m1')?.serving_stale_since !== undefined, 'pin');
    const pin = rejectedByKey(t).get('models/m1')!;
    assert.equal(pin.last_error_kind, 'non_json');
    assert.equal(served()?.kind === 'direct' && served()!.model_name, 'v1', 'the previous value keeps serving');
    let body = await statusConfig(t);
    assert.equal(body.state, 'degraded');
    assert.equal(typeof body.rejected[0].serving_stale_age_seconds, 'number');
    assert.match(await metrics(t), /aisix_config_stale_served_resources\{kind="models"\} 1/);

    // Another bad value: still pinned, same since, new error.
    await s.put(`${P}/models/m1`, { display_name: 'm1', model_name: 5, provider_key_id: 'pk1' });
    await t.until(() => rejectedByKey(t).get('models/m1')?.last_error_kind === 'schema_failed', 'second bad value');
    const pin2 = rejectedByKey(t).get('models/m1')!;
    assert.equal(pin2.serving_stale_since, pin.serving_stale_since);
    assert.equal(pin2.first_seen_at, pin.first_seen_at);
    assert.match(pin2.last_error, /model_name/);

    // A clean put clears the pin and serves the new value.
    await s.put(`${P}/models/m1`, model('m1', 'pk1', { model_name: 'v2' }));
    await t.until(() => t.gw.facts.rejected.length === 0, 'pin cleared by a clean put');
    assert.equal(served()?.kind === 'direct' && served()!.model_name, 'v2');
    body = await statusConfig(t);
    assert.equal(body.state, 'synced');

    // Pinned again, then deleted: the key stops serving and its pin is gone.
    await s.put(`${P}/models/m1`, 'still not json');
    await t.until(() => rejectedByKey(t).get('models/m1')?.serving_stale_since !== undefined, 'pinned again');
    assert.notEqual(rejectedByKey(t).get('models/m1')!.serving_stale_since, undefined);
    await s.del(`${P}/models/m1`);
    await t.until(() => t.gw.facts.rejected.length === 0 && !t.gw.snapshot!.models.has('m1'), 'delete clears the pin');
    assert.match(await metrics(t), /aisix_config_stale_served_resources\{kind="models"\} 0/);
    assertNoSecrets(await visibleText(t));
  });

  test('an api key whose new value is rejected stops serving: a malformed revocation answers 401', async () => {
    const P = '/lkg-key';
    const key = { display_name: 'k', key_hash: CALLER_HASH, allowed_models: ['*'] };
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/models/m1`, model('m1'));
    await s.put(`${P}/api_keys/k1`, key);
    const t = open({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    const app = createProxyApp(t.gw);
    const models = () => app.request('/v1/models', { headers: { authorization: 'Bearer sk-caller-test-key' } });
    assert.equal((await models()).status, 200);
    for (const bad of [{ ...key, disabled: 'true' }, { ...key, expires_at: '2020-01-01' }]) {
      await s.put(`${P}/api_keys/k1`, bad);
      await t.until(() => rejectedByKey(t).has('api_keys/k1'), `${Object.keys(bad).at(-1)} rejected`);
      const res = await models();
      assert.equal(res.status, 401, JSON.stringify(bad));
      assert.equal((await res.json()).error.message, 'invalid API key');
      assert.equal(rejectedByKey(t).get('api_keys/k1')!.serving_stale_since, undefined, 'not pinned');
      assert.doesNotMatch(await metrics(t), /aisix_config_stale_served_resources\{kind="api_keys"\} [1-9]/);
      await s.put(`${P}/api_keys/k1`, key);
      await t.until(() => !rejectedByKey(t).has('api_keys/k1'), 'a valid value again');
      assert.equal((await models()).status, 200, 'a valid value serves again');
    }
  });

  test('state: an empty prefix is applied (empty, ready); rows are judged alone, with no cross-row rejection', async () => {
    const P = '/xref';
    const t = open({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    let body = await statusConfig(t);
    assert.equal(body.state, 'empty');
    assert.deepEqual(body.applied.resource_counts, {});
    assert.equal(body.source.source_hash, expectedHash([]));
    assert.equal(body.last_reload.successful, true);
    assert.equal(t.gw.snapshot?.size, 0);
    assert.equal((await createStatusApp(t.gw).request('/status/ready')).status, 200);

    // A model whose provider key does not exist loads (it fails at dispatch).
    await s.put(`${P}/models/m1`, model('m1'));
    await t.until(() => t.gw.snapshot?.models.has('m1') === true, 'model with a dangling key loads');
    assert.equal(t.gw.facts.rejected.length, 0);
    assert.equal((await statusConfig(t)).state, 'synced');

    // A routing target and an allowed_models entry naming nothing load too; api keys without a name, many.
    await s.put(`${P}/models/r1`, { display_name: 'r1', routing: { targets: [{ model: 'm1' }, { model: 'ghost' }] } });
    await s.put(`${P}/api_keys/k1`, { key_hash: CALLER_HASH, allowed_models: ['m1', 'nope', 'openai/*'] });
    await s.put(`${P}/api_keys/k2`, { key_hash: 'x', allowed_models: [], display_name: null });
    await s.put(`${P}/api_keys/k3`, { key_hash: 'y', allowed_models: [] });
    await t.until(() => t.gw.snapshot!.apiKeys.size === 3, 'api keys load');
    assert.equal(t.gw.facts.rejected.length, 0);
    assert.equal(t.gw.snapshot!.apiKeys.get('k2')!.display_name, undefined, 'null is absent');

    // Duplicate display names and key hashes all load; the index keeps the row written last.
    await s.put(`${P}/models/m9`, model('m1', 'pk1', { model_name: 'newer' }));
    await t.until(() => t.gw.snapshot!.models.has('m9'), 'duplicate name loads');
    const byName = t.gw.snapshot!.modelByName('m1');
    assert.equal(byName?.kind === 'direct' && byName.model_name, 'newer');
    await s.put(`${P}/models/m1`, model('m1', 'pk1', { model_name: 'newest' }));
    await t.until(() => {
      const m = t.gw.snapshot!.modelByName('m1');
      return m?.kind === 'direct' && m.model_name === 'newest';
    }, 'the row written last wins the name');
    await s.put(`${P}/api_keys/k4`, { key_hash: CALLER_HASH, allowed_models: ['*'] });
    await t.until(() => t.gw.snapshot!.apiKeyByHash(CALLER_HASH)?.id === 'k4', 'the key written last wins the hash');
    assert.equal(t.gw.facts.rejected.length, 0);

    // Everything deleted: applied, zero resources.
    await s.client.delete(`${P}/`, { prefix: true });
    await t.until(() => t.gw.snapshot?.size === 0, 'all deleted');
    body = await statusConfig(t);
    assert.equal(body.state, 'empty');
    assert.deepEqual(body.applied.resource_counts, {});
    assert.equal((await createStatusApp(t.gw).request('/status/ready')).status, 200, 'ready never goes back');
  });

  test('hashes are exactly docs/etcd.md; applied_revision follows every batch, apply_seq the config_hash', async () => {
    const P = '/hash';
    const rows: [string, string][] = [
      [`${P}/provider_keys/pk1`, `{ "provider": "openai",  "display_name": "pk", "api_key": "${UPSTREAM_SECRET}" }`],
      [
        `${P}/models/m1`,
        JSON.stringify({
          model_name: 'x',
          display_name: 'm1',
          provider_key_id: 'pk1',
          cost: { output_per_1k: 2, input_per_1k: 1.5 },
        }),
      ],
      [`${P}/models/bad`, 'not json at all'],
      // Code point order differs from UTF-16 order here: U+FF21 < U+1F600, but 0xFF21 > 0xD83D.
      [`${P}/models/\uFF21`, 'fullwidth'],
      [`${P}/models/\u{1F600}`, 'emoji'],
    ];
    for (const [k, v] of rows) await s.put(k, v);
    const t = open({ endpoint: etcd.endpoint, prefix: P });
    await t.source.firstApplied;
    let body = await statusConfig(t);
    assert.equal(body.source.source_hash, expectedHash(rows));
    assert.equal(body.applied.config_hash, expectedHash(rows.slice(0, 2)));
    assert.match(await metrics(t), new RegExp(`aisix_config_hash_info\\{hash="${body.applied.config_hash}"\\} 1`));
    const seq = body.applied.apply_seq as number;

    const v2 = JSON.stringify(model('m1', 'pk1', { model_name: 'y' }));
    const rev = await s.put(`${P}/models/m1`, v2);
    await t.until(() => t.gw.facts.applied?.applied_revision === rev, 'applied revision');
    body = await statusConfig(t);
    assert.equal(body.applied.apply_seq, seq + 1);
    assert.equal(body.source.observed_revision, rev);
    const now: [string, string][] = [rows[0]!, [`${P}/models/m1`, v2], ...rows.slice(2)];
    assert.equal(body.source.source_hash, expectedHash(now));
    assert.equal(body.applied.config_hash, expectedHash(now.slice(0, 2)));
    assert.match(await metrics(t), new RegExp(`aisix_config_applied_revision ${rev}\\b`));
    assert.match(await metrics(t), /aisix_config_source_connected 1/);

    // A pin: config_hash still covers the last-known-good value, source_hash the bad one.
    const rev2 = await s.put(`${P}/models/m1`, 'broken');
    await t.until(() => t.gw.facts.applied?.applied_revision === rev2, 'pin applied');
    body = await statusConfig(t);
    assert.equal(body.applied.apply_seq, seq + 1, 'apply_seq moves only when config_hash does');
    assert.equal(body.applied.config_hash, expectedHash(now.slice(0, 2)));
    assert.equal(body.source.source_hash, expectedHash([rows[0]!, [`${P}/models/m1`, 'broken'], ...rows.slice(2)]));
  });

  test('compaction under the watch → full resync, no failure recorded', async () => {
    const P = '/compact';
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/models/m1`, model('m1'));
    const gate = gatedFetch('/v3/watch', 1);
    const t = open({ endpoint: etcd.endpoint, prefix: P, fetch: gate.fetch });
    await t.source.firstApplied;
    await gate.reached;
    await s.put(`${P}/models/m2`, model('m2'));
    const last = await s.put(`${P}/models/m2`, model('m2', 'pk1', { model_name: 'final' }));
    await s.client.compact(last);
    gate.release();
    await t.until(() => (t.gw.facts.applied?.applied_revision ?? 0) >= last, 'resync after compaction');
    const m2 = t.gw.snapshot!.models.get('m2');
    assert.equal(m2?.kind === 'direct' && m2.model_name, 'final');
    assert.equal(t.gw.facts.lastFailure, null);
    assert.equal(
      t.platform.logs.filter((l) => l.msg === 'etcd configuration applied' && l.level === 'INFO').length,
      2,
      'two full reads',
    );
    // The new watch delivers events.
    await s.del(`${P}/models/m1`);
    await t.until(() => !t.gw.snapshot!.models.has('m1'), 'event after resync');
  });

  test('fetch errors: connected=false, last_failure fetch, backoff WARN; what serves and readiness stay', async () => {
    const P = '/cut';
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/models/m1`, model('m1'));
    const cut = cuttableFetch();
    const t = open({ endpoint: etcd.endpoint, prefix: P, fetch: cut.fetch });
    await t.source.firstApplied;
    const before = await statusConfig(t);
    cut.cut();
    await t.until(() => t.gw.facts.connected === false && t.gw.facts.lastFailure !== null, 'failure recorded');
    const body = await statusConfig(t);
    assert.equal(body.source.connected, false);
    assert.equal(body.last_reload.successful, false);
    assert.equal(body.last_failure.last_error_kind, 'fetch');
    assert.equal(body.state, 'synced', 'an unreachable source does not change state');
    assert.deepEqual(body.applied, before.applied, 'what serves is untouched');
    assert.equal((await createStatusApp(t.gw).request('/status/ready')).status, 200);
    const warn = t.platform.logs.find((l) => l.msg === 'etcd watch failed; backing off before reconnect');
    assert.ok(
      warn && warn.level === 'WARN' && typeof warn.backoff_ms === 'number' && typeof warn.error === 'string',
      JSON.stringify(warn),
    );
    assert.match(await metrics(t), /aisix_config_reload_failures_total\{reason="fetch"\} [1-9]/);

    cut.heal();
    await t.until(() => t.gw.facts.connected === true, 'reconnected');
    const rev = await s.put(`${P}/models/m2`, model('m2'));
    await t.until(() => t.gw.facts.applied?.applied_revision === rev, 'caught up');
    assert.equal((await statusConfig(t)).last_reload.successful, true);
    assert.equal((await statusConfig(t)).last_failure.last_error_kind, 'fetch', 'last_failure is sticky');
  });

  test('unreachable etcd before anything applied; missing TLS file and password variable are fetch errors naming them', async () => {
    const dead = await deadEndpoint();
    const t = open({
      endpoint: dead,
      prefix: '/none',
      etcdBlock: `etcd: { endpoints: ["${dead}"], prefix: /none, user: root, password_env: ETCD_PW }`,
      env: { ETCD_PW: ETCD_PASSWORD },
    });
    await t.until(() => t.gw.facts.lastFailure?.last_error_kind === 'fetch', 'fetch failure');
    assert.equal((await statusConfig(t)).state, 'never_loaded');
    assert.equal((await createStatusApp(t.gw).request('/status/ready')).status, 503);

    const tls = open({
      endpoint: etcd.endpoint,
      prefix: '/tls',
      etcdBlock: `etcd: { endpoints: ["${etcd.endpoint}"], prefix: /tls, tls: { ca_cert_file: /nope/ca.pem } }`,
    });
    await tls.until(() => tls.gw.facts.lastFailure !== null, 'tls failure');
    assert.match(tls.gw.facts.lastFailure!.last_error, /etcd\.tls\.ca_cert_file: cannot read \/nope\/ca\.pem/);
    assert.equal(tls.gw.facts.lastFailure!.last_error_kind, 'fetch');
    assert.ok(
      tls.platform.logs.some((l) =>
        l.msg === 'etcd watch failed; backing off before reconnect' && String(l.error).includes('/nope/ca.pem')
      ),
    );

    const pw = open({
      endpoint: etcd.endpoint,
      prefix: '/pw',
      etcdBlock: `etcd: { endpoints: ["${etcd.endpoint}"], prefix: /pw, user: root, password_env: NOT_SET_ANYWHERE }`,
    });
    await pw.until(() => pw.gw.facts.lastFailure !== null, 'password failure');
    assert.match(
      pw.gw.facts.lastFailure!.last_error,
      /etcd\.password_env: environment variable NOT_SET_ANYWHERE is not set/,
    );
    for (const g of [t, tls, pw]) assertNoSecrets(await visibleText(g));
  });

  test('snapshot cache: written after applies (pins included), restored with etcd unreachable; corrupt, foreign, unknown version ignored with a WARN', async () => {
    const P = '/cache';
    const path = '/c/cache.json';
    const extra = `managed: { snapshot_cache_path: ${path} }`;
    await s.put(`${P}/provider_keys/pk1`, pk());
    await s.put(`${P}/models/m1`, model('m1', 'pk1', { model_name: 'v1' }));
    const platform = testPlatform();
    // Count writes and their overlap; slow them down so a burst has to coalesce.
    let writes = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const write = platform.files!.writeAtomic;
    platform.files!.writeAtomic = async (p, d) => {
      writes++;
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await new Promise((r) => setTimeout(r, 30));
      await write(p, d);
      inFlight--;
    };
    const t1 = open({ endpoint: etcd.endpoint, prefix: P, extra, platform });
    await t1.source.firstApplied;
    await s.put(`${P}/models/m1`, '{ broken');
    await t1.until(() => t1.gw.facts.rejected[0]?.serving_stale_since !== undefined, 'pin');
    // A burst of 40 puts.
    let last = 0;
    for (let i = 0; i < 40; i++) {
      last = await s.put(`${P}/models/burst${i % 4}`, model(`burst${i % 4}`, 'pk1', { timeout: 1000 + i }));
    }
    await t1.until(() => t1.gw.facts.applied?.applied_revision === last, 'burst applied');
    await t1.source.flushCache();
    assert.equal(maxInFlight, 1, 'cache writes never overlap');
    assert.ok(writes < 30, `a burst is coalesced (${writes} writes)`);
    const doc = JSON.parse(platform.fileMap.get(path)!);
    assert.equal(doc.format, 'sluice-etcd-snapshot-cache');
    assert.equal(doc.version, 1);
    assert.equal(doc.prefix, P);
    assert.equal(doc.revision, last);
    assert.equal(
      JSON.parse(doc.rows[`${P}/models/m1`]).model_name,
      'v1',
      'the pinned key holds its last-known-good value',
    );
    assert.equal(doc.pins[`${P}/models/m1`].last_error_kind, 'non_json');
    const stale = t1.gw.facts.rejected[0]!.serving_stale_since;
    const hash = t1.gw.facts.applied!.config_hash;
    await t1.stop();

    // Restart with etcd unreachable: the cache serves at once, pins and all.
    const dead = await deadEndpoint();
    const t2 = open({ endpoint: dead, prefix: P, extra, platform });
    await t2.source.firstApplied;
    assert.equal(t2.gw.facts.applied!.config_hash, hash);
    assert.equal(t2.gw.facts.applied!.applied_revision, last);
    const m1 = t2.gw.snapshot!.models.get('m1');
    assert.equal(m1?.kind === 'direct' && m1.model_name, 'v1');
    assert.equal(t2.gw.facts.rejected[0]!.serving_stale_since, stale);
    assert.ok(
      t2.platform.logs.some((l) => l.msg === 'configuration restored from the snapshot cache' && l.path === path),
    );
    const body = await statusConfig(t2);
    assert.equal(body.state, 'degraded');
    assert.equal(body.source.connected, false);
    await t2.until(() => t2.gw.facts.lastFailure?.last_error_kind === 'fetch', 'fetch failure while serving the cache');
    assert.equal((await createStatusApp(t2.gw).request('/status/ready')).status, 200);
    assertNoSecrets(await visibleText(t2));
    await t2.stop();

    // Unusable caches: ignored with a WARN naming the path and the reason; nothing applied.
    const good = platform.fileMap.get(path)!;
    const cases: [string, string, RegExp][] = [
      ['corrupt', '{"format": "sluice-etcd-snap', /corrupt/],
      [
        'foreign',
        JSON.stringify({ ...JSON.parse(good), prefix: '/other' }),
        /foreign: written for etcd prefix "\/other"/,
      ],
      ['unknown version', JSON.stringify({ ...JSON.parse(good), version: 99 }), /unknown version 99/],
      ['tampered', good.replace('v1', 'v9'), /config_hash does not match/],
    ];
    for (const [what, text, reason] of cases) {
      const p = testPlatform();
      p.fileMap.set(path, text);
      const t = open({ endpoint: dead, prefix: P, extra, platform: p });
      await (t.source as unknown as { localRestore: Promise<void> }).localRestore;
      const warn = p.logs.find((l) => l.msg === 'snapshot cache ignored');
      assert.ok(warn && warn.level === 'WARN' && warn.path === path, `${what}: ${JSON.stringify(p.logs)}`);
      assert.match(String(warn.reason), reason, what);
      assert.equal(t.gw.snapshot, undefined, `${what}: nothing applied`);
      await t.stop();
    }
  });
});
