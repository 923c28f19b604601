// The RS256-signed JWT a Google service account exchanges for an access token (RFC 7523), signed with
// WebCrypto: every runtime has `crypto.subtle`, and one signature needs no library. Google issues PKCS#8
// keys (`-----BEGIN PRIVATE KEY-----`), the only form WebCrypto imports.

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const encoder = new TextEncoder();

/** The key's bytes, or undefined when `pem` is not a PKCS#8 private key. */
function pkcs8Der(pem: string): Uint8Array<ArrayBuffer> | undefined {
  const m = /-----BEGIN PRIVATE KEY-----([\s\S]+?)-----END PRIVATE KEY-----/.exec(pem);
  if (!m) return undefined;
  try {
    const bin = atob(m[1]!.replace(/\s+/g, ''));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}

function base64url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]!);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Thrown when the private key cannot be read or used; its message names no part of the key. */
export class InvalidPrivateKey extends Error {
  override readonly name = 'InvalidPrivateKey';
}

/** A signed assertion for `clientEmail` towards `tokenUri`, valid for an hour from `nowSecs`. */
export async function serviceAccountAssertion(
  privateKeyPem: string,
  clientEmail: string,
  tokenUri: string,
  nowSecs: number,
): Promise<string> {
  const der = pkcs8Der(privateKeyPem);
  if (!der) throw new InvalidPrivateKey('vertex service_account_json.private_key is not a PKCS#8 PEM private key');
  let key: CryptoKey;
  try {
    key = await crypto.subtle.importKey('pkcs8', der, { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, false, ['sign']);
  } catch {
    throw new InvalidPrivateKey('vertex service_account_json.private_key is not an RSA private key');
  }
  const header = base64url(encoder.encode(JSON.stringify({ alg: 'RS256', typ: 'JWT' })));
  const claims = base64url(encoder.encode(JSON.stringify({
    iss: clientEmail,
    scope: CLOUD_PLATFORM_SCOPE,
    aud: tokenUri,
    iat: nowSecs,
    exp: nowSecs + 3600,
  })));
  const input = `${header}.${claims}`;
  const signature = await crypto.subtle.sign('RSASSA-PKCS1-v1_5', key, encoder.encode(input));
  return `${input}.${base64url(new Uint8Array(signature))}`;
}
