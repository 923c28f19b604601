// Guardrails built from AISIX rows for tests: the schema's defaults, then the build, asserted to succeed.
import assert from 'node:assert/strict';
import { buildGuardrail } from '../../src/guardrails/build.ts';
import { GuardrailSchema } from '../../src/guardrails/schema.ts';
import type { Guardrail } from '../../src/guardrails/types.ts';

export function guardrail(row: Record<string, unknown>, id = String(row.name)): Guardrail {
  const b = buildGuardrail(id, GuardrailSchema.parse(row));
  assert.ok(b.ok, b.ok ? '' : b.error);
  assert.ok(b.guardrail, 'built and active');
  return b.guardrail;
}
