// A model's `capabilities` member: what its upstream model accepts, overriding the defaults Sluice knows by
// model family (src/providers/capabilities.ts). Every member is optional; an absent one keeps the family's
// value. The meaning of each, and the family table: docs/translation.md "Capabilities".
import { z } from 'zod';

/** Reasoning effort levels in ascending order; a translation picks the nearest one a target accepts. */
export const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;
export type Effort = (typeof EFFORTS)[number];

/** The chat field that caps the answer's length. */
export const TOKEN_LIMIT_PARAMS = ['max_tokens', 'max_completion_tokens'] as const;

/** The reasoning knob a target takes: none, OpenAI chat's `reasoning_effort`, or Anthropic's `thinking` budget. */
export const REASONING_KNOBS = ['none', 'reasoning_effort', 'thinking'] as const;

/** `tool_choice` forms, in chat's words (`required` is Anthropic's `any`, `function` its `tool`). */
export const TOOL_CHOICE_FORMS = ['auto', 'none', 'required', 'function'] as const;

/** The BPE encoding a local token count uses for the model. */
export const ENCODINGS = ['o200k_base', 'cl100k_base'] as const;

const budget = z.number().int().min(1024);

export const CapabilitiesSchema = z.strictObject({
  token_limit_param: z.enum(TOKEN_LIMIT_PARAMS).optional(),
  reasoning: z.enum(REASONING_KNOBS).optional(),
  /** With `reasoning: reasoning_effort`: the values the target accepts. */
  reasoning_efforts: z.array(z.enum(EFFORTS)).min(1, 'needs at least one level').optional(),
  /** With `reasoning: thinking`: the `budget_tokens` of each effort level (at least 1024, Anthropic's minimum). */
  thinking_budgets: z.strictObject({ low: budget, medium: budget, high: budget, xhigh: budget }).partial()
    .optional(),
  /** Whether `temperature` and `top_p` other than the default are accepted. */
  temperature: z.boolean().optional(),
  tool_choice: z.array(z.enum(TOOL_CHOICE_FORMS)).optional(),
  /** Chat `response_format: json_schema` / Anthropic `output_config.format`. */
  structured_output: z.boolean().optional(),
  /** Longest `user` (chat) or `metadata.user_id` (Anthropic) the target accepts; longer ones are cut. */
  user_max_length: z.number().int().positive().optional(),
  encoding: z.enum(ENCODINGS).optional(),
});
export type CapabilityOverrides = z.infer<typeof CapabilitiesSchema>;
