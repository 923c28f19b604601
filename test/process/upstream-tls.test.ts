// HTTPS upstreams signed by a private CA made here with openssl (test/support/tls.ts), on each runtime that
// serves `upstream.tls` (docs/configuration.md "upstream"; Workers refuses the section, test/process/workers.test.ts):
// - the runtime's own CA variable (NODE_EXTRA_CA_CERTS on Node and Bun; DENO_CERT on Deno, handed to the
//   upstream client by runtimes/deno.ts) still works; without any trust the call is a 502 naming the
//   certificate problem, never a silent success;
// - `upstream.tls.ca_file` plus a client certificate reach an upstream that requires one, next to one that
//   does not; `verify: false` reaches it without the CA (WARN at boot), but not the one that requires a
//   client certificate when none is configured;
// - `pool_idle_timeout_secs` closes an idle pooled connection although the upstream's Keep-Alive hint says
//   120 s (Node and Deno: Bun's fetch has no such knob), so the next call opens a new one.
import assert from 'node:assert/strict';
import * as https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { baseConfig, CALLER_KEY, type RuntimeName, spawnGateway } from '../support/process.ts';
import { makePki, type Pki } from '../support/tls.ts';
import { latch, within } from '../support/until.ts';

/** One HTTPS upstream: its base URL, and the server side of every connection it accepted. */
interface TlsUpstream {
  base: string;
  sockets: Socket[];
  server: https.Server;
}

let pki: Pki;
let open: TlsUpstream;
let mutual: TlsUpstream;

function answer(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
  let body = '';
  req.on('data', (d) => {
    body += d;
  });
  req.on('end', () => {
    // The hint an upstream such as AISIX's e2e sends: only the gateway's own bound may close sooner.
    const keepAlive = { connection: 'keep-alive', 'keep-alive': 'timeout=120' };
    if (JSON.parse(body).stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...keepAlive });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"over tls"}}]}\n\n');
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', ...keepAlive });
    res.end(JSON.stringify({
      id: 'x',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'over tls' }, finish_reason: 'stop' }],
    }));
  });
}

async function startUpstream(requireClientCert: boolean): Promise<TlsUpstream> {
  const server = https.createServer({
    key: pki.key,
    cert: pki.cert,
    ...(requireClientCert ? { ca: pki.ca, requestCert: true, rejectUnauthorized: true } : {}),
  }, answer);
  server.keepAliveTimeout = 120_000;
  const sockets: Socket[] = [];
  server.on('secureConnection', (s) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { base: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, sockets, server };
}

before(async () => {
  pki = makePki();
  open = await startUpstream(false);
  mutual = await startUpstream(true);
});
after(() => {
  for (const u of [open, mutual]) {
    u.server.closeAllConnections();
    u.server.close();
  }
  rmSync(pki.dir, { recursive: true, force: true });
});

/** Two models: `open-tls` on the upstream that asks nothing of the client, `mutual-tls` on the one that does. */
function resources(): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: open, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${open.base}" }
  - { display_name: mutual, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${mutual.base}" }
models:
  - { display_name: open-tls, model_name: gpt-upstream, provider_key: open }
  - { display_name: mutual-tls, model_name: gpt-upstream, provider_key: mutual }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

/** The PEM files, next to config.yaml in the gateway's folder (Deno reads only what it is allowed). */
function pemFiles(): Record<string, string> {
  return { 'ca.pem': pki.ca, 'client.pem': pki.clientCert, 'client.key': pki.clientKey };
}

async function chat(url: string, model: string, stream = false): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, text: await res.text() };
}

/** A gateway on `runtime` with `upstream` as its upstream section (YAML flow mapping), ready. */
async function gateway(runtime: RuntimeName, upstream: string, env: Record<string, string> = {}) {
  const g = await spawnGateway({
    runtime,
    config: baseConfig(upstream ? `upstream: ${upstream}\n` : ''),
    files: { 'resources.yaml': resources(), ...pemFiles() },
    env: { CALLER_KEY, ...env },
  });
  await g.waitReady('/readyz', 'proxy', 30_000);
  return g;
}

const CA_ENV: Record<RuntimeName, string> = {
  node: 'NODE_EXTRA_CA_CERTS',
  bun: 'NODE_EXTRA_CA_CERTS',
  deno: 'DENO_CERT',
};

const CERTIFICATE_502 =
  /upstream request failed: certificate verify failed: (unable to verify the first certificate|unable to get local issuer certificate|self-signed certificate in certificate chain)/;

for (const runtime of ['node', 'bun', 'deno'] as const) {
  describe(`HTTPS upstreams with a private CA on ${runtime}`, { concurrency: false }, () => {
    test(`trusted through ${CA_ENV[runtime]}: JSON and SSE pass; without any trust: a 502 naming the certificate`, async () => {
      const trusted = await gateway(runtime, '', { [CA_ENV[runtime]]: pki.caFile });
      try {
        const json = await chat(trusted.url('/v1/chat/completions'), 'open-tls');
        assert.equal(json.status, 200, json.text);
        assert.match(json.text, /over tls/);
        const sse = await chat(trusted.url('/v1/chat/completions'), 'open-tls', true);
        assert.equal(sse.status, 200, sse.text);
        assert.match(sse.text, /over tls[\s\S]*data: \[DONE\]/);
      } finally {
        assert.equal(await trusted.stop(), 0);
      }
      const untrusted = await gateway(runtime, '');
      try {
        for (const stream of [false, true]) {
          const r = await chat(untrusted.url('/v1/chat/completions'), 'open-tls', stream);
          assert.equal(r.status, 502, r.text);
          const error = JSON.parse(r.text).error as { type: string; message: string };
          assert.equal(error.type, 'upstream_error');
          assert.match(error.message, CERTIFICATE_502);
          assert.equal(r.text.includes('127.0.0.1'), false, 'the upstream address is not echoed');
        }
      } finally {
        assert.equal(await untrusted.stop(), 0);
      }
    });

    test('upstream.tls: ca_file and a client certificate reach both upstreams; the idle bound closes a pooled connection', async () => {
      const g = await gateway(
        runtime,
        '{ pool_idle_timeout_secs: 1, tls: { ca_file: ca.pem, client_cert_file: client.pem, client_key_file: client.key } }',
      );
      try {
        const mtls = await chat(g.url('/v1/chat/completions'), 'mutual-tls');
        assert.equal(mtls.status, 200, mtls.text);
        const sse = await chat(g.url('/v1/chat/completions'), 'mutual-tls', true);
        assert.equal(sse.status, 200, sse.text);
        assert.match(sse.text, /over tls[\s\S]*data: \[DONE\]/);
        const before = open.sockets.length;
        const first = await chat(g.url('/v1/chat/completions'), 'open-tls');
        assert.equal(first.status, 200, first.text);
        assert.equal(open.sockets.length, before + 1);
        if (runtime === 'bun') return; // Bun's fetch keeps idle connections on its own timer (docs/configuration.md)
        const socket = open.sockets.at(-1)!;
        const closed = latch();
        socket.once('close', () => closed.resolve());
        // The gateway closes it, after about 1 s idle (the server would wait 120 s).
        await within(closed.promise, 15_000, 'the gateway closing its idle upstream connection');
        const second = await chat(g.url('/v1/chat/completions'), 'open-tls');
        assert.equal(second.status, 200, second.text);
        assert.equal(open.sockets.length, before + 2, 'the next call opened a new connection');
      } finally {
        assert.equal(await g.stop(), 0);
      }
    });

    test('upstream.tls.verify: false reaches the private-CA upstream without its CA, WARNs; no client certificate is no answer', async () => {
      const g = await gateway(runtime, '{ tls: { verify: false } }');
      try {
        await g.waitForLog((l) => l.level === 'WARN' && String(l.msg).startsWith('upstream.tls.verify is false'));
        const r = await chat(g.url('/v1/chat/completions'), 'open-tls');
        assert.equal(r.status, 200, r.text);
        const refused = await chat(g.url('/v1/chat/completions'), 'mutual-tls');
        assert.equal(refused.status, 502, refused.text);
        assert.equal(JSON.parse(refused.text).error.type, 'upstream_error');
      } finally {
        assert.equal(await g.stop(), 0);
      }
    });
  });
}
