// One resource document → the resource Sluice serves, the same way on both paths (docs/aisix-compatibility.md "Resources"):
//
// - `strict` (the resources file, `validate`): AISIX's strict schemas; an unknown member anywhere is an error;
// - `lenient` (etcd rows): unknown members are dropped at every depth and reported as dotted paths from the
//   document root (`routing.targets[].tags`), deduplicated and capped at 64 per row; kind-inapplicable
//   `cost` / `retries` / `auto_prompt_caching` on a routing model are stripped and reported as
//   `inapplicable:<field>`. Types, required members, ranges and closed enums still apply.
//
// Both: `null` is absent for the members AISIX marks nullable; `secret` is the alias of a provider key's
// `api_key` (both given: `parse_failed`, AISIX's serde alias error); an `id` member is never the id.
import type { z } from 'zod';
import type { GuardrailEntry } from '../guardrails/attachments.ts';
import { buildGuardrail } from '../guardrails/build.ts';
import { type GuardrailAttachment, GuardrailAttachmentSchema, GuardrailSchema } from '../guardrails/schema.ts';
import {
  type ApiKey,
  ApiKeySchema,
  type CachePolicy,
  CachePolicySchema,
  DatadogExporterSchema,
  defaultAdapter,
  INAPPLICABLE_ON_ROUTING,
  type Model,
  ModelSchema,
  OTHER_EXPORTER_KINDS,
  OtherExporterSchema,
  type OtlpExporterResource,
  OtlpExporterSchema,
  type ProviderKey,
  ProviderKeySchema,
  type Routing,
  SlsExporterSchema,
  type UsageExporterResource,
} from './schema.ts';
import { resolveApiBase } from './api-base.ts';
import { lenientMcpAccess } from './mcp-schema.ts';
import { isPlainApiKey, plainApiKey } from './plain-api-key.ts';
import { type Semantic, semanticTargets } from './semantic-schema.ts';

/** AISIX caps the ignored paths of one row at 64, then adds this marker. */
export const MAX_IGNORED_FIELDS = 64;
export const TRUNCATED_MARKER = '...truncated';

type Issue = z.core.$ZodIssue;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `a.b[2].c` from a zod-style path. */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else if (typeof p === 'string') out += out ? `.${p}` : p;
  }
  return out;
}

/** The reporting form of an ignored member, AISIX's: an array index is a segment of its own, `[]`. */
function ignoredPath(path: readonly PropertyKey[], key: string): string {
  const segments = path.flatMap((p) => (typeof p === 'number' ? ['[]'] : typeof p === 'string' ? [p] : []));
  return [...segments, key].join('.');
}

/** One line per issue, `field: message`; unknown members read `field: unknown field`. */
export function issueMessages(issues: readonly Issue[]): string[] {
  const out: string[] = [];
  for (const i of issues) {
    if (i.code === 'unrecognized_keys') {
      for (const k of i.keys) out.push(`${fieldPath([...i.path, k])}: unknown field`);
      continue;
    }
    const path = fieldPath(i.path);
    out.push(path ? `${path}: ${i.message}` : i.message);
  }
  return out;
}

/** Removes `key` under `path` in `doc` (the path of an `unrecognized_keys` issue). */
function removeAt(doc: unknown, path: readonly PropertyKey[], key: string): void {
  let node: unknown = doc;
  for (const p of path) {
    if (node === null || typeof node !== 'object') return;
    node = (node as Record<PropertyKey, unknown>)[p as string];
  }
  if (isRecord(node)) delete node[key];
}

/** Zod parse; in lenient mode the unknown members are removed from `doc` (mutated) and reported. */
function parseWith<T>(
  schema: z.ZodType<T>,
  doc: Record<string, unknown>,
  lenient: boolean,
  ignored: string[],
): { ok: true; data: T } | { ok: false; issues: readonly Issue[] } {
  let r = schema.safeParse(doc);
  if (r.success) return { ok: true, data: r.data };
  if (!lenient) return { ok: false, issues: r.error.issues };
  for (let round = 0; round < 8 && !r.success; round++) {
    const unknown = r.error.issues.filter((i) => i.code === 'unrecognized_keys');
    if (unknown.length === 0) break;
    for (const i of unknown) {
      for (const k of i.keys) {
        ignored.push(ignoredPath(i.path, k));
        removeAt(doc, i.path, k);
      }
    }
    r = schema.safeParse(doc);
  }
  return r.success ? { ok: true, data: r.data } : { ok: false, issues: r.error.issues };
}

/** The ignored paths of a row that has none: one list for every such row (a prefix may hold millions). */
const NO_FIELDS: string[] = [];

/** Deduplicated, sorted, capped at 64 (then `...truncated`). */
function finishIgnored(ignored: string[]): string[] {
  if (ignored.length === 0) return NO_FIELDS;
  const sorted = [...new Set(ignored)].sort();
  return sorted.length > MAX_IGNORED_FIELDS ? [...sorted.slice(0, MAX_IGNORED_FIELDS), TRUNCATED_MARKER] : sorted;
}

/**
 * One document against `schema` under `mode` (the same reading as the built-in kinds): the parsed value and
 * the ignored paths, or the schema error. `doc` is consumed.
 */
export function parseAgainst<T>(
  schema: z.ZodType<T>,
  doc: Record<string, unknown>,
  mode: 'strict' | 'lenient',
): { ok: true; data: T; ignored: string[] } | { ok: false; error: string } {
  const ignored: string[] = [];
  const r = parseWith(schema, doc, mode === 'lenient', ignored);
  return r.ok
    ? { ok: true, data: r.data, ignored: finishIgnored(ignored) }
    : { ok: false, error: issueMessages(r.issues).join('; ') };
}

/** How a document is read: the resources file's strict reading, or an etcd row's lenient one. */
export type Mode = 'strict' | 'lenient';

/**
 * One document of one kind, judged: the resource it serves and the ignored paths, or why it is rejected. A
 * kind whose `R` admits undefined accepts documents it does not serve (an AISIX exporter kind Sluice does not).
 */
export type Read<R> =
  | { ok: true; resource: R; ignored: string[] }
  | { ok: false; errorKind: 'schema_failed' | 'parse_failed'; error: string };

/** A rejection; `undefined`: the document goes on to its schema. */
export type Precheck = (doc: Record<string, unknown>, mode: Mode, ignored: string[]) => Read<never> | undefined;

/**
 * A kind read through one zod schema: `check` sees the raw document first, `build` turns the parsed row into
 * the resource (a row that cannot be built is rejected like a schema failure). `doc` is consumed.
 */
export function schemaReader<T, R>(
  schema: z.ZodType<T>,
  build: (id: string, data: T) => { ok: true; resource: R } | { ok: false; error: string },
  check?: Precheck,
): (id: string, doc: Record<string, unknown>, mode: Mode) => Read<R> {
  return (id, doc, mode) => {
    const ignored: string[] = [];
    const early = check?.(doc, mode, ignored);
    if (early) return early;
    const r = parseWith(schema, doc, mode === 'lenient', ignored);
    if (!r.ok) return { ok: false, errorKind: 'schema_failed', error: issueMessages(r.issues).join('; ') };
    const b = build(id, r.data);
    if (!b.ok) return { ok: false, errorKind: 'schema_failed', error: b.error };
    return { ok: true, resource: b.resource, ignored: finishIgnored(ignored) };
  };
}

/**
 * The row as the resource: the key's id replaces any `id` member. `data` (the schema's own output) is
 * completed in place when it has no `id`: a rest-and-spread copy gives every object a hidden class of its
 * own in V8, paid in every row, and a prefix may hold millions of api keys.
 */
export function withId<T extends { id?: unknown }>(
  id: string,
  data: T,
): { ok: true; resource: Omit<T, 'id'> & { id: string } } {
  if (!Object.hasOwn(data, 'id')) {
    (data as { id?: unknown }).id = id;
    return { ok: true, resource: data as Omit<T, 'id'> & { id: string } };
  }
  const { id: _id, ...rest } = data;
  return { ok: true, resource: { ...rest, id } };
}

/** `secret` is AISIX's serde alias of `api_key`: both given is its `duplicate field` error. */
const secretAlias: Precheck = (doc) =>
  doc.secret !== undefined && doc.api_key !== undefined
    ? {
      ok: false,
      errorKind: 'parse_failed',
      error: 'duplicate field `api_key`: `secret` is an alias of `api_key`; set exactly one',
    }
    : undefined;

export const readProviderKey = schemaReader(ProviderKeySchema, (id, data) => {
  const { id: _id, secret, ...rest } = data;
  const { adapter: named, api_base: givenBase, ...others } = rest;
  const adapter = named ?? defaultAdapter(rest.provider);
  const api_base = resolveApiBase(adapter, rest.provider, givenBase);
  const api_key = rest.api_key ?? secret;
  const resource: ProviderKey = { ...others, id };
  if (adapter !== undefined) resource.adapter = adapter;
  if (api_base !== undefined) resource.api_base = api_base;
  if (api_key !== undefined) resource.api_key = api_key;
  return { ok: true, resource };
}, secretAlias);

/**
 * An etcd row strips the members a routing or semantic model cannot use (AISIX's), reported as
 * `inapplicable:<field>`.
 */
const stripInapplicable: Precheck = (doc, mode, ignored) => {
  if (mode === 'lenient' && ((doc.routing !== undefined && doc.routing !== null) || isPresent(doc.semantic))) {
    for (const f of INAPPLICABLE_ON_ROUTING) {
      if (f in doc) {
        delete doc[f];
        ignored.push(`inapplicable:${f}`);
      }
    }
  }
  return undefined;
};

/** Every model the router can pick, as one-try targets: the health of the one picked never refuses it. */
function semanticRouting(s: Semantic): Routing {
  return {
    strategy: 'failover',
    targets: semanticTargets(s).map((model) => ({ model, weight: 1, priority: 0 })),
    retry_on_429: false,
    when_all_unavailable: 'try_anyway',
  };
}

const isPresent = (v: unknown): boolean => v !== undefined && v !== null;

export const readModel = schemaReader(ModelSchema, (id, data) => {
  const { id: _id, ...rest } = data;
  // A wildcard row without model_name reads `*`: the capture goes upstream, and `upstream_model` labels `*`.
  // A semantic router is served as a routing model over every model it can pick; the admit step narrows the
  // targets to the one it chose (docs/routing.md "Semantic routing").
  const resource = (rest.semantic
    ? { ...rest, id, kind: 'routing', routing: semanticRouting(rest.semantic) }
    : rest.routing
    ? { ...rest, id, kind: 'routing', routing: rest.routing }
    : { ...rest, id, kind: 'direct', model_name: rest.model_name ?? '*' }) as Model;
  return { ok: true, resource };
}, stripInapplicable);

const readApiKeySchema = schemaReader(
  ApiKeySchema,
  (id, data): { ok: true; resource: ApiKey } => withId(id, data),
  lenientMcpAccess,
);

/** A plain document (src/resources/plain-api-key.ts) skips the schema, which reads it the same; the rest go through it. */
export function readApiKey(id: string, doc: Record<string, unknown>, mode: Mode): Read<ApiKey> {
  return isPlainApiKey(doc)
    ? { ok: true, resource: plainApiKey(id, doc), ignored: NO_FIELDS }
    : readApiKeySchema(id, doc, mode);
}

/** Built here, once per row value: a row that cannot be built is rejected like a schema failure. */
export const readGuardrail = schemaReader(GuardrailSchema, (id, data) => {
  const b = buildGuardrail(id, data);
  if (!b.ok) return b;
  const resource: GuardrailEntry = {
    id,
    name: data.name,
    createdAt: data.created_at,
    guardrail: b.guardrail,
    warnings: b.warnings,
    row: data,
  };
  return { ok: true, resource };
});

export const readGuardrailAttachment = schemaReader(
  GuardrailAttachmentSchema,
  (id, data): { ok: true; resource: GuardrailAttachment } => withId(id, data),
);

export const readCachePolicy = schemaReader(
  CachePolicySchema,
  (id, data): { ok: true; resource: CachePolicy } => withId(id, data),
);

export type ParsedExporter =
  /** `resource` undefined: another AISIX exporter kind, accepted and not served (`ignored` is `*`). */
  | { ok: true; resource: OtlpExporterResource | UsageExporterResource | undefined; ignored: string[] }
  | { ok: false; errorKind: 'schema_failed'; error: string };

/** Reads one `observability_exporters` document (the kind's registry entry in src/resources/kinds.ts). */
export function parseExporterDocument(
  id: string,
  doc: Record<string, unknown>,
  mode: 'strict' | 'lenient',
): ParsedExporter {
  const ignored: string[] = [];
  const fail = (issues: readonly Issue[]): ParsedExporter => ({
    ok: false,
    errorKind: 'schema_failed',
    error: issueMessages(issues).join('; '),
  });
  if ((OTHER_EXPORTER_KINDS as readonly unknown[]).includes(doc.kind)) {
    const r = OtherExporterSchema.safeParse(doc);
    return r.success ? { ok: true, resource: undefined, ignored: ['*'] } : fail(r.error.issues);
  }
  if (doc.kind === 'aliyun_sls') {
    const d = parseWith(SlsExporterSchema, doc, mode === 'lenient', ignored);
    if (!d.ok) return fail(d.issues);
    const { id: _id, ...rest } = d.data;
    return { ok: true, resource: { ...rest, id }, ignored: finishIgnored(ignored) };
  }
  if (doc.kind === 'datadog') {
    const d = parseWith(DatadogExporterSchema, doc, mode === 'lenient', ignored);
    if (!d.ok) return fail(d.issues);
    const { id: _id, ...rest } = d.data;
    return { ok: true, resource: { ...rest, id }, ignored: finishIgnored(ignored) };
  }
  const r = parseWith(OtlpExporterSchema, doc, mode === 'lenient', ignored);
  if (!r.ok) return fail(r.issues);
  const { id: _id, sample_rate, ...rest } = r.data;
  return { ok: true, resource: { ...rest, sample_rate: sample_rate ?? 1, id }, ignored: finishIgnored(ignored) };
}
