// The usual api key row read without its schema (src/resources/plain-api-key.ts): for every row it reads, the
// same resource, members in the same order, as the strict schema; every other row is left to the schema.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withId } from '../../src/resources/documents.ts';
import { parseDocument } from '../../src/resources/kinds.ts';
import { plainApiKey } from '../../src/resources/plain-api-key.ts';
import { ApiKeySchema } from '../../src/resources/schema.ts';

const CHOICES: Record<string, unknown[]> = {
  display_name: [undefined, 'user-1', '', null, 5],
  key_hash: [undefined, 'a'.repeat(64), '', null, 7],
  allowed_models: [undefined, ['m'], [], ['m', 'n'], [''], ['*'], 'm', [1], null],
  disabled: [undefined, true, false, 'no', null],
  expires_at: [undefined, '2030-01-01T00:00:00Z'],
  team_id: [undefined, 't'],
};

/** Every combination of the members above. */
function* rows(): Generator<Record<string, unknown>> {
  const names = Object.keys(CHOICES);
  const pick = (i: number, row: Record<string, unknown>): Generator<Record<string, unknown>> =>
    (function* () {
      if (i === names.length) return yield { ...row };
      for (const v of CHOICES[names[i]!]!) {
        const next = { ...row };
        if (v !== undefined) next[names[i]!] = v;
        yield* pick(i + 1, next);
      }
    })();
  yield* pick(0, {});
}

test('every row it reads: what the strict schema reads, members in order; the rest left to the schema', () => {
  let read = 0;
  let total = 0;
  for (const row of rows()) {
    total++;
    const plain = plainApiKey('ID', structuredClone(row));
    if (plain === undefined) continue;
    read++;
    const schema = ApiKeySchema.safeParse(structuredClone(row));
    assert.ok(schema.success, `${JSON.stringify(row)}: the schema refuses what the plain read accepted`);
    const resource = withId('ID', schema.data).resource;
    assert.equal(JSON.stringify(plain), JSON.stringify(resource), JSON.stringify(row));
    assert.deepEqual(plain, resource);
  }
  assert.ok(read >= 8 && read < total, `${read} of ${total} rows read without the schema`);
});

test("the registry's strict read takes it, and a row it leaves gets the schema's error", () => {
  const row = { display_name: 'u', key_hash: 'h', allowed_models: ['m'] };
  assert.deepEqual(parseDocument('api_keys', 'ID', { ...row }, 'strict'), {
    ok: true,
    resource: plainApiKey('ID', { ...row }),
    ignored: [],
  });
  assert.deepEqual(parseDocument('api_keys', 'ID', { ...row, disabled: 'no' }, 'strict'), {
    ok: false,
    errorKind: 'schema_failed',
    error: 'disabled: Invalid input: expected boolean, received string',
  });
});
