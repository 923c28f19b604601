// The api-key path's refusal lines (docs/identity.md "Metrics and logs"), AISIX's: DEBUG for a missing credential
// and an unknown key (what any scanner sends), WARN naming the key for a disabled or expired one; never the token.
// Through app.request() with the log level at debug.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import { gatewayWith } from '../support/platform.ts';

const CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { log_level: debug, metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

describe('a refused api key', () => {
  test('its line: DEBUG without a credential or for an unknown key, WARN with the id of a disabled or expired one', async () => {
    const { gw, platform } = await gatewayWith(
      `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models: [{ display_name: echo, provider: echo, model_name: echo, provider_key: offline }]
api_keys:
  - { display_name: off, key_env: OFF, allowed_models: ["*"], disabled: true }
  - { display_name: old, key_env: OLD, allowed_models: ["*"], expires_at: "2020-01-01T00:00:00Z" }
  - { display_name: ok, key_env: OK, allowed_models: ["*"] }
`,
      { config: CONFIG, env: { OFF: 'sk-off-SECRET', OLD: 'sk-old-SECRET', OK: 'sk-ok-SECRET' } },
    );
    try {
      const app = createProxyApp(gw);
      const call = async (auth?: string) => {
        const res = await app.request('/v1/chat/completions', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
          body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
        }, { peer: '203.0.113.7:4000' });
        await res.body?.cancel();
        return { status: res.status, id: res.headers.get('x-aisix-request-id') };
      };
      const lineOf = (id: string | null) => {
        const lines = platform.logs.filter((l) => l.request_id === id && String(l.msg).startsWith('rejected inbound'));
        assert.equal(lines.length, 1, JSON.stringify(lines));
        return lines[0]!;
      };
      const keyId = (name: string) => [...gw.snapshot!.apiKeys.values()].find((k) => k.display_name === name)!.id;

      const none = await call();
      assert.equal(none.status, 401);
      const l1 = lineOf(none.id);
      assert.equal(l1.msg, 'rejected inbound request without a credential');
      assert.equal(l1.level, 'DEBUG');
      assert.equal(l1.target, 'aisix::auth');
      assert.deepEqual(
        [l1.method, l1.reason, l1.http_method, l1.path, l1.source_ip],
        ['none', 'missing_credentials', 'POST', '/v1/chat/completions', '203.0.113.7'],
      );

      const unknown = lineOf((await call('sk-nobody-SECRET')).id);
      assert.deepEqual([unknown.msg, unknown.level, unknown.method, unknown.reason, unknown.api_key_id], [
        'rejected inbound credential',
        'DEBUG',
        'api_key',
        'unknown_key',
        undefined,
      ]);
      const off = lineOf((await call('sk-off-SECRET')).id);
      assert.deepEqual([off.level, off.reason, off.api_key_id], ['WARN', 'key_disabled', keyId('off')]);
      // Twice: the second judgement is answered from the hash cache, synchronously; it logs the same.
      for (let i = 0; i < 2; i++) {
        const old = lineOf((await call('sk-old-SECRET')).id);
        assert.deepEqual([old.level, old.reason, old.api_key_id], ['WARN', 'key_expired', keyId('old')]);
      }
      assert.equal((await call('sk-ok-SECRET')).status, 200);
      assert.ok(!platform.logs.some((l) => l.msg === 'rejected inbound credential' && l.reason === undefined));
      assert.ok(!JSON.stringify(platform.logs).includes('SECRET'), 'no token is ever logged');
    } finally {
      gw.stop();
    }
  });
});
