// The response cache through a real gateway on Node, Bun and Deno against counting mock upstreams
// (docs/cache.md): hit/miss/bypass headers, what a hit answers, Cache-Control, TTL, rate limits on a hit,
// streams and errors never cached, 50 concurrent identical misses making one upstream call, the semantic
// layer against a deterministic embeddings upstream, and the status page's hit ratio.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type MockEmbeddings, startMockEmbeddings } from '../support/mock-embeddings.ts';
import { type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { latch, roomInMinute, until } from '../support/until.ts';

const KEYS = { A: 'sk-cache-a', B: 'sk-cache-b', LIMITED: 'sk-cache-rpm3' };

const VECTORS: Record<string, number[]> = {
  'user: what is the capital of France?': [1, 0, 0],
  'user: capital of France?': [0.6, 0.8, 0],
  'user: tell me about cats': [0, 0, 1],
};

function resources(upstream: string, embeddings: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${upstream} }
  - { display_name: emb, provider: openai, api_key: sk-emb, api_base: ${embeddings} }
models:
  - { display_name: gpt-cached, model_name: gpt-upstream, provider_key: mock, retries: 0 }
  - { display_name: gpt-alias, routing: { targets: [{ model: gpt-cached }] } }
  - { display_name: gpt-short, model_name: gpt-upstream, provider_key: mock, retries: 0 }
  - { display_name: gpt-semantic, model_name: gpt-upstream, provider_key: mock, retries: 0 }
  - { display_name: gpt-plain, model_name: gpt-upstream, provider_key: mock, retries: 0 }
  - display_name: embedder
    model_name: text-embedding
    provider_key: emb
    retries: 0
    embedding: { dimensions: 3 }
api_keys:
  - { display_name: a, key_env: KEY_A, allowed_models: ["*"] }
  - { display_name: b, key_env: KEY_B, allowed_models: ["*"] }
  - { display_name: limited, key_env: KEY_LIMITED, allowed_models: ["*"], rate_limit: { rpm: 3 } }
cache_policies:
  - { name: short, applies_to: "model:gpt-short", ttl_seconds: 1 }
  - name: semantic
    applies_to: "model:gpt-semantic"
    scope: env
    semantic: { embedding_model: embedder, threshold: 0.6, embedding_timeout_ms: 300 }
  - { name: off, applies_to: "model:gpt-plain", enabled: false }
  - { name: main, applies_to: all, scope: api_key }
`;
}

const CONFIG = `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`response cache through a ${runtime} gateway`, { timeout: 120_000 }, () => {
    let up: MockUpstream;
    let emb: MockEmbeddings;
    let gw: GatewayProcess;
    let n = 0;
    /** A prompt no earlier test of this gateway used. */
    const fresh = (what: string) => `${what} #${++n}`;
    const chat = (
      body: Record<string, unknown>,
      o: { key?: string; headers?: Record<string, string> } = {},
    ) =>
      fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${o.key ?? KEYS.A}`,
          'content-type': 'application/json',
          ...o.headers,
        },
        body: JSON.stringify(body),
      });
    const ask = (content: string, model = 'gpt-cached') => ({ model, messages: [{ role: 'user', content }] });
    const upstreamCalls = () => up.requests.filter((r) => r.url.endsWith('/chat/completions')).length;

    before(async () => {
      [up, emb] = await Promise.all([startMockUpstream(), startMockEmbeddings(VECTORS)]);
      gw = await spawnGateway({
        runtime,
        config: CONFIG,
        files: { 'resources.yaml': resources(up.base, emb.base) },
        env: { KEY_A: KEYS.A, KEY_B: KEYS.B, KEY_LIMITED: KEYS.LIMITED },
      });
      await gw.waitReady();
    });
    after(async () => {
      await gw?.stop();
      await Promise.all([up?.close(), emb?.close()]);
    });

    test("miss, then a hit with the caller's model name, created now, the stored id and usage", async () => {
      const prompt = fresh('hello');
      up.script({ body: { ...chatCompletion('gpt-upstream', 'cached answer'), id: 'chatcmpl-orig', created: 5 } });
      const before = upstreamCalls();
      const first = await chat(ask(prompt));
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('x-aisix-cache'), 'miss');
      assert.equal(first.headers.get('x-aisix-cache-layer'), null);
      await first.json();
      const t0 = Math.floor(Date.now() / 1000);
      const hit = await chat(ask(prompt));
      assert.equal(hit.status, 200);
      assert.equal(hit.headers.get('x-aisix-cache'), 'hit');
      assert.equal(hit.headers.get('x-aisix-cache-layer'), 'exact');
      assert.equal(hit.headers.get('x-aisix-cache-similarity'), null);
      const body = await hit.json() as Record<string, unknown>;
      assert.equal(body.id, 'chatcmpl-orig');
      assert.equal(body.model, 'gpt-cached');
      assert.ok((body.created as number) >= t0 && (body.created as number) <= t0 + 2);
      assert.deepEqual(body.usage, { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 });
      assert.equal((body.choices as { message: { content: string } }[])[0]!.message.content, 'cached answer');
      assert.equal(upstreamCalls() - before, 1);
    });

    test('scope api_key: another key misses; an alias is its own entry', async () => {
      const prompt = fresh('scoped');
      await (await chat(ask(prompt))).arrayBuffer();
      const other = await chat(ask(prompt), { key: KEYS.B });
      assert.equal(other.headers.get('x-aisix-cache'), 'miss');
      await other.arrayBuffer();
      const alias = await chat(ask(prompt, 'gpt-alias'));
      assert.equal(alias.headers.get('x-aisix-cache'), 'miss');
      await alias.arrayBuffer();
    });

    test('Cache-Control: no-cache bypasses and refreshes, no-store keeps nothing', async () => {
      const prompt = fresh('directives');
      up.script({ body: chatCompletion('gpt-upstream', 'old') });
      await (await chat(ask(prompt))).arrayBuffer();
      up.script({ body: chatCompletion('gpt-upstream', 'new') });
      const bypass = await chat(ask(prompt), { headers: { 'cache-control': 'No-Cache' } });
      assert.equal(bypass.headers.get('x-aisix-cache'), 'bypass');
      await bypass.arrayBuffer();
      const refreshed = await (await chat(ask(prompt))).json() as { choices: { message: { content: string } }[] };
      assert.equal(refreshed.choices[0]!.message.content, 'new');
      const other = fresh('no-store');
      const first = await chat(ask(other), { headers: { 'cache-control': 'no-store' } });
      assert.equal(first.headers.get('x-aisix-cache'), 'miss');
      await first.arrayBuffer();
      const second = await chat(ask(other));
      assert.equal(second.headers.get('x-aisix-cache'), 'miss', 'no-store wrote nothing');
      await second.arrayBuffer();
    });

    test('streams and errors are never cached; a disabled policy sends no header', async () => {
      const prompt = fresh('stream');
      for (let i = 0; i < 2; i++) {
        const s = await chat({ ...ask(prompt), stream: true });
        assert.equal(s.headers.get('x-aisix-cache'), null);
        assert.match(await s.text(), /\[DONE\]/);
      }
      const failing = fresh('error');
      const before = upstreamCalls();
      up.script({ status: 500 });
      const err = await chat(ask(failing));
      assert.equal(err.status, 502);
      await err.arrayBuffer();
      const after = await chat(ask(failing));
      assert.equal(after.status, 200);
      assert.equal(after.headers.get('x-aisix-cache'), 'miss', 'the error was not stored');
      await after.arrayBuffer();
      assert.equal(upstreamCalls() - before, 2);
      const plain = await chat(ask(fresh('plain'), 'gpt-plain'));
      assert.equal(plain.headers.get('x-aisix-cache'), 'miss', 'the next policy (all) applies');
      await plain.arrayBuffer();
    });

    test('a hit takes a request slot: the limited key gets 429 on its fourth request, cached or not', async () => {
      await roomInMinute();
      const prompt = fresh('limited');
      const statuses: (string | number)[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await chat(ask(prompt), { key: KEYS.LIMITED });
        statuses.push(r.status === 200 ? r.headers.get('x-aisix-cache')! : r.status);
        await r.arrayBuffer();
      }
      assert.deepEqual(statuses, ['miss', 'hit', 'hit', 429]);
    });

    test('TTL: an entry of ttl_seconds 1 expires', async () => {
      const prompt = fresh('ttl');
      await (await chat(ask(prompt, 'gpt-short'))).arrayBuffer();
      const hit = await chat(ask(prompt, 'gpt-short'));
      assert.equal(hit.headers.get('x-aisix-cache'), 'hit');
      await hit.arrayBuffer();
      await until(
        async () => {
          const r = await chat(ask(prompt, 'gpt-short'));
          await r.arrayBuffer();
          return r.headers.get('x-aisix-cache') === 'miss';
        },
        5000,
        'the entry expired',
      );
    });

    test('50 concurrent identical misses make one upstream call', async () => {
      const prompt = fresh('stampede');
      const release = latch();
      up.script({ hold: release.promise, body: chatCompletion('gpt-upstream', 'once') });
      const before = upstreamCalls();
      const all = Array.from({ length: 50 }, () => chat(ask(prompt)));
      await until(
        async () => {
          const m = await (await fetch(gw.url('/metrics', 'status'))).text();
          return /aisix_proxy_in_flight_requests\{endpoint="\/v1\/chat\/completions"[^}]*\} 50/.test(m);
        },
        20_000,
        '50 requests in flight',
      );
      release.resolve();
      const answers = await Promise.all(all.map(async (p) => {
        const r = await p;
        return {
          status: r.status,
          cache: r.headers.get('x-aisix-cache'),
          body: await r.json() as Record<string, unknown>,
        };
      }));
      assert.equal(upstreamCalls() - before, 1);
      assert.ok(answers.every((a) => a.status === 200));
      assert.equal(answers.filter((a) => a.cache === 'miss').length, 1);
      assert.equal(answers.filter((a) => a.cache === 'hit').length, 49);
      // In flight is counted from the pipeline's start: a request still before the cache step when the leader
      // stored its answer is a plain hit, not a coalesced one. Most of the 49 waited on the leader.
      const m = await (await fetch(gw.url('/metrics', 'status'))).text();
      const coalesced = Number(/sluice_cache_coalesced_requests_total\{policy="main"\} (\d+)/.exec(m)?.[1] ?? 0);
      assert.ok(coalesced >= 25 && coalesced <= 49, `coalesced ${coalesced}`);
    });

    test('semantic: a similar prompt is a semantic hit at the threshold; a failing embedding is exact only', async () => {
      const q = (content: string) => ({ model: 'gpt-semantic', messages: [{ role: 'user', content }] });
      up.script({ body: chatCompletion('gpt-upstream', 'Paris') });
      await (await chat(q('what is the capital of France?'))).arrayBuffer();
      const near = await chat(q('capital of France?'), { key: KEYS.B });
      assert.equal(near.headers.get('x-aisix-cache'), 'hit');
      assert.equal(near.headers.get('x-aisix-cache-layer'), 'semantic');
      assert.equal(near.headers.get('x-aisix-cache-similarity'), '0.6000');
      const body = await near.json() as { choices: { message: { content: string } }[] };
      assert.equal(body.choices[0]!.message.content, 'Paris');
      const far = await chat(q('tell me about cats'));
      assert.equal(far.headers.get('x-aisix-cache'), 'miss');
      await far.arrayBuffer();
      for (const broken of ['unknown to the embedder', 'hang forever']) {
        const r = await chat(q(broken));
        assert.equal(r.status, 200, 'the request goes upstream');
        assert.equal(r.headers.get('x-aisix-cache'), 'miss');
        await r.arrayBuffer();
        const again = await chat(q(broken));
        assert.equal(again.headers.get('x-aisix-cache'), 'hit', 'the exact layer still stored it');
        await again.arrayBuffer();
      }
      const m = await (await fetch(gw.url('/metrics', 'status'))).text();
      assert.match(m, /aisix_cache_semantic_embedding_failures_total\{policy="semantic",cause="embed"\} 2/);
      assert.match(m, /aisix_cache_requests_total\{policy="semantic",outcome="hit_semantic"\} 1/);
      await gw.waitForLog('cache semantic embedding call failed; request proceeds uncached');
    });

    test("metrics, hit tokens without spend, and the status page's hit ratio", async () => {
      const m = await (await fetch(gw.url('/metrics', 'status'))).text();
      assert.match(m, /aisix_cache_requests_total\{policy="main",outcome="hit_exact"\} \d+/);
      assert.match(m, /aisix_cache_requests_total\{policy="main",outcome="miss"\} \d+/);
      assert.match(m, /aisix_cache_requests_total\{policy="main",outcome="bypass"\} 1/);
      const page = await (await fetch(gw.url('/status', 'status'))).text();
      assert.match(page, /<section id="cache">/);
      assert.match(page, /<td>main<\/td>/);
    });
  });
}
