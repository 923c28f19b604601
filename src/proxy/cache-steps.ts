// The response cache's two pipeline steps (pipeline.ts; docs/cache.md): "cache lookup", after the rate-limit
// reservation, answers a hit — through the caller's output guardrails, request slots taken, 0 tokens
// charged — or remembers the miss; "cache store" keeps a successful answer and puts the miss's header on it.
// Only non-streamed chat completions in OpenAI's wire are looked up. The steps are in the pipeline only of
// a snapshot with an enabled policy.
import type { CacheHit, CacheMiss, ResponseCache } from '../cache/response-cache.ts';
import type { Embed } from '../cache/semantic.ts';
import { ProxyError } from '../http/errors.ts';
import type { ProviderKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Dispatcher } from '../routing/dispatch.ts';
import { embeddingsThrough } from '../routing/semantic-embed.ts';
import { commitUsage, stamped } from './answer.ts';
import { CACHE_RECORD } from './cache-record.ts';
import { slotKey } from './call-state.ts';
import type { AnswerStep, ModelCall, ResolvedModel, SnapshotFeature, Step, StepResult } from './pipeline.ts';

/**
 * A miss waiting for its answer (the call's slot): the store step takes it, or an unhandled throw abandons it
 * so identical requests waiting on it go on.
 */
const MISS = slotKey<CacheMiss>('cache miss');
const abandon = (miss: CacheMiss) => miss.abandon();

/**
 * A cached answer through the call's output checks: the body to serve, or the refusal (a policy that now
 * blocks the answer is never bypassed by a hit). Absent when no guardrail can apply.
 */
export type CheckCached = (call: ModelCall, body: string) => string | Promise<string | ProxyError>;

export function cacheLookupStep(cache: ResponseCache, checkCached?: CheckCached): Step {
  const lookup = async (call: ModelCall): Promise<StepResult> => {
    const d = await cache.lookup({
      snapshot: call.caller.snapshot,
      body: call.body,
      apiKeyId: call.caller.key.id,
      cacheControl: call.headers.get('cache-control'),
    });
    if (d === undefined) return undefined;
    if (d.kind === 'hit') return answerHit(call, d, checkCached);
    call.state.set(MISS, d, abandon);
    call.rec.facet(CACHE_RECORD).status = d.kind;
    return undefined;
  };
  return {
    name: 'cache lookup',
    run(call) {
      if (call.route.call !== 'chat' || call.body.stream === true) return undefined;
      return lookup(call);
    },
  };
}

/**
 * The cache's steps in the pipeline of a snapshot with an enabled cache policy; none in the pipeline of one
 * without (pipeline.ts `SnapshotFeature`).
 */
export function cacheSteps(cache: ResponseCache, checkCached?: CheckCached): SnapshotFeature {
  const cacheLookup = cacheLookupStep(cache, checkCached);
  return (snapshot) => (cache.applies(snapshot) ? [cacheLookup, cacheStoreStep] : undefined);
}

export const cacheStoreStep: AnswerStep = {
  name: 'cache store',
  run(call, result) {
    const miss = call.state.take(MISS);
    if (!miss) return result;
    if (result.kind !== 'response') {
      miss.abandon();
      return result;
    }
    if (result.status < 300) void miss.store(result.body);
    else miss.abandon();
    return { ...result, headers: { ...result.headers, ...miss.headers } };
  },
};

/**
 * A hit in the caller's wire, or the refusal of an output guardrail that blocks it; the reservation is
 * committed with 0 tokens either way (no upstream spent any).
 */
async function answerHit(call: ModelCall, hit: CacheHit, checkCached: CheckCached | undefined): Promise<StepResult> {
  const { rec, caller, resolved } = call;
  rec.dispatching(false, firstUpstream(caller.snapshot, resolved));
  rec.facet(CACHE_RECORD).hit(hit.layer, hit.similarity, hit.usage);
  // Its stored usage is replayed in the token families (the part says no spend is counted).
  rec.read({ input: hit.usage.input, output: hit.usage.output }, undefined);
  let body: string | ProxyError = hit.body;
  if (checkCached) {
    const checked = checkCached(call, body);
    body = checked instanceof Promise ? await checked : checked;
  }
  await commitUsage(call, 0);
  if (body instanceof ProxyError) return body;
  return stamped(call, body, 200, { 'content-type': 'application/json', ...hit.headers, ...call.limitHeaders });
}

/**
 * The upstream a hit is labelled with (AISIX: the first target of the attempt list): a direct model's own, a
 * routing model's first target's.
 */
function firstUpstream(
  snapshot: Snapshot,
  resolved: ResolvedModel,
): { model: Extract<ResolvedModel['model'], { kind: 'direct' }>; key: ProviderKey; upstreamModel: string } | undefined {
  let m = resolved.model;
  let upstreamModel = resolved.upstreamModel;
  if (m.kind === 'routing') {
    const first = m.routing.targets[0] && snapshot.modelByName(m.routing.targets[0].model);
    if (!first || first.kind !== 'direct') return undefined;
    m = first;
    upstreamModel = undefined;
  }
  const key = snapshot.providerKeys.get(m.provider_key_id);
  return key ? { model: m, key, upstreamModel: upstreamModel ?? m.model_name } : undefined;
}

/**
 * The semantic layer's embedding call through the dispatcher: the embedding model's own upstream, bounded by
 * `timeoutMs`; any answer but a vector is a failure.
 */
export function embedThrough(dispatcher: Pick<Dispatcher, 'dispatch'>): Embed {
  return async ({ snapshot, model, input, timeoutMs }) => {
    const [v] = await embeddingsThrough(dispatcher, {
      snapshot,
      model,
      timeoutMs,
      body: { model: model.display_name, input },
    });
    if (!v) throw new Error('no embedding in the answer');
    return v;
  };
}
