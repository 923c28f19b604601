import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Routing, RoutingSchema } from '../../src/resources/schema.ts';
import {
  type Candidate,
  cookieValue,
  DEFAULT_HASH_ON,
  hash32,
  hashKeyOf,
  type HealthState,
  integerWeights,
  type PickContext,
  pickTargets,
  RoutingState,
} from '../../src/routing/strategies.ts';

interface C extends Candidate {
  name: string;
}

function routing(fields: Partial<Routing> & { targets?: Routing['targets'] }): Routing {
  return RoutingSchema.parse({ targets: [{ model: 'x' }], ...fields });
}

function cand(name: string, opts: { weight?: number; priority?: number; health?: HealthState } = {}): C {
  return {
    name,
    modelId: `id-${name}`,
    weight: opts.weight ?? 1,
    priority: opts.priority ?? 0,
    health: opts.health ?? 'healthy',
  };
}

function ctx(extra: Partial<PickContext> = {}): PickContext {
  return { routingModelId: 'r1', state: new RoutingState(), ...extra };
}

function names(result: ReturnType<typeof pickTargets<C>>): string[] {
  assert.equal(result.kind, 'ok');
  return result.kind === 'ok' ? result.order.map((c) => c.name) : [];
}

test('failover keeps declaration order', () => {
  const r = routing({ strategy: 'failover' });
  assert.deepEqual(names(pickTargets(r, [cand('a'), cand('b'), cand('c')], ctx())), ['a', 'b', 'c']);
});

test('priority tiers: higher value first (AISIX/APISIX), then the lower tiers as fallbacks', () => {
  const r = routing({ strategy: 'failover' });
  const cs = [
    cand('high', { priority: 5 }),
    cand('a', { priority: 0 }),
    cand('neg', { priority: -1 }),
    cand('b', { priority: 0 }),
  ];
  assert.deepEqual(names(pickTargets(r, cs, ctx())), ['high', 'a', 'b', 'neg']);
  // The contract's example: priorities -2, 0, -1 are tried 0, then -1, then -2.
  const backups = [cand('p-2', { priority: -2 }), cand('p0', { priority: 0 }), cand('p-1', { priority: -1 })];
  assert.deepEqual(names(pickTargets(r, backups, ctx())), ['p0', 'p-1', 'p-2']);
});

test('max_fallbacks caps the walk across tiers', () => {
  const cs = [cand('p-2', { priority: -2 }), cand('p0', { priority: 0 }), cand('p-1', { priority: -1 })];
  assert.deepEqual(names(pickTargets(routing({ max_fallbacks: 1 }), cs, ctx())), ['p0', 'p-1']);
});

test('max_fallbacks caps how many follow the first pick', () => {
  const cs = [cand('a'), cand('b'), cand('c'), cand('d')];
  assert.deepEqual(names(pickTargets(routing({ max_fallbacks: 1 }), cs, ctx())), ['a', 'b']);
  assert.deepEqual(names(pickTargets(routing({ max_fallbacks: 0 }), cs, ctx())), ['a']);
  assert.deepEqual(names(pickTargets(routing({}), cs, ctx())), ['a', 'b', 'c', 'd']);
});

test('round robin 70/30 over 100 requests gives exactly 70 and 30 first picks, smoothly', () => {
  const r = routing({ strategy: 'round_robin' });
  const c = ctx();
  const cs = [cand('a', { weight: 70 }), cand('b', { weight: 30 })];
  const firsts = Array.from({ length: 100 }, () => names(pickTargets(r, cs, c))[0]);
  assert.equal(firsts.filter((n) => n === 'a').length, 70);
  assert.equal(firsts.filter((n) => n === 'b').length, 30);
  // Smooth: never more than 3 `a` in a row with 7:3.
  assert.ok(!firsts.join('').includes('aaaa'));
});

test('round robin is exact with fractional weights and three targets', () => {
  const r = routing({ strategy: 'round_robin' });
  const c = ctx();
  const cs = [cand('a', { weight: 0.5 }), cand('b', { weight: 0.3 }), cand('c', { weight: 0.2 })];
  const counts: Record<string, number> = {};
  for (let i = 0; i < 1000; i++) {
    const first = names(pickTargets(r, cs, c))[0]!;
    counts[first] = (counts[first] ?? 0) + 1;
  }
  assert.deepEqual(counts, { a: 500, b: 300, c: 200 });
  assert.deepEqual(integerWeights([0.5, 0.3, 0.2]), [5, 3, 2]);
});

test('round robin fallbacks: the rest of the tier after the pick, then lower tiers', () => {
  const r = routing({ strategy: 'round_robin' });
  const c = ctx();
  const cs = [cand('a'), cand('b'), cand('c'), cand('z', { priority: -1 })];
  assert.deepEqual(names(pickTargets(r, cs, c)), ['a', 'b', 'c', 'z']);
  assert.deepEqual(names(pickTargets(r, cs, c)), ['b', 'c', 'a', 'z']);
  assert.deepEqual(names(pickTargets(r, cs, c)), ['c', 'a', 'b', 'z']);
});

test('round robin state is per routing model id', () => {
  const r = routing({ strategy: 'round_robin' });
  const state = new RoutingState();
  const cs = [cand('a'), cand('b')];
  assert.equal(names(pickTargets(r, cs, { routingModelId: 'r1', state }))[0], 'a');
  assert.equal(names(pickTargets(r, cs, { routingModelId: 'r2', state }))[0], 'a');
  assert.equal(names(pickTargets(r, cs, { routingModelId: 'r1', state }))[0], 'b');
});

test('round robin: a weight-0 target is only a fallback', () => {
  const r = routing({ strategy: 'round_robin' });
  const c = ctx();
  const cs = [cand('spare', { weight: 0 }), cand('a', { weight: 1 })];
  for (let i = 0; i < 5; i++) assert.equal(names(pickTargets(r, cs, c))[0], 'a');
});

test('consistent hash on a hash_on header is sticky, and falls back to the API key id', () => {
  const r = routing({
    strategy: 'consistent_hash',
    hash_on: [{ type: 'header', name: 'x-session' }, { type: 'api_key' }],
  });
  const cs = [cand('a'), cand('b'), cand('c')];
  const headers = new Headers({ 'x-session': 'user-42' });
  const first = names(pickTargets(r, cs, ctx({ headers, apiKeyId: 'k1' })));
  for (let i = 0; i < 10; i++) assert.deepEqual(names(pickTargets(r, cs, ctx({ headers, apiKeyId: 'k1' }))), first);
  // Same value via the API key when the header is absent.
  const byKey = names(pickTargets(r, cs, ctx({ headers: new Headers(), apiKeyId: 'user-42' })));
  assert.deepEqual(byKey, first);
  assert.equal(new Set(first).size, 3);
});

test('consistent hash spreads keys and removing a target only moves its own keys', () => {
  const r = routing({ strategy: 'consistent_hash' });
  const all = [cand('a'), cand('b'), cand('c'), cand('d')];
  const without = all.filter((c) => c.name !== 'c');
  const counts: Record<string, number> = {};
  let moved = 0;
  for (let i = 0; i < 4000; i++) {
    const key = `caller-${i}`;
    const before = names(pickTargets(r, all, ctx({ apiKeyId: key })))[0]!;
    const after = names(pickTargets(r, without, ctx({ apiKeyId: key })))[0]!;
    counts[before] = (counts[before] ?? 0) + 1;
    if (before !== 'c') assert.equal(after, before, `key ${key} moved from ${before} to ${after}`);
    else moved++;
  }
  for (const n of ['a', 'b', 'c', 'd']) assert.ok(counts[n]! > 850 && counts[n]! < 1150, `${n}: ${counts[n]}`);
  assert.equal(moved, counts.c);
});

test('consistent hash honours weights', () => {
  const r = routing({ strategy: 'consistent_hash' });
  const cs = [cand('a', { weight: 3 }), cand('b', { weight: 1 })];
  let a = 0;
  for (let i = 0; i < 4000; i++) if (names(pickTargets(r, cs, ctx({ apiKeyId: `k${i}` })))[0] === 'a') a++;
  assert.ok(a > 2800 && a < 3200, `a: ${a}`);
});

test('hash32 is FNV-1a based and deterministic', () => {
  assert.equal(hash32('abc'), hash32('abc'));
  assert.notEqual(hash32('abc'), hash32('abd'));
});

test('least_latency: unknown targets first, then the lowest EWMA', () => {
  const r = routing({ strategy: 'least_latency' });
  const state = new RoutingState();
  state.observeLatency('id-a', 300);
  state.observeLatency('id-b', 100);
  const cs = [cand('a'), cand('b'), cand('new')];
  assert.deepEqual(names(pickTargets(r, cs, ctx({ state }))), ['new', 'b', 'a']);
  // EWMA: a few fast samples bring `a` below `b`.
  for (let i = 0; i < 10; i++) state.observeLatency('id-a', 10);
  state.observeLatency('id-new', 1000);
  assert.deepEqual(names(pickTargets(r, cs, ctx({ state }))), ['a', 'b', 'new']);
});

test('least_busy: fewest in-flight first; release is idempotent', () => {
  const r = routing({ strategy: 'least_busy' });
  const state = new RoutingState();
  const doneA1 = state.begin('id-a');
  state.begin('id-a');
  state.begin('id-b');
  const cs = [cand('a'), cand('b'), cand('c')];
  assert.deepEqual(names(pickTargets(r, cs, ctx({ state }))), ['c', 'b', 'a']);
  doneA1();
  doneA1();
  assert.equal(state.inFlight('id-a'), 1);
  assert.deepEqual(names(pickTargets(r, cs, ctx({ state }))), ['c', 'a', 'b']);
});

test('health: cooled and unhealthy targets are skipped while a healthy one exists', () => {
  const r = routing({});
  const cs = [cand('cool', { health: 'cooldown' }), cand('sick', { health: 'unhealthy' }), cand('ok', { priority: 9 })];
  const res = pickTargets(r, cs, ctx());
  assert.deepEqual(names(res), ['ok']);
  assert.equal(res.kind === 'ok' && res.pool, 'healthy');
});

test('health: only cooled ones left → they are used', () => {
  const r = routing({});
  const cs = [
    cand('sick', { health: 'unhealthy' }),
    cand('c1', { health: 'cooldown' }),
    cand('c2', { health: 'cooldown' }),
  ];
  const res = pickTargets(r, cs, ctx());
  assert.deepEqual(names(res), ['c1', 'c2']);
  assert.equal(res.kind === 'ok' && res.pool, 'cooldown');
});

test('health: all unhealthy → all_unavailable (fail), or every target in order (try_anyway)', () => {
  const cs = [cand('a', { health: 'unhealthy' }), cand('b', { health: 'unhealthy' })];
  assert.deepEqual(pickTargets(routing({}), cs, ctx()), { kind: 'all_unavailable' });
  assert.deepEqual(pickTargets(routing({ when_all_unavailable: 'fail' }), [], ctx()), { kind: 'all_unavailable' });
  const res = pickTargets(routing({ when_all_unavailable: 'try_anyway' }), cs, ctx());
  assert.deepEqual(names(res), ['a', 'b']);
  assert.equal(res.kind === 'ok' && res.pool, 'unhealthy');
});

test('RoutingState.retain forgets ids that left', () => {
  const r = routing({ strategy: 'round_robin' });
  const state = new RoutingState();
  pickTargets(r, [cand('a'), cand('b')], { routingModelId: 'gone', state });
  state.observeLatency('id-a', 5);
  state.retain(new Set(['r-other']));
  assert.equal(state.roundRobin.size, 0);
  assert.equal(state.latency('id-a'), undefined);
});

test('consistent hash: an empty header value counts as absent; no key at all hashes the empty string', () => {
  const r = routing({
    strategy: 'consistent_hash',
    hash_on: [{ type: 'header', name: 'x-session' }, { type: 'api_key' }],
  });
  const cs = [cand('a'), cand('b'), cand('c')];
  const viaKey = names(pickTargets(r, cs, ctx({ apiKeyId: 'k9' })));
  assert.deepEqual(
    names(pickTargets(r, cs, ctx({ headers: new Headers({ 'x-session': ' ' }), apiKeyId: 'k9' }))),
    viaKey,
  );
  const none = names(pickTargets(r, cs, ctx()));
  assert.deepEqual(none, names(pickTargets(r, cs, ctx({ apiKeyId: '' }))));
  assert.equal(new Set(none).size, 3);
});

test('hash_on: the default chain is the x-aisix-routing-key header, then the API key id', () => {
  assert.deepEqual(DEFAULT_HASH_ON, [{ type: 'header', name: 'x-aisix-routing-key' }, { type: 'api_key' }]);
  const r = routing({ strategy: 'consistent_hash' });
  assert.equal(r.hash_on, undefined);
  const headers = new Headers({ 'x-aisix-routing-key': ' tenant-7 ' });
  assert.equal(hashKeyOf(r, { headers, apiKeyId: 'k1', clientIp: '10.0.0.1' }), 'tenant-7');
  assert.equal(hashKeyOf(r, { headers: new Headers(), apiKeyId: 'k1', clientIp: '10.0.0.1' }), 'k1');
  assert.equal(hashKeyOf(r, { clientIp: '10.0.0.1' }), undefined, 'client_ip is not in the default chain');
});

test('hash_on: header, cookie, api_key, client_ip — the first source that yields wins; then fallthrough', () => {
  const r = routing({
    strategy: 'consistent_hash',
    hash_on: [
      { type: 'header', name: 'x-user' },
      { type: 'cookie', name: 'session' },
      { type: 'client_ip' },
      { type: 'api_key' },
    ],
  });
  const all = {
    headers: new Headers({ 'x-user': 'u1', cookie: 'theme=dark; session=s-9; other=1' }),
    apiKeyId: 'k1',
    clientIp: '192.0.2.7',
  };
  assert.equal(hashKeyOf(r, all), 'u1');
  assert.equal(hashKeyOf(r, { ...all, headers: new Headers({ cookie: 'theme=dark; session=s-9' }) }), 's-9');
  assert.equal(hashKeyOf(r, { ...all, headers: new Headers({ cookie: 'session=; theme=dark' }) }), '192.0.2.7');
  assert.equal(hashKeyOf(r, { ...all, headers: undefined, clientIp: undefined }), 'k1');
  assert.equal(hashKeyOf(r, {}), undefined);
  // A header/cookie source without a name yields nothing.
  assert.equal(hashKeyOf(routing({ hash_on: [{ type: 'header' }, { type: 'api_key' }] }), all), 'k1');
  // Requests with the same key stick to the same order.
  const cs = [cand('a'), cand('b'), cand('c')];
  const byCookie = (v: string) => names(pickTargets(r, cs, ctx({ headers: new Headers({ cookie: `session=${v}` }) })));
  assert.deepEqual(byCookie('s-1'), byCookie('s-1'));
  assert.deepEqual(byCookie('s-1'), names(pickTargets(r, cs, ctx({ headers: new Headers({ 'x-user': 's-1' }) }))));
});

test('cookieValue parses a Cookie header: first non-empty match, trimmed, verbatim', () => {
  assert.equal(cookieValue('a=1; b=2', 'b'), '2');
  assert.equal(cookieValue('a=1;b= x=y ', 'b'), 'x=y');
  assert.equal(cookieValue('b=; b=3', 'b'), '3');
  assert.equal(cookieValue('ab=1', 'b'), undefined);
  assert.equal(cookieValue(null, 'b'), undefined);
});

test('least_cost: cheapest input+output per 1K first, targets without cost last, tiers first', () => {
  const r = routing({ strategy: 'least_cost' });
  const cs = [
    { ...cand('none'), cost: undefined },
    { ...cand('pricey'), cost: 0.03 + 0.06 },
    { ...cand('cheap'), cost: 0.0005 + 0.0015 },
    { ...cand('mid'), cost: 0.01 + 0.03 },
    { ...cand('also-none'), cost: undefined },
  ];
  assert.deepEqual(names(pickTargets(r, cs, ctx())), ['cheap', 'mid', 'pricey', 'none', 'also-none']);
  const tiered = [{ ...cand('backup-cheap', { priority: -1 }), cost: 0.001 }, { ...cand('primary'), cost: 1 }];
  assert.deepEqual(names(pickTargets(r, tiered, ctx())), ['primary', 'backup-cheap']);
});
