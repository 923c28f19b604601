// What an upstream's failures look like to a caller, through a real gateway process on Node, Bun and Deno
// (issue 14): an upstream echoing the credential it was sent — as an error status, in-stream as an error
// event, in a header — never shows it (nor the admin key, nor the caller's own key) on /v1/chat/completions or
// /v1/messages, JSON or SSE, same-wire or translated; a 200 whose body is not JSON is an upstream failure
// (retried, 502, said so); a stream cut before its terminator or carrying an error event counts as
// `outcome="upstream_error"` under the status the caller saw (200); a transport failure is told in the
// gateway's words, never the runtime's.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  baseConfig,
  CALLER_KEY,
  deadEndpoint,
  type GatewayProcess,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';
import { sumSamples } from '../support/metrics.ts';

const OPENAI_KEY = 'sk-upstream-OPENAI-SECRET-9f8e7d';
const ANTHROPIC_KEY = 'sk-ant-upstream-SECRET-1a2b3c';
const ADMIN_KEY = 'admin-key-SECRET';
const SECRETS = [OPENAI_KEY, ANTHROPIC_KEY, ADMIN_KEY, CALLER_KEY];
const MESSAGES = [{ role: 'user', content: 'hi' }];

/**
 * One loopback upstream speaking both wires (`/v1/chat/completions`, `/v1/messages`); what it does is
 * chosen by the upstream model name. `echo-key` quotes the credential it received (and the admin and caller
 * keys, as if they had leaked into its words); `not-json` answers 200 with HTML; `cut` streams one event and
 * closes without the terminator.
 */
async function startUpstream(): Promise<{ base: string; hits: Map<string, number>; close(): Promise<void> }> {
  const hits = new Map<string, number>();
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const p of req) raw += p;
    const body = JSON.parse(raw) as { model: string; stream?: boolean };
    const anthropic = req.url === '/v1/messages';
    hits.set(`${req.url} ${body.model}`, (hits.get(`${req.url} ${body.model}`) ?? 0) + 1);
    const credential = anthropic ? String(req.headers['x-api-key']) : String(req.headers.authorization);
    const echoed = `Incorrect API key provided: ${credential} (also seen: ${ADMIN_KEY}, ${CALLER_KEY})`;
    const sse = (events: string[]) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(events.join(''));
    };
    const openaiChunk = `data: ${
      JSON.stringify({
        id: 'c1',
        object: 'chat.completion.chunk',
        model: body.model,
        choices: [{ index: 0, delta: { content: 'part' } }],
      })
    }\n\n`;
    const anthropicStart = [
      `event: message_start\ndata: ${
        JSON.stringify({
          type: 'message_start',
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: [],
            usage: { input_tokens: 1, output_tokens: 0 },
          },
        })
      }\n\n`,
      `event: content_block_start\ndata: ${
        JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      }\n\n`,
      `event: content_block_delta\ndata: ${
        JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'part' } })
      }\n\n`,
    ];
    switch (body.model) {
      case 'echo-key':
        if (body.stream) {
          return sse(
            anthropic
              ? [
                ...anthropicStart,
                `event: error\ndata: ${
                  JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: echoed } })
                }\n\n`,
              ]
              : [
                openaiChunk,
                `data: ${JSON.stringify({ error: { message: echoed, type: 'invalid_request_error' } })}\n\n`,
              ],
          );
        }
        res.writeHead(401, { 'content-type': 'application/json', 'retry-after': credential });
        return res.end(JSON.stringify(
          anthropic
            ? { type: 'error', error: { type: 'authentication_error', message: echoed } }
            : { error: { message: echoed, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
        ));
      case 'not-json':
        res.writeHead(200, { 'content-type': 'text/html' });
        return res.end('<html>upstream broke</html>');
      case 'whole':
        return sse(
          anthropic
            ? [
              ...anthropicStart,
              'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
              'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n',
              'event: message_stop\ndata: {"type":"message_stop"}\n\n',
            ]
            : [openaiChunk, 'data: [DONE]\n\n'],
        );
      case 'cut':
        return sse(anthropic ? anthropicStart : [openaiChunk]);
      default:
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end('{"error":{"message":"unknown model","type":"invalid_request_error"}}');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    hits,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function resources(base: string, dead: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: ${OPENAI_KEY}, api_base: "${base}/v1" }
  - { display_name: ant, provider: anthropic, api_key: ${ANTHROPIC_KEY}, api_base: "${base}" }
  - { display_name: gone, provider: openai, api_key: ${OPENAI_KEY}, api_base: "${dead}/v1" }
models:
  - { display_name: oai-echo, provider_key: oai, model_name: echo-key }
  - { display_name: ant-echo, provider_key: ant, model_name: echo-key }
  - { display_name: oai-notjson, provider_key: oai, model_name: not-json }
  - { display_name: ant-notjson, provider_key: ant, model_name: not-json }
  - { display_name: oai-cut, provider_key: oai, model_name: cut }
  - { display_name: ant-cut, provider_key: ant, model_name: cut }
  - { display_name: oai-whole, provider_key: oai, model_name: whole }
  - { display_name: ant-whole, provider_key: ant, model_name: whole }
  - { display_name: gone, provider_key: gone, model_name: gone, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

let upstream: Awaited<ReturnType<typeof startUpstream>>;
let dead: string;
const running: GatewayProcess[] = [];
before(async () => {
  upstream = await startUpstream();
  dead = await deadEndpoint();
});
after(async () => {
  await Promise.all(running.map((g) => g.stop()));
  await upstream.close();
});

function assertNoSecret(where: string, text: string): void {
  for (const s of SECRETS) assert.ok(!text.includes(s), `${where} carries the secret ${s}: ${text}`);
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: upstream failures`, () => {
    let gw: GatewayProcess;
    const call = async (path: string, model: string, stream = false) => {
      const body = path === '/v1/messages'
        ? { model, max_tokens: 16, messages: MESSAGES, stream }
        : { model, messages: MESSAGES, stream };
      const res = await fetch(gw.url(path), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      const headers = [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n');
      return { status: res.status, text, headers, contentType: res.headers.get('content-type') };
    };

    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig('upstream: { retries: 2 }'),
        env: { CALLER_KEY },
        files: { 'resources.yaml': resources(upstream.base, dead) },
      });
      running.push(gw);
      await gw.waitReady();
    });

    test('an upstream echoing the credential: never in a body, an SSE event or a header', async () => {
      for (const path of ['/v1/chat/completions', '/v1/messages']) {
        for (const model of ['oai-echo', 'ant-echo']) { // same wire and translated, both ways
          const json = await call(path, model);
          const where = `${path} ${model} JSON`;
          assert.equal(json.status, 401, where);
          assertNoSecret(where, json.text);
          assertNoSecret(`${where} headers`, json.headers);
          assert.match(json.text, /Incorrect API key provided: .*\[redacted\]/, where);
          const err = JSON.parse(json.text) as { type?: string; error: { type: string; message: string } };
          if (path === '/v1/messages') assert.deepEqual([err.type, err.error.type], ['error', 'authentication_error']);
          // An OpenAI caller keeps the upstream's own type (translated or not).
          else assert.equal(err.error.type, model === 'oai-echo' ? 'invalid_request_error' : 'authentication_error');

          const sse = await call(path, model, true);
          const sseWhere = `${path} ${model} SSE`;
          assert.equal(sse.status, 200, sseWhere);
          assert.equal(sse.contentType, 'text/event-stream', sseWhere);
          assertNoSecret(sseWhere, sse.text);
          assertNoSecret(`${sseWhere} headers`, sse.headers);
          assert.match(sse.text, /Incorrect API key provided: .*\[redacted\]/, sseWhere);
          if (path === '/v1/messages') assert.match(sse.text, /event: error\n/, sseWhere);
          else assert.match(sse.text, /data: \{"error":/, sseWhere);
        }
      }
      // Same-wire JSON: the upstream's type, message, param and code re-wrapped, nothing else of its body.
      const oai = await call('/v1/chat/completions', 'oai-echo');
      assert.deepEqual(JSON.parse(oai.text), {
        error: {
          message: `Incorrect API key provided: Bearer [redacted] (also seen: [redacted], [redacted])`,
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      });
    });

    test('a 200 that is not JSON: retried like any upstream failure, then 502 saying what came', async () => {
      for (
        const [path, model, upstreamPath] of [
          ['/v1/chat/completions', 'oai-notjson', '/v1/chat/completions'],
          ['/v1/messages', 'ant-notjson', '/v1/messages'],
          ['/v1/messages', 'oai-notjson', '/v1/chat/completions'],
          ['/v1/chat/completions', 'ant-notjson', '/v1/messages'],
        ] as const
      ) {
        const key = `${upstreamPath} not-json`;
        const before = upstream.hits.get(key) ?? 0;
        const r = await call(path, model);
        assert.equal(r.status, 502, `${path} ${model}`);
        const message = path === '/v1/messages'
          ? (JSON.parse(r.text) as { error: { type: string; message: string } }).error
          : (JSON.parse(r.text) as { error: { type: string; message: string } }).error;
        assert.equal(message.message, 'upstream answered 200 with a body that is not JSON', `${path} ${model}`);
        assert.equal(message.type, path === '/v1/messages' ? 'api_error' : 'upstream_error');
        assert.equal((upstream.hits.get(key) ?? 0) - before, 3, `${path} ${model}: 1 + upstream.retries calls`);
      }
    });

    test('a transport failure is told in our words', async () => {
      const r = await call('/v1/chat/completions', 'gone');
      assert.equal(r.status, 502);
      assert.deepEqual(JSON.parse(r.text), {
        error: { message: 'upstream request failed: no answer from the upstream', type: 'upstream_error' },
      });
      assert.ok(!r.text.includes('verbose'), r.text);
    });

    test('cut streams and error events count as upstream_error under status 200; whole ones as success', async () => {
      const cuts: [string, string][] = [
        ['/v1/chat/completions', 'oai-cut'],
        ['/v1/messages', 'ant-cut'],
        ['/v1/messages', 'oai-cut'],
        ['/v1/chat/completions', 'ant-cut'],
      ];
      for (const [path, model] of cuts) {
        const r = await call(path, model, true);
        assert.equal(r.status, 200, `${path} ${model}`);
        // The caller is told: a whole answer's terminator never follows.
        assert.ok(!/^data: \[DONE\]$|^event: message_stop$/m.test(r.text), `${path} ${model}: ${r.text}`);
      }
      const wholes: [string, string][] = [
        ['/v1/chat/completions', 'oai-whole'],
        ['/v1/messages', 'ant-whole'],
        ['/v1/messages', 'oai-whole'],
        ['/v1/chat/completions', 'ant-whole'],
      ];
      for (const [path, model] of wholes) {
        const r = await call(path, model, true);
        assert.equal(r.status, 200, `${path} ${model}`);
        assert.match(r.text, /^data: \[DONE\]$|^event: message_stop$/m, `${path} ${model}`);
      }
      const metrics = await (await fetch(gw.url('/metrics', 'status'))).text();
      const count = (model: string, endpoint: string, outcome: string) =>
        sumSamples(metrics, 'aisix_proxy_requests_total', { model, endpoint, status: '200', outcome }) ?? 0;
      for (const [path, model] of cuts) {
        assert.equal(count(model, path, 'upstream_error'), 1, `${path} ${model} counted as upstream_error`);
        assert.equal(count(model, path, 'success'), 0, `${path} ${model} not counted as success`);
      }
      for (const [path, model] of wholes) {
        assert.equal(count(model, path, 'success'), 1, `${path} ${model} counted as success`);
        assert.equal(count(model, path, 'upstream_error'), 0, `${path} ${model} not a failure`);
      }
      // The echoed error events of the first test: also failures, status 200.
      for (const model of ['oai-echo', 'ant-echo']) {
        for (const path of ['/v1/chat/completions', '/v1/messages']) {
          assert.equal(count(model, path, 'upstream_error'), 1, `${path} ${model} error event`);
        }
      }
      assert.ok(
        (sumSamples(metrics, 'aisix_proxy_failed_requests_total', { model: 'oai-cut', status: '200' }) ?? 0) >= 1,
      );
      const line = gw.logs.find((l) => l.msg === 'proxy request completed' && l.model === 'oai-cut');
      assert.equal(line?.status, 200);
      assert.equal(line?.error_kind, 'upstream_error');
    });
  });
}
