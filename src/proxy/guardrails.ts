// The guardrail steps of the request pipeline (pipeline.ts; docs/guardrails.md "Where they run"): the input
// check after the rate-limit reservation (a caller over its limit costs no check), the output check on the winning
// attempt's answer (its tokens are charged; no failover on a refusal). Each snapshot's attachment index is
// built once, with its pipeline, on its first request; a snapshot without guardrails has no guardrail step.
import type { Config } from '../config/schema.ts';
import { AttachmentIndex } from '../guardrails/attachments.ts';
import type { ChainDeps } from '../guardrails/chain.ts';
import { checkAnswer, checkRequest, runsOn } from '../guardrails/guard.ts';
import { blockMessage, GUARDRAIL_MSG } from '../guardrails/messages.ts';
import type { GuardedEndpoint } from '../guardrails/slots.ts';
import { guardStream } from '../guardrails/stream.ts';
import type { Guardrail } from '../guardrails/types.ts';
import { ProxyError } from '../http/errors.ts';
import { type Scrub, scrubberFor } from '../http/scrub.ts';
import { guardrailMetricsFor } from '../observability/guardrail-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { Registry } from '../observability/metrics.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { DispatchResult } from '../routing/dispatch.ts';
import { isMediaEndpoint, MEDIA_ENDPOINTS } from '../providers/media.ts';
import { slotKey } from './call-state.ts';
import { GUARDRAIL_RECORD } from './guardrail-record.ts';
import type { AnswerStep, ModelCall, SnapshotFeature } from './pipeline.ts';
import { readBody, StreamUsage, totalOf } from './usage.ts';

export interface GuardrailStepDeps {
  config: Pick<Config, 'bedrock_endpoint_url'>;
  /** config.yaml's secrets (`configSecrets`), scrubbed with the snapshot's from what a service answers. */
  configSecrets: readonly string[];
  log: Logger;
  metrics: { readonly registry: Registry };
  upstream: UpstreamFetch;
}

/** The chain a call resolved in its input step, for its output step (the call's slot). */
const CHAIN = slotKey<readonly Guardrail[]>('guardrail chain');

/** The guardrail feature of the pipeline, and the output check of a cached answer (for the cache lookup). */
export interface Guardrails {
  /**
   * A snapshot's guardrail steps (input and output checks, over its attachment index built here, once), or
   * undefined when no guardrail of the snapshot applies anywhere: its pipeline then has no guardrail step.
   */
  steps: SnapshotFeature;
  /**
   * A cached answer through the call's output hook, as an upstream's would go (AISIX): the body to serve
   * (masks re-applied), or the refusal. The chain is the one the input step resolved for this caller.
   */
  checkCached(call: ModelCall, body: string): string | Promise<string | ProxyError>;
  /**
   * The chain of a request that names no model (a passthrough route's: the environment's, the route's, the
   * key's and its team's attachments) and what its checks need, or undefined when no guardrail applies to it.
   */
  chainFor(
    snapshot: Snapshot,
    key: ApiKey,
    routeId: string,
  ): { chain: readonly Guardrail[]; deps: ChainDeps } | undefined;
  /**
   * The chain of a model call outside the pipeline (a Realtime session: the environment's, the model's, the key's
   * and its team's attachments), or undefined when no guardrail applies to it.
   */
  modelChain(
    snapshot: Snapshot,
    key: ApiKey,
    modelId: string,
  ): { chain: readonly Guardrail[]; deps: ChainDeps } | undefined;
}

export function guardrails(d: GuardrailStepDeps): Guardrails {
  const base: ChainDeps = {
    ctx: { fetch: d.upstream, bedrockEndpointUrl: d.config.bedrock_endpoint_url || undefined },
    metrics: guardrailMetricsFor(d.metrics.registry),
    log: (level, msg, fields) => d.log[level](msg, fields),
    now: () => performance.now() / 1000,
  };
  const perSnapshot = new WeakMap<Snapshot, ChainDeps>();
  // What a service answers is logged scrubbed of the snapshot's secrets (the rows' own keys among them).
  const depsOf = (snapshot: Snapshot): ChainDeps => {
    let deps = perSnapshot.get(snapshot);
    if (!deps) {
      const scrub: Scrub = (text, max) => scrubberFor(snapshot, d.configSecrets, undefined)(text, max);
      perSnapshot.set(snapshot, deps = { ...base, ctx: { ...base.ctx, scrub } });
    }
    return deps;
  };
  const outputChecks: AnswerStep = {
    name: 'output checks',
    run(call, result) {
      const chain = call.state.get(CHAIN);
      // Embeddings, audio, images and rerank answers carry no text the output checks read.
      if (!chain || call.route.call === 'embeddings' || isMediaEndpoint(call.route.call)) return result;
      if (!runsOn(chain, 'output')) return result;
      return checkOutput(call, chain, result, depsOf(call.caller.snapshot));
    },
  };
  // One index per snapshot, shared by its pipeline and its passthrough routes (its build-time lines once).
  const indexes = new WeakMap<Snapshot, AttachmentIndex>();
  const indexFor = (snapshot: Snapshot): AttachmentIndex => {
    let index = indexes.get(snapshot);
    if (!index) indexes.set(snapshot, index = indexOf(snapshot, d.log));
    return index;
  };
  const steps: SnapshotFeature = (snapshot) => {
    if (snapshot.guardrails.length === 0) return undefined;
    const index = indexFor(snapshot);
    if (index.empty) return undefined;
    const deps = depsOf(snapshot);
    return [{ name: 'input checks', run: (call) => checkInput(call, index, deps) }, outputChecks];
  };
  const checkCached = (call: ModelCall, body: string) => {
    const chain = call.state.get(CHAIN);
    return chain && runsOn(chain, 'output') ? checkCachedOutput(call, chain, body, depsOf(call.caller.snapshot)) : body;
  };
  const chainFor = (snapshot: Snapshot, key: ApiKey, routeId: string) => {
    if (snapshot.guardrails.length === 0) return undefined;
    // No model is named: a model-scoped attachment selects nothing here.
    const chain = indexFor(snapshot).resolve({ modelId: '', apiKeyId: key.id, teamId: key.team_id, routeId });
    return chain.length === 0 ? undefined : { chain, deps: depsOf(snapshot) };
  };
  const modelChain = (snapshot: Snapshot, key: ApiKey, modelId: string) => {
    if (snapshot.guardrails.length === 0) return undefined;
    const chain = indexFor(snapshot).resolve({ modelId, apiKeyId: key.id, teamId: key.team_id });
    return chain.length === 0 ? undefined : { chain, deps: depsOf(snapshot) };
  };
  return { steps, checkCached, chainFor, modelChain };
}

/** The index of a snapshot, with its build-time lines logged once. */
function indexOf(snapshot: Snapshot, log: Logger): AttachmentIndex {
  for (const g of snapshot.guardrails) {
    if (g.warnings?.includes('unknown_enforcement_mode')) {
      log.warn(GUARDRAIL_MSG.unknownEnforcementMode, { guardrail: g.name, id: g.id });
    }
  }
  return new AttachmentIndex(snapshot.guardrails, snapshot.guardrailAttachments, (msg, fields) => {
    if (msg === 'implicitEnv') log.info(GUARDRAIL_MSG.implicitEnv, fields);
    else log.warn(GUARDRAIL_MSG.unknownGuardrail, fields);
  });
}

/** The endpoints guardrails check; others (count_tokens) pass. */
const GUARDED = new Set<string>([
  'chat',
  'completions',
  'embeddings',
  'messages',
  'responses',
  ...MEDIA_ENDPOINTS,
]);

function endpointOf(call: ModelCall): GuardedEndpoint {
  return call.route.call as GuardedEndpoint;
}

async function checkInput(call: ModelCall, index: AttachmentIndex, deps: ChainDeps): Promise<ProxyError | undefined> {
  if (!GUARDED.has(call.route.call)) return undefined;
  const key = call.caller.key;
  const chain = index.resolve({ modelId: call.resolved.model.id, apiKeyId: key.id, teamId: key.team_id });
  if (chain.length === 0) return undefined;
  call.state.set(CHAIN, chain);
  if (!runsOn(chain, 'input')) return undefined;
  const r = await checkRequest(
    chain,
    endpointOf(call),
    call.route.wire,
    call.body,
    deps,
    call.resolved.model.display_name,
  );
  if (r.verdict) call.rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
  return r.refusal ? new ProxyError(422, 'content_filter', blockMessage('request', r.refusal.guardrail)) : undefined;
}

async function checkOutput(
  call: ModelCall,
  chain: readonly Guardrail[],
  result: DispatchResult,
  deps: ChainDeps,
): Promise<DispatchResult> {
  if (result.kind === 'stream') return guardedStream(call, chain, result, deps);
  if (result.kind !== 'response' || result.status >= 300) return result;
  const model = call.resolved.model.display_name;
  const r = await checkAnswer(chain, endpointOf(call), call.route.wire, result.body, deps, model);
  if (r.verdict) call.rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
  if (!r.refusal) return r.body === result.body ? result : { ...result, body: r.body };
  // The upstream spent the tokens: charge them before the refusal.
  const read = readBody(result.body);
  call.rec.read(read.usage, read.id);
  await call.permit.end(call.permit.chargesTokens ? totalOf(read.usage) : undefined);
  const message = blockMessage('response', r.refusal.guardrail);
  return { kind: 'error', failure: { kind: 'content_filter', status: 422, message }, served: result.served };
}

async function checkCachedOutput(
  call: ModelCall,
  chain: readonly Guardrail[],
  body: string,
  deps: ChainDeps,
): Promise<string | ProxyError> {
  const model = call.resolved.model.display_name;
  const r = await checkAnswer(chain, endpointOf(call), call.route.wire, body, deps, model, GUARDRAIL_MSG.blockedCached);
  if (r.verdict) call.rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
  return r.refusal ? new ProxyError(422, 'content_filter', blockMessage('response', r.refusal.guardrail)) : r.body;
}

function guardedStream(
  call: ModelCall,
  chain: readonly Guardrail[],
  result: Extract<DispatchResult, { kind: 'stream' }>,
  deps: ChainDeps,
): DispatchResult {
  const spent = new StreamUsage();
  let blocked = false;
  async function* tapped(): AsyncGenerator<Uint8Array> {
    for await (const c of result.chunks) {
      spent.observe(c);
      yield c;
    }
  }
  const chunks = guardStream(tapped(), {
    chain,
    endpoint: endpointOf(call),
    wire: call.route.wire,
    deps,
    abort: result.abort,
    onVerdict: (v) => call.rec.facet(GUARDRAIL_RECORD).ran(v),
    onBlock(name, verdict) {
      blocked = true;
      if (!verdict) call.rec.facet(GUARDRAIL_RECORD).blocked = true; // over the hold-back cap: no verdict
      const used = spent.usage();
      call.rec.read(used, spent.id);
      void call.permit.end(call.permit.chargesTokens ? totalOf(used) : undefined);
      call.rec.endedByGateway('content_filter', blockMessage('response', name));
    },
  });
  // A block is the guardrail's doing, not the upstream's: its health hears of a whole stream.
  return { ...result, chunks, settle: (end) => result.settle(blocked ? 'complete' : end) };
}
