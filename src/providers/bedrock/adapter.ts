// AWS Bedrock (`adapter: bedrock`; docs/configuration.md "AWS Bedrock"): static access keys (JSON in
// `api_key`), SigV4-signed calls to the runtime API. Chat: InvokeModel with a Messages body for a
// non-streaming `anthropic.*` model, Converse for the others, ConverseStream for every stream; Messages:
// native for `anthropic.*` (messages.ts), through chat otherwise; embeddings: Titan (one call per input)
// and Cohere. Error answers are canned: AWS's text names accounts and roles.
import type { ProviderKey } from '../../resources/schema.ts';
import { cloudClaudeCapabilities } from '../capabilities.ts';
import { messagesViaChat } from '../translate/via-chat.ts';
import { credentialJson, stringMember } from '../credential-json.ts';
import { invalidConfig, invalidCredentials } from '../failures.ts';
import { chatAnswerCounts, chatToMessagesRequest, messagesToChatResponse } from '../translate/chat-via-messages.ts';
import { isRecord, type Json, parseJsonObject, translatedId, TranslationError } from '../translate/shared.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from '../types.ts';
import { chatToConverse, converseToChat } from './converse.ts';
import { bedrockEmbeddings } from './embeddings.ts';
import { bedrockMessages } from './messages.ts';
import { bedrockPublisher, checkModelId, sendBedrock } from './runtime.ts';
import type { AwsCredentials } from './sign.ts';
import { converseStreamToChat } from './stream.ts';

const SECRET_SHAPE = '{access_key_id, secret_access_key, region, session_token?}';

/** The key's AWS credentials, or the answer that refuses the call. */
export function bedrockCredentials(key: ProviderKey): AwsCredentials | ProviderResult {
  if (!key.api_key?.trim()) {
    return invalidCredentials(`bedrock provider_key.api_key is empty — expected JSON ${SECRET_SHAPE}`);
  }
  const doc = credentialJson(key);
  const accessKeyId = doc && stringMember(doc, 'access_key_id');
  const secretAccessKey = doc && stringMember(doc, 'secret_access_key');
  if (!doc || !accessKeyId || !secretAccessKey || typeof doc.region !== 'string') {
    return invalidCredentials(`bedrock provider_key.api_key must be valid JSON: ${SECRET_SHAPE}`);
  }
  const region = doc.region.trim();
  if (region === '') {
    return invalidConfig(`bedrock provider_key.api_key.region is empty — expected JSON ${SECRET_SHAPE}`);
  }
  if (!/^[a-z0-9-]+$/.test(region)) return invalidConfig('bedrock provider_key.api_key.region is not a region name');
  const sessionToken = stringMember(doc, 'session_token');
  return { accessKeyId, secretAccessKey, region, ...(sessionToken ? { sessionToken } : {}) };
}

async function chat(c: ProviderCall, cred: AwsCredentials, id: string): Promise<ProviderResult> {
  const chatId = `chatcmpl-${translatedId('')}`;
  const anthropic = bedrockPublisher(id) === 'anthropic';
  let body: Json;
  try {
    if (anthropic && !c.stream) {
      // Bedrock's Messages schema has no `metadata` (the translation's home for OpenAI's `user`).
      const { model: _m, stream: _s, metadata: _u, ...rest } = chatToMessagesRequest(
        c.body,
        cloudClaudeCapabilities(c),
      );
      body = { ...rest, anthropic_version: 'bedrock-2023-05-31' };
    } else body = chatToConverse(c.body);
  } catch (e) {
    if (e instanceof TranslationError) return { kind: 'refused', message: e.message };
    throw e;
  }
  const op = anthropic && !c.stream ? 'invoke' : c.stream ? 'converse-stream' : 'converse';
  const accept = c.stream ? 'application/vnd.amazon.eventstream' : 'application/json';
  const sent = await sendBedrock({ c, cred, id, op, body, accept });
  if (!sent.ok) return sent.answer;
  const { res } = sent;
  if (c.stream) {
    const opts = c.body.stream_options;
    const includeUsage = isRecord(opts) && opts.include_usage === true;
    return {
      kind: 'stream',
      chunks: converseStreamToChat(res.body, id, chatId, includeUsage),
      cancel: () => res.discard(),
    };
  }
  const json = parseJsonObject(await res.text());
  const answer = json &&
    (anthropic ? messagesToChatResponse(json, id, c.forTranslation) : converseToChat(json, id, chatId));
  const counted = json && anthropic ? chatAnswerCounts(json, c.forTranslation) : undefined;
  return {
    kind: 'response',
    status: res.status,
    body: answer ? JSON.stringify(answer) : '',
    contentType: 'application/json',
    retryAfter: null,
    ...(counted ? { counted } : {}),
  };
}

async function call(c: ProviderCall): Promise<ProviderResult> {
  const cred = bedrockCredentials(c.key);
  if ('kind' in cred) return cred;
  const id = String(c.body.model ?? '');
  const refused = checkModelId(id);
  if (refused) return refused;
  if (c.endpoint === 'embeddings') return bedrockEmbeddings(c, cred, id);
  if (c.endpoint === 'messages') {
    // Claude speaks Messages natively; every other publisher is reached through chat.
    return bedrockPublisher(id) === 'anthropic' ? bedrockMessages(c, cred, id) : messagesViaChat(bedrockAdapter, c);
  }
  return chat(c, cred, id);
}

export const bedrockAdapter: ProviderAdapter = {
  name: 'bedrock',
  supports: (endpoint) => endpoint === 'chat' || endpoint === 'embeddings' || endpoint === 'messages',
  call,
};
