// `admin.tls` (docs/configuration.md): the admin listener serves HTTPS with the configured certificate on each
// runtime, and a certificate that cannot be read stops the boot before anything binds.
import assert from 'node:assert/strict';
import * as https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { rmSync } from 'node:fs';
import { CALLER_KEY, resourcesFor, type RuntimeName, spawnGateway } from '../support/process.ts';
import { makePki, type Pki } from '../support/tls.ts';

const RUNTIMES: RuntimeName[] = ['node', 'bun', 'deno'];
let pki: Pki;
before(() => {
  pki = makePki();
});
after(() => rmSync(pki.dir, { recursive: true, force: true }));

function config(keyFile: string): string {
  return `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin:
  addr: "127.0.0.1:{{admin}}"
  admin_keys: [admin-key-SECRET]
  tls: { cert_file: ${pki.certFile}, key_file: ${keyFile} }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;
}

function get(url: string, ca: string | undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, headers: { authorization: 'Bearer admin-key-SECRET' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
  });
}

for (const runtime of RUNTIMES) {
  describe(`admin.tls (${runtime})`, { timeout: 60_000 }, () => {
    test('the admin API answers over HTTPS with the configured certificate', async () => {
      const gw = await spawnGateway({
        runtime,
        config: config(pki.keyFile),
        files: { 'resources.yaml': resourcesFor('http://127.0.0.1:9/v1') },
        env: { CALLER_KEY },
      });
      try {
        const bound = await gw.waitForLog((l) => l.msg === 'listening' && l.listener === 'admin', 30_000);
        assert.equal(bound.tls, true);
        const base = `https://127.0.0.1:${gw.ports.admin}`;
        const health = await get(`${base}/admin/v1/health`, pki.ca);
        assert.equal(health.status, 200, health.body);
        assert.equal(JSON.parse(health.body).status, 'ok');
        // Verified against the private CA: without it the handshake is refused.
        await assert.rejects(get(`${base}/livez`, undefined), /self[- ]signed|unable to (get|verify)/i);
      } finally {
        assert.equal(await gw.stop(20_000), 0);
      }
    });

    test('an unreadable admin.tls.key_file stops the boot before anything binds', async () => {
      const gw = await spawnGateway({
        runtime,
        config: config('/nonexistent/admin.key'),
        files: { 'resources.yaml': resourcesFor('http://127.0.0.1:9/v1') },
        env: { CALLER_KEY },
      });
      assert.equal(await gw.waitForExit(20_000), 1);
      assert.match(gw.rawErr.join('\n'), /admin\.tls\.key_file: cannot read \/nonexistent\/admin\.key/);
      assert.ok(!gw.logs.some((l) => l.msg === 'listening'));
    });
  });
}
