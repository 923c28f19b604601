// The boot as a real process: what must be usable before anything binds is checked first, and a
// problem there is a config error (exit 1, a message naming the key and the file), never a crash.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { baseConfig, CALLER_KEY, resourcesFor, spawnGateway } from '../support/process.ts';

describe('boot: config errors before anything binds', () => {
  for (const key of ['ca_file', 'client_cert_file'] as const) {
    test(`an unreadable ratelimit.redis.tls.${key} is a config error, not a crash`, async () => {
      const tls = key === 'ca_file'
        ? '{ ca_file: /nonexistent/sluice/ca.pem }'
        : '{ client_cert_file: /nonexistent/sluice/c.pem, client_key_file: /nonexistent/sluice/k.pem }';
      const gw = await spawnGateway({
        config: baseConfig(`ratelimit: { backend: redis, redis: { url: "rediss://127.0.0.1:1", tls: ${tls} } }\n`),
        files: { 'resources.yaml': resourcesFor('http://127.0.0.1:9/v1') },
        env: { CALLER_KEY },
      });
      try {
        assert.equal(await gw.waitForExit(15_000), 1);
        const err = gw.rawErr.join('\n');
        assert.match(err, new RegExp(`ratelimit\\.redis\\.tls\\.${key}: cannot read /nonexistent/sluice/`));
        assert.match(err, /^config file .*config\.yaml: /m);
        assert.doesNotMatch(err, /fatal|\n\s+at /, 'no crash, no stack trace');
        assert.equal(gw.logs.some((l) => l.msg === 'listening'), false, 'nothing bound');
      } finally {
        gw.kill();
      }
    });
  }
});
