// What the admin write API may change on a model row (docs/admin.md "Models"): its rate limit and its budgets,
// the members an operator tunes while the model's routing and credentials stay as the row's owner wrote them.
import type { z } from 'zod';
import { ProxyError } from '../http/errors.ts';
import { BudgetListSchema } from '../resources/budget-schema.ts';
import { RateLimitSchema } from '../resources/schema.ts';
import type { RowStore } from './etcd-rows.ts';
import { changeRow, type KeyWrite } from './key-writes.ts';

const MODEL_EDITABLE: Readonly<Record<string, z.ZodType>> = { rate_limit: RateLimitSchema, budgets: BudgetListSchema };

const bad = (message: string) => new ProxyError(400, 'invalid_request_error', message);

/** The body's edits, each checked against its member's schema; `null` removes the member. */
function modelEditsOf(body: unknown): Record<string, unknown> | ProxyError {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return bad('the body must be a JSON object');
  const edits = body as Record<string, unknown>;
  for (const [k, v] of Object.entries(edits)) {
    const schema = MODEL_EDITABLE[k];
    if (!schema) return bad(`${k}: a model write may set ${Object.keys(MODEL_EDITABLE).join(', ')} only`);
    if (v === null) continue;
    const r = schema.safeParse(v);
    if (!r.success) {
      const i = r.error.issues[0]!;
      return bad(`${[k, ...i.path].join('.')}: ${i.message}`);
    }
  }
  return edits;
}

export function updateModel(rows: RowStore, id: string, body: unknown): Promise<KeyWrite | ProxyError> {
  const edits = modelEditsOf(body);
  if (edits instanceof ProxyError) return Promise.resolve(edits);
  return changeRow(rows, 'models', id, (doc) => {
    const out = { ...doc };
    for (const [k, v] of Object.entries(edits)) {
      if (v === null) delete out[k];
      else out[k] = v;
    }
    return out;
  });
}
