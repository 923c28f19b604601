// A real OIDC issuer on 127.0.0.1 for the identity tests (docs/identity.md): its discovery document at
// `/.well-known/openid-configuration`, its key set at `/jwks`, tokens signed with jose. Switches rotate the
// keys, fail or redirect the fetches, publish an oversized set or a foreign discovery document; every fetch is
// counted so a test can wait on it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import rsaKeys from './fixtures/rsa-test-keys.json' with { type: 'json' };

export interface SigningKey {
  kid: string | undefined;
  alg: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

export interface MockOidc {
  /** The issuer (`http://127.0.0.1:<port>`), also the discovery document's `issuer`. */
  issuer: string;
  jwksUri: string;
  /** The keys published, in order; the first signs by default. */
  keys: SigningKey[];
  /** Fetches served so far, per path. */
  fetches: { discovery: number; jwks: number };
  /** Non-2xx for every fetch while set. */
  failStatus: number | undefined;
  /** Redirect every fetch to this URL while set. */
  redirectTo: string | undefined;
  /** Overrides members of the discovery document. */
  discovery: Record<string, unknown>;
  /** Replaces the JWKS body while set. */
  rawJwks: string | undefined;
  /** A new key (published first, signing from now on); the old ones stay published unless `retire`. */
  rotate(opts?: { alg?: string; kid?: string | null; retire?: boolean }): Promise<SigningKey>;
  /** A token with these claims, signed by `key` (default: the first published). */
  sign(claims: Record<string, unknown>, key?: SigningKey, header?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

let rsaTaken = 0;

/** A key pair for `alg`. RSA keys come from a fixed set, each handed out once per process while it lasts, since
 *  generating one takes about half a second; the other families are generated. */
async function keyPair(alg: string): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
  const fixed = /^(RS|PS)/.test(alg) ? (rsaKeys as JWK[])[rsaTaken++] : undefined;
  if (fixed !== undefined) {
    return { privateKey: await importJWK(fixed, alg) as CryptoKey, jwk: { kty: 'RSA', n: fixed.n, e: fixed.e } };
  }
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: await exportJWK(publicKey) };
}

export async function newKey(alg = 'RS256', kid: string | null = null): Promise<SigningKey> {
  const { privateKey, jwk } = await keyPair(alg);
  const id = kid === null ? `k-${Math.random().toString(36).slice(2, 10)}` : kid;
  if (id !== '') jwk.kid = id;
  jwk.use = 'sig';
  jwk.alg = alg;
  return { kid: id === '' ? undefined : id, alg, privateKey, jwk };
}

export async function startMockOidc(opts: { alg?: string } = {}): Promise<MockOidc> {
  const holder: { server?: Server } = {};
  const m: MockOidc = {
    issuer: '',
    jwksUri: '',
    keys: [await newKey(opts.alg ?? 'RS256')],
    fetches: { discovery: 0, jwks: 0 },
    failStatus: undefined,
    redirectTo: undefined,
    discovery: {},
    rawJwks: undefined,
    async rotate(o = {}) {
      const k = await newKey(o.alg ?? 'RS256', o.kid ?? null);
      m.keys = o.retire ? [k] : [k, ...m.keys];
      return k;
    },
    sign(claims, key = m.keys[0]!, header = {}) {
      const h: Record<string, unknown> = { alg: key.alg, ...header };
      if (key.kid !== undefined && !('kid' in header)) h.kid = key.kid;
      return new SignJWT(claims).setProtectedHeader(h as { alg: string }).sign(key.privateKey);
    },
    close: () => new Promise((resolve) => holder.server!.close(() => resolve())),
  };
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    if (path === '/.well-known/openid-configuration') m.fetches.discovery++;
    else if (path === '/jwks') m.fetches.jwks++;
    if (m.redirectTo !== undefined) {
      res.writeHead(302, { location: m.redirectTo }).end();
      return;
    }
    if (m.failStatus !== undefined) {
      res.writeHead(m.failStatus, { 'content-type': 'text/plain' }).end('down');
      return;
    }
    if (path === '/.well-known/openid-configuration') {
      res.writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ issuer: m.issuer, jwks_uri: m.jwksUri, ...m.discovery }));
    } else if (path === '/jwks') {
      res.writeHead(200, { 'content-type': 'application/json' })
        .end(m.rawJwks ?? JSON.stringify({ keys: m.keys.map((k) => k.jwk) }));
    } else res.writeHead(404).end();
  });
  holder.server = server;
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  m.issuer = `http://127.0.0.1:${port}`;
  m.jwksUri = `${m.issuer}/jwks`;
  return m;
}
