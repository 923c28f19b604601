// OpenAI chat ⇄ Gemini `generateContent` (docs/configuration.md "Vertex AI"). The request is first built
// as the Messages request Sluice already translates to (system, text and image parts, tool calls and
// results, tools, tool_choice, stop), then reshaped into Gemini's contents; JSON mode maps to
// `responseMimeType`. Answers and SSE chunks come back as chat completions and chunks.
import { dataEvent, DONE_EVENT, jsonData, parseSse } from '../sse.ts';
import { chatToMessagesRequest, MESSAGES_SHAPE_ONLY } from '../translate/chat-via-messages.ts';
import { isRecord, type Json, num, str, TranslationError } from '../translate/shared.ts';
import { UpstreamStreamError } from '../types.ts';

export function chatToGemini(body: Json): Json {
  const { response_format: format, ...rest } = body;
  const msgs = chatToMessagesRequest(rest, MESSAGES_SHAPE_ONLY);
  const toolNames = new Map<string, string>();
  const contents = (msgs.messages as Json[]).map((m) => ({
    role: m.role === 'assistant' ? 'model' : 'user',
    parts: typeof m.content === 'string'
      ? [{ text: m.content }]
      : (m.content as Json[]).map((b) => geminiPart(b, toolNames)),
  }));
  if (contents.length === 0) {
    throw new TranslationError(
      'messages must include at least one user or assistant turn (Gemini takes no system-only request)',
    );
  }
  const out: Json = { contents };
  if (typeof msgs.system === 'string' && msgs.system !== '') {
    out.systemInstruction = { role: 'user', parts: [{ text: msgs.system }] };
  }
  const generation = generationConfig(body, msgs, format);
  if (Object.keys(generation).length > 0) out.generationConfig = generation;
  if (Array.isArray(msgs.tools) && msgs.tools.length > 0) {
    out.tools = [{
      functionDeclarations: (msgs.tools as Json[]).map((t) => ({
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.input_schema,
      })),
    }];
    const mode = functionCalling(msgs.tool_choice);
    if (mode) out.toolConfig = { functionCallingConfig: mode };
  }
  return out;
}

function generationConfig(body: Json, msgs: Json, format: unknown): Json {
  const g: Json = {};
  if (num(body.temperature) !== undefined) g.temperature = body.temperature;
  if (num(body.top_p) !== undefined) g.topP = body.top_p;
  const max = num(body.max_tokens) ?? num(body.max_completion_tokens);
  if (max !== undefined) g.maxOutputTokens = max;
  if (Array.isArray(msgs.stop_sequences)) g.stopSequences = msgs.stop_sequences;
  if (isRecord(format) && format.type === 'json_object') g.responseMimeType = 'application/json';
  if (isRecord(format) && format.type === 'json_schema' && isRecord(format.json_schema)) {
    g.responseMimeType = 'application/json';
    if (isRecord(format.json_schema.schema)) g.responseJsonSchema = format.json_schema.schema;
  }
  return g;
}

function functionCalling(choice: unknown): Json | undefined {
  if (!isRecord(choice)) return undefined;
  if (choice.type === 'auto') return { mode: 'AUTO' };
  if (choice.type === 'any') return { mode: 'ANY' };
  if (choice.type === 'none') return { mode: 'NONE' };
  if (choice.type === 'tool') return { mode: 'ANY', allowedFunctionNames: [choice.name] };
  return undefined;
}

function geminiPart(b: Json, toolNames: Map<string, string>): Json {
  switch (b.type) {
    case 'text':
      return { text: b.text };
    case 'image': {
      const src = isRecord(b.source) ? b.source : {};
      if (src.type === 'base64') return { inlineData: { mimeType: src.media_type, data: src.data } };
      const url = String(src.url);
      return { fileData: { mimeType: imageType(url), fileUri: url } };
    }
    case 'tool_use':
      toolNames.set(String(b.id), String(b.name));
      return { functionCall: { name: b.name, args: b.input ?? {} } };
    case 'tool_result':
      return {
        functionResponse: {
          name: toolNames.get(String(b.tool_use_id)) ?? String(b.tool_use_id),
          response: { content: typeof b.content === 'string' ? b.content : '' },
        },
      };
    default:
      throw new TranslationError(`content of type "${String(b.type)}" cannot be sent to this model`);
  }
}

function imageType(url: string): string {
  const ext = /\.([a-z0-9]+)(?:$|[?#])/i.exec(url)?.[1]?.toLowerCase();
  if (ext === 'png' || ext === 'webp' || ext === 'gif' || ext === 'heic') return `image/${ext}`;
  return 'image/jpeg';
}

// ---- answers ------------------------------------------------------------------------------------------------

export function geminiFinish(reason: unknown, toolCalls: boolean): string {
  switch (reason) {
    case 'MAX_TOKENS':
      return 'length';
    case 'SAFETY':
    case 'RECITATION':
    case 'BLOCKLIST':
    case 'PROHIBITED_CONTENT':
    case 'SPII':
    case 'IMAGE_SAFETY':
    case 'LANGUAGE':
      return 'content_filter';
    default:
      return toolCalls ? 'tool_calls' : 'stop';
  }
}

export function geminiUsage(u: unknown): Json {
  const m = isRecord(u) ? u : {};
  const prompt = num(m.promptTokenCount) ?? 0;
  const completion = (num(m.candidatesTokenCount) ?? 0) + (num(m.thoughtsTokenCount) ?? 0);
  const out: Json = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: num(m.totalTokenCount) || prompt + completion,
  };
  if (num(m.cachedContentTokenCount)) out.prompt_tokens_details = { cached_tokens: m.cachedContentTokenCount };
  if (num(m.thoughtsTokenCount)) out.completion_tokens_details = { reasoning_tokens: m.thoughtsTokenCount };
  return out;
}

interface Parts {
  text: string;
  reasoning: string;
  calls: Json[];
}

function readParts(candidate: Json, callCount: number): Parts {
  const content = isRecord(candidate.content) ? candidate.content : {};
  const out: Parts = { text: '', reasoning: '', calls: [] };
  for (const p of Array.isArray(content.parts) ? content.parts : []) {
    if (!isRecord(p)) continue;
    if (isRecord(p.functionCall)) {
      out.calls.push({
        id: `call_${callCount + out.calls.length}`,
        type: 'function',
        function: { name: str(p.functionCall.name) ?? '', arguments: JSON.stringify(p.functionCall.args ?? {}) },
      });
    } else if (typeof p.text === 'string') {
      if (p.thought === true) out.reasoning += p.text;
      else out.text += p.text;
    }
  }
  return out;
}

export function geminiToChat(answer: Json, model: string, id: string): Json {
  const candidate = Array.isArray(answer.candidates) && isRecord(answer.candidates[0]) ? answer.candidates[0] : {};
  const parts = readParts(candidate, 0);
  const message: Json = { role: 'assistant', content: parts.text === '' && parts.calls.length > 0 ? null : parts.text };
  if (parts.reasoning !== '') message.reasoning_content = parts.reasoning;
  if (parts.calls.length > 0) message.tool_calls = parts.calls;
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: geminiFinish(candidate.finishReason, parts.calls.length > 0) }],
    usage: geminiUsage(answer.usageMetadata),
  };
}

/** Gemini's in-stream `{"error":{code,message,status}}` as the caller's stream error (its text withheld). */
function streamError(j: Json): UpstreamStreamError | undefined {
  if (!isRecord(j.error)) return undefined;
  const code = num(j.error.code);
  if (code === 429 || j.error.status === 'RESOURCE_EXHAUSTED') {
    return new UpstreamStreamError('upstream_error', 'upstream rate limited');
  }
  return new UpstreamStreamError(
    'upstream_error',
    code ? `upstream reported stream error ${code}` : 'upstream reported a stream error',
  );
}

/**
 * Gemini's SSE (`data: <GenerateContentResponse>`, no terminator) as chat chunks ending with `[DONE]`: usage
 * once, from the last chunk that carried it. A stream that closes before a `finishReason` is an error.
 */
export async function* geminiStreamToChat(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  id: string,
  includeUsage: boolean,
  maxEventBytes?: number,
): AsyncGenerator<Uint8Array> {
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: Json, finish: string | null = null) =>
    dataEvent({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  let started = false;
  let finished = false;
  let calls = 0;
  let usage: unknown;
  for await (const ev of parseSse(chunks, maxEventBytes)) {
    const j = jsonData(ev);
    if (!j) continue;
    const err = streamError(j);
    if (err) throw err;
    if (j.usageMetadata !== undefined) usage = j.usageMetadata;
    const candidate = Array.isArray(j.candidates) && isRecord(j.candidates[0]) ? j.candidates[0] : undefined;
    if (!candidate) continue;
    if (!started) yield chunk({ role: 'assistant', content: '' });
    started = true;
    const parts = readParts(candidate, calls);
    if (parts.reasoning !== '') yield chunk({ reasoning_content: parts.reasoning });
    if (parts.text !== '') yield chunk({ content: parts.text });
    if (parts.calls.length > 0) {
      yield chunk({ tool_calls: parts.calls.map((c, i) => ({ index: calls + i, ...c })) });
      calls += parts.calls.length;
    }
    if (candidate.finishReason !== undefined && candidate.finishReason !== null) {
      finished = true;
      yield chunk({}, geminiFinish(candidate.finishReason, calls > 0));
    }
  }
  if (!finished) throw new UpstreamStreamError('upstream_error', 'upstream stream ended before a finish reason');
  if (includeUsage && usage !== undefined) {
    yield dataEvent({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: geminiUsage(usage) });
  }
  yield DONE_EVENT;
}
