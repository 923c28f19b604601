// OAuth 2.0 client credentials for `auth_type: oauth2` upstreams (docs/mcp.md "Upstreams"): AISIX's token
// request (the secret in the form body, scopes joined by a space), its cache key (token URL, client id, a
// digest of the secret, scopes) and its limits (3 600 s without `expires_in`, 30 days at most). Tokens are
// shared by every request of the process through the gateway's token cache; an upstream 401 drops the entry.
import type { UpstreamFetch } from '../platform.ts';
import { type Grant, TokenCache } from '../providers/token-cache.ts';
import type { McpServer } from '../resources/mcp-schema.ts';
import type { CancelSignal } from '../util/cancel.ts';
import { sha256Hex } from '../util/crypto.ts';
import { UpstreamFailure } from './failures.ts';

const DEFAULT_EXPIRES_SECS = 3_600;
const MAX_EXPIRES_SECS = 30 * 86_400;

export class OAuthTokens {
  private readonly cache = new TokenCache();
  /** Server id → its last cache key, so a 401 can drop it without hashing again. */
  private readonly keys = new Map<string, string>();

  constructor(private readonly upstream: UpstreamFetch) {}

  /** A token for the server's client, minted when none is cached or it is in its last minute. */
  async token(server: McpServer, signal: CancelSignal): Promise<string> {
    const { client_id, secret, token_url } = server;
    if (!client_id || !secret || !token_url) {
      throw new UpstreamFailure(
        'oauth2 upstream auth requires client_id, secret (the OAuth client secret), and token_url',
      );
    }
    const scope = (server.scopes ?? []).join(' ');
    // Length-prefixed parts, so no two different credentials make the same key.
    const key = [token_url, client_id, await sha256Hex(secret), scope].map((p) => `${p.length}:${p}`).join('|');
    this.keys.set(server.id, key);
    return await this.cache.token(key, (s) => this.mint(token_url, client_id, secret, scope, s), signal);
  }

  /** The upstream refused the token: the next request mints a new one. */
  drop(server: McpServer): void {
    const key = this.keys.get(server.id);
    if (key !== undefined) this.cache.drop(key);
  }

  private async mint(url: string, id: string, secret: string, scope: string, signal: CancelSignal): Promise<Grant> {
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: id, client_secret: secret });
    if (scope !== '') form.set('scope', scope);
    let status: number;
    let text: string;
    try {
      const res = await this.upstream({
        url,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form.toString(),
        signal,
      });
      status = res.status;
      text = await res.text();
    } catch (e) {
      // The transport's words, never the form body: it holds the secret.
      throw new UpstreamFailure(`upstream OAuth token endpoint unreachable: ${e instanceof Error ? e.name : 'error'}`);
    }
    if (status < 200 || status >= 300) {
      throw new UpstreamFailure(`upstream OAuth token endpoint returned HTTP ${status}`);
    }
    let body: { access_token?: unknown; expires_in?: unknown };
    try {
      body = JSON.parse(text);
      if (typeof body !== 'object' || body === null) throw new Error();
    } catch {
      throw new UpstreamFailure('upstream OAuth token endpoint returned a malformed token response');
    }
    if (typeof body.access_token !== 'string' || body.access_token === '') {
      throw new UpstreamFailure('upstream OAuth token endpoint returned an empty access_token');
    }
    const given = typeof body.expires_in === 'number' && body.expires_in >= 0 ? body.expires_in : DEFAULT_EXPIRES_SECS;
    return { token: body.access_token, expiresInSecs: Math.min(given, MAX_EXPIRES_SECS) };
  }
}

/**
 * The credential an upstream request carries for `server` (never the caller's): its bearer secret, its API key
 * under `apiKeyHeader`, or a token minted for it; none for `auth_type: none`.
 */
export async function credentialHeaders(
  server: McpServer,
  tokens: OAuthTokens,
  signal: CancelSignal,
  apiKeyHeader: string,
): Promise<Record<string, string>> {
  const secret = server.secret ?? '';
  switch (server.auth_type) {
    case 'none':
      return {};
    case 'bearer':
      return { authorization: `Bearer ${secret}` };
    case 'api_key':
      if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(secret)) {
        throw new UpstreamFailure('upstream API key is not a valid HTTP header value');
      }
      return { [apiKeyHeader.toLowerCase()]: secret };
    case 'oauth2':
      return { authorization: `Bearer ${await tokens.token(server, signal)}` };
  }
}
