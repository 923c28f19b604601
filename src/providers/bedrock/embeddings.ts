// Embeddings on Bedrock (docs/configuration.md "AWS Bedrock"): Titan takes one text per InvokeModel call
// (sent in order, token counts summed), Cohere a batch; the answer is OpenAI's embedding list.
import { isRecord, type Json, num, parseJsonObject } from '../translate/shared.ts';
import { invalidConfig } from '../failures.ts';
import type { ProviderCall, ProviderResult } from '../types.ts';
import { sendBedrock, withoutProfile } from './runtime.ts';
import type { AwsCredentials } from './sign.ts';

/** The caller's `input` as texts, or undefined when it is not text (token arrays cannot be sent here). */
function texts(input: unknown): string[] | undefined {
  if (typeof input === 'string') return [input];
  if (Array.isArray(input) && input.length > 0 && input.every((t) => typeof t === 'string')) return input as string[];
  return undefined;
}

function list(model: string, vectors: unknown[], tokens: number): ProviderResult {
  const body = {
    object: 'list',
    model,
    data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
  return {
    kind: 'response',
    status: 200,
    body: JSON.stringify(body),
    contentType: 'application/json',
    retryAfter: null,
  };
}

const NOT_JSON: ProviderResult = {
  kind: 'response',
  status: 200,
  body: '',
  contentType: 'application/json',
  retryAfter: null,
};

export async function bedrockEmbeddings(c: ProviderCall, cred: AwsCredentials, id: string): Promise<ProviderResult> {
  const inputs = texts(c.body.input);
  if (!inputs) return { kind: 'refused', message: '`input` must be a string or an array of strings for this model' };
  const family = withoutProfile(id);
  if (family.startsWith('amazon.titan-embed')) {
    const vectors: unknown[] = [];
    let tokens = 0;
    for (const inputText of inputs) {
      const body: Json = { inputText };
      if (num(c.body.dimensions) !== undefined && id.includes('v2')) body.dimensions = c.body.dimensions;
      const sent = await sendBedrock({ c, cred, id, op: 'invoke', body, accept: 'application/json' });
      if (!sent.ok) return sent.answer;
      const json = parseJsonObject(await sent.res.text());
      if (!json || !Array.isArray(json.embedding)) return NOT_JSON;
      vectors.push(json.embedding);
      tokens += num(json.inputTextTokenCount) ?? 0;
    }
    return list(String(c.body.model), vectors, tokens);
  }
  if (family.startsWith('cohere.embed')) {
    const body = { texts: inputs, input_type: 'search_document' };
    const sent = await sendBedrock({ c, cred, id, op: 'invoke', body, accept: 'application/json' });
    if (!sent.ok) return sent.answer;
    const json = parseJsonObject(await sent.res.text());
    const vectors = json &&
      (Array.isArray(json.embeddings)
        ? json.embeddings
        : isRecord(json.embeddings)
        ? json.embeddings.float
        : undefined);
    if (!Array.isArray(vectors)) return NOT_JSON;
    return list(String(c.body.model), vectors, 0);
  }
  return invalidConfig(`bedrock embeddings support amazon.titan-embed-* and cohere.embed-* model ids; got "${id}"`);
}
