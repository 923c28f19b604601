import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bucketSpec,
  MemoryRateLimitStore,
  RateLimiter,
  rateLimitHeaders,
  type RateLimitSubject,
  windowStart,
} from '../../src/routing/rate-limit.ts';
import { RateLimitSchema } from '../../src/resources/schema.ts';

function setup(start = 1_000_000_000_000) {
  const c = { t: start };
  const refusals: string[] = [];
  const limiter = new RateLimiter({
    store: new MemoryRateLimitStore({ now: () => c.t }),
    onRefused: (kind, scope) => refusals.push(`${kind}/${scope}`),
  });
  return { c, limiter, refusals };
}

const key = (limits: RateLimitSubject['limits']): RateLimitSubject => ({ scope: 'api_key', id: 'k1', limits });
const refusal = (d: Awaited<ReturnType<RateLimiter['acquire']>>) =>
  d.allowed ? undefined : { secs: d.retryAfterSecs, scope: d.scope, dim: d.dimension, kind: d.kind };

test('no limits → always allowed, no headers', async () => {
  const { limiter } = setup();
  for (let i = 0; i < 100; i++) {
    const d = await limiter.acquire([key(undefined), key({}), key(null), key({ rpm: null, tpm: null })]);
    assert.equal(d.allowed, true);
    assert.equal(d.headers, undefined);
  }
});

test('rps: the limit per second, then Retry-After until the next second', async () => {
  const { c, limiter, refusals } = setup(1_000_000_000_300);
  const s = [key({ rps: 2 })];
  assert.equal((await limiter.acquire(s)).allowed, true);
  assert.equal((await limiter.acquire(s)).allowed, true);
  assert.deepEqual(refusal(await limiter.acquire(s)), { secs: 1, scope: 'api_key', dim: 'rps', kind: 'requests' });
  assert.deepEqual(refusals, ['requests/api_key']);
  c.t += 700; // next second
  assert.equal((await limiter.acquire(s)).allowed, true);
});

test('rpm, rph, rpd: Retry-After is the rest of the refusing window', async () => {
  const minute = 60_000 * 16_666_667;
  const { c, limiter } = setup(minute + 10_000);
  const s = [key({ rpm: 3 })];
  for (let i = 0; i < 3; i++) assert.equal((await limiter.acquire(s)).allowed, true);
  assert.deepEqual(refusal(await limiter.acquire(s)), { secs: 50, scope: 'api_key', dim: 'rpm', kind: 'requests' });
  c.t = minute + 60_000;
  assert.equal((await limiter.acquire(s)).allowed, true);

  const hour = 3_600_000 * 277_778;
  c.t = hour + 600_500;
  const h = [key({ rph: 1 })];
  assert.equal((await limiter.acquire(h)).allowed, true);
  assert.deepEqual(refusal(await limiter.acquire(h)), { secs: 3000, scope: 'api_key', dim: 'rph', kind: 'requests' });

  const day = 86_400_000 * 11_575;
  c.t = day + 86_399_000;
  const d = [{ scope: 'api_key' as const, id: 'k2', limits: { rpd: 1 } }];
  assert.equal((await limiter.acquire(d)).allowed, true);
  assert.deepEqual(refusal(await limiter.acquire(d)), { secs: 1, scope: 'api_key', dim: 'rpd', kind: 'requests' });
  c.t = day + 86_400_000;
  assert.equal((await limiter.acquire(d)).allowed, true);
});

test('tpm/tpd: checked before, charged after; refused once the window is over the limit', async () => {
  const minute = 60_000 * 16_666_667;
  const { c, limiter } = setup(minute + 45_000);
  const s = [key({ tpm: 100, tpd: 1000 })];
  const first = await limiter.acquire(s);
  assert.ok(first.allowed && first.permit.chargesTokens);
  // A second request is admitted too: the first one's tokens are not known yet.
  const second = await limiter.acquire(s);
  assert.ok(second.allowed);
  await first.permit.end(60);
  assert.equal((await limiter.acquire(s)).allowed, true);
  await second.permit.end(40);
  // 100 ≤ 100: still admitted (AISIX refuses only above the limit).
  const third = await limiter.acquire(s);
  assert.ok(third.allowed);
  await third.permit.end(1);
  assert.deepEqual(refusal(await limiter.acquire(s)), { secs: 15, scope: 'api_key', dim: 'tpm', kind: 'tokens' });
  c.t = minute + 60_000;
  assert.equal((await limiter.acquire(s)).allowed, true);
});

test('concurrency: acquire/end, Retry-After 1, end is idempotent', async () => {
  const { limiter } = setup();
  const s = [key({ concurrency: 2 })];
  const a = await limiter.acquire(s);
  const b = await limiter.acquire(s);
  assert.ok(a.allowed && b.allowed);
  assert.deepEqual(refusal(await limiter.acquire(s)), {
    secs: 1,
    scope: 'api_key',
    dim: 'concurrency',
    kind: 'concurrency',
  });
  await a.permit.end();
  await a.permit.end();
  const c2 = await limiter.acquire(s);
  assert.ok(c2.allowed);
  assert.equal((await limiter.acquire(s)).allowed, false, 'a double end must not free two slots');
});

test('0 is a limit (AISIX): requests and concurrency refuse all; tokens admit until one is charged', async () => {
  const { limiter } = setup();
  for (const dim of ['rps', 'rpm', 'rph', 'rpd', 'concurrency'] as const) {
    assert.equal(refusal(await limiter.acquire([{ scope: 'model', id: dim, limits: { [dim]: 0 } }]))?.dim, dim);
  }
  const t = [{ scope: 'model' as const, id: 't', limits: { tpm: 0 } }];
  const first = await limiter.acquire(t);
  assert.ok(first.allowed);
  await first.permit.end(1);
  assert.equal(refusal(await limiter.acquire(t))?.dim, 'tpm');
});

test('api key and model limits both apply; a refusal consumes nothing; AISIX check order', async () => {
  const { c, limiter, refusals } = setup(1_000_000_020_000);
  const apiKey: RateLimitSubject = { scope: 'api_key', id: 'k1', limits: { rpm: 2 } };
  const model: RateLimitSubject = { scope: 'model', id: 'm1', name: 'gpt', limits: { rps: 1, concurrency: 5 } };
  const first = await limiter.acquire([apiKey, model]);
  assert.ok(first.allowed);
  assert.deepEqual(refusal(await limiter.acquire([apiKey, model])), {
    secs: 1,
    scope: 'model',
    dim: 'rps',
    kind: 'requests',
  });
  assert.deepEqual(refusals, ['requests/model']);
  c.t += 1000;
  // The refused request did not use the key's rpm: one more is still allowed this minute.
  assert.equal((await limiter.acquire([apiKey, model])).allowed, true);
  c.t += 1000;
  assert.deepEqual(refusal(await limiter.acquire([apiKey, model])), {
    secs: 58,
    scope: 'api_key',
    dim: 'rpm',
    kind: 'requests',
  });
  // Within a bucket the first refusing dimension in AISIX's order wins (rps before rpm).
  const { limiter: l2 } = setup(1_000_000_000_000);
  const s = [key({ rps: 1, rpm: 1 })];
  await l2.acquire(s);
  assert.equal(refusal(await l2.acquire(s))?.dim, 'rps');
});

test('x-ratelimit-* headers: AISIX names and formats, from the API key bucket', async () => {
  const minute = 60_000 * 16_666_667;
  const { limiter } = setup(minute + 15_400);
  const s: RateLimitSubject[] = [
    { scope: 'api_key', id: 'k', limits: { rpm: 10, tpm: 500, concurrency: 4 } },
    { scope: 'model', id: 'm', limits: { rpm: 1 } },
  ];
  const d = await limiter.acquire(s);
  assert.ok(d.allowed);
  assert.deepEqual(d.headers, {
    'x-ratelimit-limit-requests': '10',
    'x-ratelimit-remaining-requests': '9',
    'x-ratelimit-reset-requests': '45s',
    'x-ratelimit-limit-tokens': '500',
    'x-ratelimit-remaining-tokens': '500',
    'x-ratelimit-reset-tokens': '45s',
    'x-ratelimit-limit-concurrent': '4',
    'x-ratelimit-remaining-concurrent': '3',
  });
  await d.permit.end(120);
  const refused = await limiter.acquire(s); // the model's rpm refuses; the key's headers show its counts
  assert.equal(refused.allowed, false);
  assert.equal(refused.headers?.['x-ratelimit-remaining-tokens'], '380');
  assert.equal(refused.headers?.['x-ratelimit-remaining-requests'], '9');
  // Only the configured families.
  assert.deepEqual(rateLimitHeaders(bucketSpec('b', { rps: 1 })!, { inFlight: 0, used: [0] }, 0), undefined);
});

test('schema: every AISIX member, ≥ 0 integers or null; unknown members rejected', () => {
  const all = { rps: 0, rpm: 1, rph: 2, rpd: 3, tpm: 4, tpd: 5, concurrency: 6 };
  assert.deepEqual(RateLimitSchema.parse(all), all);
  assert.deepEqual(RateLimitSchema.parse({ rpm: null }), { rpm: null });
  assert.equal(RateLimitSchema.safeParse({ rpm: -1 }).success, false);
  assert.equal(RateLimitSchema.safeParse({ rpm: 1.5 }).success, false);
  assert.equal(RateLimitSchema.safeParse({ rpw: 1 }).success, false);
});

test('memory store: fixed windows aligned to the epoch, old windows swept', async () => {
  assert.equal(windowStart(1_799, 60), 1_740);
  assert.equal(windowStart(1_800, 60), 1_800);
  const c = { t: 100 };
  const store = new MemoryRateLimitStore({ now: () => c.t });
  const s = [bucketSpec('k', { rps: 1 })!];
  assert.equal((await store.acquire(s, 'a')).refused, undefined);
  c.t = 900;
  assert.deepEqual((await store.acquire(s, 'b')).refused, { bucket: 0, dim: 'rps', retryAfterSecs: 1 });
  c.t = 1000;
  assert.equal((await store.acquire(s, 'c')).refused, undefined);
  c.t = 10_000;
  for (let i = 0; i < MemoryRateLimitStore.SWEEP_EVERY; i++) await store.acquire([], 'x');
  assert.equal((await store.acquire(s, 'd')).refused, undefined);
});
