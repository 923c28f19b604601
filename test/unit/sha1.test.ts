// The resource ids' SHA-1 (src/util/sha1.ts) against node:crypto's and @noble/hashes' (what it replaced), over
// every length around its block and padding boundaries, and the ids' UUIDv5 built on it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { sha1 } from '@noble/hashes/legacy.js';
import { sha1Into } from '../../src/util/sha1.ts';
import { uuidV5 } from '../../src/util/crypto.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

test('SHA-1 of every length from 0 to 300 bytes: the digest node:crypto and @noble/hashes give', () => {
  const out = new Uint8Array(20);
  for (let n = 0; n <= 300; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 131 + n * 7) & 0xff);
    const want = createHash('sha1').update(bytes).digest('hex');
    assert.equal(hex(sha1Into(bytes, out)), want, `length ${n}`);
    assert.equal(hex(sha1(bytes)), want);
  }
  assert.equal(hex(sha1Into(new TextEncoder().encode('abc'), out)), 'a9993e364706816aba3e25717850c26c9cd0d89d');
});

test("uuidV5: RFC 9562's example, and ids of long and non-ASCII names", () => {
  // RFC 9562 appendix A.4: the DNS namespace and www.example.com.
  assert.equal(
    uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'),
    '2ed6657d-e927-568b-95e1-2665a8aea6a2',
  );
  for (const name of ['api_keys/user-1', 'models/é', `api_keys/${'x'.repeat(600)}`]) {
    const ns = Buffer.from('6f1c3a529d0e5b7a8c412e5f0d9b7a13', 'hex');
    const h = createHash('sha1').update(Buffer.concat([ns, Buffer.from(name)])).digest();
    h[6] = (h[6]! & 0x0f) | 0x50;
    h[8] = (h[8]! & 0x3f) | 0x80;
    const s = h.subarray(0, 16).toString('hex');
    const want = `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
    assert.equal(uuidV5(name), want, name.slice(0, 20));
  }
});
