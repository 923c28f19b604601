// The request rules the real APIs enforce and a lenient mock would let through, with the real 400s' words
// (reviews/clients-2026-12-05.md "Validation, as the real APIs do"): OpenAI's per-family parameter rules
// (by model-name prefix) and tool pairing; Anthropic's `max_tokens`, turn pairing, extra fields and the
// extended-thinking rules. The mocks apply them when started with `rules: true`.

type Json = Record<string, unknown>;

export interface Violation {
  status: 400;
  body: Json;
}

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function openai(message: string, param: string | null, code: string | null): Violation {
  return { status: 400, body: { error: { message, type: 'invalid_request_error', param, code } } };
}

/** What OpenAI answers a chat completion request it refuses; undefined when it would take it. */
export function openaiViolation(body: Json | undefined): Violation | undefined {
  if (!body) return openai('We could not parse the JSON body of your request.', null, 'invalid_json');
  const model = String(body.model ?? '').replace(/^.*\//, '');
  const reasoning = /^(gpt-5|o\d)/.test(model) && !/^gpt-5(\.\d+)?-chat/.test(model);
  if (reasoning && body.max_tokens !== undefined) {
    return openai(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      'max_tokens',
      'unsupported_parameter',
    );
  }
  if (reasoning && body.temperature !== undefined && body.temperature !== 1) {
    return openai(
      `Unsupported value: 'temperature' does not support ${
        String(body.temperature)
      } with this model. Only the default (1) value is supported.`,
      'temperature',
      'unsupported_value',
    );
  }
  if (/^gpt-4/.test(model) && body.reasoning_effort !== undefined) {
    return openai(
      "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
      'reasoning_effort',
      'unsupported_parameter',
    );
  }
  if (/^o\d/.test(model) && body.reasoning_effort !== undefined) {
    if (!['low', 'medium', 'high'].includes(String(body.reasoning_effort))) {
      return openai(
        `Unsupported value: 'reasoning_effort' does not support '${
          String(body.reasoning_effort)
        }' with this model. Supported values are: 'low', 'medium', and 'high'.`,
        'reasoning_effort',
        'unsupported_value',
      );
    }
  }
  // A `vendor/model` name is a router's (OpenRouter takes 128).
  const userMax = String(body.model ?? '').includes('/') ? 128 : 64;
  if (typeof body.user === 'string' && body.user.length > userMax) {
    return openai(
      `Invalid 'user': string too long. Expected a string with maximum length ${userMax}, but got a string with length ${body.user.length} instead.`,
      'user',
      'string_above_max_length',
    );
  }
  if (body.stream_options !== undefined && body.stream !== true) {
    return openai('The `stream_options` parameter is only allowed when `stream` is enabled.', 'stream_options', null);
  }
  return toolPairing(Array.isArray(body.messages) ? body.messages : []);
}

function toolPairing(messages: unknown[]): Violation | undefined {
  let open = new Set<string>();
  for (const m of messages) {
    if (!isRecord(m)) continue;
    if (m.role === 'tool') {
      if (!open.delete(String(m.tool_call_id))) {
        return openai(
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          'messages.[].role',
          null,
        );
      }
      continue;
    }
    if (open.size > 0) {
      return openai(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
          `The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
        'messages',
        null,
      );
    }
    open = new Set(
      Array.isArray(m.tool_calls) ? m.tool_calls.filter(isRecord).map((c) => String(c.id)) : [],
    );
  }
  return undefined;
}

function anthropic(message: string): Violation {
  return { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message } } };
}

const MESSAGES_FIELDS = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'metadata',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'tools',
  'tool_choice',
  'thinking',
  'output_config',
  'service_tier',
  'container',
  'context_management',
  'mcp_servers',
]);

/**
 * What Anthropic answers a Messages request it refuses (`countTokens`: the count_tokens rules). `issued`: the
 * thinking signatures this upstream gave out; a thinking block that leads a continued tool turn must carry one.
 */
export function anthropicViolation(
  body: Json | undefined,
  countTokens = false,
  issued?: ReadonlySet<string>,
): Violation | undefined {
  if (!body) return anthropic('There was an issue with the format of your request: invalid JSON');
  for (const k of Object.keys(body)) {
    if (!MESSAGES_FIELDS.has(k)) return anthropic(`${k}: Extra inputs are not permitted`);
  }
  if (!countTokens && typeof body.max_tokens !== 'number') return anthropic('max_tokens: Field required');
  const thinking = isRecord(body.thinking) && body.thinking.type === 'enabled' ? body.thinking : undefined;
  if (thinking) {
    const budget = Number(thinking.budget_tokens);
    if (!(budget >= 1024)) {
      return anthropic('thinking.enabled.budget_tokens: Input should be greater than or equal to 1024');
    }
    if (!countTokens && !(Number(body.max_tokens) > budget)) {
      return anthropic('`max_tokens` must be greater than `thinking.budget_tokens`.');
    }
    if (body.temperature !== undefined && body.temperature !== 1) {
      return anthropic('`temperature` may only be set to 1 when thinking is enabled or in adaptive mode.');
    }
    const choice = isRecord(body.tool_choice) ? body.tool_choice.type : undefined;
    if (choice === 'any' || choice === 'tool') {
      return anthropic('Thinking may not be enabled when tool_choice forces tool use.');
    }
  }
  if (isRecord(body.metadata) && typeof body.metadata.user_id === 'string' && body.metadata.user_id.length > 256) {
    return anthropic('metadata.user_id: String should have at most 256 characters');
  }
  return turns(Array.isArray(body.messages) ? body.messages : [], thinking !== undefined, issued);
}

function turns(messages: unknown[], thinking: boolean, issued?: ReadonlySet<string>): Violation | undefined {
  let pending: string[] = [];
  let lastAssistant: Json[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isRecord(m) || (m.role !== 'user' && m.role !== 'assistant')) {
      return anthropic(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    }
    const blocks: Json[] = typeof m.content === 'string'
      ? [{ type: 'text', text: m.content }]
      : Array.isArray(m.content)
      ? m.content.filter(isRecord)
      : [];
    for (const b of blocks) {
      if (b.type === 'text' && String(b.text ?? '').trim() === '') {
        return anthropic(`messages.${i}: text content blocks must be non-empty`);
      }
    }
    const results = blocks.filter((b) => b.type === 'tool_result').map((b) => String(b.tool_use_id));
    for (const id of results) {
      if (!pending.includes(id)) {
        return anthropic(
          `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. ` +
            'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
        );
      }
    }
    const missing = pending.filter((id) => !results.includes(id));
    if (missing.length > 0) {
      return anthropic(
        `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${
          missing.join(', ')
        }. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
      );
    }
    pending = m.role === 'assistant' ? blocks.filter((b) => b.type === 'tool_use').map((b) => String(b.id)) : [];
    if (m.role === 'assistant') lastAssistant = blocks;
  }
  if (thinking && lastAssistant?.some((b) => b.type === 'tool_use')) {
    const first = lastAssistant[0]?.type;
    if (first !== 'thinking' && first !== 'redacted_thinking') {
      return anthropic(
        `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found ` +
          `\`${
            String(first)
          }\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking ` +
          'block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).',
      );
    }
    const signature = lastAssistant[0]?.signature;
    if (first === 'thinking' && issued && !(typeof signature === 'string' && issued.has(signature))) {
      return anthropic(`messages.${messages.length - 2}.content.0: Invalid \`signature\` in \`thinking\` block`);
    }
  }
  return undefined;
}
