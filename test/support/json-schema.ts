// The published JSON Schemas (schemas/*.schema.json) compiled by Ajv, a validator editors and CI linters
// also use: draft 2020-12, with the `format` keywords (uri, date-time) checked.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const ROOT = resolve(import.meta.dirname, '../..');
// ajv-formats is CommonJS: its default export arrives wrapped under Node's ESM loader.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

export function schemaValidator(): { config: ValidateFunction; resources: ValidateFunction } {
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true }));
  const load = (name: string) => JSON.parse(readFileSync(join(ROOT, 'schemas', name), 'utf8')) as object;
  return { config: ajv.compile(load('config.schema.json')), resources: ajv.compile(load('resources.schema.json')) };
}
