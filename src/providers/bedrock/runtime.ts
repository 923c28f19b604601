// The Bedrock runtime API as every Bedrock call uses it: which publisher a model id names, the ids that
// cannot be called, one SigV4-signed POST, and AWS's error answer canned (its text names accounts and roles).
import type { UpstreamResponse } from '../../platform.ts';
import { cannedUpstreamError, errorJson, invalidConfig } from '../failures.ts';
import type { Json } from '../translate/shared.ts';
import type { ProviderCall, ProviderResult } from '../types.ts';
import { addKeyHeaders, SIGV4_OWNED } from '../upstream-headers.ts';
import { encodeSegment, pathSegment, type SegmentRule, urlUnder } from '../url-segment.ts';
import { type AwsCredentials, signedHeaders } from './sign.ts';

const PUBLISHERS = new Set([
  'anthropic',
  'meta',
  'mistral',
  'amazon',
  'cohere',
  'ai21',
  'deepseek',
  'writer',
  'stability',
  'google',
  'nvidia',
  'qwen',
  'moonshotai',
  'moonshot',
  'minimaxai',
  'minimax',
  'zai-org',
  'zai',
  'twelvelabs',
  'openai',
]);

/** The publisher of a model id, a cross-region inference-profile prefix (`us.`, `eu.`, …) looked through. */
export function bedrockPublisher(id: string): string | undefined {
  const parts = id.split('.');
  if (parts.length >= 3 && /^[a-z0-9-]{2,7}$/.test(parts[0]!) && PUBLISHERS.has(parts[1]!)) return parts[1];
  return PUBLISHERS.has(parts[0]!) ? parts[0] : undefined;
}

/** A model id, an inference-profile id or an ARN (its `/` travels encoded, inside the one segment). */
const MODEL_ID: SegmentRule = {
  field: "upstream model id (the request's model, or the model's model_name)",
  grammar: /^[A-Za-z0-9._:/-]+$/,
  shape: 'a Bedrock model id, inference profile or ARN: only [A-Za-z0-9._:/-]',
};

/** The model id's refusal, when it cannot be called: not one path segment, or a publisher Bedrock does not have. */
export function checkModelId(id: string): ProviderResult | undefined {
  const segment = pathSegment('bedrock', MODEL_ID, id);
  if (typeof segment !== 'string') return segment;
  if (!bedrockPublisher(id)) {
    return invalidConfig(
      `bedrock publisher unknown for model id "${id}"; expected one of ${[...PUBLISHERS].join(', ')}`,
    );
  }
  return undefined;
}

/** AWS's error code (`x-amzn-errortype` or the body's `__type`, namespace and suffix dropped) as OpenAI's. */
const AWS_CODES: Record<string, string> = {
  ThrottlingException: 'rate_limit_exceeded',
  ServiceQuotaExceededException: 'insufficient_quota',
  AccessDeniedException: 'permission_denied',
  ResourceNotFoundException: 'model_not_found',
  ModelNotReadyException: 'model_not_ready',
  ModelTimeoutException: 'timeout',
  ModelStreamErrorException: 'stream_error',
  ModelErrorException: 'model_error',
  ServiceUnavailableException: 'overloaded',
};

export function awsErrorCode(header: string | null, body: Record<string, unknown> | undefined): string | undefined {
  const raw = header ?? (typeof body?.__type === 'string' ? body.__type : undefined);
  if (!raw) return undefined;
  const name = raw.split(':')[0]!.split('#').pop()!;
  return AWS_CODES[name];
}

export interface BedrockSend {
  c: ProviderCall;
  cred: AwsCredentials;
  /** The model id, checked by `checkModelId`: `/model/<id>/<op>` is called, the id encoded. */
  id: string;
  /** `converse`, `converse-stream`, `invoke`, `invoke-with-response-stream`. */
  op: string;
  body: Json;
  accept: string;
}

/** Sign and send one runtime-API call; a non-2xx answer comes back canned. */
export async function sendBedrock(s: BedrockSend): Promise<
  { ok: true; res: UpstreamResponse } | { ok: false; answer: ProviderResult }
> {
  const base = s.c.key.api_base ?? `https://bedrock-runtime.${s.cred.region}.amazonaws.com`;
  const url = urlUnder('bedrock', base, '/model/', `${encodeSegment(s.id)}/${s.op}`);
  if (typeof url !== 'string') return { ok: false, answer: url };
  const body = JSON.stringify(s.body);
  const plain: Record<string, string> = { 'content-type': 'application/json', accept: s.accept };
  if (s.c.traceparent) plain.traceparent = s.c.traceparent;
  addKeyHeaders(plain, s.c, SIGV4_OWNED); // before signing, so the signature covers them
  const headers = await signedHeaders(url, body, plain, s.cred);
  const res = await s.c.upstream({ url, method: 'POST', headers, body, signal: s.c.signal, tls: s.c.key.tls });
  if (res.status >= 200 && res.status < 300) return { ok: true, res };
  const text = await res.text();
  const code = awsErrorCode(
    res.header('x-amzn-errortype'),
    errorJson(res.header('content-type') ?? 'application/json', text),
  );
  return {
    ok: false,
    answer: cannedUpstreamError(res.status, { 404: 'upstream model not found' }, code, res.header('retry-after')),
  };
}

/** The id without its cross-region inference-profile prefix (`us.amazon.titan-…` → `amazon.titan-…`). */
export function withoutProfile(id: string): string {
  const publisher = bedrockPublisher(id);
  return publisher && !id.startsWith(`${publisher}.`) ? id.slice(id.indexOf('.') + 1) : id;
}
