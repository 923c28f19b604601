// SigV4 for Bedrock through aws4fetch's signer (canonicalisation, double-encoded paths, the signing-key
// chain). The service is named explicitly: the host says `bedrock-runtime`, the signing name is `bedrock`.
import { AwsV4Signer } from 'aws4fetch';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
}

/** Signing keys by secret, day, region and service; cleared when it grows (one entry per key per day). */
const signingKeys = new Map<string, ArrayBuffer>();

/**
 * The headers to send with a POST of `body` to `url`: `headers` plus `authorization`, `x-amz-date` and,
 * with a session token, `x-amz-security-token`. `host` is signed from the URL and left to the HTTP client.
 */
export async function signedHeaders(
  url: string,
  body: string,
  headers: Record<string, string>,
  cred: AwsCredentials,
  service = 'bedrock',
  datetime?: string,
): Promise<Record<string, string>> {
  if (signingKeys.size > 256) signingKeys.clear();
  const signer = new AwsV4Signer({
    method: 'POST',
    url,
    headers,
    body,
    accessKeyId: cred.accessKeyId,
    secretAccessKey: cred.secretAccessKey,
    ...(cred.sessionToken ? { sessionToken: cred.sessionToken } : {}),
    service,
    region: cred.region,
    cache: signingKeys,
    ...(datetime ? { datetime } : {}),
  });
  const signed = await signer.sign();
  const out: Record<string, string> = {};
  signed.headers.forEach((v, k) => {
    if (k !== 'host') out[k] = v;
  });
  return out;
}
