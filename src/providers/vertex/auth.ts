// A Vertex key's credential (JSON in `api_key`: project, region, and a pre-minted `access_token` or a
// `service_account_json` key file) and the bearer token each call carries, minted from the service
// account and cached (src/providers/token-cache.ts). docs/configuration.md "Vertex AI".
import type { ProviderKey } from '../../resources/schema.ts';
import type { CancelSignal } from '../../util/cancel.ts';
import { credentialJson, stringMember } from '../credential-json.ts';
import { invalidConfig, invalidCredentials } from '../failures.ts';
import { MintFailed, mintToken } from '../mint.ts';
import { TokenCache } from '../token-cache.ts';
import type { ProviderCall, ProviderResult } from '../types.ts';
import { pathSegment, type SegmentRule } from '../url-segment.ts';
import { InvalidPrivateKey, serviceAccountAssertion } from './jwt.ts';

export interface ServiceAccount {
  privateKey: string;
  clientEmail: string;
  tokenUri: string;
}

export interface VertexCredential {
  project: string;
  region: string;
  /** Where `prefix` is appended. */
  base: string;
  /** `/v1/projects/<project>/locations/<region>/`, each segment checked and encoded: every call's path starts so. */
  prefix: string;
  auth: { kind: 'token'; token: string } | { kind: 'service_account'; sa: ServiceAccount };
}

const SHAPE = '{project, region, and either access_token or service_account_json}';

/**
 * A publisher-path model id (`gemini-1.5-flash`, `claude-3-5-sonnet-v2@20241022`): it comes from the caller's
 * `model` through a wildcard alias, so it is the caller's text in the operator's URL.
 */
export const VERTEX_MODEL_ID: SegmentRule = {
  field: "upstream model id (the request's model, or the model's model_name)",
  grammar: /^[A-Za-z0-9][A-Za-z0-9._@-]*$/,
  shape: 'a Vertex model id: letters, digits, ".", "_", "@" and "-"',
};

/** GCP's project id (6–30 of `[a-z0-9-]`, a letter first), a domain-scoped one (`example.com:id`), or a number. */
const PROJECT: SegmentRule = {
  field: 'provider_key.api_key.project',
  grammar: /^(?:(?:[a-z0-9-]+\.)+[a-z]{2,}:)?(?:[a-z][a-z0-9-]{4,28}[a-z0-9])$|^[0-9]{1,20}$/,
  shape: 'a Google Cloud project id (6 to 30 lowercase letters, digits and "-", a letter first) or project number',
  quiet: true,
};

/** A region name (as Bedrock's), `global` among them: it is also part of the default host name. */
const REGION: SegmentRule = {
  field: 'provider_key.api_key.region',
  grammar: /^[a-z0-9-]+$/,
  shape: 'a region name of lowercase letters, digits and "-" (us-central1, global)',
};

/** `http(s)://host[:port]` and nothing else, or the region's own host (`global` has no region prefix). */
function vertexBase(apiBase: string | undefined, region: string): string | ProviderResult {
  if (!apiBase) {
    return region === 'global' ? 'https://aiplatform.googleapis.com' : `https://${region}-aiplatform.googleapis.com`;
  }
  const t = apiBase.replace(/\/+$/, '');
  if (!/^https?:\/\/[^/?#@\\]+$/i.test(t)) {
    return invalidConfig(
      'vertex provider_key api_base must be a bare http(s) origin (no userinfo, path, query or fragment)',
    );
  }
  return t;
}

function serviceAccount(v: unknown): ServiceAccount | ProviderResult {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    return invalidCredentials('vertex service_account_json must be the key file as a JSON object');
  }
  const sa = v as Record<string, unknown>;
  if (sa.type !== 'service_account') {
    return invalidCredentials(`vertex service_account_json.type = "${String(sa.type)}", want "service_account"`);
  }
  const privateKey = stringMember(sa, 'private_key');
  if (!privateKey?.startsWith('-----BEGIN')) {
    return invalidCredentials('vertex service_account_json.private_key is not PEM-formatted');
  }
  const clientEmail = stringMember(sa, 'client_email');
  if (!clientEmail) return invalidCredentials('vertex service_account_json.client_email is empty');
  const tokenUri = stringMember(sa, 'token_uri');
  if (!tokenUri) return invalidCredentials('vertex service_account_json.token_uri is empty');
  return { privateKey, clientEmail, tokenUri };
}

export function vertexCredential(key: ProviderKey): VertexCredential | ProviderResult {
  if (!key.api_key?.trim()) {
    return invalidCredentials(`vertex provider_key.api_key is empty — expected JSON with ${SHAPE}`);
  }
  const doc = credentialJson(key);
  if (!doc || typeof doc.project !== 'string' || typeof doc.region !== 'string') {
    return invalidCredentials(`vertex provider_key.api_key must be valid JSON: ${SHAPE}`);
  }
  const hasToken = 'access_token' in doc;
  const hasSa = 'service_account_json' in doc;
  if (hasToken && hasSa) {
    return invalidCredentials(
      'vertex provider_key.api_key must set exactly one of access_token or service_account_json (both were provided)',
    );
  }
  if (!hasToken && !hasSa) {
    return invalidCredentials(
      'vertex provider_key.api_key must set either access_token or service_account_json (neither was provided)',
    );
  }
  const project = doc.project;
  const region = doc.region;
  const projectSegment = pathSegment('vertex', PROJECT, project);
  if (typeof projectSegment !== 'string') return projectSegment;
  const regionSegment = pathSegment('vertex', REGION, region);
  if (typeof regionSegment !== 'string') return regionSegment;
  const base = vertexBase(key.api_base, region);
  if (typeof base !== 'string') return base;
  const prefix = `/v1/projects/${projectSegment}/locations/${regionSegment}/`;
  if (hasToken) {
    const token = stringMember(doc, 'access_token');
    if (!token) return invalidCredentials('vertex provider_key.api_key.access_token is empty');
    return { project, region, base, prefix, auth: { kind: 'token', token } };
  }
  const sa = serviceAccount(doc.service_account_json);
  if ('kind' in sa) return sa;
  return { project, region, base, prefix, auth: { kind: 'service_account', sa } };
}

const tokens = new TokenCache();

/** Requests waiting on a service-account mint right now. */
export function vertexMintWaiters(): number {
  return tokens.waiting();
}

async function mint(upstream: ProviderCall['upstream'], sa: ServiceAccount, signal: CancelSignal) {
  let assertion: string;
  try {
    assertion = await serviceAccountAssertion(
      sa.privateKey,
      sa.clientEmail,
      sa.tokenUri,
      Math.floor(Date.now() / 1000),
    );
  } catch (e) {
    if (e instanceof InvalidPrivateKey) throw new MintFailed(invalidCredentials(e.message));
    throw e;
  }
  return mintToken(
    upstream,
    sa.tokenUri,
    {
      grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      assertion,
    },
    'vertex',
    signal,
  );
}

/** The bearer token for a call: the configured one, or the service account's (one mint in flight per key file). */
export async function vertexToken(c: ProviderCall, cred: VertexCredential): Promise<string> {
  if (cred.auth.kind === 'token') return cred.auth.token;
  const { sa } = cred.auth;
  const id = JSON.stringify(['service_account', sa.privateKey, sa.clientEmail, sa.tokenUri]);
  return await tokens.token(id, (signal) => mint(c.upstream, sa, signal), c.signal);
}
