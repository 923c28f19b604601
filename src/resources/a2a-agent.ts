// AISIX's `a2a_agents` kind (docs/a2a.md "Resources"): an upstream A2A agent the gateway fronts at
// `/a2a/<name>`. The schema and its reading live here, where the kinds' registry imports them without a cycle;
// what the gateway does with an agent is src/a2a/.
import { z } from 'zod';
import { type Precheck, schemaReader } from './documents.ts';

/** One URL path segment: no `/ ? # %`, whitespace or control characters (AISIX's pattern). */
// deno-lint-ignore no-control-regex -- the control characters are what the pattern refuses
const AGENT_NAME = /^[^/?#%\s\x00-\x1f\x7f\u0080-\u009f]+$/;
const agentName = z.string().min(1, 'must not be empty').regex(
  AGENT_NAME,
  'must be one URL path segment: no `/`, `?`, `#`, `%`, whitespace or control characters',
);

/** An optional member AISIX also accepts as JSON `null`, which means absent. */
function nullOk<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema.optional());
}

/** The unary call's and the card fetch's deadline when `timeout_ms` is absent (AISIX's). */
export const A2A_DEFAULT_TIMEOUT_MS = 30_000;

export const A2aAgentSchema = z.strictObject({
  id: z.unknown().optional(),
  name: agentName.optional(),
  /** AISIX's former name of `name` (a serde alias): both given is `parse_failed`. */
  display_name: agentName.optional(),
  url: z.string().min(1, 'must not be empty'),
  /** Sent upstream as `A2A-Version` on every call; the gateway never translates between versions. */
  protocol_version: z.enum(['1.0', '0.3']).default('1.0'),
  auth_type: z.enum(['none', 'bearer', 'api_key']).default('none'),
  secret: nullOk(z.string()),
  timeout_ms: nullOk(z.number().int().min(1, 'must be at least 1')),
  enabled: z.boolean().default(true),
}).superRefine((a, ctx) => {
  if (a.name === undefined && a.display_name === undefined) {
    ctx.addIssue({ code: 'custom', path: ['name'], message: 'required (or its former name `display_name`)' });
  }
  if (a.auth_type !== 'none' && (a.secret === undefined || a.secret === '')) {
    ctx.addIssue({
      code: 'custom',
      path: ['secret'],
      message: `required (a non-empty string) when auth_type is ${a.auth_type}`,
    });
  }
});

type A2aAgentRow = z.infer<typeof A2aAgentSchema>;
/** An agent as the snapshot holds it: `name` whichever spelling the document used. */
export type A2aAgent = Omit<A2aAgentRow, 'id' | 'display_name' | 'name'> & { id: string; name: string };

/** `display_name` is AISIX's serde alias of `name`: both given is its `duplicate field` error. */
const nameAlias: Precheck = (doc) =>
  doc.name !== undefined && doc.display_name !== undefined
    ? {
      ok: false,
      errorKind: 'parse_failed',
      error: 'duplicate field `name`: `display_name` is the former name of `name`; set exactly one',
    }
    : undefined;

export const readA2aAgent = schemaReader(A2aAgentSchema, (id, data): { ok: true; resource: A2aAgent } => {
  const { id: _id, display_name, name, ...rest } = data;
  return { ok: true, resource: { ...rest, id, name: (name ?? display_name)! } };
}, nameAlias);
