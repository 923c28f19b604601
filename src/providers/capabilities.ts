// What a target model accepts, in one place: its token-limit parameter, reasoning knob and scale, whether it
// takes `temperature`, its `tool_choice` forms, structured output, the longest `user` and the encoding of a
// local token count. Known by model family (the upstream model name, so a caller-minted wildcard name
// resolves by what it reaches) and by vendor; a model's `capabilities` member overrides either. The
// translations consult it (translate/*). The table and each mapping: docs/translation.md.
import {
  type CapabilityOverrides,
  type Effort,
  EFFORTS,
  ENCODINGS,
  REASONING_KNOBS,
  TOKEN_LIMIT_PARAMS,
  TOOL_CHOICE_FORMS,
} from '../resources/capabilities.ts';
import type { ProviderCall } from './types.ts';

export type { Effort };

export interface Capabilities {
  /** The family row that matched (`default` when none did), for the docs and the tests. */
  family: string;
  token_limit_param: (typeof TOKEN_LIMIT_PARAMS)[number];
  reasoning: (typeof REASONING_KNOBS)[number];
  /** Accepted `reasoning_effort` values, ascending (with `reasoning: reasoning_effort`). */
  reasoning_efforts: readonly Effort[];
  /** `thinking.budget_tokens` per effort (with `reasoning: thinking`). */
  thinking_budgets: { low: number; medium: number; high: number; xhigh: number };
  temperature: boolean;
  tool_choice: readonly (typeof TOOL_CHOICE_FORMS)[number][];
  structured_output: boolean;
  user_max_length?: number;
  encoding: (typeof ENCODINGS)[number];
}

const ALL_TOOL_CHOICES = TOOL_CHOICE_FORMS;

/** Budgets as LiteLLM maps efforts, which makes AISIX's budget → effort thresholds their exact inverse. */
const BUDGETS = { low: 1024, medium: 2048, high: 4096, xhigh: 8192 };

/** What a model no row names gets: what Sluice sent before it knew any family (AISIX's mapping). */
const DEFAULT: Capabilities = {
  family: 'default',
  token_limit_param: 'max_tokens',
  reasoning: 'reasoning_effort',
  reasoning_efforts: ['minimal', 'low', 'medium', 'high'],
  thinking_budgets: BUDGETS,
  temperature: true,
  tool_choice: ALL_TOOL_CHOICES,
  structured_output: true,
  encoding: 'cl100k_base',
};

type Row = { family: string; match: (name: string) => boolean } & Partial<Capabilities>;

const starts = (...prefixes: string[]) => (name: string) => prefixes.some((p) => name.startsWith(p));

/** The OpenAI reasoning families: `max_completion_tokens` only, the default temperature only. */
const OPENAI_REASONING = {
  token_limit_param: 'max_completion_tokens',
  temperature: false,
  encoding: 'o200k_base',
} as const;

function claude(thinks: boolean): Partial<Capabilities> {
  return {
    token_limit_param: 'max_tokens',
    reasoning: thinks ? 'thinking' : 'none',
    structured_output: false,
    encoding: 'cl100k_base',
  };
}

/** A current Claude model; also what an Anthropic-wire model whose name no row reads is taken for. */
const CLAUDE: Partial<Capabilities> = { ...claude(true), structured_output: true };

/** First match wins, so the narrower rows come first. Names are lower-cased, a `vendor/` prefix dropped. */
const FAMILIES: Row[] = [
  {
    family: 'gpt-5-chat',
    match: (n) => /^gpt-5(\.\d+)?-chat/.test(n),
    token_limit_param: 'max_completion_tokens',
    reasoning: 'none',
    encoding: 'o200k_base',
  },
  { family: 'gpt-5-pro', match: starts('gpt-5-pro'), ...OPENAI_REASONING, reasoning_efforts: ['high'] },
  {
    family: 'gpt-5.1',
    match: starts('gpt-5.1'),
    ...OPENAI_REASONING,
    reasoning_efforts: ['none', 'low', 'medium', 'high'],
  },
  {
    family: 'gpt-5.2+',
    match: (n) => /^gpt-5\.\d/.test(n),
    ...OPENAI_REASONING,
    reasoning_efforts: ['none', 'low', 'medium', 'high', 'xhigh'],
  },
  { family: 'gpt-5', match: starts('gpt-5'), ...OPENAI_REASONING },
  // The first o1 releases take no effort knob at all.
  { family: 'o1-mini', match: starts('o1-mini', 'o1-preview'), ...OPENAI_REASONING, reasoning: 'none' },
  {
    family: 'o-series',
    match: (n) => /^o\d/.test(n),
    ...OPENAI_REASONING,
    reasoning_efforts: ['low', 'medium', 'high'],
  },
  {
    family: 'gpt-4o/gpt-4.1',
    match: starts('gpt-4o', 'gpt-4.1', 'chatgpt-4o'),
    reasoning: 'none',
    encoding: 'o200k_base',
  },
  {
    family: 'gpt-4/gpt-3.5',
    match: starts('gpt-4', 'gpt-3.5'),
    reasoning: 'none',
    structured_output: false,
  },
  // It always reasons and takes no knob; DeepSeek offers JSON mode, not schemas.
  {
    family: 'deepseek-reasoner',
    match: starts('deepseek-reasoner', 'deepseek-r1'),
    reasoning: 'none',
    temperature: false,
    structured_output: false,
  },
  { family: 'claude (before 3.7)', match: (n) => (claudeVersion(n) ?? 9) < 3.7, ...claude(false) },
  // Structured output came with Opus 4.1 and the 4.5 models.
  {
    family: 'claude (3.7 to 4.0)',
    match: (n) => (claudeVersion(n) ?? 9) < 4.1 || (claudeVersion(n) === 4.1 && !n.includes('opus')),
    ...claude(true),
  },
  { family: 'claude', match: (n) => claudeVersion(n) !== undefined, ...CLAUDE },
];

/**
 * A Claude model's version from its name, either naming scheme (`claude-3-5-sonnet-…`, `claude-sonnet-4-5-…`,
 * a Bedrock `us.anthropic.claude-…` id); a date suffix is not a minor version. Undefined: not Claude.
 */
export function claudeVersion(name: string): number | undefined {
  const i = name.indexOf('claude-');
  if (i < 0) return undefined;
  const rest = name.slice(i + 'claude-'.length);
  const old = /^(\d+)(?:-(\d))?-(?:opus|sonnet|haiku|instant)/.exec(rest);
  if (old) return Number(old[1]) + Number(old[2] ?? 0) / 10;
  const current = /^(?:opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d)(?!\d))?/.exec(rest);
  if (current) return Number(current[1]) + Number(current[2] ?? 0) / 10;
  const legacy = /^(\d+)(?:\.(\d))?/.exec(rest); // claude-2.1, claude-instant-1.2
  if (legacy) return Number(legacy[1]) + Number(legacy[2] ?? 0) / 10;
  return rest.startsWith('instant') ? 1 : 4.5; // a Claude name no scheme reads: a current model
}

/** Per vendor (the model's `provider`, else the key's): the longest `user`. */
const VENDORS: Record<string, Partial<Capabilities>> = {
  openai: { user_max_length: 64 },
  openrouter: { user_max_length: 128 },
};

/** `openai/gpt-5` (OpenRouter), `GPT-4o` → the name the family table reads. */
function baseName(model: string): string {
  const lower = model.toLowerCase();
  return lower.slice(lower.lastIndexOf('/') + 1);
}

/** The capabilities of upstream model `model` at `vendor`, with the model resource's overrides on top. */
export function capabilitiesOf(model: string, vendor?: string, override?: CapabilityOverrides): Capabilities {
  const name = baseName(model);
  const row: Partial<Row> = FAMILIES.find((r) => r.match(name)) ??
    (vendor === 'anthropic' ? { family: 'claude', ...CLAUDE } : {});
  const { match: _m, ...fromRow } = row;
  const out: Capabilities = { ...DEFAULT, ...fromRow, ...(vendor ? VENDORS[vendor] : undefined) };
  if (!override) return out;
  const { thinking_budgets, ...rest } = override;
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) (out as unknown as Record<string, unknown>)[k] = v;
  if (thinking_budgets) out.thinking_budgets = { ...out.thinking_budgets, ...thinking_budgets };
  return out;
}

/** The capabilities of a call's target: its upstream model name (`body.model`), vendor and overrides. */
export function capabilitiesOfCall(call: ProviderCall): Capabilities {
  const vendor = (call.provider ?? call.key.provider) || call.key.adapter;
  return capabilitiesOf(String(call.body.model ?? ''), vendor, call.capabilities);
}

/**
 * Claude on Bedrock or Vertex: as on Anthropic, but structured output only where the model resource says so
 * (whether those platforms take `output_config` is not known here; a refusal beats a silently free answer).
 */
export function cloudClaudeCapabilities(call: ProviderCall): Capabilities {
  const caps = capabilitiesOf(String(call.body.model ?? ''), 'anthropic', call.capabilities);
  return { ...caps, structured_output: call.capabilities?.structured_output ?? false };
}

// ---- the mappings ------------------------------------------------------------------------------------------

const rank = (e: Effort) => EFFORTS.indexOf(e);

/** An effort the caller asked for as the nearest level `caps` accepts (a tie goes up); none: undefined. */
export function nearestEffort(wanted: Effort, accepted: readonly Effort[]): Effort | undefined {
  let best: Effort | undefined;
  for (const e of accepted) {
    if (best === undefined) best = e;
    const d = Math.abs(rank(e) - rank(wanted)) - Math.abs(rank(best) - rank(wanted));
    if (d < 0 || (d === 0 && rank(e) > rank(best))) best = e;
  }
  return best;
}

/** A caller's effort string read onto the scale: Anthropic's `max` is the top; anything unknown is undefined. */
export function effortOf(v: unknown): Effort | undefined {
  if (v === 'max') return 'xhigh';
  return typeof v === 'string' && (EFFORTS as readonly string[]).includes(v) ? v as Effort : undefined;
}

/**
 * Anthropic's `thinking` (and `output_config.effort`, which says how hard an adaptive thinker tries) as an
 * effort: `enabled` by its budget (AISIX's thresholds: ≥ 4096 high, ≥ 2048 medium, ≥ 1024 low, else
 * minimal), `adaptive` as `output_config.effort` or medium; disabled or absent: undefined.
 */
export function effortOfThinking(thinking: unknown, outputEffort?: unknown): Effort | undefined {
  if (typeof thinking !== 'object' || thinking === null) return effortOf(outputEffort);
  const t = thinking as { type?: unknown; budget_tokens?: unknown };
  if (t.type === 'adaptive') return effortOf(outputEffort) ?? 'medium';
  if (t.type !== 'enabled') return undefined;
  const explicit = effortOf(outputEffort);
  if (explicit) return explicit;
  const budget = typeof t.budget_tokens === 'number' ? t.budget_tokens : 0;
  return budget >= 4096 ? 'high' : budget >= 2048 ? 'medium' : budget >= 1024 ? 'low' : 'minimal';
}

/** The `reasoning_effort` to send a chat target for `wanted`; undefined where it has no such knob. */
export function chatReasoningEffort(wanted: Effort | undefined, caps: Capabilities): Effort | undefined {
  if (wanted === undefined || caps.reasoning !== 'reasoning_effort') return undefined;
  return nearestEffort(wanted, caps.reasoning_efforts);
}

/** The thinking budget of an effort on a `thinking` target; none and minimal think not at all. */
export function thinkingBudget(wanted: Effort | undefined, caps: Capabilities): number | undefined {
  if (caps.reasoning !== 'thinking' || wanted === undefined || wanted === 'none' || wanted === 'minimal') {
    return undefined;
  }
  return caps.thinking_budgets[wanted];
}

/** `text` cut to the target's longest `user` (by code point, so no surrogate pair is split). */
export function cutUser(text: string, caps: Capabilities): string {
  const max = caps.user_max_length;
  if (max === undefined || text.length <= max) return text;
  return Array.from(text).slice(0, max).join('');
}

/** A chat `tool_choice` the target accepts: a form it lacks becomes `auto` (the model may still call). */
export function acceptedToolChoice(choice: unknown, caps: Capabilities): unknown {
  if (choice === undefined) return undefined;
  const form = typeof choice === 'string' ? choice : 'function';
  return (caps.tool_choice as readonly string[]).includes(form) ? choice : 'auto';
}
