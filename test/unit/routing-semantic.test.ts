// Semantic routing end to end (docs/routing.md "Semantic routing"): the proxy app through app.request()
// against one loopback upstream that serves embeddings deterministically (a vector per keyword) and records
// which target's upstream model each chat call named, and a loopback decision API for the classifier mode
// that refuses a call without the key or in another shape; plus the schema and the scoring rule.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { ModelSchema } from '../../src/resources/schema.ts';
import { SemanticSchema } from '../../src/resources/semantic-schema.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { CLASSIFIER_INSTRUCTIONS } from '../../src/routing/semantic-classifier.ts';
import { bestRoute, lastUserText } from '../../src/routing/semantic.ts';
import { exportResources } from '../../src/sources/etcd/export.ts';
import { parse } from 'yaml';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';

const CALLER = 'sk-caller-semantic-SECRET-1';
const ENV = { CALLER, UPSTREAM_KEY: 'sk-upstream-semantic-SECRET-9', TS_KEY: 'ts-key-semantic-SECRET-3' };

/** A text's vector: how often it says `contract`, `code`, `weather`; a text saying none of them is [0,0,0,1]. */
function vectorOf(text: string): number[] {
  const n = (w: string) => text.split(w).length - 1;
  const v = [n('contract'), n('code'), n('weather'), 0];
  return v.some((x) => x > 0) ? v : [0, 0, 0, 1];
}

interface Seen {
  url: string;
  json: Record<string, unknown>;
}

let server: http.Server;
let base = '';
const seen: Seen[] = [];
/** Upstream model names whose next call answers 500. */
const failNext = new Set<string>();
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;
let logs: Record<string, unknown>[];

/** The decision API: each call's body as received; the answer depends on the prompt's keyword. */
let classifier: http.Server;
const asked: Record<string, unknown>[] = [];
const TS_KEY = ENV.TS_KEY;

/** The answer to `state`: `contract` → legal (0.9), `code` → code (0.3), others a failure of some kind. */
function decide(state: string, res: http.ServerResponse): void {
  const answer = (choice: string, confidence: number): void =>
    void res.end(JSON.stringify({
      model: 'jev-1.13.0',
      answers: { route: { type: 'choice', choice, confidence, probabilities: { [choice]: confidence } } },
      usage: { input_tokens: 10, output_tokens: 0 },
    }));
  if (state.includes('contract')) return answer('legal', 0.9);
  if (state.includes('code')) return answer('code', 0.3);
  if (state.includes('weather')) return answer('weather', 0.99);
  if (state.includes('garbled')) return void res.end('not json');
  if (state.includes('unanswered')) return void res.end(JSON.stringify({ answers: {} }));
  if (state.includes('overloaded')) return void res.writeHead(529).end('{}');
  // `hang`: no answer until the gateway gives up and closes the connection.
}

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => body += c);
    req.on('end', () => {
      const json = JSON.parse(body) as Record<string, unknown>;
      seen.push({ url: req.url ?? '', json });
      const model = String(json.model);
      res.setHeader('content-type', 'application/json');
      if (model === 'up-embed-bad' || failNext.delete(model)) {
        res.writeHead(500).end(JSON.stringify({ error: { message: 'mock failure', type: 'server_error' } }));
        return;
      }
      if (req.url?.endsWith('/embeddings')) {
        const input = json.input as string[];
        // Reversed on purpose: the gateway must put the vectors back in input order by `index`.
        const data = input.map((t, index) => ({ object: 'embedding', index, embedding: vectorOf(t) })).reverse();
        res.end(JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
        return;
      }
      if (json.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = { id: 'c1', object: 'chat.completion.chunk', created: 1, model, choices: [] };
        res.end(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`);
        return;
      }
      res.end(JSON.stringify({
        id: 'c1',
        object: 'chat.completion',
        created: 1,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  classifier = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => body += c);
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.method !== 'POST' || req.url !== '/v1/systemone') return void res.writeHead(404).end('{}');
      if (req.headers.authorization !== `Bearer ${TS_KEY}`) return void res.writeHead(401).end('{}');
      if (req.headers['content-type'] !== 'application/json') return void res.writeHead(415).end('{}');
      const json = JSON.parse(body) as { state: string };
      asked.push(json);
      decide(json.state, res);
    });
  });
  await new Promise<void>((r) => classifier.listen(0, '127.0.0.1', r));
  const tsBase = `http://127.0.0.1:${(classifier.address() as AddressInfo).port}/`;
  const clsRoutes = `
        - { name: legal, target: m-legal, description: Contract review, examples: ["x"] }
        - { name: code, target: m-code, description: Programming help, examples: ["y"] }
        - { name: plain, target: m-def, examples: ["z"] }`;
  const cls = (name: string, extra: string) => `
  - display_name: ${name}
    semantic:
      embedding_model: emb
      default: m-def
      match: { threshold: 0.7 }
      classifier: { provider_key: ts, model: jev-latest, min_confidence: 0.5, timeout_ms: 300${extra} }
      routes:${clsRoutes}`;
  const routes = `
        - { name: legal, target: m-legal, description: Contract review, examples: ["review this contract", "a contract clause"] }
        - { name: code, target: m-code, examples: ["fix my code"], threshold: 0.95 }`;
  ({ gw, platform: { logs } } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: p, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${base} }
  - { display_name: ts, provider: typesafe, api_key: "\${TS_KEY}", api_base: "${tsBase}" }
models:
  - { display_name: emb, provider_key: p, model_name: up-embed, embedding: { dimensions: 4 } }
  - { display_name: emb-bad, provider_key: p, model_name: up-embed-bad, retries: 0, embedding: { dimensions: 4 } }
  - { display_name: emb-wide, provider_key: p, model_name: up-embed, embedding: { dimensions: 8 } }
  - { display_name: m-legal, provider_key: p, model_name: up-legal, retries: 0 }
  - { display_name: m-code, provider_key: p, model_name: up-code, retries: 0 }
  - { display_name: m-def, provider_key: p, model_name: up-def, retries: 0 }
  - { display_name: m-safe, provider_key: p, model_name: up-safe, retries: 0 }
  - { display_name: m-flaky, provider_key: p, model_name: up-flaky, retries: 0 }
  - { display_name: m-limited, provider_key: p, model_name: up-limited, retries: 0, rate_limit: { rpm: 0 } }
  - { display_name: m-private, provider_key: p, model_name: up-private, retries: 0, allowed_cidrs: [10.9.0.0/16] }
  - { display_name: m-def-private, provider_key: p, model_name: up-def-private, retries: 0, allowed_cidrs: [10.9.0.0/16] }
  - display_name: sem
    semantic:
      embedding_model: emb
      default: m-def
      match: { threshold: 0.7 }
      routes:${routes}
  - display_name: sem-gated
    semantic:
      embedding_model: emb
      default: m-def
      match: { threshold: 0.7 }
      routes:
        - { name: private, target: m-private, examples: ["contract"] }
        - { name: flaky, target: m-flaky, examples: ["code"] }
  - display_name: sem-limited
    semantic:
      embedding_model: emb
      default: m-def
      match: { threshold: 0.7 }
      routes:
        - { name: limited, target: m-limited, examples: ["contract"] }
  - display_name: sem-closed
    semantic:
      embedding_model: emb
      default: m-def-private
      match: { threshold: 0.7 }
      routes:
        - { name: private, target: m-private, examples: ["contract"] }
  - display_name: sem-own-cidrs
    allowed_cidrs: [10.9.0.0/16]
    semantic:
      embedding_model: emb
      default: m-def
      match: { threshold: 0.7 }
      routes:
        - { name: legal, target: m-legal, examples: ["contract"] }
  - display_name: sem-bad-default
    semantic: { embedding_model: emb-bad, default: m-def, match: { threshold: 0.7 }, routes: [{ name: legal, target: m-legal, examples: ["contract"] }] }
  - display_name: sem-bad-fail
    semantic: { embedding_model: emb-bad, default: m-def, on_embedding_failure: fail, match: { threshold: 0.7 }, routes: [{ name: legal, target: m-legal, examples: ["contract"] }] }
  - display_name: sem-bad-target
    semantic: { embedding_model: emb-bad, default: m-def, on_embedding_failure: { target: m-safe }, match: { threshold: 0.7 }, routes: [{ name: legal, target: m-legal, examples: ["contract"] }] }
  - display_name: sem-wrong-dims
    semantic: { embedding_model: emb-wide, default: m-def, match: { threshold: 0.7 }, routes: [{ name: legal, target: m-legal, examples: ["contract"] }] }
  - display_name: sem-no-embedder
    semantic: { embedding_model: m-code, default: m-def, match: { threshold: 0.7 }, routes: [{ name: legal, target: m-legal, examples: ["contract"] }] }
${cls('sem-cls', '')}${cls('sem-cls-fail', ', on_failure: fail')}${
      cls('sem-cls-target', ', on_failure: { target: m-safe }')
    }${cls('sem-cls-wrong-key', '').replace('provider_key: ts', 'provider_key: p')}
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
    { env: ENV, config: BASE_CONFIG },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await new Promise((r) => server.close(r));
  classifier.closeAllConnections();
  await new Promise((r) => classifier.close(r));
});
beforeEach(() => {
  seen.length = 0;
});

/** A chat call; what the upstream saw is counted from here. */
async function chat(model: string, content: unknown, peer = '127.0.0.1:5555'): Promise<Response> {
  seen.length = 0;
  const messages = content === undefined
    ? [{ role: 'system', content: 'be brief' }]
    : [{ role: 'user', content: 'ignored: an earlier turn about code' }, { role: 'user', content }];
  return await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages }),
  }, { peer });
}

/** The answer's routing headers and the upstream model its chat call named, after checking it was a 200. */
async function served(res: Response): Promise<{ to: string; route: string | null; by: string | null }> {
  assert.equal(res.status, 200, await res.clone().text());
  await res.body?.cancel();
  const chats = seen.filter((s) => s.url.endsWith('/chat/completions'));
  assert.equal(chats.length, 1, 'one chat call: a semantic router makes a single attempt');
  return {
    to: String(chats[0]!.json.model),
    route: res.headers.get('x-aisix-route'),
    by: res.headers.get('x-aisix-served-by'),
  };
}

const embeddingCalls = () => seen.filter((s) => s.url.endsWith('/embeddings'));

const IP_RESTRICTED = {
  error: {
    message: 'Access denied: your client IP is not allowed to access this model',
    type: 'permission_denied',
    code: 'ip_restricted',
  },
};

describe('semantic routing through the proxy', () => {
  test('the most similar route serves: x-aisix-route and x-aisix-served-by name it', async () => {
    const first = await served(await chat('sem', 'please check this contract'));
    assert.deepEqual(first, { to: 'up-legal', route: 'legal', by: 'm-legal' });
    // One embedding call: the prompt first, then every example not yet embedded, as floats.
    const calls = embeddingCalls();
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0]!.json, {
      model: 'up-embed',
      input: ['please check this contract', 'review this contract', 'a contract clause', 'fix my code'],
      encoding_format: 'float',
      dimensions: 4,
    });
  });

  test("the examples' vectors are kept: a later request embeds its prompt only", async () => {
    await served(await chat('sem', 'another contract'));
    seen.length = 0;
    const again = await served(await chat('sem', [{ type: 'text', text: 'a contract' }, { type: 'image_url' }]));
    assert.deepEqual(again, { to: 'up-legal', route: 'legal', by: 'm-legal' });
    assert.deepEqual(embeddingCalls().map((c) => c.json.input), [['a contract']]);
  });

  test("below every threshold the default serves, without x-aisix-route; a route's own threshold wins", async () => {
    assert.deepEqual(await served(await chat('sem', 'weather today')), { to: 'up-def', route: null, by: 'm-def' });
    // `code` scores 0.894 against its example: over the router's 0.7, under the route's own 0.95.
    assert.deepEqual(await served(await chat('sem', 'code code weather')), { to: 'up-def', route: null, by: 'm-def' });
    assert.deepEqual(await served(await chat('sem', 'code')), { to: 'up-code', route: 'code', by: 'm-code' });
  });

  test('a stream is routed the same way and carries both headers', async () => {
    seen.length = 0;
    const res = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sem', stream: true, messages: [{ role: 'user', content: 'a contract' }] }),
    }, { peer: '127.0.0.1:5555' });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /data: \[DONE\]/);
    assert.equal(res.headers.get('x-aisix-route'), 'legal');
    assert.equal(res.headers.get('x-aisix-served-by'), 'm-legal');
    assert.equal(seen.find((s) => s.url.endsWith('/chat/completions'))?.json.model, 'up-legal');
  });

  test('no user text: the default serves without an embedding call', async () => {
    assert.deepEqual(await served(await chat('sem', undefined)), { to: 'up-def', route: null, by: 'm-def' });
    assert.deepEqual(await served(await chat('sem', '   ')), { to: 'up-def', route: null, by: 'm-def' });
    assert.equal(embeddingCalls().length, 0);
  });

  test("a winner whose allowed_cidrs exclude the caller yields to the default; the member's own caller reaches it", async () => {
    assert.deepEqual(await served(await chat('sem-gated', 'contract')), { to: 'up-def', route: null, by: 'm-def' });
    seen.length = 0;
    const inside = await served(await chat('sem-gated', 'contract', '10.9.1.2:5555'));
    assert.deepEqual(inside, { to: 'up-private', route: 'private', by: 'm-private' });
  });

  test('winner and default both excluded: the 403 that names no member, and no chat call', async () => {
    const res = await chat('sem-closed', 'contract');
    assert.equal(res.status, 403);
    assert.deepEqual(await res.json(), IP_RESTRICTED);
    assert.equal(seen.filter((s) => s.url.endsWith('/chat/completions')).length, 0);
  });

  test("the router's own allowed_cidrs refuse before any embedding call", async () => {
    const res = await chat('sem-own-cidrs', 'contract');
    assert.equal(res.status, 403);
    assert.deepEqual(await res.json(), IP_RESTRICTED);
    assert.equal(seen.length, 0);
  });

  test('a winner in cooldown yields to a healthy default', async () => {
    failNext.add('up-flaky');
    const direct = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm-flaky', messages: [{ role: 'user', content: 'hi' }] }),
    }, { peer: '127.0.0.1:5555' });
    assert.equal(direct.status, 502);
    await direct.body?.cancel();
    assert.equal(gw.health.state(gw.snapshot!.modelByName('m-flaky')!), 'cooldown');
    seen.length = 0;
    assert.deepEqual(await served(await chat('sem-gated', 'code')), { to: 'up-def', route: null, by: 'm-def' });
  });

  test("the chosen target's own rate limit applies, and nothing else is tried", async () => {
    const res = await chat('sem-limited', 'contract');
    assert.equal(res.status, 429);
    const body = await res.json() as { error: { message: string } };
    assert.match(body.error.message, /^routing target "m-limited" is over its model rate limit/);
    assert.equal(seen.filter((s) => s.url.endsWith('/chat/completions')).length, 0);
  });

  test('a failed embedding: on_embedding_failure picks the default, a named target, or a 503', async () => {
    assert.deepEqual(await served(await chat('sem-bad-default', 'contract')), {
      to: 'up-def',
      route: null,
      by: 'm-def',
    });
    seen.length = 0;
    assert.deepEqual(await served(await chat('sem-bad-target', 'contract')), {
      to: 'up-safe',
      route: null,
      by: 'm-safe',
    });
    seen.length = 0;
    const res = await chat('sem-bad-fail', 'contract');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), {
      error: {
        message: 'no bridge registered for provider',
        type: 'provider_unavailable',
      },
    });
    assert.equal(seen.filter((s) => s.url.endsWith('/chat/completions')).length, 0);
  });

  test('vectors of the wrong dimension, or an embedding model without `embedding`, count as a failure', async () => {
    assert.deepEqual(await served(await chat('sem-wrong-dims', 'contract')), {
      to: 'up-def',
      route: null,
      by: 'm-def',
    });
    seen.length = 0;
    assert.deepEqual(await served(await chat('sem-no-embedder', 'contract')), {
      to: 'up-def',
      route: null,
      by: 'm-def',
    });
    assert.equal(embeddingCalls().length, 0);
  });

  test("outside chat completions a router has no provider: AISIX's 400", async () => {
    const res = await app.request('/v1/embeddings', {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sem', input: 'contract' }),
    }, { peer: '127.0.0.1:5555' });
    assert.equal(res.status, 400);
    const body = await res.json() as { error: { message: string; type: string } };
    assert.equal(
      body.error.message,
      `request payload is invalid: model "sem" has no provider (routing models can't be dispatched directly)`,
    );
    assert.equal(body.error.type, 'invalid_request_error');
    assert.equal(seen.length, 0);
  });

  test('a request to another model makes no embedding call', async () => {
    const res = await chat('m-code', 'contract');
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.deepEqual(seen.map((s) => s.url), ['/v1/chat/completions']);
    assert.equal(res.headers.get('x-aisix-route'), null);
  });
});

describe('the classifier mode', () => {
  beforeEach(() => {
    asked.length = 0;
  });

  test('the decision model picks the route by its description: one call with the key, no embedding', async () => {
    assert.deepEqual(await served(await chat('sem-cls', 'please check this contract')), {
      to: 'up-legal',
      route: 'legal',
      by: 'm-legal',
    });
    assert.equal(embeddingCalls().length, 0);
    assert.equal(asked.length, 1);
    // AISIX's question: the routes in configured order, an absent description sent as an empty one.
    assert.equal(
      JSON.stringify(asked[0]),
      JSON.stringify({
        state: 'please check this contract',
        model: 'jev-latest',
        questions: {
          route: {
            type: 'choice',
            instructions: CLASSIFIER_INSTRUCTIONS,
            criteria: { legal: 'Contract review', code: 'Programming help', plain: '' },
          },
        },
      }),
    );
    assert.equal(CLASSIFIER_INSTRUCTIONS, 'Which route should handle this user request to an AI assistant?');
  });

  test('a pick under min_confidence serves the default, without x-aisix-route', async () => {
    assert.deepEqual(await served(await chat('sem-cls', 'fix my code')), { to: 'up-def', route: null, by: 'm-def' });
    assert.equal(asked.length, 1);
  });

  test('no user text: the default, with no call', async () => {
    assert.deepEqual(await served(await chat('sem-cls', undefined)), { to: 'up-def', route: null, by: 'm-def' });
    assert.equal(asked.length, 0);
  });

  test('a failed call — a route not offered, not JSON, no answer, 529, no answer in time — applies on_failure', async () => {
    for (const prompt of ['weather today', 'garbled', 'unanswered', 'overloaded', 'hang']) {
      logs.length = 0;
      assert.deepEqual(await served(await chat('sem-cls', prompt)), { to: 'up-def', route: null, by: 'm-def' }, prompt);
      const warn = logs.find((l) => l.msg === 'semantic classifier call failed; applying classifier.on_failure');
      assert.ok(warn, `${prompt}: ${JSON.stringify(logs)}`);
      assert.equal(warn.router, 'sem-cls');
      assert.ok(!JSON.stringify(logs).includes(TS_KEY), 'the key is never logged');
    }
    const reasons = async (prompt: string) => {
      logs.length = 0;
      await (await chat('sem-cls', prompt)).body?.cancel();
      return String(logs.find((l) => String(l.msg).startsWith('semantic classifier'))?.error);
    };
    assert.equal(await reasons('weather'), 'classifier picked "weather", which is not one of the offered routes');
    assert.equal(await reasons('overloaded'), 'classifier returned HTTP 529');
    assert.equal(await reasons('unanswered'), 'classifier response carries no answer to the routing question');
    assert.equal(await reasons('hang'), 'classifier timed out after 300 ms');
    assert.deepEqual(await served(await chat('sem-cls-target', 'garbled')), {
      to: 'up-safe',
      route: null,
      by: 'm-safe',
    });
    const res = await chat('sem-cls-fail', 'garbled');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), {
      error: { message: 'no bridge registered for provider', type: 'provider_unavailable' },
    });
  });

  test('a key of another provider is never sent to the decision API: on_failure, and no call', async () => {
    logs.length = 0;
    assert.deepEqual(await served(await chat('sem-cls-wrong-key', 'contract')), {
      to: 'up-def',
      route: null,
      by: 'm-def',
    });
    assert.equal(asked.length, 0);
    assert.match(
      String(logs.find((l) => String(l.msg).startsWith('semantic classifier'))?.error),
      /^classifier provider key "p" has provider "openai", not "typesafe"$/,
    );
  });

  test('the block: defaults, ranges, unknown members; in a file the key by name', async () => {
    const block = {
      embedding_model: 'emb',
      default: 'm',
      match: { threshold: 0.5 },
      routes: [{ name: 'a', target: 't', examples: ['x'] }],
    };
    const c = SemanticSchema.parse({ ...block, classifier: { provider_key_id: 'k', model: 'jev-latest' } }).classifier;
    assert.deepEqual(c, {
      provider_key_id: 'k',
      model: 'jev-latest',
      min_confidence: 0,
      timeout_ms: 5000,
      on_failure: 'default',
    });
    for (const bad of [{ min_confidence: 1.5 }, { timeout_ms: 0 }, { extra: 1 }, { model: '' }]) {
      const r = SemanticSchema.safeParse({ ...block, classifier: { provider_key_id: 'k', model: 'm', ...bad } });
      assert.equal(r.success, false, JSON.stringify(bad));
    }
    const file = (key: string) =>
      `_format_version: "1"
provider_keys:
  - { display_name: ts, provider: typesafe, api_key: k }
  - { display_name: p, provider: openai, api_key: k }
models:
  - { display_name: emb, provider_key: p, model_name: e, embedding: { dimensions: 3 } }
  - { display_name: m, provider_key: p, model_name: up }
  - display_name: r
    semantic:
      embedding_model: emb
      default: m
      match: { threshold: 0.5 }
      classifier: { ${key}, model: jev-latest }
      routes: [{ name: a, target: m, examples: ["x"] }]
`;
    const ok = await loadResourcesFile('/t/r.yaml', file('provider_key: ts'), {});
    assert.ok(ok.ok);
    const ts = ok.snapshot.resources.provider_keys.find((k) => k.display_name === 'ts')!;
    const r = ok.snapshot.modelByName('r') as { semantic?: { classifier?: { provider_key_id: string } } };
    assert.equal(r.semantic?.classifier?.provider_key_id, ts.id);
    const bad = await loadResourcesFile('/t/r.yaml', file('provider_key: nope'), {});
    assert.ok(!bad.ok);
    assert.match(
      bad.report.format(),
      /semantic\.classifier: `provider_key` references unknown provider key "nope" \(defined provider_keys: p, ts\)/,
    );
  });
});

describe('the semantic block', () => {
  const block = {
    embedding_model: 'emb',
    default: 'm',
    match: { threshold: 0.5 },
    routes: [{ name: 'a', target: 't', examples: ['x'] }],
  };

  test("AISIX's defaults: cosine, max, on_embedding_failure default", () => {
    const s = SemanticSchema.parse(block);
    assert.deepEqual(s.match, { threshold: 0.5, distance_metric: 'cosine', aggregation: 'max' });
    assert.equal(s.on_embedding_failure, 'default');
  });

  test('refused: no examples, a threshold outside 0–1, unknown members, routing or direct fields beside it', () => {
    assert.equal(
      SemanticSchema.safeParse({ ...block, routes: [{ name: 'a', target: 't', examples: [] }] }).success,
      false,
    );
    assert.equal(SemanticSchema.safeParse({ ...block, match: { threshold: 1.5 } }).success, false);
    assert.equal(SemanticSchema.safeParse({ ...block, extra: 1 }).success, false);
    const withRouting = ModelSchema.safeParse({
      display_name: 'r',
      semantic: block,
      routing: { targets: [{ model: 't' }] },
    });
    assert.equal(withRouting.success, false);
    assert.match(JSON.stringify(withRouting.error?.issues), /not allowed on a semantic model/);
    const withProvider = ModelSchema.safeParse({ display_name: 'r', semantic: block, model_name: 'x' });
    assert.equal(withProvider.success, false);
    assert.equal(ModelSchema.safeParse({ display_name: 'r', semantic: block }).success, true);
  });

  test('an etcd row drops the members a router cannot use, as for a routing model', () => {
    const r = parseDocument(
      'models',
      's1',
      { display_name: 'r', semantic: block, cost: { input_per_1k: 1 } },
      'lenient',
    );
    assert.ok(r.ok);
    assert.deepEqual(r.ignored, ['inapplicable:cost']);
  });

  test('the best route at or above its threshold wins; the first on a tie', () => {
    const s = SemanticSchema.parse({
      ...block,
      routes: [
        { name: 'a', target: 't', examples: ['x'] },
        { name: 'b', target: 't', examples: ['x'], threshold: 0.9 },
        { name: 'c', target: 't', examples: ['x'] },
      ],
    });
    assert.equal(bestRoute(s, [0.6, 0.8, 0.7]), 2);
    assert.equal(bestRoute(s, [0.6, 0.9, 0.6]), 1);
    assert.equal(bestRoute(s, [0.5, 0.5, 0.5]), 0);
    assert.equal(bestRoute(s, [0.4, 0.85, 0.1]), undefined);
  });

  test('the text is the last user message: a string, or its text parts', () => {
    assert.equal(lastUserText([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }]), 'a');
    assert.equal(
      lastUserText([{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'text', text: 'y' }] }]),
      'x\ny',
    );
    assert.equal(lastUserText([{ role: 'system', content: 's' }]), '');
    assert.equal(lastUserText(undefined), '');
  });
});

describe('export', () => {
  test('a semantic router is written with its block only, so the file loads again', () => {
    const semantic = {
      embedding_model: 'emb',
      default: 'm',
      match: { threshold: 0.5, distance_metric: 'cosine', aggregation: 'max' },
      routes: [{ name: 'a', target: 'm', examples: ['x'] }],
      on_embedding_failure: 'default',
    };
    const rows = [
      ['provider_keys/pk', { display_name: 'p', provider: 'openai', api_key: 'k' }],
      ['models/m1', { display_name: 'm', provider_key_id: 'pk', model_name: 'up' }],
      ['models/e1', { display_name: 'emb', provider_key_id: 'pk', model_name: 'e', embedding: { dimensions: 3 } }],
      ['models/s1', { display_name: 'sem', semantic }],
    ].map(([key, doc]) => ({
      key: `/aisix/${key}`,
      value: JSON.stringify(doc),
      modRevision: 1,
      createRevision: 1,
      version: 1,
    }));
    const r = exportResources(rows, '/aisix', { withSecrets: true, revision: 1, source: 'test' });
    const doc = parse(r.yaml) as { models: Record<string, unknown>[] };
    assert.deepEqual(doc.models.find((m) => m.display_name === 'sem'), { display_name: 'sem', semantic });
  });

  test("a classifier's key is written by name, as a file names keys", async () => {
    const semantic = {
      embedding_model: 'emb',
      default: 'm',
      match: { threshold: 0.5, distance_metric: 'cosine', aggregation: 'max' },
      routes: [{ name: 'a', target: 'm', description: 'd', examples: ['x'] }],
      on_embedding_failure: 'default',
      classifier: {
        provider_key_id: 'tk',
        model: 'jev-latest',
        min_confidence: 0.4,
        timeout_ms: 900,
        on_failure: 'fail',
      },
    };
    const rows = [
      ['provider_keys/pk', { display_name: 'p', provider: 'openai', api_key: 'k' }],
      ['provider_keys/tk', { display_name: 'ts', provider: 'typesafe', api_key: 'k2' }],
      ['models/m1', { display_name: 'm', provider_key_id: 'pk', model_name: 'up' }],
      ['models/e1', { display_name: 'emb', provider_key_id: 'pk', model_name: 'e', embedding: { dimensions: 3 } }],
      ['models/s1', { display_name: 'sem', semantic }],
    ].map(([key, doc]) => ({
      key: `/aisix/${key}`,
      value: JSON.stringify(doc),
      modRevision: 1,
      createRevision: 1,
      version: 1,
    }));
    const r = exportResources(rows, '/aisix', { withSecrets: true, revision: 1, source: 'test' });
    const doc = parse(r.yaml) as { models: { display_name: string; semantic?: { classifier?: unknown } }[] };
    assert.deepEqual(doc.models.find((m) => m.display_name === 'sem')?.semantic?.classifier, {
      model: 'jev-latest',
      min_confidence: 0.4,
      timeout_ms: 900,
      on_failure: 'fail',
      provider_key: 'ts',
    });
    const again = await loadResourcesFile('/t/r.yaml', r.yaml, {});
    assert.ok(again.ok, again.ok ? '' : again.report.format());
  });
});
