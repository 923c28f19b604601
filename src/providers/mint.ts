// The one token-endpoint exchange both minting families make (an OAuth2 form POST answered with
// `{access_token, expires_in}`), and what the caller is told when it fails: never the endpoint's words,
// which name tenants, clients and service accounts.
import type { UpstreamFetch } from '../platform.ts';
import type { CancelSignal } from '../util/cancel.ts';
import { cannedUpstreamError, invalidCredentials } from './failures.ts';
import type { Grant } from './token-cache.ts';
import type { ProviderResult } from './types.ts';

/** A mint that did not produce a token; `answer` is what the request that needed it answers. */
export class MintFailed extends Error {
  constructor(readonly answer: ProviderResult) {
    super('token mint failed');
    this.name = 'MintFailed';
  }
}

/**
 * POST `form` to `url` and read the grant. A 4xx means the credential was refused (401 to the caller, the
 * same credential would be refused again); a 5xx is the token service's failure (retried, then 502); a
 * transport failure rejects as one.
 */
export async function mintToken(
  upstream: UpstreamFetch,
  url: string,
  form: Record<string, string>,
  what: string,
  signal: CancelSignal,
): Promise<Grant> {
  const res = await upstream({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(form).toString(),
    signal,
  });
  const text = await res.text();
  if (res.status >= 400 && res.status < 500) {
    throw new MintFailed(invalidCredentials(`${what} token endpoint refused the credential (HTTP ${res.status})`));
  }
  if (res.status < 200 || res.status >= 300) {
    throw new MintFailed(cannedUpstreamError(res.status, {}, undefined, res.header('retry-after')));
  }
  let v: { access_token?: unknown; expires_in?: unknown } | undefined;
  try {
    v = JSON.parse(text) as typeof v;
  } catch {
    v = undefined;
  }
  const token = v?.access_token;
  const expires = Number(v?.expires_in ?? 3600);
  if (typeof token !== 'string' || token === '' || !Number.isFinite(expires)) {
    throw new MintFailed(cannedUpstreamError(502, {}, undefined, null));
  }
  return { token, expiresInSecs: expires };
}
