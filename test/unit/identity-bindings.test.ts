// A JWT caller's direct binding after a key's change (src/identity/authenticate.ts, src/resources/api-key-index.ts;
// docs/performance.md "Configuration at scale"): the key index keeps the bindings as keys change in place, so the
// first JWT caller after a change finds its key without a pass over every key.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SignJWT } from 'jose';
import { AuthDecisions } from '../../src/identity/decisions.ts';
import { JwtAuthenticator } from '../../src/identity/authenticate.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { Registry } from '../../src/observability/metrics.ts';
import type { OidcProvider } from '../../src/resources/identity-schema.ts';
import type { ApiKey } from '../../src/resources/schema.ts';
import { Snapshot } from '../../src/resources/snapshot.ts';

const SECRET = 'a-shared-secret-of-at-least-32-byte';
const provider: OidcProvider = {
  id: 'p',
  name: 'corp',
  audiences: [],
  hmac_secret: SECRET,
  identity_claim: 'sub',
  required_scopes: [],
  leeway_secs: 0,
  enabled: true,
};
const key = (id: string, extra: Partial<ApiKey> = {}): ApiKey => ({
  id,
  key_hash: `h-${id}`,
  allowed_models: ['*'],
  disabled: false,
  ...extra,
});
const token = (sub: string) =>
  new SignJWT({ sub, exp: Math.floor(Date.now() / 1000) + 60 }).setProtectedHeader({ alg: 'HS256' }).sign(
    new TextEncoder().encode(SECRET),
  );
const ctx = { method: 'POST', path: '/v1/chat/completions', requestId: 'r' };

test('a key changed in place: the next JWT caller finds its binding without a pass over the keys', async () => {
  const keys = [key('alice', { jwt_provider: 'corp', jwt_subject: 'alice' })];
  for (let i = 0; i < 1000; i++) keys.push(key(`k${i}`));
  let snapshot = new Snapshot({ provider_keys: [], models: [], api_keys: keys, oidc_providers: [provider] });
  const index = snapshot.apiKeys;
  let passes = 0;
  const values = index.values.bind(index);
  const list = index.list.bind(index);
  index.values = () => (passes++, values());
  index.list = () => (passes++, list());
  const jwt = new JwtAuthenticator({
    upstream: () => Promise.reject(new Error('a shared-secret provider fetches nothing')),
    clock: Date.now,
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    decisions: new AuthDecisions(new Registry()),
  });
  const who = async (sub: string) => {
    const r = await jwt.authenticate(await token(sub), snapshot, ctx);
    return 'key' in r ? r.key.id : r.code;
  };

  assert.equal(await who('alice'), 'alice');
  // What the etcd source does with one key's change: in place, then a derived snapshot is served.
  index.put(key('bob', { jwt_provider: 'corp', jwt_subject: 'bob' }));
  snapshot = snapshot.derive();
  assert.equal(await who('bob'), 'bob');
  index.put(key('alice', { jwt_provider: 'corp', jwt_subject: 'alice-renamed' }));
  snapshot = snapshot.derive();
  assert.equal(await who('alice-renamed'), 'alice');
  assert.notEqual(await who('alice'), 'alice', 'the old subject no longer binds it');
  index.put(key('bob2', { jwt_provider: 'corp', jwt_subject: 'bob' }));
  snapshot = snapshot.derive();
  assert.equal(await who('bob'), 'jwt_identity_unmapped', 'two keys bound to one subject: ambiguous');
  index.remove('bob2');
  snapshot = snapshot.derive();
  assert.equal(await who('bob'), 'bob');
  assert.equal(passes, 0, 'no pass over every key');
});
