// `observability.metrics.client_type_rules` (docs/usage-events.md "Client type"): AISIX's operator rules for the
// `client_type` label, checked at boot with AISIX's words. src/usage/client-type.ts runs them.
import { z } from 'zod';
import { compilePattern } from '../guardrails/regex.ts';

/** AISIX's limits on the operator's rules. */
export const MAX_CLIENT_RULES = 64;
const CLIENT_NAME = /^[a-z0-9][a-z0-9._-]*$/;
const PATH = 'observability.metrics.client_type_rules';

/**
 * `observability.metrics.client_type_rules`: `[{pattern, client}]`, AISIX's checks and words. The patterns are
 * Rust regex syntax, run on re2js (linear time), case-insensitive and unanchored.
 */
export const ClientTypeRulesSchema = z.array(z.strictObject({ pattern: z.string(), client: z.string() }))
  .default([])
  .superRefine((rules, ctx) => {
    if (rules.length > MAX_CLIENT_RULES) {
      ctx.addIssue({
        code: 'custom',
        message: `${PATH}: ${rules.length} rules exceed the limit of ${MAX_CLIENT_RULES}`,
      });
      return;
    }
    rules.forEach((r, i) => {
      const at = `${PATH}[${i}]`;
      const bytes = new TextEncoder().encode(r.pattern).length;
      if (bytes < 1 || bytes > 512) {
        ctx.addIssue({ code: 'custom', path: [i, 'pattern'], message: `${at}: pattern must be 1..=512 bytes` });
      } else {
        const c = compilePattern(`(?i)${r.pattern}`);
        if (!c.ok) {
          ctx.addIssue({ code: 'custom', path: [i, 'pattern'], message: `${at}: invalid pattern: ${c.error}` });
        }
      }
      if (!CLIENT_NAME.test(r.client) || r.client.length > 64) {
        ctx.addIssue({
          code: 'custom',
          path: [i, 'client'],
          message: `${at}: client "${r.client}" must match [a-z0-9][a-z0-9._-]* and be at most 64 chars`,
        });
      }
    });
  });
