// Which client program sent a request, from its `User-Agent` (docs/usage-events.md "Client type"): the
// operator's `observability.metrics.client_type_rules` first, in order, then AISIX's built-in table; the
// label of `aisix_llm_tokens_by_client_total`. Bounded by construction: a label is a rule's `client` or a
// built-in name, never the caller's text.
import { compilePattern, type Pattern } from '../guardrails/regex.ts';

/** AISIX's built-in needles (lowercase substrings), first match wins, in its order. */
export const BUILTIN_CLIENT_RULES: readonly (readonly [needle: string, client: string])[] = [
  ['claude-cli', 'claude-code'],
  ['claude-code', 'claude-code'],
  ['codex', 'codex'],
  ['cline', 'cline'],
  ['roo-code', 'roo-code'],
  ['roocode', 'roo-code'],
  ['kilo-code', 'kilocode'],
  ['kilocode', 'kilocode'],
  ['zoo-code', 'zoo-code'],
  ['zoocode', 'zoo-code'],
  ['githubcopilot', 'github-copilot'],
  ['cursor', 'cursor'],
  ['opencode', 'opencode'],
  ['qwencode', 'qwen-code'],
  ['geminicli', 'gemini-cli'],
  ['charm-crush', 'crush'],
  ['zed/', 'zed'],
  ['aider', 'aider'],
  ['openai-python', 'openai-python'],
  ['openai/python', 'openai-python'],
  ['openai-node', 'openai-node'],
  ['openai/js', 'openai-node'],
  ['anthropic-sdk-python', 'anthropic-python'],
  ['anthropic/python', 'anthropic-python'],
  ['anthropic-sdk-typescript', 'anthropic-typescript'],
  ['anthropic/js', 'anthropic-typescript'],
  ['langchain', 'langchain'],
  ['llama-index', 'llamaindex'],
  ['llama_index', 'llamaindex'],
  ['llamaindex', 'llamaindex'],
  ['litellm', 'litellm'],
  ['ai-sdk/provider-utils', 'vercel-ai-sdk'],
  ['curl', 'curl'],
  ['python-requests', 'python-requests'],
  ['python-httpx', 'httpx'],
  ['httpx', 'httpx'],
  ['aiohttp', 'aiohttp'],
  ['okhttp', 'okhttp'],
  ['go-http-client', 'go-http-client'],
  ['node-fetch', 'node'],
  ['undici', 'node'],
  ['axios', 'node'],
  ['postmanruntime', 'postman'],
  ['mozilla', 'browser'],
];

/** The longest user agent kept (characters, after control characters are removed): AISIX's cap. */
export const USER_AGENT_MAX = 256;
const PATH = 'observability.metrics.client_type_rules';

// Control characters (C0, DEL, C1) and the two Unicode line separators.
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Control characters removed, at most `max` characters: how AISIX keeps caller text it records. */
export function cleanText(text: string, max: number): string {
  const clean = text.replace(CONTROL, '');
  return clean.length > max ? clean.slice(0, max) : clean;
}

/** The user agent as AISIX records it (`client_user_agent`): cleaned, capped, trimmed. */
export function cleanUserAgent(ua: string | null | undefined): string {
  return ua ? cleanText(ua, USER_AGENT_MAX).trim() : '';
}

export type ClientTypeRule = { pattern: string; client: string };

/** Distinct user agents remembered; past this the memo starts over (callers cannot grow it without bound). */
const MEMO_SIZE = 1024;

/** `User-Agent` → `client_type`. A gateway sees few distinct agents, so each is classified once. */
export class ClientTypeClassifier {
  private readonly rules: readonly { pattern: Pattern; client: string }[];
  private readonly memo = new Map<string, string>();

  constructor(rules: readonly ClientTypeRule[] = []) {
    this.rules = rules.map((r) => {
      const c = compilePattern(`(?i)${r.pattern}`);
      // The config schema refused an invalid pattern before the gateway was built.
      if (!c.ok) throw new Error(`${PATH}: invalid pattern: ${c.error}`);
      return { pattern: c.pattern, client: r.client };
    });
  }

  /** The client type of a cleaned user agent (`cleanUserAgent`); `unknown` for none. */
  classify(ua: string): string {
    if (ua === '') return 'unknown';
    let label = this.memo.get(ua);
    if (label !== undefined) return label;
    label = this.match(ua);
    if (this.memo.size >= MEMO_SIZE) this.memo.clear();
    this.memo.set(ua, label);
    return label;
  }

  private match(ua: string): string {
    for (const r of this.rules) if (r.pattern.test(ua)) return r.client;
    const lower = ua.toLowerCase();
    for (const [needle, client] of BUILTIN_CLIENT_RULES) if (lower.includes(needle)) return client;
    return 'other';
  }
}
