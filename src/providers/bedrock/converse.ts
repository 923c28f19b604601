// OpenAI chat ⇄ Bedrock Converse (docs/configuration.md "AWS Bedrock"). The request is first built as the
// Anthropic Messages request Sluice already translates to (system, text and image blocks, tool calls and
// results, tools, tool_choice, stop), then reshaped into Converse's blocks; answers and ConverseStream
// events come back as chat completions and chunks.
import { chatToMessagesRequest, MESSAGES_SHAPE_ONLY } from '../translate/chat-via-messages.ts';
import { isRecord, type Json, num, str, TranslationError } from '../translate/shared.ts';

/** The Converse body for an OpenAI chat body (no `model`: it travels in the URL). */
export function chatToConverse(body: Json): Json {
  const msgs = chatToMessagesRequest(body, MESSAGES_SHAPE_ONLY);
  const messages = (msgs.messages as Json[]).map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' ? [{ text: m.content }] : (m.content as Json[]).map(converseBlock),
  }));
  if (messages.length === 0) {
    throw new TranslationError(
      'messages must include at least one user or assistant turn (Converse takes no system-only request)',
    );
  }
  const out: Json = { messages };
  if (typeof msgs.system === 'string' && msgs.system !== '') out.system = [{ text: msgs.system }];
  const inference: Json = {};
  const maxTokens = num(body.max_tokens) ?? num(body.max_completion_tokens);
  if (maxTokens !== undefined) inference.maxTokens = maxTokens;
  if (num(body.temperature) !== undefined) inference.temperature = body.temperature;
  if (num(body.top_p) !== undefined) inference.topP = body.top_p;
  if (Array.isArray(msgs.stop_sequences)) inference.stopSequences = msgs.stop_sequences;
  if (Object.keys(inference).length > 0) out.inferenceConfig = inference;
  const toolConfig = converseTools(msgs);
  if (toolConfig) out.toolConfig = toolConfig;
  return out;
}

function converseBlock(b: Json): Json {
  switch (b.type) {
    case 'text':
      return { text: b.text };
    case 'image': {
      const src = isRecord(b.source) ? b.source : {};
      if (src.type !== 'base64') {
        throw new TranslationError('images must be data: URLs for this model (Bedrock takes image bytes only)');
      }
      const format = String(src.media_type).replace(/^image\//, '').replace('jpg', 'jpeg');
      return { image: { format, source: { bytes: src.data } } };
    }
    case 'tool_use':
      return { toolUse: { toolUseId: b.id, name: b.name, input: b.input ?? {} } };
    case 'tool_result':
      return {
        toolResult: { toolUseId: b.tool_use_id, content: [{ text: typeof b.content === 'string' ? b.content : '' }] },
      };
    default:
      throw new TranslationError(`content of type "${String(b.type)}" cannot be sent to this model`);
  }
}

/** `toolConfig`, or undefined when no tools were sent or the caller chose `none` (Converse has no such choice). */
function converseTools(msgs: Json): Json | undefined {
  if (!Array.isArray(msgs.tools) || msgs.tools.length === 0) return undefined;
  const choice = isRecord(msgs.tool_choice) ? msgs.tool_choice : undefined;
  if (choice?.type === 'none') return undefined;
  const tools = (msgs.tools as Json[]).map((t) => ({
    toolSpec: {
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      inputSchema: { json: t.input_schema },
    },
  }));
  const out: Json = { tools };
  if (choice?.type === 'any') out.toolChoice = { any: {} };
  else if (choice?.type === 'tool') out.toolChoice = { tool: { name: choice.name } };
  return out;
}

/** Converse's `stopReason` as OpenAI's `finish_reason`. */
export function finishReason(stop: unknown): string {
  switch (stop) {
    case 'max_tokens':
      return 'length';
    case 'content_filtered':
    case 'guardrail_intervened':
      return 'content_filter';
    case 'tool_use':
      return 'tool_calls';
    default:
      return 'stop';
  }
}

export function converseUsage(u: unknown): Json {
  const usage = isRecord(u) ? u : {};
  const input = Math.max(0, num(usage.inputTokens) ?? 0);
  const output = Math.max(0, num(usage.outputTokens) ?? 0);
  const out: Json = {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: Math.max(0, num(usage.totalTokens) ?? input + output),
  };
  const cached = num(usage.cacheReadInputTokens);
  if (cached) out.prompt_tokens_details = { cached_tokens: cached };
  return out;
}

/** A Converse answer as a chat completion. */
export function converseToChat(answer: Json, model: string, id: string): Json {
  const output = isRecord(answer.output) ? answer.output : {};
  const message = isRecord(output.message) ? output.message : {};
  let text = '';
  let reasoning = '';
  const toolCalls: Json[] = [];
  for (const b of Array.isArray(message.content) ? message.content : []) {
    if (!isRecord(b)) continue;
    if (typeof b.text === 'string') text += b.text;
    else if (isRecord(b.toolUse)) {
      toolCalls.push({
        id: str(b.toolUse.toolUseId) ?? '',
        type: 'function',
        function: { name: str(b.toolUse.name) ?? '', arguments: JSON.stringify(b.toolUse.input ?? {}) },
      });
    } else if (isRecord(b.reasoningContent) && isRecord(b.reasoningContent.reasoningText)) {
      reasoning += str(b.reasoningContent.reasoningText.text) ?? '';
    }
  }
  const msg: Json = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (reasoning !== '') msg.reasoning_content = reasoning;
  if (toolCalls.length > 0) msg.tool_calls = toolCalls;
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: msg, finish_reason: finishReason(answer.stopReason) }],
    usage: converseUsage(answer.usage),
  };
}
