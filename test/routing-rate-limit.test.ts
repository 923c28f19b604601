import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryRateLimitStore, RateLimiter, type RateLimitSubject, windowEnd } from '../src/routing/rate-limit.ts';

function setup(start = 1_000_000_000_000) {
  const c = { t: start };
  const limiter = new RateLimiter({ now: () => c.t });
  return { c, limiter };
}

const key = (limits: RateLimitSubject['limits']): RateLimitSubject => ({ scope: 'api_key', id: 'k1', limits });

test('no limits → always allowed', async () => {
  const { limiter } = setup();
  for (let i = 0; i < 100; i++) assert.equal((await limiter.acquire([key(undefined), key({})])).allowed, true);
});

test('rps: the limit per second, then Retry-After until the next second', async () => {
  const { c, limiter } = setup(1_000_000_000_300);
  const s = [key({ rps: 2 })];
  assert.equal((await limiter.acquire(s)).allowed, true);
  assert.equal((await limiter.acquire(s)).allowed, true);
  const refused = await limiter.acquire(s);
  assert.deepEqual(refused, { allowed: false, retryAfterSecs: 1, scope: 'api_key', id: 'k1', dimension: 'rps' });
  c.t += 700; // next second
  assert.equal((await limiter.acquire(s)).allowed, true);
});

test('rpm: Retry-After is the rest of the minute', async () => {
  const minute = 60_000 * 16_666_667;
  const { c, limiter } = setup(minute + 10_000);
  const s = [key({ rpm: 3 })];
  for (let i = 0; i < 3; i++) assert.equal((await limiter.acquire(s)).allowed, true);
  const refused = await limiter.acquire(s);
  assert.equal(refused.allowed, false);
  assert.equal(!refused.allowed && refused.retryAfterSecs, 50);
  assert.equal(!refused.allowed && refused.dimension, 'rpm');
  c.t = minute + 60_000;
  assert.equal((await limiter.acquire(s)).allowed, true);
});

test('tpm: charged after the response; refused once the minute is spent', async () => {
  const minute = 60_000 * 16_666_667;
  const { c, limiter } = setup(minute + 45_000);
  const s = [key({ tpm: 100 })];
  const first = await limiter.acquire(s);
  assert.ok(first.allowed);
  // A second request is admitted too: the first one's tokens are not known yet.
  const second = await limiter.acquire(s);
  assert.ok(second.allowed);
  await first.permit.charge(60);
  assert.equal((await limiter.acquire(s)).allowed, true);
  await second.permit.charge(40);
  const refused = await limiter.acquire(s);
  assert.deepEqual(refused, { allowed: false, retryAfterSecs: 15, scope: 'api_key', id: 'k1', dimension: 'tpm' });
  c.t = minute + 60_000;
  assert.equal((await limiter.acquire(s)).allowed, true);
});

test('concurrency: acquire/release, Retry-After 1, release is idempotent', async () => {
  const { limiter } = setup();
  const s = [key({ concurrency: 2 })];
  const a = await limiter.acquire(s);
  const b = await limiter.acquire(s);
  assert.ok(a.allowed && b.allowed);
  assert.deepEqual(await limiter.acquire(s), {
    allowed: false,
    retryAfterSecs: 1,
    scope: 'api_key',
    id: 'k1',
    dimension: 'concurrency',
  });
  await a.permit.release();
  await a.permit.release();
  const c2 = await limiter.acquire(s);
  assert.ok(c2.allowed);
  assert.equal((await limiter.acquire(s)).allowed, false, 'a double release must not free two slots');
});

test('api key and model limits both apply; a refusal consumes nothing', async () => {
  const { c, limiter } = setup(1_000_000_020_000);
  const apiKey: RateLimitSubject = { scope: 'api_key', id: 'k1', limits: { rpm: 2 } };
  const model: RateLimitSubject = { scope: 'model', id: 'm1', limits: { rps: 1, concurrency: 5 } };
  const first = await limiter.acquire([apiKey, model]);
  assert.ok(first.allowed);
  const refused = await limiter.acquire([apiKey, model]);
  assert.equal(!refused.allowed && refused.scope, 'model');
  assert.equal(!refused.allowed && refused.dimension, 'rps');
  c.t += 1000;
  // The refused request did not use the key's rpm: one more is still allowed this minute.
  assert.equal((await limiter.acquire([apiKey, model])).allowed, true);
  c.t += 1000;
  const byKey = await limiter.acquire([apiKey, model]);
  assert.equal(!byKey.allowed && byKey.dimension, 'rpm');
  assert.equal(!byKey.allowed && byKey.retryAfterSecs, 58);
});

test('the longest wait wins when several dimensions refuse', async () => {
  const { limiter } = setup(1_000_000_000_000);
  const s = [key({ rps: 1, rpm: 1 })];
  await limiter.acquire(s);
  const refused = await limiter.acquire(s);
  assert.equal(!refused.allowed && refused.dimension, 'rpm');
  assert.equal(!refused.allowed && refused.retryAfterSecs, 20);
});

test('memory store: fixed windows aligned to the epoch, old windows swept', async () => {
  assert.equal(windowEnd(1_500, 1000), 2000);
  assert.equal(windowEnd(2_000, 1000), 3000);
  const store = new MemoryRateLimitStore();
  const w = { key: 'k', windowMs: 1000, limit: 1, cost: 1 };
  assert.deepEqual(await store.consume({ windows: [w], slots: [] }, 100), { ok: true });
  assert.deepEqual(await store.consume({ windows: [w], slots: [] }, 900), {
    ok: false,
    windows: [{ index: 0, resetAt: 1000 }],
    slots: [],
  });
  assert.deepEqual(await store.consume({ windows: [w], slots: [] }, 1000), { ok: true });
  for (let i = 0; i < MemoryRateLimitStore.SWEEP_EVERY; i++) await store.consume({ windows: [], slots: [] }, 10_000);
  assert.deepEqual(await store.consume({ windows: [w], slots: [] }, 10_000), { ok: true });
});
