// The usage exporters' failure text is scrubbed as every outsider's text is (docs/security.md "Secrets in answers
// and logs"): a Datadog intake or an SLS endpoint that echoes the exporter's key — raw, URL-encoded, base64 or
// lower-cased — leaves none of it in the error the WARN line carries, and a cut never leaves the start of one.
// Run: node --import tsx --test test/unit/usage-exporter-scrub.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { datadogDelivery, type PostBytes } from '../../src/usage/datadog.ts';
import { slsDelivery } from '../../src/usage/sls.ts';
import { Cancel } from '../../src/util/cancel.ts';

const KEY = 'dd-api-KEY-0123456789abcdef+/=';
const SECRET = 'sls-AK-secret-0123456789+/=';
const RECORD = JSON.stringify({ request_id: 'r1' });
const SLS_RECORD = JSON.stringify([['request_id', 'r1']]);

/** Every copy of `secret` an echo may hold, and the pieces a cut could leave. */
function copies(secret: string): string[] {
  const b64 = Buffer.from(secret).toString('base64');
  return [secret, secret.toLowerCase(), encodeURIComponent(secret), b64, secret.slice(0, 12), b64.slice(0, 12)];
}

function answering(status: number, text: (n: number) => string, n = 0): PostBytes {
  return () => Promise.resolve({ status, text: text(n) });
}

function assertClean(error: string | undefined, secret: string): void {
  assert.ok(error !== undefined);
  for (const c of copies(secret)) {
    assert.ok(!error.toLowerCase().includes(c.toLowerCase()), `${JSON.stringify(c)} in ${JSON.stringify(error)}`);
  }
}

const echo = (s: string) =>
  `raw=${s} url=${encodeURIComponent(s)} b64=${Buffer.from(s).toString('base64')} lower=${s.toLowerCase()}`;

async function datadogError(post: PostBytes): Promise<string | undefined> {
  const deliver = datadogDelivery({ site: '127.0.0.1:1', credential_ref: 'dd' }, { DD_CRED_DD_API_KEY: KEY }, post);
  const r = await deliver([RECORD], new Cancel());
  assert.equal(r.ok, false);
  return r.ok ? undefined : r.error;
}

async function slsError(post: PostBytes): Promise<string | undefined> {
  const row = { endpoint: 'http://127.0.0.1:1', project: 'p', logstore: 'l', credential_ref: 'main' };
  const env = { SLS_CRED_MAIN_AK_ID: 'LTAI-access-id-77', SLS_CRED_MAIN_AK_SECRET: SECRET };
  const r = await slsDelivery(row, env, post)([SLS_RECORD], new Cancel());
  assert.equal(r.ok, false);
  return r.ok ? undefined : r.error;
}

describe('usage exporters scrub what the intake says', () => {
  test('Datadog: an echoed API key in any encoding is redacted', async () => {
    const error = await datadogError(answering(403, () => JSON.stringify({ errors: [echo(KEY)] })));
    assertClean(error, KEY);
    assert.match(error!, /^HTTP 403: raw=\[redacted\]/);
  });

  test('Datadog: wherever the cut falls, no piece of the key is left', async () => {
    for (let n = 150; n <= 200; n++) {
      const error = await datadogError(
        answering(400, (k) => JSON.stringify({ errors: [`${'x'.repeat(k)} ${echo(KEY)}`] }), n),
      );
      assertClean(error, KEY);
      assert.ok(error!.length <= 200, `${error!.length} characters`);
    }
  });

  test('SLS: an echoed access key secret in any encoding is redacted, and so is a cut one', async () => {
    const sls = (message: string) => JSON.stringify({ errorCode: 'Unauthorized', errorMessage: message });
    assertClean(await slsError(answering(401, () => sls(echo(SECRET)))), SECRET);
    for (let n = 150; n <= 200; n++) {
      assertClean(await slsError(answering(401, (k) => sls(`${'x'.repeat(k)} ${echo(SECRET)}`), n)), SECRET);
    }
  });
});
