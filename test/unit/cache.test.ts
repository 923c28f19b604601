// The response cache's pure parts and its engine in process (docs/cache.md): the fingerprint tables
// (requests that share an entry and requests that must not), policy choice, Cache-Control, the memory
// store's bounds and TTL on an injected clock, the semantic index, single-flight, and the engine's
// decisions with a counting embedding function.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { exactFingerprint, quantiseMilli, scopeOf, semanticText } from '../../src/cache/fingerprint.ts';
import { parseDirectives, PolicyTable } from '../../src/cache/policy.ts';
import { renderHit, ResponseCache } from '../../src/cache/response-cache.ts';
import { type Embed, SemanticIndex, unit } from '../../src/cache/semantic.ts';
import { SingleFlight } from '../../src/cache/single-flight.ts';
import { entryBytes, MemoryExactStore } from '../../src/cache/store.ts';
import { CacheMetrics } from '../../src/observability/cache-metrics.ts';
import { Registry } from '../../src/observability/metrics.ts';
import { type CachePolicy, CachePolicySchema, type DirectModel } from '../../src/resources/schema.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';
import { until } from '../support/until.ts';
import { gatewayWith } from '../support/platform.ts';
import { statusPageHtml } from '../../src/status/page.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';

function policy(over: Partial<CachePolicy> & { name?: string } = {}): CachePolicy {
  const p = CachePolicySchema.parse({ name: over.name ?? 'p', ...over });
  return { ...p, id: over.id ?? 'pol-1' } as CachePolicy;
}

const BASE = { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] };
const fp = (body: Record<string, unknown>, p: CachePolicy = policy(), key = 'key-a') =>
  exactFingerprint(body, scopeOf(p, key));

describe('exact fingerprint (AISIX key.rs rules)', () => {
  const same: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['identical', BASE, { ...BASE }],
    ['top-level key order', { ...BASE, seed: 1, top_k: 2 }, { top_k: 2, seed: 1, ...BASE }],
    [
      'nested key order in tools',
      { ...BASE, tools: [{ type: 'function', function: { name: 'f', parameters: { a: 1, b: 2 } } }] },
      { ...BASE, tools: [{ function: { parameters: { b: 2, a: 1 }, name: 'f' }, type: 'function' }] },
    ],
    ['temperature within a thousandth (truncated)', { ...BASE, temperature: 0.2 }, {
      ...BASE,
      temperature: 0.2000001,
    }],
    ['temperature 0.7004 and 0.7009 (truncated to 700)', { ...BASE, temperature: 0.7004 }, {
      ...BASE,
      temperature: 0.7009,
    }],
    ['negative temperature is 0', { ...BASE, temperature: -1 }, { ...BASE, temperature: 0 }],
    ['top_p quantised too', { ...BASE, top_p: 0.9 }, { ...BASE, top_p: 0.9000004 }],
    ['stream is not part of it', { ...BASE, stream: false }, BASE],
    ['block content with reordered keys', {
      ...BASE,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }],
    }, { ...BASE, messages: [{ content: [{ text: 'x', type: 'text' }], role: 'user' }] }],
  ];
  for (const [what, a, b] of same) {
    test(`share an entry: ${what}`, async () => assert.equal(await fp(a), await fp(b)));
  }
  const differ: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['another model name (an alias is its own name)', BASE, { ...BASE, model: 'gpt-alias' }],
    ['another message', BASE, { ...BASE, messages: [{ role: 'user', content: 'yo' }] }],
    ['another role', BASE, { ...BASE, messages: [{ role: 'system', content: 'hi' }] }],
    ['text vs a block array', BASE, { ...BASE, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] }],
    ['a message name', BASE, { ...BASE, messages: [{ role: 'user', content: 'hi', name: 'bob' }] }],
    ['tools', BASE, { ...BASE, tools: [{ type: 'function', function: { name: 'get_weather' } }] }],
    ['tool order', { ...BASE, tools: [{ name: 'x' }, { name: 'y' }] }, {
      ...BASE,
      tools: [{ name: 'y' }, { name: 'x' }],
    }],
    ['seed', { ...BASE, seed: 42 }, { ...BASE, seed: 43 }],
    ['response_format', { ...BASE, response_format: { type: 'json_object' } }, {
      ...BASE,
      response_format: { type: 'text' },
    }],
    ['temperature 0.2 vs 0.7', { ...BASE, temperature: 0.2 }, { ...BASE, temperature: 0.7 }],
    ['temperature 0.001 apart', { ...BASE, temperature: 0.2 }, { ...BASE, temperature: 0.201 }],
    ['max_tokens', { ...BASE, max_tokens: 10 }, { ...BASE, max_tokens: 11 }],
    ['user', { ...BASE, user: 'a' }, { ...BASE, user: 'b' }],
  ];
  for (const [what, a, b] of differ) {
    test(`do not share: ${what}`, async () => assert.notEqual(await fp(a), await fp(b)));
  }
  test('scope: another key under api_key, the same entry under env', async () => {
    assert.notEqual(await fp(BASE, policy(), 'key-a'), await fp(BASE, policy(), 'key-b'));
    const env = policy({ scope: 'env' });
    assert.equal(await fp(BASE, env, 'key-a'), await fp(BASE, env, 'key-b'));
  });
  test('scope: purge generation and policy id', async () => {
    assert.notEqual(await fp(BASE, policy()), await fp(BASE, policy({ purge_generation: 1 })));
    assert.notEqual(await fp(BASE, policy()), await fp(BASE, policy({ id: 'pol-2' })));
  });
  test('16 lowercase hex characters', async () => assert.match(await fp(BASE), /^[0-9a-f]{16}$/));
  test("the same keys through the platform's native SHA-256 as through Web Crypto", async () => {
    const { createHash } = await import('node:crypto');
    const native = () => {
      const h = createHash('sha256');
      return { update: (b: Uint8Array) => void h.update(b), digest: () => new Uint8Array(h.digest()) };
    };
    const scope = scopeOf(policy(), 'key-a');
    // The keys as Web Crypto's `digest` made them before: replicas of either kind share a Redis cache.
    const cases: [Record<string, unknown>, string][] = [
      [BASE, 'c3d53270af22dd1d'],
      [{ ...BASE, messages: [{ role: 'user', content: 'héllo ✓ \u{1F600}' }] }, '7204377bb6a83f3e'],
    ];
    for (const [body, key] of cases) {
      assert.equal(await exactFingerprint(body, scope), key);
      assert.equal(exactFingerprint(body, scope, native), key);
    }
  });
  test('quantisation as AISIX computes it in f32', () => {
    assert.equal(quantiseMilli(Number.NaN), 0);
    assert.equal(quantiseMilli(-1), 0);
    assert.equal(quantiseMilli(0.5), 500);
    assert.equal(quantiseMilli(0.29), 290);
    assert.equal(quantiseMilli(Infinity), 0xffff_ffff);
    assert.equal(quantiseMilli(undefined), null);
  });
});

describe('semantic text', () => {
  test('one escaped role: content line per message; plain text blocks count', () => {
    assert.equal(
      semanticText([{ role: 'system', content: 'a\\b' }, { role: 'user', content: [{ type: 'text', text: 'x\ny' }] }]),
      'system: a\\\\b\nuser: x\\ny',
    );
  });
  test('not embeddable: an image block, a name, a tool_call_id, only blank text', () => {
    assert.equal(
      semanticText([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'u' } }] }]),
      undefined,
    );
    assert.equal(semanticText([{ role: 'user', content: 'x', name: 'n' }]), undefined);
    assert.equal(semanticText([{ role: 'tool', content: 'x', tool_call_id: 't' }]), undefined);
    assert.equal(semanticText([{ role: 'user', content: '  ' }]), undefined);
  });
});

describe('policies and directives', () => {
  test('first enabled match wins; model: exact; api_key: by id; anything else is all', () => {
    const t = new PolicyTable([
      policy({ id: 'off', enabled: false }),
      policy({ id: 'm', applies_to: 'model:gpt' }),
      policy({ id: 'k', applies_to: 'api_key:key-b' }),
      policy({ id: 'weird', applies_to: 'team:x' }),
      policy({ id: 'all' }),
    ]);
    assert.equal(t.match('gpt', 'key-a')?.id, 'm');
    assert.equal(t.match('gpt-4', 'key-b')?.id, 'k', 'no globbing on model:');
    assert.equal(t.match('other', 'key-a')?.id, 'weird', 'an unknown form parses as all');
    assert.equal(new PolicyTable([policy({ enabled: false })]).empty, true);
  });
  test('Cache-Control: exact tokens, case-insensitive', () => {
    assert.deepEqual(parseDirectives('No-Cache'), { noCache: true, noStore: false });
    assert.deepEqual(parseDirectives('max-age=0, no-store'), { noCache: false, noStore: true });
    assert.deepEqual(parseDirectives('no-cache="x", no-storex'), { noCache: false, noStore: false });
    assert.deepEqual(parseDirectives(null), { noCache: false, noStore: false });
  });
  test("defaults are AISIX's", () => {
    const p = CachePolicySchema.parse({ name: 'x' });
    assert.deepEqual(p, {
      name: 'x',
      enabled: true,
      backend: 'memory',
      ttl_seconds: 3600,
      applies_to: 'all',
      scope: 'api_key',
      purge_generation: 0,
    });
    assert.equal(CachePolicySchema.safeParse({ name: 'x', ttl_seconds: 604_801 }).success, false);
    assert.equal(CachePolicySchema.safeParse({ name: 'x', semantic: { embedding_model: 'e' } }).success, false);
  });
});

describe('memory store', () => {
  test('TTL from insert on the injected clock; reads do not extend it', () => {
    let now = 1_000;
    const s = new MemoryExactStore({ maxEntries: 10, maxBytes: 1 << 20, clock: () => now });
    s.setSync('k', '{"a":1}', 2_000);
    now += 1_000;
    assert.equal(s.getSync('k')?.body, '{"a":1}');
    now += 999;
    assert.ok(s.getSync('k'));
    now += 1;
    assert.equal(s.getSync('k'), undefined);
    assert.equal(s.bytes, 0);
  });
  test('bounded by entries: the least recently used goes first', () => {
    const s = new MemoryExactStore({ maxEntries: 2, maxBytes: 1 << 20, clock: () => 0 });
    s.setSync('a', '1', 10);
    s.setSync('b', '2', 10);
    s.getSync('a');
    s.setSync('c', '3', 10);
    assert.equal(s.getSync('b'), undefined);
    assert.ok(s.getSync('a') && s.getSync('c'));
    // The most recent read again, then two writes: the read one stays newest until both pass it.
    s.getSync('c');
    s.setSync('d', '4', 10);
    s.setSync('e', '5', 10);
    assert.equal(s.size, 2);
    assert.deepEqual(['a', 'c', 'd', 'e'].map((k) => s.getSync(k)?.body), [undefined, undefined, '4', '5']);
  });
  test('20,000 random writes, reads and rewrites keep what a plain recency list keeps', () => {
    let seed = 7;
    const rand = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    let now = 0;
    const s = new MemoryExactStore({ maxEntries: 50, maxBytes: 40_000, clock: () => now });
    // The model: entries from the least to the most recently used.
    let model: { key: string; body: string; expiresAt: number }[] = [];
    const bytesOf = () => model.reduce((n, e) => n + entryBytes(e.key, e.body), 0);
    for (let i = 0; i < 20_000; i++) {
      const key = `k${rand(120)}`;
      now += rand(3);
      if (rand(3) === 0) {
        const at = model.findIndex((e) => e.key === key);
        const e = at >= 0 ? model.splice(at, 1)[0]! : undefined;
        const live = e && e.expiresAt > now ? e : undefined;
        if (live) model.push(live);
        assert.equal(s.getSync(key)?.body, live?.body, `read ${key} at step ${i}`);
      } else {
        const body = 'x'.repeat(rand(400));
        const ttl = 1 + rand(2_000);
        s.setSync(key, body, ttl);
        model = model.filter((e) => e.key !== key);
        while (model.length >= 50 || bytesOf() + entryBytes(key, body) > 40_000) model.shift();
        model.push({ key, body, expiresAt: now + ttl });
      }
      assert.equal(s.size, model.length, `size at step ${i}`);
      assert.equal(s.bytes, bytesOf(), `bytes at step ${i}`);
    }
  });
  test('bounded by bytes: many large answers never exceed max_bytes; a too-large one is not kept', () => {
    const big = 'x'.repeat(100_000);
    const maxBytes = 2_000_000;
    const s = new MemoryExactStore({ maxEntries: 10_000, maxBytes, clock: () => 0 });
    for (let i = 0; i < 10_000; i++) {
      s.setSync(`k${i}`, big, 60_000);
      assert.ok(s.bytes <= maxBytes);
    }
    assert.equal(s.size, Math.floor(maxBytes / entryBytes('k9999', big)));
    s.setSync('huge', 'y'.repeat(maxBytes), 60_000);
    assert.equal(s.getSync('huge'), undefined);
  });
});

describe('semantic index', () => {
  const clock = () => 0;
  const p = { id: 'p', generation: 0, maxEntries: 2 };
  test('best match at or above the threshold in the same partition', () => {
    const ix = new SemanticIndex(clock);
    ix.store(p, 'a', 'part', unit([1, 0]), 10);
    ix.store(p, 'b', 'part', unit([0.8, 0.6]), 10);
    ix.store({ ...p, maxEntries: 3 }, 'c', 'other', unit([1, 0]), 10);
    assert.equal(ix.search('p', 'part', unit([0.9, 0.1]), 0.5)?.key, 'a');
    assert.equal(ix.search('p', 'part', unit([0, 1]), 0.61)?.key, undefined);
    const edge = ix.search('p', 'part', unit([0, 1]), 0.6);
    assert.equal(edge?.key, 'b');
    assert.ok(Math.abs(edge!.similarity - 0.6) < 1e-6);
  });
  test('max_entries evicts the oldest; a new generation clears; zero similarity never matches', () => {
    const ix = new SemanticIndex(clock);
    ix.store(p, 'a', 'x', unit([1, 0]), 10);
    ix.store(p, 'b', 'x', unit([0, 1]), 10);
    ix.store(p, 'c', 'x', unit([1, 1]), 10);
    assert.equal(ix.size('p'), 2);
    assert.equal(ix.search('p', 'x', unit([1, 0]), 0.99), undefined, 'a was evicted');
    assert.equal(ix.search('p', 'x', unit([-1, 0]), 0), undefined, 'opposite vectors never match');
    ix.store({ ...p, generation: 1 }, 'd', 'x', unit([1, 0]), 10);
    assert.equal(ix.size('p'), 1);
  });
});

describe('single flight', () => {
  test('one leader; followers get its answer; after settle a new leader', async () => {
    const f = new SingleFlight();
    const a = f.join('k');
    const b = f.join('k');
    assert.ok('lead' in a && 'follow' in b);
    a.lead.settle('answer');
    a.lead.settle('again');
    assert.equal(await b.follow, 'answer');
    assert.ok('lead' in f.join('k'));
  });
});

// -- the engine ---------------------------------------------------------------------------------------------

const ANSWER = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'upstream-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
});

function embedModel(over: Partial<DirectModel> = {}): DirectModel {
  return {
    id: 'emb-id',
    kind: 'direct',
    display_name: 'emb',
    model_name: 'text-embedding',
    provider_key_id: 'pk',
    embedding: { dimensions: 3, normalize: true },
    ...over,
  } as DirectModel;
}

function engine(policies: CachePolicy[], o: { embed?: Embed; now?: { t: number }; models?: DirectModel[] } = {}) {
  const now = o.now ?? { t: 1_000_000 };
  const clock = () => now.t;
  const registry = new Registry();
  const memory = new MemoryExactStore({ maxEntries: 100, maxBytes: 1 << 20, clock });
  const metrics = new CacheMetrics(registry, () => ({ entries: memory.size, bytes: memory.bytes }));
  const warnings: string[] = [];
  const cache = new ResponseCache({
    memory,
    clock,
    metrics,
    embed: o.embed,
    upstreamTimeoutMs: 1000,
    warn: (m) => warnings.push(m),
  });
  const snapshot = new Snapshot({ provider_keys: [], models: o.models ?? [], api_keys: [], cache_policies: policies });
  const ask = (body: Record<string, unknown> = BASE, cacheControl: string | null = null, apiKeyId = 'key-a') =>
    cache.lookup({ snapshot, body, apiKeyId, cacheControl });
  return { cache, ask, metrics: () => registry.render(), warnings, now, memory };
}

describe('response cache engine', () => {
  test('no policy, a disabled policy, a stream: no decision (no header)', async () => {
    assert.equal(await engine([]).ask(), undefined);
    assert.equal(await engine([policy({ enabled: false })]).ask(), undefined);
    assert.equal(await engine([policy()]).ask({ ...BASE, stream: true }), undefined);
  });
  test("miss, store, hit with the caller's model, created now, the stored usage; TTL expiry", async () => {
    const e = engine([policy({ ttl_seconds: 2 })]);
    const miss = await e.ask();
    assert.equal(miss?.kind, 'miss');
    assert.deepEqual(miss?.headers, { 'x-aisix-cache': 'miss' });
    if (miss?.kind !== 'miss') return;
    await miss.store(ANSWER);
    e.now.t += 1_000;
    const hit = await e.ask();
    assert.equal(hit?.kind, 'hit');
    if (hit?.kind !== 'hit') return;
    assert.deepEqual(hit.headers, { 'x-aisix-cache': 'hit', 'x-aisix-cache-layer': 'exact' });
    const body = JSON.parse(hit.body);
    assert.equal(body.model, 'gpt');
    assert.equal(body.id, 'chatcmpl-1');
    assert.equal(body.created, Math.floor(e.now.t / 1000));
    assert.deepEqual(hit.usage, { input: 5, output: 7 });
    e.now.t += 1_000;
    assert.equal((await e.ask())?.kind, 'miss', 'expired at ttl_seconds');
    assert.match(e.metrics(), /aisix_cache_requests_total\{policy="p",outcome="hit_exact"\} 1/);
    assert.match(e.metrics(), /aisix_cache_requests_total\{policy="p",outcome="miss"\} 2/);
  });
  test('no-cache bypasses and refreshes; no-store suppresses writes; errors are never stored', async () => {
    const e = engine([policy()]);
    const first = await e.ask();
    if (first?.kind !== 'miss') return assert.fail('miss expected');
    await first.store(JSON.stringify({ error: { message: 'x' } }));
    const second = await e.ask(BASE, 'no-store');
    if (second?.kind !== 'miss') return assert.fail('an error body is not stored');
    await second.store(ANSWER);
    const third = await e.ask();
    if (third?.kind !== 'miss') return assert.fail('no-store wrote nothing');
    await third.store(ANSWER);
    assert.equal((await e.ask())?.kind, 'hit');
    const bypass = await e.ask(BASE, 'no-cache');
    assert.equal(bypass?.kind, 'bypass');
    assert.deepEqual(bypass?.headers, { 'x-aisix-cache': 'bypass' });
    if (bypass?.kind !== 'bypass') return;
    await bypass.store(ANSWER.replace('hello', 'fresh'));
    const refreshed = await e.ask();
    assert.equal(refreshed?.kind === 'hit' && JSON.parse(refreshed.body).choices[0].message.content, 'fresh');
  });
  test('50 concurrent identical misses: one leader, 49 served from its answer', async () => {
    const e = engine([policy()]);
    const pending = Array.from({ length: 50 }, () => e.ask());
    const leader = await Promise.race(pending); // the followers resolve only once the leader settles
    if (leader?.kind !== 'miss') return assert.fail('the first to resolve leads');
    await leader.store(ANSWER);
    const all = await Promise.all(pending);
    // Those that looked up after the store hit the exact layer; the others waited for the leader.
    assert.equal(all.filter((r) => r?.kind === 'miss').length, 1);
    assert.equal(all.filter((r) => r?.kind === 'hit').length, 49);
    assert.equal(e.cache.flightsInProgress, 0);
  });
  test('followers wait for the leader, and go upstream themselves when it keeps nothing', async () => {
    const e = engine([policy()]);
    const leader = await e.ask();
    if (leader?.kind !== 'miss') return assert.fail('miss expected');
    const followers = Array.from({ length: 5 }, () => e.ask());
    await until(() => e.cache.coalescing === 5, 5000, 'five followers waiting');
    assert.equal(e.cache.flightsInProgress, 1);
    await leader.store(ANSWER);
    const served = await Promise.all(followers);
    assert.ok(served.every((r) => r?.kind === 'hit' && r.coalesced));
    assert.match(e.metrics(), /sluice_cache_coalesced_requests_total\{policy="p"\} 5/);
    const e2 = engine([policy()]);
    const l2 = await e2.ask();
    if (l2?.kind !== 'miss') return assert.fail('miss expected');
    const f2 = e2.ask();
    await until(() => e2.cache.coalescing === 1, 5000, 'a follower waiting');
    l2.abandon();
    assert.equal((await f2)?.kind, 'miss');
  });
  test('a no-store miss never leads: identical requests do not wait for it', async () => {
    const e = engine([policy()]);
    const m = await e.ask(BASE, 'no-store');
    assert.equal(m?.kind, 'miss');
    assert.equal(e.cache.flightsInProgress, 0);
    const next = await e.ask();
    assert.equal(next?.kind, 'miss', 'its own leader');
  });
  test('redis policy without cache.redis: no decision, WARN once per policy', async () => {
    const e = engine([policy({ backend: 'redis' })]);
    assert.equal(await e.ask(), undefined);
    assert.equal(await e.ask(), undefined);
    assert.equal(e.warnings.length, 1);
  });
  test('renderHit keeps id and usage, sets model and created', () => {
    const r = renderHit(ANSWER, 'mine', 42);
    assert.deepEqual({ ...JSON.parse(r.body), choices: undefined }, {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 42,
      model: 'mine',
      choices: undefined,
      usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
    });
  });
});

describe('semantic layer (memory)', () => {
  const sem = (threshold: number, over: Partial<CachePolicy> = {}) =>
    policy({ semantic: { embedding_model: 'emb', threshold, max_entries: 10 }, ...over });
  const VECTORS: Record<string, number[]> = {
    'user: what is the capital of France?': [1, 0, 0],
    // Cosine 0.6 with the first, exactly as f32 vectors hold it (0.9 would be 0.89999998).
    'user: capital of France?': [0.6, 0.8, 0],
    'user: something else': [0, 1, 0],
  };
  const counting = () => {
    const calls: string[] = [];
    const embed: Embed = (r) => {
      calls.push(r.input);
      const v = VECTORS[r.input];
      return v ? Promise.resolve(v) : Promise.reject(new Error('no vector'));
    };
    return { calls, embed };
  };
  const ask = (text: string) => ({ model: 'gpt', messages: [{ role: 'user', content: text }] });

  test('a similar prompt at the threshold is a semantic hit with its similarity; then exact (back-filled)', async () => {
    const { calls, embed } = counting();
    const e = engine([sem(0.6)], { embed, models: [embedModel()] });
    const first = await e.ask(ask('what is the capital of France?'));
    if (first?.kind !== 'miss') return assert.fail('miss expected');
    await first.store(ANSWER);
    const near = await e.ask(ask('capital of France?'));
    assert.equal(near?.kind, 'hit');
    if (near?.kind !== 'hit') return;
    assert.equal(near.layer, 'semantic');
    assert.equal(near.headers['x-aisix-cache-similarity'], '0.6000');
    assert.equal(JSON.parse(near.body).choices[0].message.content, 'hello');
    const again = await e.ask(ask('capital of France?'));
    assert.equal(again?.kind === 'hit' && again.layer, 'exact', 'the exact layer was back-filled');
    assert.equal(calls.length, 2, 'an exact hit needs no embedding');
    assert.match(e.metrics(), /outcome="hit_semantic"\} 1/);
    assert.match(e.metrics(), /aisix_cache_semantic_embedding_seconds_count\{policy="p"\} 2/);
  });
  test('just below the threshold: a miss', async () => {
    const { embed } = counting();
    const e = engine([sem(0.6001)], { embed, models: [embedModel()] });
    const first = await e.ask(ask('what is the capital of France?'));
    if (first?.kind !== 'miss') return assert.fail('miss expected');
    await first.store(ANSWER);
    assert.equal((await e.ask(ask('capital of France?')))?.kind, 'miss');
  });
  test('another key under scope api_key never matches semantically', async () => {
    const { embed } = counting();
    const e = engine([sem(0.5)], { embed, models: [embedModel()] });
    const first = await e.ask(ask('what is the capital of France?'));
    if (first?.kind !== 'miss') return assert.fail('miss expected');
    await first.store(ANSWER);
    assert.equal((await e.ask(ask('capital of France?'), null, 'key-b'))?.kind, 'miss');
  });
  test('the embedding call fails or times out: exact only, counted cause=embed, WARN once', async () => {
    const failing: Embed = () => Promise.reject(new Error('upstream 500'));
    const e = engine([sem(0.5)], { embed: failing, models: [embedModel()] });
    const m = await e.ask(ask('a'));
    if (m?.kind !== 'miss') return assert.fail('miss expected');
    await m.store(ANSWER);
    assert.equal((await e.ask(ask('a')))?.kind, 'hit', 'the exact layer still stored it');
    await e.ask(ask('b'));
    assert.match(e.metrics(), /aisix_cache_semantic_embedding_failures_total\{policy="p",cause="embed"\} 2/);
    assert.equal(e.warnings.length, 1);
    const hanging: Embed = () => new Promise(() => {});
    const slow = engine([
      sem(0.5, { semantic: { embedding_model: 'emb', threshold: 0.5, max_entries: 10, embedding_timeout_ms: 20 } }),
    ], {
      embed: hanging,
      models: [embedModel()],
    });
    assert.equal((await slow.ask(ask('a')))?.kind, 'miss');
    assert.match(slow.metrics(), /cause="embed"\} 1/);
  });
  test('an embedding model that does not resolve: cause=resolve on every eligible request, WARN once', async () => {
    const { embed, calls } = counting();
    const e = engine([sem(0.5)], { embed, models: [embedModel({ embedding: undefined })] });
    await e.ask(ask('a'));
    await e.ask(ask('b'));
    assert.match(e.metrics(), /cause="resolve"\} 2/);
    assert.equal(e.warnings.length, 1);
    assert.equal(calls.length, 0);
  });
  test('a vector of the wrong size is an embedding failure', async () => {
    const e = engine([sem(0.5)], { embed: () => Promise.resolve([1, 0]), models: [embedModel()] });
    await e.ask(ask('a'));
    assert.match(e.metrics(), /cause="embed"\} 1/);
  });
});

describe('the status page', () => {
  test('a hit ratio per policy, once a policy applied to a request; no section before', async () => {
    const { gw } = await gatewayWith(`_format_version: "1"
cache_policies: [{ name: main }]
`);
    assert.equal(statusPageHtml(gw).includes('id="cache"'), false);
    const engine = gw.cache.engine();
    const ask = () => engine.lookup({ snapshot: gw.snapshot!, body: BASE, apiKeyId: 'k', cacheControl: null });
    const miss = await ask();
    if (miss?.kind !== 'miss') return assert.fail('miss expected');
    await miss.store(ANSWER);
    await ask();
    await ask();
    const page = statusPageHtml(gw);
    assert.match(page, /<section id="cache"><h2>Response cache<\/h2>/);
    assert.match(page, /<td>main<\/td>\s*<td>3<\/td>\s*<td>2<\/td>\s*<td>66\.7 %<\/td>/);
    gw.stop();
  });
});

describe('through the proxy app (in process)', () => {
  test('a hit replays the stored usage in the token families, with no spend, and answers with the headers', async () => {
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: local, provider: echo }]
models:
  - { display_name: priced, model_name: echo-1, provider_key: local, cost: { input_per_1k: 1, output_per_1k: 2 } }
api_keys: [{ display_name: caller, key_env: CALLER, allowed_models: ["*"] }]
cache_policies: [{ name: main }]
`,
      { env: { CALLER: 'sk-in-process' } },
    );
    const app = createProxyApp(gw);
    const ask = () =>
      app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer sk-in-process', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'priced', messages: [{ role: 'user', content: 'hello there' }] }),
      });
    const spend = () => /aisix_llm_spend_micro_usd_total\{[^}]*\} (\d+)/.exec(gw.metrics.registry.render())?.[1];
    const tokens = () => /aisix_llm_input_tokens_total\{[^}]*\} (\d+)/.exec(gw.metrics.registry.render())?.[1];
    const first = await ask();
    assert.equal(first.headers.get('x-aisix-cache'), 'miss');
    const miss = await first.json() as { usage: { prompt_tokens: number } };
    const [spendAfterMiss, tokensAfterMiss] = [spend(), tokens()];
    assert.ok(Number(spendAfterMiss) > 0);
    const second = await ask();
    assert.equal(second.headers.get('x-aisix-cache'), 'hit');
    assert.equal(second.headers.get('x-aisix-cache-layer'), 'exact');
    const hit = await second.json() as { model: string; usage: unknown };
    assert.equal(hit.model, 'priced');
    assert.deepEqual(hit.usage, miss.usage);
    assert.equal(spend(), spendAfterMiss, 'no spend on a hit');
    assert.equal(Number(tokens()), 2 * Number(tokensAfterMiss), 'the stored usage replayed');
    gw.stop();
  });
  test('a throw after a miss lets the miss go: the next identical request leads, not waits on it', async () => {
    const { gw } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: local, provider: echo }]
models: [{ display_name: e, model_name: echo-1, provider_key: local }]
api_keys: [{ display_name: caller, key_env: CALLER, allowed_models: ["*"] }]
cache_policies: [{ name: main }]
`,
      { env: { CALLER: 'sk-in-process' } },
    );
    // The dispatch's first read of the model's health throws: after the cache lookup, before the store step.
    const state = gw.health.state.bind(gw.health);
    let throws = 1;
    gw.health.state = (...a) => {
      if (throws-- > 0) throw new Error('boom');
      return state(...a);
    };
    const app = createProxyApp(gw);
    const ask = () =>
      app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer sk-in-process', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'e', messages: [{ role: 'user', content: 'hello there' }] }),
      });
    assert.equal((await ask()).status, 500);
    const second = await ask();
    assert.equal(second.status, 200);
    assert.equal(second.headers.get('x-aisix-cache'), 'miss');
    assert.equal((await ask()).headers.get('x-aisix-cache'), 'hit');
    gw.stop();
  });
});

describe('output guardrails on a hit (AISIX: a cached answer is checked as an upstream one)', () => {
  const base = `_format_version: "1"
provider_keys: [{ display_name: local, provider: echo }]
models: [{ display_name: e, model_name: echo-1, provider_key: local }]
api_keys: [{ display_name: caller, key_env: CALLER, allowed_models: ["*"] }]
cache_policies: [{ name: main, scope: env }]
`;
  test('a guardrail added since the answer was stored blocks the hit; a mask is applied to it', async () => {
    const { gw, platform } = await gatewayWith(base, { env: { CALLER: 'sk-in-process' } });
    const app = createProxyApp(gw);
    const prompt = 'the secret word, mail a@b.example.com';
    const ask = () =>
      app.request('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer sk-in-process', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'e', messages: [{ role: 'user', content: prompt }] }),
      });
    const apply = async (extra: string) => {
      const r = await loadResourcesFile('/t/resources.yaml', base + extra, platform.env);
      if (!r.ok) throw new Error(r.report.format());
      gw.apply(r.snapshot, { configHash: extra });
    };
    const first = await ask();
    assert.equal(first.headers.get('x-aisix-cache'), 'miss');
    assert.equal(((await first.json()) as ChatAnswer).choices[0]!.message.content, prompt);

    await apply(
      `guardrails: [{ name: quiet, kind: keyword, hook_point: output, patterns: [{ kind: literal, value: secret }] }]
`,
    );
    const blocked = await ask();
    assert.equal(blocked.status, 422);
    assert.equal(
      await blocked.text(),
      `{"error":{"message":"response blocked by content policy (guardrail 'quiet')","type":"content_filter"}}`,
    );
    assert.ok(platform.logs.some((l) => l.msg === 'guardrail blocked cached response' && l.guardrail === 'quiet'));

    await apply(`guardrails: [{ name: mails, kind: pii, hook_point: output, detectors: [{ type: email }] }]
`);
    const masked = await ask();
    assert.equal(masked.headers.get('x-aisix-cache'), 'hit');
    assert.equal(
      ((await masked.json()) as ChatAnswer).choices[0]!.message.content,
      'the secret word, mail [EMAIL_REDACTED]',
    );
    gw.stop();
  });
});

interface ChatAnswer {
  choices: { message: { content: string } }[];
}
