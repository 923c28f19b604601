// Azure OpenAI (`adapter: azure-openai`; docs/configuration.md "Azure OpenAI"): the OpenAI wire on a
// deployment URL with `api-version`, authenticated by the resource key (`api-key`) or by an Entra ID app
// whose client-credentials token is minted and cached. Answers pass through as Azure sent them (content
// filter results included); error answers are canned.
import type { ProviderKey } from '../resources/schema.ts';
import { credentialJson, stringMember } from './credential-json.ts';
import { cannedUpstreamError, errorJson, invalidConfig, invalidCredentials } from './failures.ts';
import { MintFailed, mintToken } from './mint.ts';
import { TokenCache } from './token-cache.ts';
import { callMedia, isMediaEndpoint, mediaPath } from './media.ts';
import {
  type Endpoint,
  type ProviderAdapter,
  type ProviderCall,
  type ProviderResult,
  upstreamResult,
} from './types.ts';
import { addKeyHeaders } from './upstream-headers.ts';
import { pathSegment, type SegmentRule, urlUnder } from './url-segment.ts';

export const AZURE_API_VERSION = '2024-10-21';
const AAD_AUTHORITY = 'https://login.microsoftonline.com';
const AAD_SCOPE = 'https://cognitiveservices.azure.com/.default';
const PATHS = { chat: '/chat/completions', completions: '/completions', embeddings: '/embeddings' } as const;
const TOKEN = /^[A-Za-z0-9_-]+$/;

/** A deployment name: the model's `model_name`, or the caller's `model` through a wildcard alias. */
const DEPLOYMENT: SegmentRule = {
  field: "deployment (the request's model, or the model's model_name)",
  grammar: TOKEN,
  shape: 'a deployment name of [A-Za-z0-9_-]',
};

/** An Entra ID tenant: its GUID or one of its domain names. */
const TENANT: SegmentRule = {
  field: 'aad credentials.tenant_id',
  grammar: /^[A-Za-z0-9][A-Za-z0-9.-]*$/,
  shape: 'a tenant GUID or domain name',
  quiet: true,
};

type Auth = { kind: 'key'; key: string } | {
  kind: 'aad';
  /** `<authority>/<tenant>/oauth2/v2.0/token`, the tenant checked as one path segment. */
  tokenUrl: string;
  client: string;
  secret: string;
};

const aadTokens = new TokenCache();

/** The key's credential: a resource key, or an AAD app when `api_key` is a JSON object. */
function azureAuth(key: ProviderKey): Auth | ProviderResult {
  const raw = key.api_key?.trim() ?? '';
  if (raw === '') return invalidCredentials('provider_key.api_key is empty');
  if (!raw.startsWith('{')) return { kind: 'key', key: raw };
  const doc = credentialJson(key);
  if (!doc) {
    return invalidCredentials(
      'azure provider_key.api_key looks JSON-shaped but failed to parse as AAD client_credentials {tenant_id, client_id, client_secret}',
    );
  }
  const tenant = stringMember(doc, 'tenant_id');
  const client = stringMember(doc, 'client_id');
  const secret = stringMember(doc, 'client_secret');
  for (const [name, v] of [['tenant_id', tenant], ['client_id', client], ['client_secret', secret]] as const) {
    if (!v) return invalidCredentials(`azure aad credentials.${name} is empty`);
  }
  const tenantSegment = pathSegment('azure', TENANT, tenant!);
  if (typeof tenantSegment !== 'string') return tenantSegment;
  if (/[/?#\s]|\.\./.test(client!)) {
    return invalidConfig('azure aad credentials.client_id contains URL-control characters');
  }
  const authority = bareOrigin(stringMember(doc, 'authority_host') ?? AAD_AUTHORITY);
  if (!authority) return invalidConfig('azure aad credentials.authority_host must be a bare http(s) origin');
  const tokenUrl = urlUnder('azure', authority, '/', `${tenantSegment}/oauth2/v2.0/token`);
  if (typeof tokenUrl !== 'string') return tokenUrl;
  return { kind: 'aad', tokenUrl, client: client!, secret: secret! };
}

/** `http(s)://host[:port]` with nothing else, or undefined. */
function bareOrigin(text: string): string | undefined {
  const t = text.trim().replace(/\/+$/, '');
  if (!/^https?:\/\/[^/?#@\\]+$/i.test(t)) return undefined;
  try {
    return new URL(t).origin;
  } catch {
    return undefined;
  }
}

/** The resource's base (`…/openai/deployments` is appended) and the `api-version`, from `api_base`. */
export function azureBase(apiBase: string | undefined): { base: string; version: string } | ProviderResult {
  const given = apiBase?.trim();
  if (!given) {
    return invalidConfig(
      'azure provider_key has no api_base — expected https://<resource>.openai.azure.com, a bare resource name, or a verbatim override URL (https://<host>[:<port>])',
    );
  }
  if (!given.includes(':')) {
    if (!TOKEN.test(given)) return invalidConfig('azure provider_key api_base is not a resource name ([A-Za-z0-9_-]+)');
    return { base: `https://${given}.openai.azure.com`, version: AZURE_API_VERSION };
  }
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return invalidConfig('azure provider_key api_base is not a URL');
  }
  if (url.username || url.password || url.hash || given.includes('@')) {
    return invalidConfig('azure provider_key api_base must not carry userinfo or a fragment');
  }
  // Sluice's addition: `?api-version=<v>` chooses the version; no other query is meaningful here.
  const params = [...url.searchParams.keys()];
  if (params.some((p) => p !== 'api-version')) {
    return invalidConfig('azure provider_key api_base may carry no query but api-version');
  }
  const version = url.searchParams.get('api-version') || AZURE_API_VERSION;
  const host = /^([A-Za-z0-9_-]+)\.openai\.azure\.com$/i.exec(url.hostname);
  if (host) return { base: `https://${url.hostname.toLowerCase()}`, version };
  return { base: `${url.origin}${url.pathname.replace(/\/+$/, '')}`, version };
}

async function authHeaders(c: ProviderCall, auth: Auth): Promise<Record<string, string>> {
  if (auth.kind === 'key') return { 'api-key': auth.key };
  const id = JSON.stringify([auth.tokenUrl, auth.client, auth.secret]);
  const token = await aadTokens.token(
    id,
    (signal) =>
      mintToken(
        c.upstream,
        auth.tokenUrl,
        {
          grant_type: 'client_credentials',
          client_id: auth.client,
          client_secret: auth.secret,
          scope: AAD_SCOPE,
        },
        'azure aad',
        signal,
      ),
    c.signal,
  );
  return { authorization: `Bearer ${token}` };
}

/** Azure's error token: `innererror.code` when it names the content policy, else `error.code`. */
function azureCode(json: Record<string, unknown> | undefined): string | undefined {
  const e = json?.error as Record<string, unknown> | undefined;
  if (typeof e !== 'object' || e === null) return undefined;
  const inner = (e.innererror ?? e.inner_error) as { code?: unknown } | undefined;
  const raw = inner?.code === 'ResponsibleAIPolicyViolation' ? inner.code : e.code;
  const code = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw : undefined;
  if (code === 'DeploymentNotFound') return 'model_not_found';
  if (code === 'ResponsibleAIPolicyViolation' || code === 'content_filter') return 'content_policy_violation';
  // Passed on verbatim only when it is a code, not a sentence from a proxy in between.
  return code && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : undefined;
}

const AZURE_MESSAGES = {
  404: 'upstream deployment or model not found',
  409: 'upstream conflict',
  413: 'upstream request entity too large',
};

async function call(c: ProviderCall): Promise<ProviderResult> {
  const auth = azureAuth(c.key);
  if (auth.kind !== 'key' && auth.kind !== 'aad') return auth;
  const where = azureBase(c.key.api_base);
  if (!('base' in where)) return where;
  const deployment = pathSegment('azure', DEPLOYMENT, String(c.body.model ?? ''));
  if (typeof deployment !== 'string') return deployment;
  const path = isMediaEndpoint(c.endpoint) ? mediaPath(c.endpoint) : PATHS[c.endpoint as keyof typeof PATHS];
  const url = urlUnder(
    'azure',
    where.base,
    '/openai/deployments/',
    `${deployment}${path}?api-version=${encodeURIComponent(where.version)}`,
  );
  if (typeof url !== 'string') return url;
  let headers: Record<string, string>;
  try {
    headers = await authHeaders(c, auth);
  } catch (e) {
    if (e instanceof MintFailed) return e.answer;
    throw e;
  }
  if (isMediaEndpoint(c.endpoint)) return canned(await callMedia(c, url, headers));
  headers['content-type'] = 'application/json';
  headers.accept = c.stream ? 'text/event-stream' : 'application/json';
  if (c.traceparent) headers.traceparent = c.traceparent;
  if (c.requestId) headers['x-aisix-request-id'] = c.requestId;
  addKeyHeaders(headers, c);
  const res = await c.upstream({
    url,
    method: 'POST',
    headers,
    body: JSON.stringify(c.body),
    signal: c.signal,
    tls: c.key.tls,
  });
  return canned(await upstreamResult(res, c.stream));
}

/** An answer as the adapter gives Azure's back: a 2xx as it came, an error canned. */
function canned(r: ProviderResult): ProviderResult {
  if (r.kind !== 'response' || (r.status >= 200 && r.status < 300)) return r;
  return cannedUpstreamError(r.status, AZURE_MESSAGES, azureCode(errorJson(r.contentType, r.body)), r.retryAfter);
}

/** Azure deploys speech, transcription and image models; rerank is no Azure OpenAI endpoint. */
function servedMedia(endpoint: Endpoint): boolean {
  return isMediaEndpoint(endpoint) && endpoint !== 'rerank';
}

export const azureOpenAiAdapter: ProviderAdapter = {
  name: 'azure-openai',
  supports: (endpoint) =>
    endpoint === 'chat' || endpoint === 'completions' || endpoint === 'embeddings' || servedMedia(endpoint),
  call,
};
