// The body one target is sent (docs/routing.md "Fields a key drops"): the caller's, with the target's
// upstream model name and without the members the target's provider key drops, on every wire and endpoint
// (the adapters translate what is left).
import type { Target } from './dispatch-types.ts';

export function upstreamBody(
  body: Record<string, unknown>,
  t: Pick<Target, 'key' | 'upstreamModel'>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, model: t.upstreamModel };
  const drop = t.key.drop_body_fields;
  if (drop) { for (const f of drop) delete out[f]; }
  return out;
}
