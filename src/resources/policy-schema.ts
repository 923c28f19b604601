// The `rate_limit_policies` resource (docs/rate-limit-policies.md; AISIX's rate_limit_policy schema): one of two
// forms, classic (`scope`, `scope_ref`, `window`, `max_requests` / `max_tokens`) or conditional (`limits`,
// `conditions`, `group_by`), each with optional suspension `schedules`. Mixing the forms rejects the row.
import { z } from 'zod';

export const POLICY_SCOPES = ['api_key', 'model', 'team', 'member', 'team_member'] as const;
export type PolicyScope = (typeof POLICY_SCOPES)[number];
export const POLICY_WINDOWS = ['second', 'minute', 'hour', 'day'] as const;
export type PolicyWindow = (typeof POLICY_WINDOWS)[number];
export const DIMENSIONS = ['team', 'member', 'api_key', 'model', 'model_name', 'provider'] as const;
export type Dimension = (typeof DIMENSIONS)[number];
/** `group_by` members, in the fixed order their values join a bucket name. */
export const GROUP_BY = ['team', 'member', 'api_key', 'model', 'provider'] as const;
export type GroupBy = (typeof GROUP_BY)[number];
const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;

/** The wire operators of AISIX's condition vocabulary; v1 admits `==`, `~=`, `in` everywhere, regexes on two. */
const WIRE_OPERATORS = ['==', '~=', '~~', '~*', 'in', 'has', '>', '>=', '<', '<=', 'ipmatch'];
const REGEX_DIMENSIONS: readonly Dimension[] = ['model_name', 'provider'];
const MAX_DEPTH = 3;
const MAX_LEAVES = 16;
const MAX_IN_VALUES = 64;
const MAX_REGEX_BYTES = 256;

const count = z.number().int().nonnegative();

export const PolicyLimitsSchema = z.strictObject({
  rps: count.nullable().optional(),
  rpm: count.nullable().optional(),
  rph: count.nullable().optional(),
  rpd: count.nullable().optional(),
  tpm: count.nullable().optional(),
  tpd: count.nullable().optional(),
  concurrency: count.nullable().optional(),
});
export type PolicyLimits = z.infer<typeof PolicyLimitsSchema>;

export const ScheduleSchema = z.strictObject({
  timezone: z.string().min(1),
  days_of_week: z.array(z.enum(WEEKDAYS)).min(1).optional(),
  dates: z.array(z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')).min(1).optional(),
  start_time: z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM'),
  end_time: z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$|^24:00$/, 'must be HH:MM or 24:00'),
}).refine((s) => (s.days_of_week === undefined) !== (s.dates === undefined), {
  message: 'exactly one of days_of_week or dates',
});
export type Schedule = z.infer<typeof ScheduleSchema>;

export interface ConditionLeaf {
  dimension: Dimension;
  operator: string;
  value: string | string[];
  negate?: boolean;
}
export interface ConditionGroup {
  logic: 'and' | 'or';
  children: ConditionNode[];
  negate?: boolean;
}
export type ConditionNode = ConditionLeaf | ConditionGroup;

const LeafSchema = z.strictObject({
  dimension: z.enum(DIMENSIONS),
  operator: z.string(),
  value: z.union([z.string(), z.array(z.string())]),
  negate: z.boolean().optional(),
});
const NodeSchema: z.ZodType<ConditionNode> = z.lazy(() =>
  z.union([
    LeafSchema,
    z.strictObject({
      logic: z.enum(['and', 'or']),
      children: z.array(NodeSchema).min(1),
      negate: z.boolean().optional(),
    }),
  ])
);

export const RateLimitPolicySchema = z.strictObject({
  id: z.unknown().optional(),
  name: z.string().min(1),
  scope: z.enum(POLICY_SCOPES).optional(),
  scope_ref: z.string().min(1).optional(),
  window: z.enum(POLICY_WINDOWS).optional(),
  max_requests: z.number().int().min(1).optional(),
  max_tokens: z.number().int().min(1).optional(),
  conditions: z.array(NodeSchema).optional(),
  group_by: z.array(z.enum(GROUP_BY)).optional(),
  limits: PolicyLimitsSchema.optional(),
  action: z.literal('reject').optional(),
  schedules: z.array(ScheduleSchema).optional(),
}).superRefine(checkForm);

type PolicyRow = z.infer<typeof RateLimitPolicySchema>;
export type ClassicPolicy = PolicyRow & {
  id: string;
  form: 'classic';
  scope: PolicyScope;
  scope_ref: string;
  window: PolicyWindow;
};
export type ConditionalPolicy = PolicyRow & { id: string; form: 'conditional'; limits: PolicyLimits };
export type RateLimitPolicy = ClassicPolicy | ConditionalPolicy;

const CLASSIC_FIELDS = ['scope', 'scope_ref', 'window', 'max_requests', 'max_tokens'] as const;
const CONDITIONAL_FIELDS = ['conditions', 'group_by', 'limits', 'action'] as const;

function checkForm(p: PolicyRow, ctx: z.RefinementCtx): void {
  const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
  if (p.limits !== undefined) {
    for (const f of CLASSIC_FIELDS) if (p[f] !== undefined) issue([f], 'not allowed with `limits` (conditional form)');
    if (Object.values(p.limits).every((v) => v == null)) issue(['limits'], 'needs at least one limit');
    if (p.group_by && new Set(p.group_by).size !== p.group_by.length) {
      issue(['group_by'], 'must not repeat a dimension');
    }
    if (p.conditions) checkConditions(p.conditions, issue);
    return;
  }
  for (const f of CONDITIONAL_FIELDS) {
    if (p[f] !== undefined) issue([f], 'only the conditional form (with `limits`) takes this');
  }
  for (const f of ['scope', 'scope_ref', 'window'] as const) {
    if (p[f] === undefined) issue([f], 'required (or give `limits` for the conditional form)');
  }
  if (p.max_requests === undefined && p.max_tokens === undefined) {
    issue(['max_requests'], 'one of max_requests or max_tokens is required');
  }
}

function checkConditions(
  nodes: readonly ConditionNode[],
  issue: (path: (string | number)[], message: string) => void,
): void {
  let leaves = 0;
  const walk = (n: ConditionNode, depth: number, path: (string | number)[]) => {
    if (depth > MAX_DEPTH) return issue(path, `conditions nest at most ${MAX_DEPTH} deep`);
    if ('logic' in n) {
      n.children.forEach((c, i) => walk(c, depth + 1, [...path, 'children', i]));
      return;
    }
    leaves++;
    const problem = leafProblem(n);
    if (problem) issue(path, problem);
  };
  nodes.forEach((n, i) => walk(n, 1, ['conditions', i]));
  if (leaves > MAX_LEAVES) issue(['conditions'], `at most ${MAX_LEAVES} leaves`);
}

function leafProblem(l: ConditionLeaf): string | undefined {
  if (!WIRE_OPERATORS.includes(l.operator)) return `unknown operator ${JSON.stringify(l.operator)}`;
  const regex = l.operator === '~~' || l.operator === '~*';
  if (!['==', '~=', 'in'].includes(l.operator) && !(regex && REGEX_DIMENSIONS.includes(l.dimension))) {
    return `operator ${l.operator} is not admitted on ${l.dimension}`;
  }
  if (l.operator === 'in') {
    if (!Array.isArray(l.value) || l.value.length < 1 || l.value.length > MAX_IN_VALUES) {
      return `in takes a list of 1–${MAX_IN_VALUES} values`;
    }
    if (l.value.some((v) => v === '')) return 'in values must not be empty';
    return undefined;
  }
  if (typeof l.value !== 'string') return `${l.operator} takes one string value`;
  if (regex) {
    if (new TextEncoder().encode(l.value).length > MAX_REGEX_BYTES) {
      return `a regex is at most ${MAX_REGEX_BYTES} bytes`;
    }
    if (compileRegex(l.value, l.operator === '~*') === undefined) return `invalid regex ${JSON.stringify(l.value)}`;
  }
  return undefined;
}

/**
 * A condition regex as AISIX's engine reads it (unanchored search): a leading `(?i)` is a flag; lookaround and
 * backreferences, which AISIX's engine has not, are refused, so Sluice enforces no row AISIX would reject.
 */
export function compileRegex(source: string, caseless: boolean): RegExp | undefined {
  let s = source;
  let flags = 'u';
  if (s.startsWith('(?i)')) {
    s = s.slice(4);
    flags += 'i';
  }
  if (caseless && !flags.includes('i')) flags += 'i';
  if (/\(\?<?[=!]|\\[1-9]|\\k</.test(s)) return undefined;
  try {
    return new RegExp(s, flags);
  } catch {
    return undefined;
  }
}

/** The row as the snapshot holds it: its id and which form it is. */
export function toPolicy(id: string, row: PolicyRow): RateLimitPolicy {
  const { id: _id, ...rest } = row;
  return (rest.limits !== undefined
    ? { ...rest, id, form: 'conditional' }
    : { ...rest, id, form: 'classic' }) as RateLimitPolicy;
}
