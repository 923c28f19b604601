// The cross-reference stage of the resources-file pipeline (docs/configuration.md "resources.yaml"), over
// the identities pass 1 declared: an entry whose own schema failed still counts as defined, so one typo
// is reported once, where it is.
import { keyedMap } from '../util/sharded-map.ts';
import { type AcceptedRow, type EntryRef, type Problems, scopeOf } from './entries.ts';
import type { ApiKey, Model, ProviderKey } from './schema.ts';

/** The entries that passed their schema, with where they are, of the kinds that hold references. */
export interface Typed {
  provider_keys: AcceptedRow<ProviderKey>[];
  models: AcceptedRow<Model>[];
  api_keys: AcceptedRow<ApiKey>[];
}

/** Between rows: a promise when the pipeline's slice is up and requests must run first (pace.ts). */
type Pace = () => Promise<void> | undefined;

export async function checkReferences(
  typed: Typed,
  modelNames: readonly string[],
  providerKeyIds: ReadonlySet<string>,
  problems: Problems,
  pace: Pace,
  routeNames: readonly string[] = [],
): Promise<void> {
  await checkModelRefs(typed, modelNames, problems, pace);
  await checkRouteRefs(typed.api_keys, routeNames, problems, pace);
  await checkKeyHashes(typed.api_keys, problems, pace);
  for (const at of typed.models) {
    const { r } = at;
    const paced = pace();
    if (paced) await paced;
    if (r.kind === 'direct' && !providerKeyIds.has(r.provider_key_id)) {
      problems.entry(
        at,
        `provider_key_id ${
          JSON.stringify(r.provider_key_id)
        } does not match any provider key defined in this file — reference it by name with \`provider_key\` instead`,
      );
    }
  }
}

/** `allowed_models` entries and routing targets name a model of this file (or are a wildcard). */
async function checkModelRefs(typed: Typed, modelNames: readonly string[], problems: Problems, pace: Pace) {
  const modelSet = new Set(modelNames);
  // Listed only in a message, so sorted only once one is written.
  let defined: string | undefined;
  const definedModels = () => (defined ??= modelNames.length === 0 ? 'none' : [...modelNames].sort().join(', '));
  const check = (at: EntryRef, field: string, ref: string) => {
    if (ref.includes('*') || modelSet.has(ref)) return;
    problems.entry(at, `${field} references unknown model ${JSON.stringify(ref)} (defined models: ${definedModels()})`);
  };
  for (const at of typed.api_keys) {
    const { r } = at;
    const paced = pace();
    if (paced) await paced;
    for (const m of r.allowed_models) check(at, 'allowed_models entry', m);
  }
  for (const at of typed.models) {
    const { r } = at;
    const paced = pace();
    if (paced) await paced;
    if (r.kind === 'routing') { for (const t of r.routing.targets) check(at, 'routing target', t.model); }
  }
}

/** `allowed_routes` entries without `*` name a passthrough route of this file (AISIX's file check). */
async function checkRouteRefs(
  apiKeys: Typed['api_keys'],
  routeNames: readonly string[],
  problems: Problems,
  pace: Pace,
) {
  const known = new Set(routeNames);
  for (const at of apiKeys) {
    const { r } = at;
    const paced = pace();
    if (paced) await paced;
    for (const name of r.allowed_routes ?? []) {
      if (name.includes('*') || known.has(name)) continue;
      const defined = routeNames.length === 0 ? 'none' : [...routeNames].sort().join(', ');
      problems.entry(
        at,
        `allowed_routes entry references unknown passthrough route ${
          JSON.stringify(name)
        } (defined routes: ${defined})`,
      );
    }
  }
}

/** Two api keys with one plaintext would be one caller under two names. */
async function checkKeyHashes(apiKeys: Typed['api_keys'], problems: Problems, pace: Pace) {
  // Each hash's key, one lookup per key: a hash already held is overwritten, which leaves the map's size as it
  // was, and named among `repeats`. Sharded: a million keys.
  const seen = keyedMap<Typed['api_keys'][number]>((at) => at.r.key_hash);
  const repeats: Typed['api_keys'] = [];
  for (const at of apiKeys) {
    const paced = pace();
    if (paced) await paced;
    const size = seen.size;
    seen.set(at.r.key_hash, at);
    if (seen.size === size) repeats.push(at);
  }
  if (repeats.length === 0) return;
  // Where each repeated hash was first seen (a message's scope), in one more pass; then each repeat, in order.
  const repeated = new Set(repeats.map((at) => at.r.key_hash));
  const firsts = new Map<string, Typed['api_keys'][number]>();
  for (const at of apiKeys) {
    const paced = pace();
    if (paced) await paced;
    const hash = at.r.key_hash;
    if (repeated.has(hash) && !firsts.has(hash)) firsts.set(hash, at);
  }
  for (const at of repeats) {
    problems.entry(
      at,
      `duplicate api key credential: this entry's key resolves to the same key_hash as ${
        scopeOf(firsts.get(at.r.key_hash)!)
      } — every api key must have a distinct plaintext`,
    );
  }
}
