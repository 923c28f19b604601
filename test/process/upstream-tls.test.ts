// An HTTPS upstream signed by a private CA, trusted the way each runtime's operators expect: Node and Bun read
// NODE_EXTRA_CA_CERTS; on Deno the upstream client (undici over node:tls) is given DENO_CERT by
// runtimes/deno.ts. Without the CA the call fails as an upstream error, never as a silent success.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { baseConfig, CALLER_KEY, resourcesFor, type RuntimeName, spawnGateway } from '../support/process.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-upstream-tls-'));
const certFile = join(dir, 'cert.pem');
let server: https.Server;
let base = '';

before(async () => {
  try {
    execFileSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost',
    ], { stdio: 'ignore' });
  } catch (e) {
    throw new Error(
      `openssl is needed to make a test certificate: apt-get install -y openssl (${(e as Error).message})`,
    );
  }
  server = https.createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(certFile) }, (req, res) => {
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
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'over tls' }, finish_reason: 'stop' }],
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `https://localhost:${(server.address() as AddressInfo).port}/v1`;
});
after(() => {
  server.closeAllConnections();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

const CA_ENV: Record<RuntimeName, string> = {
  node: 'NODE_EXTRA_CA_CERTS',
  bun: 'NODE_EXTRA_CA_CERTS',
  deno: 'DENO_CERT',
};

async function chat(url: string, stream: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
    body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, text: await res.text() };
}

for (const runtime of ['node', 'bun', 'deno'] as const) {
  describe(`HTTPS upstream with a private CA on ${runtime}`, { concurrency: false }, () => {
    test(`trusted through ${CA_ENV[runtime]}: JSON and SSE pass; without it: 502 upstream_error`, async () => {
      const trusted = await spawnGateway({
        runtime,
        config: baseConfig(),
        files: { 'resources.yaml': resourcesFor(base) },
        env: { CALLER_KEY, [CA_ENV[runtime]]: certFile },
      });
      try {
        await trusted.waitReady('/readyz', 'proxy', 30_000);
        const json = await chat(trusted.url('/v1/chat/completions'), false);
        assert.equal(json.status, 200, json.text);
        assert.match(json.text, /over tls/);
        const sse = await chat(trusted.url('/v1/chat/completions'), true);
        assert.equal(sse.status, 200, sse.text);
        assert.match(sse.text, /over tls[\s\S]*data: \[DONE\]/);
      } finally {
        assert.equal(await trusted.stop(), 0);
      }
      const untrusted = await spawnGateway({
        runtime,
        config: baseConfig(),
        files: { 'resources.yaml': resourcesFor(base) },
        env: { CALLER_KEY },
      });
      try {
        await untrusted.waitReady('/readyz', 'proxy', 30_000);
        const r = await chat(untrusted.url('/v1/chat/completions'), false);
        assert.equal(r.status, 502, r.text);
        assert.equal(JSON.parse(r.text).error.type, 'upstream_error');
      } finally {
        assert.equal(await untrusted.stop(), 0);
      }
    });
  });
}
