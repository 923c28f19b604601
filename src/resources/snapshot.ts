// The immutable set of resources the gateway serves (docs/architecture.md "A configuration change"): built
// once per applied configuration and swapped atomically; a request reads one snapshot from start to end.
import type { GuardrailEntry } from '../guardrails/attachments.ts';
import type { GuardrailAttachment } from '../guardrails/schema.ts';
import { ApiKeyIndex } from './api-key-index.ts';
import { KINDS, RESOURCE_KINDS, type ResourceKind, type ResourceOf } from './kinds.ts';
import type { RateLimitPolicy } from './policy-schema.ts';
import type {
  ApiKey,
  CachePolicy,
  DirectModel,
  Model,
  OtlpExporterResource,
  ProviderKey,
  UsageExporterResource,
} from './schema.ts';
import { captureOf, rankWildcards, upstreamModelOf, type WildcardRow, wildcardRow } from './wildcard.ts';
import { paceSteps, runSteps } from '../util/steps.ts';

/**
 * The served resources of each kind (src/resources/kinds.ts), in the source's order: the name indexes keep
 * the last entry of a name, and the first enabled cache policy that matches a request wins
 * (src/cache/policy.ts). A kind other than the three every snapshot has is absent when it has none (the
 * common case: its step finds nothing to do).
 */
export type ResourceSet =
  & { provider_keys: ProviderKey[]; models: Model[]; api_keys: ApiKey[] }
  & { [K in ResourceKind]?: ResourceOf<K>[] };

/** The lookups of a snapshot, built once from its resources. */
interface Index {
  providerKeys: Map<string, ProviderKey>;
  models: Map<string, Model>;
  apiKeys: ApiKeyIndex;
  modelsByName: Map<string, Model>;
  wildcards: WildcardRow<DirectModel>[];
  checked: DirectModel[];
  unverified: ProviderKey[];
}

/**
 * The indexes, a row at a time (the generator pauses after each, so `Snapshot.build` can let requests run).
 * Name and key-hash indexes keep the LAST entry of a name (AISIX's name index: the row written last wins);
 * the etcd source lists rows in write order for that reason.
 */
function* indexRows(resources: ResourceSet, apiKeys?: ApiKeyIndex): Generator<void, Index> {
  const ix: Index = {
    providerKeys: new Map(),
    models: new Map(),
    apiKeys: apiKeys ?? new ApiKeyIndex(),
    modelsByName: new Map(),
    wildcards: [],
    checked: [],
    unverified: [],
  };
  for (const k of resources.provider_keys) {
    ix.providerKeys.set(k.id, k);
    if (k.tls?.verify === false) ix.unverified.push(k);
    yield;
  }
  const wildcards = new Map<string, WildcardRow<DirectModel>>();
  for (const m of resources.models) {
    ix.models.set(m.id, m);
    if (isChecked(m)) ix.checked.push(m);
    const row = m.kind === 'direct' ? wildcardRow(m) : undefined;
    if (row === undefined) ix.modelsByName.set(m.display_name, m);
    else wildcards.set(m.display_name, row);
    yield;
  }
  // The most literal characters first, so `*-mini` beats `gpt-*` for `gpt-4o-mini` (AISIX's specificity).
  ix.wildcards.push(...rankWildcards([...wildcards.values()]));
  if (apiKeys === undefined) {
    for (const k of resources.api_keys) {
      ix.apiKeys.append(k);
      yield;
    }
  }
  return ix;
}

/**
 * Whether the background checker runs for `m`: a direct model with checks enabled, except a wildcard alias,
 * whose `model_name` is a pattern, not a model an upstream could answer for.
 */
function isChecked(m: Model): m is DirectModel {
  return m.kind === 'direct' && m.background_model_check?.enabled === true && !m.model_name.includes('*');
}

function indexAll(resources: ResourceSet, apiKeys?: ApiKeyIndex): Index {
  return runSteps(indexRows(resources, apiKeys));
}

export class Snapshot {
  readonly providerKeys: Map<string, ProviderKey>;
  readonly models: Map<string, Model>;
  /**
   * The api keys. The etcd source changes one key in place (`ApiKeyIndex.put`): the keys are the one kind
   * that reaches millions, and a key's change must not rebuild them (docs/performance.md "Configuration at
   * scale"); every other index is immutable.
   */
  readonly apiKeys: ApiKeyIndex;
  /** The resources of each kind; `api_keys` lists the key index, in write order. */
  readonly resources: ResourceSet;
  private readonly modelsByName: Map<string, Model>;
  private readonly wildcards: WildcardRow<DirectModel>[];
  private readonly index: Index;
  /** The direct models the background checker runs for (checks enabled, no wildcard alias), in file order. */
  readonly checkedModels: readonly DirectModel[];
  /** The provider keys whose `tls.verify` is false (the gateway WARNs about each). */
  readonly unverifiedKeys: readonly ProviderKey[];
  /** `<kind>/<id>` → the etcd mod_revision of the row it came from (etcd source only; the admin lists). */
  revisions: { get(kindAndId: string): number | undefined } = new Map<string, number>();

  /**
   * Builds the indexes in one go; `Snapshot.build` builds the same ones in slices. `apiKeys`: the key index
   * to serve instead of one built from `resources.api_keys` (the etcd source keeps its own across applies).
   */
  constructor(resources: ResourceSet, index?: Index, apiKeys?: ApiKeyIndex) {
    const ix = index ?? indexAll(resources, apiKeys);
    this.index = ix;
    this.resources = liveKeys(resources, ix.apiKeys);
    this.providerKeys = ix.providerKeys;
    this.models = ix.models;
    this.apiKeys = ix.apiKeys;
    this.modelsByName = ix.modelsByName;
    this.wildcards = ix.wildcards;
    this.checkedModels = ix.checked;
    this.unverifiedKeys = ix.unverified;
  }

  /** The same snapshot as `new Snapshot(resources)`, its indexes built with `pace()` awaited between rows. */
  static async build(
    resources: ResourceSet,
    pace: () => Promise<void> | undefined,
    apiKeys?: ApiKeyIndex,
  ): Promise<Snapshot> {
    return new Snapshot(resources, await paceSteps(indexRows(resources, apiKeys), pace));
  }

  /**
   * A new snapshot serving the same indexes (the key index included, as it is now): what the gateway swaps in
   * after keys changed in place, so what it derives once per snapshot is derived again.
   */
  derive(): Snapshot {
    const s = new Snapshot(this.resources, this.index);
    s.revisions = this.revisions;
    return s;
  }

  static empty(): Snapshot {
    return new Snapshot({ provider_keys: [], models: [], api_keys: [] });
  }

  /** Exact name first, then the most specific wildcard row. `upstreamModel` fills a `*` in the row's model_name. */
  resolveModel(name: string): { model: Model; upstreamModel?: string } | undefined {
    const exact = this.modelsByName.get(name);
    if (exact) return { model: exact, upstreamModel: exact.kind === 'direct' ? exact.model_name : undefined };
    for (const w of this.wildcards) {
      const capture = captureOf(w, name);
      if (capture !== undefined) return { model: w.model, upstreamModel: upstreamModelOf(w.model.model_name, capture) };
    }
    return undefined;
  }

  modelByName(name: string): Model | undefined {
    return this.modelsByName.get(name);
  }

  /** `h`: `hashOf(hash)`, if the caller keeps it (src/util/sharded-map.ts). */
  apiKeyByHash(hash: string, h?: number): ApiKey | undefined {
    return this.apiKeys.byHash(hash, h);
  }

  /** Models listed by `/v1/models`: wildcard aliases are hidden. */
  listableModels(): Model[] {
    return [...this.modelsByName.values()];
  }

  /** Resources per kind; only the kinds that have some are listed (AISIX's `resource_counts`). */
  counts(): Partial<Record<ResourceKind, number>> {
    const out: Partial<Record<ResourceKind, number>> = {};
    for (const kind of RESOURCE_KINDS) {
      const n = this.countOf(kind);
      if (KINDS[kind].counted && n > 0) out[kind] = n;
    }
    return out;
  }

  /** The resources of one kind, in the source's order (empty when there are none). */
  of<K extends ResourceKind>(kind: K): readonly ResourceOf<K>[] {
    return (this.resources[kind] as ResourceOf<K>[] | undefined) ?? NONE;
  }

  /** The rate-limit policies, in write order (empty when there are none). */
  get policies(): readonly RateLimitPolicy[] {
    return this.of('rate_limit_policies');
  }

  get cachePolicies(): readonly CachePolicy[] {
    return this.of('cache_policies');
  }

  get guardrails(): readonly GuardrailEntry[] {
    return this.of('guardrails');
  }

  get guardrailAttachments(): readonly GuardrailAttachment[] {
    return this.of('guardrail_attachments');
  }

  get size(): number {
    let n = 0;
    for (const kind of RESOURCE_KINDS) n += this.countOf(kind);
    return n;
  }

  private countOf(kind: ResourceKind): number {
    return kind === 'api_keys' ? this.apiKeys.size : this.of(kind).length;
  }

  /** The trace exporters served (`observability_exporters`, `kind: otlp_http`). */
  get exporters(): readonly OtlpExporterResource[] {
    return this.of('observability_exporters').filter((e): e is OtlpExporterResource => e.kind === 'otlp_http');
  }

  /** The usage-event exporters served (`observability_exporters`, `kind: datadog` or `aliyun_sls`; src/usage). */
  get usageExporters(): readonly UsageExporterResource[] {
    return this.of('observability_exporters').filter((e): e is UsageExporterResource =>
      e.kind === 'datadog' || e.kind === 'aliyun_sls'
    );
  }
}

const NONE: readonly never[] = [];

/** `resources` with `api_keys` read from the key index, so a key changed in place is listed as it is now. */
function liveKeys(resources: ResourceSet, keys: ApiKeyIndex): ResourceSet {
  // Copied by descriptor: a spread would read a live `api_keys` and list every key (a million, per key changed).
  const { api_keys: _, ...others } = Object.getOwnPropertyDescriptors(resources);
  const out = Object.defineProperties({}, others) as ResourceSet;
  Object.defineProperty(out, 'api_keys', { get: () => keys.list(), enumerable: true });
  return out;
}

/** `*` matches any run of characters; everything else is literal. */
export function globMatch(pattern: string, name: string): boolean {
  if (pattern === '*') return true;
  if (!pattern.includes('*')) return pattern === name;
  const parts = pattern.split('*');
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!name.startsWith(first) || !name.endsWith(last) || name.length < first.length + last.length) return false;
  let pos = first.length;
  const end = name.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const at = name.indexOf(parts[i]!, pos);
    if (at < 0 || at + parts[i]!.length > end) return false;
    pos = at + parts[i]!.length;
  }
  return true;
}
