// JSON Schemas of `config.yaml` and `resources.yaml` for editors and CI linters (docs/deploy.md "Schemas"),
// derived from the zod schemas that the gateway itself validates with: the zod shapes are the one source of
// truth; what zod checks in code (cross-field refinements) is written here as JSON Schema where it can be,
// from the same exported lists. `npm run schemas` writes schemas/*.schema.json; test/unit/schemas.test.ts
// fails when the committed files drift from this output.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigSchema, IGNORED_KEYS, REFUSED_KEYS } from '../src/config/schema.ts';
import { FILE_COLLECTIONS, type Identity, type KindName, KINDS, roleOf } from '../src/resources/kinds.ts';
import { ClaimMappingSchema, OidcProviderSchema } from '../src/resources/identity-schema.ts';
import { A2aAgentSchema } from '../src/resources/a2a-agent.ts';
import {
  apiKeyShape,
  cachePolicyShape,
  DatadogExporterSchema,
  DIRECT_ONLY_FIELDS,
  INAPPLICABLE_ON_ROUTING,
  modelShape,
  OtherExporterSchema,
  OtlpExporterSchema,
  providerKeyShape,
  SlsExporterSchema,
} from '../src/resources/schema.ts';

type Json = Record<string, unknown>;

const DRAFT = 'https://json-schema.org/draft/2020-12/schema';

/** What zod's integer bounds emit when there is no bound of ours: noise in an editor's hover. */
const SAFE_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/** JSON Schema's own formats among those zod emits. */
const STANDARD_FORMATS = new Set(['uri', 'date-time', 'email', 'ipv4', 'ipv6', 'uuid', 'date', 'time', 'duration']);

interface Options {
  /** `${VAR}` is interpolated before validation (resources.yaml): a string that names a variable passes. */
  interpolated: boolean;
}

/** zod → JSON Schema (the input side: defaults make members optional), with Sluice's adjustments. */
function toJson(schema: z.ZodType, o: Options): Json {
  const out = z.toJSONSchema(schema, {
    io: 'input',
    // Refinements (CIDR checks, cross-field rules) have no JSON form; they stay zod's, listed in docs/deploy.md.
    unrepresentable: 'any',
    override: (ctx) => {
      const js = ctx.jsonSchema as Json;
      if (SAFE_BOUNDS.has(js.maximum as number)) delete js.maximum;
      if (SAFE_BOUNDS.has(js.minimum as number)) delete js.minimum;
      // zod names some checks as formats no validator knows (`starts_with`); their `pattern` says it.
      if (typeof js.format === 'string' && !STANDARD_FORMATS.has(js.format)) delete js.format;
      // A URL's allowed schemes (`z.url({ protocol })`) as a pattern on its prefix.
      const protocol = (ctx.zodSchema._zod.def as { protocol?: RegExp }).protocol;
      if (js.format === 'uri' && protocol) js.pattern = `^(?:${protocol.source.replace(/^\^|\$$/g, '')}):`;
      // `nullOk` (a preprocess): AISIX's `null` = absent, which the output side cannot show.
      const def = ctx.zodSchema._zod.def as { type: string; in?: { _zod: { def: { type: string } } } };
      if (def.type === 'pipe' && def.in?._zod.def.type === 'transform') orNull(js);
      if (o.interpolated && js.type === 'string' && (js.pattern || js.format || js.enum)) orVariable(js);
    },
  }) as Json;
  delete out.$schema;
  return out;
}

function orNull(js: Json): void {
  const copy = { ...js };
  for (const k of Object.keys(js)) delete js[k];
  js.anyOf = [copy, { type: 'null' }];
}

function orVariable(js: Json): void {
  const copy = { ...js };
  for (const k of Object.keys(js)) delete js[k];
  js.anyOf = [copy, { type: 'string', pattern: '\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}', description: 'a ${VAR} reference' }];
}

const props = (js: Json): Json => js.properties as Json;
const required = (...names: string[]): Json => ({ required: names });
const noneOf = (names: readonly string[]): Json => ({ not: { anyOf: names.map((n) => required(n)) } });

// -- config.yaml -------------------------------------------------------------------------------------------

/**
 * The AISIX keys the loader accepts and ignores (`IGNORED_KEYS`) are allowed where they sit; the ones it
 * refuses (`REFUSED_KEYS`) are named with the loader's advice, so an editor shows why.
 */
function allowAisixKeys(root: Json): void {
  const at = (path: string[]): Json => path.reduce<Json>((node, seg) => props(node)[seg] as Json, root);
  for (const key of IGNORED_KEYS) {
    const segs = key.split('.');
    const parent = at(segs.slice(0, -1));
    const last = segs.at(-1)!;
    const ignored = { description: `AISIX key: accepted and ignored by Sluice (one WARN at boot)` };
    if (last === '*') parent.additionalProperties = ignored;
    else if (last.endsWith('*')) {
      parent.patternProperties = { ...(parent.patternProperties as Json), [`^${last.slice(0, -1)}`]: ignored };
    } else props(parent)[last] = ignored;
  }
  for (const [key, advice] of Object.entries(REFUSED_KEYS)) {
    const segs = key.split('.');
    props(at(segs.slice(0, -1)))[segs.at(-1)!] = { not: {}, description: advice };
  }
}

export function configJsonSchema(): Json {
  const root = toJson(ConfigSchema, { interpolated: false });
  allowAisixKeys(root);
  return {
    $schema: DRAFT,
    title: 'Sluice config.yaml',
    description: 'The bootstrap file (docs/configuration.md). AISIX_<SECTION>__<KEY> environment variables ' +
      'override keys at load time, so a key they set may be missing here. Cross-field rules (one configuration ' +
      'source; admin_keys when the admin listener is on; the Redis mode members) are checked by ' +
      '`sluice validate --config`.',
    ...root,
  };
}

// -- resources.yaml ----------------------------------------------------------------------------------------

const identity = { type: 'string', minLength: 1, description: "the entry's identity, unique within its kind" };

function providerKeyEntry(): Json {
  const { id: _id, ...shape } = providerKeyShape;
  const js = toJson(z.strictObject(shape), { interpolated: true });
  props(js).display_name = identity;
  const echoAdapter = { properties: { adapter: { const: 'echo' } }, required: ['adapter'] };
  const echoVendor = { properties: { provider: { const: 'echo' }, adapter: { type: 'null' } }, required: ['provider'] };
  return {
    ...js,
    required: ['display_name'],
    // A credential, except on the echo adapter; `secret` is `api_key`'s alias, never both.
    anyOf: [required('api_key'), required('secret'), echoAdapter, echoVendor],
    not: required('api_key', 'secret'),
  };
}

function modelEntry(): Json {
  const { id: _id, ...shape } = modelShape;
  const js = toJson(z.strictObject({ ...shape, provider_key: z.string().min(1) }), { interpolated: true });
  props(js).display_name = identity;
  props(js).provider_key = { type: 'string', minLength: 1, description: 'a provider key of this file, by name' };
  // A semantic router's classifier names its key the same two ways.
  const classifier = props(props(js).semantic as Json).classifier as Json;
  props(classifier).provider_key = {
    type: 'string',
    minLength: 1,
    description: 'a provider key of this file, by name',
  };
  classifier.required = (classifier.required as string[]).filter((n) => n !== 'provider_key_id');
  classifier.oneOf = [required('provider_key'), required('provider_key_id')];
  return {
    ...js,
    required: ['display_name'],
    not: required('provider_key', 'provider_key_id'),
    // A routing or semantic model carries no direct-only or kind-inapplicable member; a direct one names its
    // upstream.
    if: { anyOf: [required('routing'), required('semantic')] },
    then: noneOf([...DIRECT_ONLY_FIELDS, ...INAPPLICABLE_ON_ROUTING, 'provider_key']),
    else: { ...required('model_name'), anyOf: [required('provider_key'), required('provider_key_id')] },
  };
}

function apiKeyEntry(): Json {
  const { id: _id, ...shape } = apiKeyShape;
  const js = toJson(z.strictObject({ ...shape, key_env: z.string().min(1) }), { interpolated: true });
  props(js).display_name = identity;
  props(js).key_env = { type: 'string', minLength: 1, description: 'an environment variable holding the key' };
  return { ...js, required: ['display_name', 'allowed_models'], oneOf: [required('key_env'), required('key_hash')] };
}

function cachePolicyEntry(): Json {
  const { id: _id, ...shape } = cachePolicyShape;
  const js = toJson(z.strictObject(shape), { interpolated: true });
  props(js).name = identity;
  return { ...js, required: ['name'] };
}

function exporterEntry(): Json {
  const { id: _id, ...otlp } = OtlpExporterSchema.shape;
  const served = toJson(z.strictObject(otlp), { interpolated: true });
  props(served).name = { ...props(served).name as Json, description: "the exporter's name (its identity)" };
  const { id: _did, ...datadog } = DatadogExporterSchema.shape;
  const usage = toJson(z.strictObject(datadog), { interpolated: true });
  const { id: _sid, ...sls } = SlsExporterSchema.shape;
  const slsUsage = toJson(z.strictObject(sls), { interpolated: true });
  const other = toJson(OtherExporterSchema, { interpolated: true });
  return { oneOf: [served, usage, slsUsage, { ...other, not: required('id') }] };
}

/** A claim mapping names its key by `resolve.api_key` (a display_name of the file) or `resolve.api_key_id`. */
function claimMappingEntry(): Json {
  const { id: _id, resolve: _resolve, ...shape } = ClaimMappingSchema.shape;
  const js = toJson(z.strictObject(shape), { interpolated: true });
  props(js).name = identity;
  props(js).resolve = {
    type: 'object',
    additionalProperties: false,
    properties: {
      api_key: { type: 'string', minLength: 1, description: 'an api key of this file, by display_name' },
      api_key_id: { type: 'string', minLength: 1, description: "an api key's id" },
    },
    oneOf: [required('api_key'), required('api_key_id')],
  };
  return { ...js, required: ['name', 'jwt_provider', 'match', 'resolve'] };
}

/** An OIDC provider: the key-set mode needs `issuer` and `audiences`; `hmac_secret` makes both optional, and no `jwks_uri`. */
function oidcProviderEntry(): Json {
  const { id: _id, ...shape } = OidcProviderSchema.shape;
  const js = toJson(z.strictObject(shape), { interpolated: true });
  props(js).name = identity;
  return {
    ...js,
    required: ['name'],
    if: required('hmac_secret'),
    then: { not: required('jwks_uri') },
    else: { ...required('issuer', 'audiences'), properties: { audiences: { type: 'array', minItems: 1 } } },
  };
}

/** AISIX's `a2a_agents` entry: `name` or `display_name`, and a non-empty `secret` for `bearer` and `api_key`. */
function a2aAgentEntry(): Json {
  const coupling = (auth: string): Json => ({
    if: { properties: { auth_type: { const: auth } }, required: ['auth_type'] },
    then: { required: ['secret'], properties: { secret: { type: 'string', minLength: 1 } } },
  });
  return {
    type: 'object',
    ...toJson(A2aAgentSchema, { interpolated: true }),
    not: required('id'),
    ...NAMED_BY.name_or_display_name,
    allOf: [coupling('bearer'), coupling('api_key')],
  };
}

/**
 * The served kinds whose file entry is not their document as stored: file sugar (`provider_key`, `key_env`),
 * cross-field rules zod checks in code, or alternative forms. Every other kind's entry is its registry schema.
 */
const FILE_ENTRIES: Partial<Record<KindName, () => Json>> = {
  provider_keys: providerKeyEntry,
  models: modelEntry,
  api_keys: apiKeyEntry,
  // The two forms, the condition tree and its caps are checked by `sluice validate` (src/resources/policy-schema.ts).
  rate_limit_policies: () => ({ type: 'object', not: required('id'), ...required('name') }),
  observability_exporters: exporterEntry,
  cache_policies: cachePolicyEntry,
  claim_mappings: claimMappingEntry,
  oidc_providers: oidcProviderEntry,
  a2a_agents: a2aAgentEntry,
};

/** The members naming an entry, as the registry's identity rule says. */
const NAMED_BY: Record<Identity, Json> = {
  display_name: required('display_name'),
  name: required('name'),
  name_or_display_name: { anyOf: [required('name'), required('display_name')] },
  singleton: {},
};

/** One collection of the file: its entries' schema; `null` is an absent collection. */
function collection(kind: KindName): Json {
  const list = (items: Json, description: string): Json => ({ type: ['array', 'null'], items, description });
  const entry = KINDS[kind];
  if (roleOf(kind) === 'gating') {
    return {
      type: ['array', 'null'],
      maxItems: 0,
      description: `Sluice does not implement ${kind}: an entry would gate traffic, so the file is refused`,
    };
  }
  if (entry.role !== 'served') {
    const items = { type: 'object', not: required('id'), ...NAMED_BY[entry.identity] };
    return list(items, `accepted, not served by Sluice`);
  }
  const items = FILE_ENTRIES[kind]?.() ??
    { type: 'object', ...toJson(entry.schema, { interpolated: true }), not: required('id') };
  return list(items, entry.description);
}

export function resourcesJsonSchema(): Json {
  return {
    $schema: DRAFT,
    title: 'Sluice resources.yaml (AISIX format "1")',
    description: 'Resources of the file source (docs/configuration.md). `${VAR}` in a string is read from the ' +
      'environment first. Cross references (provider_key, allowed_models, routing targets), unique identities ' +
      'and key hashes are checked by `sluice validate`.',
    type: 'object',
    properties: {
      _format_version: { const: '1', description: 'must be the string "1" (quote it)' },
      ...Object.fromEntries(FILE_COLLECTIONS.map((k) => [k, collection(k)])),
    },
    required: ['_format_version'],
    additionalProperties: false,
  };
}

// -- the files ---------------------------------------------------------------------------------------------

/** The committed files and their text (two-space JSON, one trailing newline). */
export function schemaFiles(): Record<string, string> {
  const text = (j: Json) => `${JSON.stringify(j, null, 2)}\n`;
  return { 'config.schema.json': text(configJsonSchema()), 'resources.schema.json': text(resourcesJsonSchema()) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = fileURLToPath(new URL('.', import.meta.url));
  for (const [name, text] of Object.entries(schemaFiles())) {
    writeFileSync(`${dir}${name}`, text);
    console.log(`schemas/${name}`);
  }
}
