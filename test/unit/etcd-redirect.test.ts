// The etcd client follows no redirect (docs/security.md "Upstream URLs and credentials"): an endpoint that
// answers 307 to a second recording server is a failed attempt, and nothing (no password, no token, no
// range request) reaches the second server, with the global fetch as the transport.
// Run: node --import tsx --test test/unit/etcd-redirect.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdClient, EtcdError } from '../../src/sources/etcd/client.ts';
import { type RedirectPair, startRedirectPair } from '../support/redirect-upstream.ts';

const PASSWORD = 'etcd-PASSWORD-redirect-1';

let pair: RedirectPair;
before(async () => {
  pair = await startRedirectPair();
});
after(() => pair.close());

describe('etcd client and a redirecting endpoint', () => {
  test('authenticate: the 307 fails the call; the password never reaches the redirect target', async () => {
    const client = new EtcdClient({ endpoints: [pair.redirector.url], user: 'root', password: PASSWORD });
    const err = await client.unary('/v3/kv/range', { key: 'YQ==' }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof EtcdError, String(err));
    assert.match(err.message, /answered HTTP 307, a redirect; the etcd client follows none/);
    assert.equal(err.message.includes(PASSWORD), false);
    assert.equal(pair.redirector.requests.length, 1);
    assert.equal(pair.redirector.requests[0]!.path, '/v3/auth/authenticate');
    assert.equal(pair.target.requests.length, 0);
  });

  test('two endpoints that both redirect: each 307 is a failed attempt, never followed', async () => {
    const client = new EtcdClient({ endpoints: [pair.redirector.url, pair.redirector.url] });
    const err = await client.unary('/v3/kv/range', { key: 'YQ==' }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof EtcdError, String(err));
    assert.match(err.message, /every endpoint failed: .*answered HTTP 307.*answered HTTP 307/);
    assert.equal(pair.target.requests.length, 0);
  });

  test('ping: a redirect is not an answer that proves the path', async () => {
    const client = new EtcdClient({ endpoints: [pair.redirector.url] });
    const err = await client.ping({ timeoutMs: 2000 }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof EtcdError, String(err));
    assert.match(err.message, /HTTP 307, a redirect/);
    assert.equal(pair.target.requests.length, 0);
  });
});
