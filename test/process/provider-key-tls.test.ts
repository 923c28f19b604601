// A provider key's own `tls` and `SSL_CERT_FILE` (docs/configuration.md "Provider keys" and "upstream"), on each
// runtime that can set a CA (Workers cannot: docs/workers.md):
// - a key carrying its endpoint's CA inline (`tls.ca_cert`) reaches that HTTPS endpoint, JSON and SSE, while a
//   key without it is refused there with a 502 naming the certificate (the CA is the key's, not the gateway's);
// - `tls.verify: false` reaches a self-signed endpoint (a WARN names the key); the same endpoint refuses a key
//   that verifies;
// - `SSL_CERT_FILE` naming the CA makes the endpoint trusted for every key, also where NODE_EXTRA_CA_CERTS names it
//   too (on Bun the configured CAs are then in fetch's own roots, runtimes/bun-tls.ts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as https from 'node:https';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { baseConfig, CALLER_KEY, type RuntimeName, spawnGateway } from '../support/process.ts';
import { makePki, type Pki } from '../support/tls.ts';

let pki: Pki;
let selfSignedDir: string;
let servers: https.Server[] = [];
/** The endpoint whose certificate a private CA signed. */
let privateBase: string;
/** The endpoint whose certificate signed itself. */
let selfSignedBase: string;

function answer(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
  let body = '';
  req.on('data', (d) => {
    body += d;
  });
  req.on('end', () => {
    if (JSON.parse(body).stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"over tls"}}]}\n\n');
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      id: 'x',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'over tls' }, finish_reason: 'stop' }],
    }));
  });
}

async function serve(key: string, cert: string): Promise<string> {
  const server = https.createServer({ key, cert }, answer);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

before(async () => {
  pki = makePki();
  selfSignedDir = mkdtempSync(join(tmpdir(), 'sluice-self-signed-'));
  execFileSync('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'key.pem',
    '-out',
    'cert.pem',
    '-days',
    '2',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ], { cwd: selfSignedDir, stdio: 'ignore' });
  privateBase = await serve(pki.key, pki.cert);
  selfSignedBase = await serve(
    readFileSync(join(selfSignedDir, 'key.pem'), 'utf8'),
    readFileSync(join(selfSignedDir, 'cert.pem'), 'utf8'),
  );
});
after(() => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  servers = [];
  rmSync(pki.dir, { recursive: true, force: true });
  rmSync(selfSignedDir, { recursive: true, force: true });
});

/** The CA as a YAML block scalar under `ca_cert:` (indented for the key's `tls` mapping). */
function caBlock(): string {
  return pki.ca.trim().split('\n').map((l) => `        ${l}`).join('\n');
}

function resources(): string {
  return `_format_version: "1"
provider_keys:
  - display_name: with-ca
    provider: openai
    api_key: sk-upstream-SECRET-value
    api_base: "${privateBase}"
    tls:
      ca_cert: |
${caBlock()}
  - { display_name: plain, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${privateBase}" }
  - { display_name: unverified, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${selfSignedBase}", tls: { verify: false } }
  - { display_name: verifying, provider: openai, api_key: sk-upstream-SECRET-value, api_base: "${selfSignedBase}" }
models:
  - { display_name: with-ca, model_name: gpt-upstream, provider_key: with-ca }
  - { display_name: plain, model_name: gpt-upstream, provider_key: plain }
  - { display_name: unverified, model_name: gpt-upstream, provider_key: unverified }
  - { display_name: verifying, model_name: gpt-upstream, provider_key: verifying }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

async function chat(url: string, model: string, stream = false): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, text: await res.text() };
}

async function gateway(runtime: RuntimeName, env: Record<string, string>) {
  const g = await spawnGateway({
    runtime,
    config: baseConfig(),
    files: { 'resources.yaml': resources() },
    // Neither runtime variable trusts the private CA: only what the test names does.
    env: { CALLER_KEY, NODE_EXTRA_CA_CERTS: '', DENO_CERT: '', ...env },
  });
  await g.waitReady('/readyz', 'proxy', 30_000);
  return g;
}

function assertCertificate502(r: { status: number; text: string }): void {
  assert.equal(r.status, 502, r.text);
  const error = JSON.parse(r.text).error as { type: string; message: string };
  assert.equal(error.type, 'upstream_error');
  assert.match(error.message, /certificate/);
}

for (const runtime of ['node', 'bun', 'deno'] as const) {
  describe(`a provider key's own TLS on ${runtime}`, { concurrency: false }, () => {
    test('tls.ca_cert reaches the private-CA endpoint (JSON, SSE); tls.verify: false a self-signed one, WARNed', async () => {
      const g = await gateway(runtime, { SSL_CERT_FILE: '' });
      try {
        const warn = await g.waitForLog((l) =>
          l.level === 'WARN' && String(l.msg).startsWith('provider_key tls.verify is false')
        );
        assert.equal(warn.provider_key, 'unverified');
        const json = await chat(g.url('/v1/chat/completions'), 'with-ca');
        assert.equal(json.status, 200, json.text);
        assert.match(json.text, /over tls/);
        const sse = await chat(g.url('/v1/chat/completions'), 'with-ca', true);
        assert.equal(sse.status, 200, sse.text);
        assert.match(sse.text, /over tls[\s\S]*data: \[DONE\]/);
        assertCertificate502(await chat(g.url('/v1/chat/completions'), 'plain'));
        const unverified = await chat(g.url('/v1/chat/completions'), 'unverified');
        assert.equal(unverified.status, 200, unverified.text);
        assertCertificate502(await chat(g.url('/v1/chat/completions'), 'verifying'));
      } finally {
        assert.equal(await g.stop(), 0);
      }
    });

    test('SSL_CERT_FILE naming the CA trusts the endpoint for every key', async () => {
      const g = await gateway(runtime, { SSL_CERT_FILE: pki.caFile });
      try {
        const r = await chat(g.url('/v1/chat/completions'), 'plain');
        assert.equal(r.status, 200, r.text);
        assertCertificate502(await chat(g.url('/v1/chat/completions'), 'verifying'));
      } finally {
        assert.equal(await g.stop(), 0);
      }
    });

    test('SSL_CERT_FILE naming the bundle NODE_EXTRA_CA_CERTS names (Bun then hands fetch no CA): as above', async () => {
      const g = await gateway(runtime, { SSL_CERT_FILE: pki.caFile, NODE_EXTRA_CA_CERTS: pki.caFile });
      try {
        for (const model of ['plain', 'with-ca']) {
          const r = await chat(g.url('/v1/chat/completions'), model);
          assert.equal(r.status, 200, r.text);
        }
        assertCertificate502(await chat(g.url('/v1/chat/completions'), 'verifying'));
      } finally {
        assert.equal(await g.stop(), 0);
      }
    });
  });
}
