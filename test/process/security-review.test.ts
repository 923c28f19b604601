// The security review's reproductions against real gateway processes on Node, Bun and Deno (docs/security.md):
// the exact requests of H1, L1, M2, L2, M3, M6, L3, L4, L5 and L10, with recording mocks that must receive nothing where
// nothing may be sent; the checks the review found holding (key hash, admin keys, allowed_models on six
// endpoints, no caller credential upstream, clean logs); and its malformed framings, which each runtime's
// listener parses its own way. The unit tests hold each finding in detail; these hold the shipped entrypoints.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { baseConfig, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { type CloudRequest, type CloudServer, sendJson, startCloudServer } from '../support/mock-cloud.ts';
import { chatCompletion } from '../support/mock-upstream.ts';
import { geminiAnswer } from '../support/mock-vertex.ts';
import { type MockGuardrails, startMockGuardrails, TRIGGERS } from '../support/mock-guardrails.ts';
import { labelsOf } from '../support/metrics.ts';
import { roomInMinute } from '../support/until.ts';

const KEYS = {
  FULL: 'sk-full-caller-key-123456',
  NARROW: 'sk-narrow-caller-key-3333',
  RPM2: 'sk-rpm-two-caller-key-4444',
  GROUPED: 'sk-grouped-caller-key-5555',
};
const OPENAI_KEY = 'sk-test-SECRETKEY-0123456789abcdef+/=';
const VERTEX_TOKEN = 'ya29.VERTEXTOKEN123456';
const EXFIL_TOKEN = 'ya29.VERTEX-TOKEN-EXFIL-777';
const VERTEX_PATH = '/v1/projects/proj-one/locations/us-central1/publishers/google/models/';

/** The review's mock: Gemini answers, and OpenAI-wire answers by model name (normal, or an error echoing the key). */
function answer(req: CloudRequest, res: Parameters<typeof sendJson>[0]) {
  if (req.path.includes(':generateContent')) return sendJson(res, 200, geminiAnswer('hi from vertex'));
  if (req.path.endsWith('/echo-mod/v1/moderations')) {
    // A moderation service refusing its key and quoting it back, as OpenAI's 401 does.
    const key = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
    const b64 = Buffer.from(key).toString('base64');
    const message = `Incorrect API key provided: ${key} url=${encodeURIComponent(key)} b64=${b64}`;
    return sendJson(res, 401, { error: { message, type: 'invalid_request_error' } });
  }
  const model = String(req.json?.model ?? '');
  if (model.includes('err-echo')) {
    const b64 = Buffer.from(OPENAI_KEY).toString('base64');
    const message = `raw=${OPENAI_KEY} b64=${b64} url=${encodeURIComponent(OPENAI_KEY)} json=${
      JSON.stringify(OPENAI_KEY)
    } lower=${OPENAI_KEY.toLowerCase()}`;
    return sendJson(res, 401, { error: { message, type: 'invalid_request_error', code: 'invalid_api_key' } });
  }
  const trunc = /err-trunc-(\d+)/.exec(model);
  if (trunc) {
    const message = `${'x'.repeat(Number(trunc[1]))} key=${OPENAI_KEY}`;
    return sendJson(res, 400, { error: { message, type: 'invalid_request_error' } });
  }
  const answer = chatCompletion(model);
  if (model.includes('reasoning')) {
    (answer.choices as { message: Record<string, unknown> }[])[0]!.message.reasoning_content = 'a forbiddenword';
  }
  return sendJson(res, 200, answer);
}

function resources(mock: string, guard: string, exfilPort: number): string {
  const vertex = (o: Record<string, string>) =>
    JSON.stringify({ project: 'proj-one', region: 'us-central1', access_token: VERTEX_TOKEN, ...o });
  return `_format_version: "1"
provider_keys:
  - { display_name: vertex-mock, adapter: vertex, api_key: '${vertex({})}', api_base: "${mock}" }
  - display_name: vertex-exfil
    adapter: vertex
    api_key: '${vertex({ region: `127.0.0.1:${exfilPort}\\`, access_token: EXFIL_TOKEN })}'
  - { display_name: oai-mock, provider: openai, api_key: "${OPENAI_KEY}", api_base: "${mock}/v1" }
  - { display_name: oai-drop, provider: openai, api_key: "${OPENAI_KEY}", api_base: "${mock}/v1", drop_body_fields: [models, route, provider] }
models:
  - { display_name: "vtx/*", provider_key: vertex-mock, model_name: "*", retries: 0 }
  - { display_name: exfil, provider_key: vertex-exfil, model_name: gemini-1.5-flash, retries: 0 }
  - { display_name: "oai/*", provider_key: oai-mock, model_name: "*", retries: 0 }
  - { display_name: gpt-direct, provider_key: oai-mock, model_name: gpt-direct-up, retries: 0 }
  - { display_name: gpt-drop, provider_key: oai-drop, model_name: gpt-drop-up, retries: 0 }
  - { display_name: group-open, routing: { targets: [{ model: gpt-direct }] } }
api_keys:
  - { display_name: full, key_env: FULL, allowed_models: ["*"] }
  - { display_name: narrow, key_env: NARROW, allowed_models: ["vtx/gemini-1.5-flash*"] }
  - { display_name: rpm2, key_env: RPM2, allowed_models: ["*"], rate_limit: { rpm: 2 } }
  - { display_name: grouped, key_env: GROUPED, allowed_models: [group-open] }
guardrails:
  - { name: mod, kind: openai_moderation, api_key: sk-mod-SECRET-MODERATION-9999, endpoint: "${guard}/v1" }
  - { name: words, kind: keyword, patterns: [{ kind: literal, value: forbiddenword }] }
`;
}

const chat = (model: string, content = 'hi') => ({ model, messages: [{ role: 'user', content }] });

async function post(
  gw: GatewayProcess,
  body: unknown,
  key: string,
  path = '/v1/chat/completions',
): Promise<{ status: number; text: string }> {
  const res = await fetch(gw.url(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    redirect: 'manual',
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}

const messageOf = (text: string) => (JSON.parse(text) as { error: { message: string } }).error.message;

/** The request families' series (the lines with labels), and the exposition's size. */
async function scrape(gw: GatewayProcess): Promise<{ series: Set<string>; bytes: number }> {
  const text = await (await fetch(gw.url('/metrics', 'status'), { signal: AbortSignal.timeout(15_000) })).text();
  const series = new Set(
    text.split('\n').filter((l) => l.includes('{') && !l.startsWith('#')).map((l) => l.slice(0, l.lastIndexOf(' '))),
  );
  return { series, bytes: text.length };
}

/** A TCP server that counts connections: where a request would go if a host were named, none may arrive. */
async function connectionCounter(): Promise<{ port: number; count: () => number; close: () => Promise<void> }> {
  let n = 0;
  const server = net.createServer((s) => {
    n++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    count: () => n,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

let mock: CloudServer;
let guard: MockGuardrails;
let exfil: Awaited<ReturnType<typeof connectionCounter>>;
before(async () => {
  mock = await startCloudServer(answer);
  guard = await startMockGuardrails();
  exfil = await connectionCounter();
});
after(async () => {
  await mock.close();
  await guard.close();
  await exfil.close();
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: the review's reproductions`, () => {
    let gw: GatewayProcess;
    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: KEYS,
        files: { 'resources.yaml': resources(mock.url, guard.url, exfil.port) },
      });
      await gw.waitReady();
    });
    after(() => gw.stop());

    test('H1: a Vertex model id that walks the path is a 400 naming the field; nothing is sent', async () => {
      const sent = mock.requests.length;
      const denied = await post(gw, chat('vtx/gemini-1.5-pro'), KEYS.NARROW);
      assert.equal(denied.status, 403, denied.text);
      assert.equal(messageOf(denied.text), 'this API key may not use model "vtx/gemini-1.5-pro"');
      const walks = [
        'vtx/gemini-1.5-flash\\%2e%2e\\gemini-1.5-pro',
        'vtx/gemini-1.5-flash\\%2e%2e\\%2e%2e\\%2e%2e\\anthropic\\models\\claude-opus-4',
        `vtx/gemini-a${'\\%2e%2e'.repeat(7)}\\evil`,
        `vtx/gemini-a${'\\%2e%2e'.repeat(10)}\\evil`,
      ];
      for (const model of walks) {
        const r = await post(gw, chat(model), model.startsWith('vtx/gemini-1.5-flash') ? KEYS.NARROW : KEYS.FULL);
        assert.equal(r.status, 400, `${model}: ${r.text}`);
        assert.match(
          messageOf(r.text),
          /^invalid upstream configuration: vertex upstream model id \(the request's model/,
        );
        assert.doesNotMatch(r.text, /VERTEXTOKEN/);
      }
      assert.equal(mock.requests.length, sent, 'the upstream received nothing');
      const ok = await post(gw, chat('vtx/gemini-1.5-flash'), KEYS.NARROW);
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(mock.requests.slice(sent).map((r) => r.path), [
        `${VERTEX_PATH}gemini-1.5-flash:generateContent`,
      ]);
    });

    test('L1: a Vertex region naming another host is a 400 naming the field; the token goes nowhere', async () => {
      const r = await post(gw, chat('exfil'), KEYS.FULL);
      assert.equal(r.status, 400, r.text);
      assert.match(messageOf(r.text), /vertex provider_key\.api_key\.region/);
      assert.doesNotMatch(r.text, /EXFIL/);
      assert.equal(exfil.count(), 0, 'no connection reached the host the region names');
    });

    test('M2: an echoed key is scrubbed in every encoding, and before the message is cut', async () => {
      const echo = await post(gw, chat('oai/err-echo'), KEYS.FULL);
      assert.equal(echo.status, 401, echo.text);
      const b64 = Buffer.from(OPENAI_KEY).toString('base64');
      for (const copy of [OPENAI_KEY, OPENAI_KEY.toLowerCase(), encodeURIComponent(OPENAI_KEY), b64, 'SECRETKEY']) {
        assert.ok(!echo.text.toLowerCase().includes(copy.toLowerCase()), `${copy} in ${echo.text}`);
      }
      assert.match(messageOf(echo.text), /^raw=\[redacted\] b64=\[redacted\] url=\[redacted\] json=/);
      // The review's length attack: n × x, then ` key=<key>`, moving the 500-character cut through the key.
      for (let n = 455; n <= 500; n++) {
        const r = await post(gw, chat(`oai/err-trunc-${n}`), KEYS.FULL);
        assert.equal(r.status, 400, r.text);
        const tail = messageOf(r.text).split(' key=')[1] ?? '';
        assert.ok('[redacted]'.startsWith(tail), `n=${n}: the answer ends ${JSON.stringify(tail)}`);
      }
      const lines = gw.logs.map((l) => JSON.stringify(l)).join('\n');
      assert.ok(!lines.includes('SECRETKEY') && !lines.includes('secretkey'), 'no log line holds the key');
    });

    test('M3: ten 50 KB model names do not change /metrics; wildcard series carry the configured row', async () => {
      // One request of each outcome first: the series a 200 and a 400 add are the configured row's, once.
      assert.equal((await post(gw, chat('oai/card-0'), KEYS.FULL)).status, 200);
      assert.equal((await post(gw, chat(`oai/${'b'.repeat(50_000)}`), KEYS.FULL)).status, 400);
      const before = await scrape(gw);
      for (let i = 0; i < 10; i++) {
        const r = await post(gw, chat(`oai/${i}${'a'.repeat(50_000)}`), KEYS.FULL);
        assert.equal(r.status, 400, r.text.slice(0, 300));
        assert.equal(messageOf(r.text), '`model` must be at most 256 characters (it has 50005)');
      }
      const afterTen = await scrape(gw);
      for (let i = 1; i <= 100; i++) {
        assert.equal((await post(gw, chat(`oai/card-${i}-${'a'.repeat(200)}`), KEYS.FULL)).status, 200);
      }
      const afterAll = await scrape(gw);
      console.log(
        `${runtime}: /metrics ${before.bytes} bytes, ${before.series.size} series before; after ten 50 KB names ` +
          `${afterTen.bytes} bytes, ${afterTen.series.size} series; after 100 wildcard names ${afterAll.bytes} ` +
          `bytes, ${afterAll.series.size} series`,
      );
      assert.deepEqual([...afterTen.series].filter((s) => !before.series.has(s)), [], 'no series added');
      assert.deepEqual([...afterAll.series].filter((s) => !before.series.has(s)), [], 'no series added');
      assert.ok(
        Math.abs(afterAll.bytes - before.bytes) < 1_000,
        `/metrics went from ${before.bytes} to ${afterAll.bytes} bytes (counters' digits only)`,
      );
      assert.ok(![...afterAll.series].some((s) => /card-|aaaa|bbbb/.test(s)), 'no series carries the caller text');
      const upstreamModels = new Set(
        [...afterAll.series].filter((s) => s.includes('upstream_model=')).map((s) => labelsOf(s).upstream_model),
      );
      assert.ok(upstreamModels.has('*'), 'the wildcard row is labelled by its pattern');
    });

    test('M6: a key with rpm 2 sends six flagged prompts; the moderation service is called at most twice', async () => {
      await roomInMinute();
      const calls = () => guard.requests.filter((r) => r.path.endsWith('/moderations')).length;
      const before = calls();
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        statuses.push((await post(gw, chat('gpt-direct', `a ${TRIGGERS.violent} prompt`), KEYS.RPM2)).status);
      }
      assert.deepEqual(statuses, [422, 422, 429, 429, 429, 429]);
      assert.ok(calls() - before <= 2, `${calls() - before} moderation calls`);
    });

    test("L5: a key's drop_body_fields keeps OpenRouter's routing members from the upstream", async () => {
      const vendor = { models: ['gpt-secret-model'], route: 'fallback', provider: { order: ['x'] } };
      const sent = mock.requests.length;
      for (const model of ['gpt-drop', 'gpt-direct']) {
        const r = await post(gw, { ...chat(model), ...vendor }, KEYS.FULL);
        assert.equal(r.status, 200, r.text);
      }
      const [dropped, passed] = mock.requests.slice(sent).map((r) => r.json ?? {});
      assert.deepEqual([dropped!.models, dropped!.route, dropped!.provider], [undefined, undefined, undefined]);
      // Without the list the members pass, as AISIX passes them (docs/security.md "Security state fails closed").
      assert.deepEqual(passed!.models, vendor.models);
    });

    test('L10: the guardrail reads documents, tool descriptions, predictions, suffixes and reasoning', async () => {
      const said = 'it says forbiddenword';
      const sent = mock.requests.length;
      const user = [{ role: 'user', content: 'hi' }];
      const cases: [string, string, unknown][] = [
        ['an Anthropic document', '/v1/messages', {
          model: 'gpt-direct',
          max_tokens: 8,
          messages: [{
            role: 'user',
            content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: said } }, {
              type: 'text',
              text: 'summarise',
            }],
          }],
        }],
        ['a tool description', '/v1/chat/completions', {
          model: 'gpt-direct',
          messages: user,
          tools: [{ type: 'function', function: { name: 'f', description: said, parameters: { type: 'object' } } }],
        }],
        ['a prediction', '/v1/chat/completions', {
          model: 'gpt-direct',
          messages: user,
          prediction: { type: 'content', content: said },
        }],
        ['a completions suffix', '/v1/completions', { model: 'gpt-direct', prompt: 'hi', suffix: said }],
      ];
      for (const [name, path, body] of cases) {
        const r = await post(gw, body, KEYS.FULL, path);
        assert.equal(r.status, 422, `${name}: ${r.text}`);
        assert.match(r.text, /request blocked by content policy \(guardrail 'words'\)/, name);
      }
      assert.equal(mock.requests.length, sent, 'no input reached the upstream');
      const out = await post(gw, chat('oai/reasoning-model'), KEYS.FULL);
      assert.equal(out.status, 422, out.text);
      assert.match(out.text, /response blocked by content policy/);
      assert.doesNotMatch(out.text, /forbiddenword/);
    });

    test('L3: 100,000 levels of nesting are a 400; nothing is sent and the target stays healthy', async () => {
      const sent = mock.requests.length;
      const body = `{"model":"gpt-direct","messages":[{"role":"user","content":"hi"}],"metadata":${
        '['.repeat(100_000)
      }${']'.repeat(100_000)}}`;
      for (let i = 0; i < 3; i++) {
        const r = await post(gw, body, KEYS.FULL);
        assert.equal(r.status, 400, r.text);
        assert.match(messageOf(r.text), /nested deeper than 127 levels/);
      }
      assert.equal(mock.requests.length, sent, 'no upstream request');
      const rows = await (await fetch(gw.url('/status/models', 'status'))).json() as {
        display_name: string;
        status: string;
      }[];
      assert.equal(rows.find((r) => r.display_name === 'gpt-direct')?.status, 'healthy');
    });
  });
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: what the review found holding`, () => {
    let gw: GatewayProcess;
    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: KEYS,
        files: { 'resources.yaml': resources(mock.url, guard.url, exfil.port) },
      });
      await gw.waitReady();
    });
    after(() => gw.stop());

    test('caller keys by hash: no key and a wrong key are 401', async () => {
      const none = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        body: JSON.stringify(chat('gpt-direct')),
      });
      assert.equal(none.status, 401, await none.text());
      const wrong = await post(gw, chat('gpt-direct'), `${KEYS.FULL}x`);
      assert.equal(wrong.status, 401, wrong.text);
      assert.equal(messageOf(wrong.text), 'invalid API key');
    });

    test('admin reads need an admin key, whatever the path spelling', async () => {
      const admin = (path: string, headers: Record<string, string> = {}) =>
        fetch(gw.url(path, 'admin'), { headers, signal: AbortSignal.timeout(10_000) }).then(async (r) => {
          await r.text();
          return r.status;
        });
      assert.equal(await admin('/admin/v1/provider_keys'), 401);
      assert.equal(await admin('/admin/v1/%70rovider_keys'), 401);
      assert.equal(await admin('/admin/v1/provider_keys', { authorization: `Bearer ${KEYS.FULL}` }), 401);
      assert.equal(await admin('/admin/v1/provider_keys', { 'x-api-key': 'admin-key-SECRET' }), 200);
    });

    test('allowed_models holds on all six model endpoints; nothing is sent', async () => {
      const sent = mock.requests.length;
      const m = (model: string) => ({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
      const cases: [string, (model: string) => unknown, number][] = [
        ['/v1/chat/completions', m, 403],
        ['/v1/completions', (model) => ({ model, prompt: 'hi' }), 403],
        ['/v1/embeddings', (model) => ({ model, input: 'hi' }), 403],
        ['/v1/messages', m, 403],
        ['/v1/responses', (model) => ({ model, input: 'hi' }), 403],
        // A model the key may not use answers as an unknown one here (docs/aisix-compatibility.md).
        ['/v1/messages/count_tokens', m, 404],
      ];
      for (const model of ['gpt-direct', 'oai/gpt-secret', 'vtx/gemini-1.5-pro']) {
        for (const [path, body, status] of cases) {
          const r = await post(gw, body(model), KEYS.NARROW, path);
          assert.equal(r.status, status, `${model} ${path}: ${r.text}`);
        }
      }
      assert.equal(mock.requests.length, sent, 'no upstream request');
    });

    test("the caller's credential, cookie and forwarding headers never go upstream", async () => {
      const sent = mock.requests.length;
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEYS.FULL}`,
          'x-api-key': KEYS.FULL,
          cookie: 'session=caller-cookie-SECRET',
          'x-forwarded-for': '10.1.2.3',
          'content-type': 'application/json',
        },
        body: JSON.stringify(chat('gpt-direct')),
      });
      assert.equal(res.status, 200, await res.text());
      const got = mock.requests.slice(sent);
      assert.equal(got.length, 1);
      const h = got[0]!.headers;
      assert.equal(h.authorization, `Bearer ${OPENAI_KEY}`);
      assert.equal(h['x-api-key'], undefined);
      assert.equal(h.cookie, undefined);
      assert.equal(h['x-forwarded-for'], undefined);
      assert.ok(!JSON.stringify(h).includes(KEYS.FULL), JSON.stringify(h));
    });

    test('no log line holds a secret', () => {
      const text = gw.logs.map((l) => JSON.stringify(l)).join('\n') + gw.rawErr.join('\n');
      const secrets = [...Object.values(KEYS), OPENAI_KEY, VERTEX_TOKEN, EXFIL_TOKEN, 'admin-key-SECRET'];
      for (const secret of [...secrets, 'sk-mod-SECRET-MODERATION-9999', 'caller-cookie-SECRET']) {
        assert.ok(!text.includes(secret), `a log line holds ${secret.slice(0, 8)}…`);
      }
    });
  });
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: routing groups (L4)`, () => {
    const spawn = (config: string) =>
      spawnGateway({
        runtime,
        config,
        env: KEYS,
        files: { 'resources.yaml': resources(mock.url, guard.url, exfil.port) },
      });
    const hidden = baseConfig().replace(
      'proxy: { addr: "127.0.0.1:{{proxy}}" }',
      'proxy: { addr: "127.0.0.1:{{proxy}}", served_by_header: false }',
    );
    let shown: GatewayProcess;
    let quiet: GatewayProcess;
    before(async () => {
      [shown, quiet] = await Promise.all([spawn(baseConfig()), spawn(hidden)]);
      await Promise.all([shown.waitReady(), quiet.waitReady()]);
    });
    after(() => Promise.all([shown.stop(), quiet.stop()]));

    test('a key allowed the group reaches its member; served_by_header: false hides the name', async () => {
      const direct = await post(shown, chat('gpt-direct'), KEYS.GROUPED);
      assert.equal(direct.status, 403, 'the member by its own name is refused');
      for (const [gw, header] of [[shown, 'gpt-direct'], [quiet, null]] as const) {
        const res = await fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { authorization: `Bearer ${KEYS.GROUPED}`, 'content-type': 'application/json' },
          body: JSON.stringify(chat('group-open')),
        });
        const text = await res.text();
        assert.equal(res.status, 200, text);
        assert.equal(res.headers.get('x-aisix-served-by'), header);
        if (header === null) assert.doesNotMatch(text, /gpt-direct"/);
      }
    });
  });
}

const MOD_KEY = 'sk-mod-ECHOED-SECRET-0123456789+/=';

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: a guardrail service that echoes its key (L2)`, () => {
    let gw: GatewayProcess;
    before(async () => {
      const rows = resources(mock.url, guard.url, exfil.port).replace(
        /guardrails:\n[\s\S]*$/,
        `guardrails:\n  - { name: echo-mod, kind: openai_moderation, api_key: "${MOD_KEY}", endpoint: "${mock.url}/echo-mod/v1" }\n`,
      );
      gw = await spawnGateway({ runtime, config: baseConfig(), env: KEYS, files: { 'resources.yaml': rows } });
      await gw.waitReady();
    });
    after(() => gw.stop());

    test('its 4xx body is logged at ERROR with the key redacted in every form; the input fails closed', async () => {
      const r = await post(gw, chat('gpt-direct'), KEYS.FULL);
      assert.equal(r.status, 422, r.text);
      const line = await gw.waitForLog((l) => l.level === 'ERROR' && JSON.stringify(l).includes('response_body'));
      const text = JSON.stringify(line);
      assert.match(text, /Incorrect API key provided: \[redacted\]/);
      const b64 = Buffer.from(MOD_KEY).toString('base64');
      for (const copy of [MOD_KEY, encodeURIComponent(MOD_KEY), b64, 'ECHOED-SECRET']) {
        assert.ok(!gw.logs.some((l) => JSON.stringify(l).includes(copy)), `a log line holds ${copy}`);
      }
      assert.ok(!r.text.includes('ECHOED'), r.text);
    });
  });
}

/** Write `raw` on a new connection; the status line answered (or '' for none) and whether the gateway closed. */
function exchange(port: number, raw: Buffer): Promise<{ status: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ status: got.split('\r\n')[0] ?? '', closed: false });
    }, 5_000);
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ status: got.split('\r\n')[0] ?? '', closed: true });
    });
    s.write(raw);
  });
}

const HEAD = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.FULL}\r\n`;
/** The review's malformed framings (its check 5.1): each must be a 400 and a closed connection. */
const FRAMINGS: [string, string][] = [
  ['Content-Length with Transfer-Encoding', `${HEAD}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
  ['two Content-Length fields', `${HEAD}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`],
  ['Transfer-Encoding: xchunked', `${HEAD}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`],
  ['Transfer-Encoding: chunked, identity', `${HEAD}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`],
  ['a space before the colon', `${HEAD}Content-Length : 5\r\n\r\nhello`],
  ['an obs-fold', `${HEAD}X-Folded: a\r\n b\r\nContent-Length: 0\r\n\r\n`],
  ['bare LF line ends', 'POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 0\n\n'],
  ['a NUL in a value', `${HEAD}X-Nul: a\0b\r\nContent-Length: 0\r\n\r\n`],
  ['a CR in a value', `${HEAD}X-Cr: a\rb\r\nContent-Length: 0\r\n\r\n`],
  ['a bad chunk size', `${HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`],
  ['an LF-only chunk extension', `${HEAD}Transfer-Encoding: chunked\r\n\r\n5;ext\nhello\r\n0\r\n\r\n`],
  ['no Host', 'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n'],
  ['a Content-Length that is no number', `${HEAD}Content-Length: 5x\r\n\r\nhello`],
];

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: malformed framings`, () => {
    let gw: GatewayProcess;
    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: KEYS,
        files: { 'resources.yaml': resources(mock.url, guard.url, exfil.port) },
      });
      await gw.waitReady();
    });
    after(() => gw.stop());

    test('each is a 400 and the connection closed', async () => {
      const got = await Promise.all(
        FRAMINGS.map(async ([name, raw]) => ({ name, ...await exchange(gw.ports.proxy, Buffer.from(raw, 'latin1')) })),
      );
      // Bun's parser reads a request line ended by a bare LF as one without an HTTP version: 505, also refused.
      const refused = (g: { name: string; status: string }) =>
        g.status.startsWith('HTTP/1.1 400 ') ||
        (runtime === 'bun' && g.name === 'bare LF line ends' && g.status.startsWith('HTTP/1.1 505 '));
      const wrong = got.filter((g) => !refused(g) || !g.closed);
      assert.deepEqual(wrong, [], `${runtime}: ${JSON.stringify(got, null, 1)}`);
    });
  });
}
