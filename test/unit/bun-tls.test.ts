// Which configured CAs Bun's fetch is handed per request (runtimes/bun-tls.ts): none when its own roots hold them
// all (SSL_CERT_FILE naming the bundle NODE_EXTRA_CA_CERTS names), else only the ones they lack, compared by the
// certificate's bytes whatever the PEM's line breaks.
import assert from 'node:assert/strict';
import { rootCertificates } from 'node:tls';
import { test } from 'node:test';
import { caBeyond, certificateIds, ownIds } from '../../runtimes/bun-tls.ts';

const [a, b, c, d] = rootCertificates as [string, string, string, string];
const own = ownIds([a, b, c]);

/** `pem` with CRLF line ends and its base64 wrapped at 76 columns instead of 64. */
function rewrapped(pem: string): string {
  const body = pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const lines = body.match(/.{1,76}/g)!;
  return ['-----BEGIN CERTIFICATE-----', ...lines, '-----END CERTIFICATE-----', ''].join('\r\n');
}

test('a bundle of certificates Bun trusts already hands fetch no CA', () => {
  assert.deepEqual(caBeyond(own, [`${a}\n${b}\n`]), []);
  assert.deepEqual(caBeyond(own, [rewrapped(c), `# comment\n${a}`]), []);
  assert.deepEqual(caBeyond(own, []), []);
});

test('a certificate beyond them is handed on alone, as the same certificate', () => {
  const extra = caBeyond(own, [`${a}\n${d}\n${b}`]);
  assert.equal(extra.length, 1);
  assert.deepEqual(certificateIds(extra[0]!), certificateIds(d));
  assert.deepEqual(caBeyond(new Set(), [a]).map(certificateIds), [certificateIds(a)]);
});

test('a text with a block other than CERTIFICATE is handed on whole', () => {
  const trusted = a.replace(/BEGIN CERTIFICATE/, 'BEGIN TRUSTED CERTIFICATE').replace(
    /END CERTIFICATE/,
    'END TRUSTED CERTIFICATE',
  );
  assert.equal(certificateIds(trusted), undefined);
  assert.deepEqual(caBeyond(own, [trusted]), [trusted]);
  assert.deepEqual(caBeyond(own, [`${b}\n${trusted}`]), [`${b}\n${trusted}`]);
});
