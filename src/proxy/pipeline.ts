// The request pipeline: the ordered steps every model call passes (docs/architecture.md "A request").
//
//   [tracking: in-flight slot, request id, the record]                    track.ts
//   identify → read body → admit → (policies) → (input checks) → reserve → (cache lookup)
//   → dispatch with its attempts → (output checks) → (cache store) → answer
//   → when the last byte is out: usage commit → [telemetry: metrics, access log]   answer.ts, track.ts
//
// Steps in parentheses are features: each is in the list only when it is configured, so an absent one costs
// nothing per request. The list is built once per app (`buildPipeline`); a feature whose rules come from the
// resources builds its sub-steps once per snapshot (`perSnapshot`). Every write to the request's record goes
// through `RequestRecord` (record.ts).
import type { Context } from 'hono';
import { ProxyError } from '../http/errors.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Permit } from '../routing/rate-limit.ts';
import type { DispatchResult } from '../routing/dispatch.ts';
import type { Caller, ResolvedModel } from './admission.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestRecord } from './record.ts';
import type { ModelCallRoute } from './routes.ts';

/**
 * One model call as it passes the steps. Each field is set by the step its comment names, before any later
 * step reads it (the order is `buildPipeline`'s).
 */
export class ModelCall {
  /** identify */
  caller!: Caller;
  /** read body */
  body!: Record<string, unknown>;
  /** admit */
  resolved!: ResolvedModel;
  /** admit: the caller's address under `proxy.real_ip` (for `allowed_cidrs` and `hash_on: client_ip`). */
  clientIp: string | undefined = undefined;
  /** reserve */
  permit!: Permit;
  /** reserve: the caller-facing `x-ratelimit-*` headers of the limits that apply. */
  limitHeaders: Record<string, string> | undefined = undefined;

  constructor(readonly c: Context<ProxyEnv>, readonly rec: RequestRecord, readonly route: ModelCallRoute) {}

  get headers(): Headers {
    return this.c.req.raw.headers;
  }
}

/** What a step before dispatch decides: go on (undefined), refuse (the caller's error), or answer here. */
export type StepResult = ProxyError | Response | undefined;

export type StepName =
  | 'identify'
  | 'read body'
  | 'admit'
  | 'policies'
  | 'input checks'
  | 'cache lookup'
  | 'reserve';

/** A step before dispatch. A synchronous step returns its result directly (no promise turn). */
export interface Step {
  readonly name: StepName;
  run(call: ModelCall): StepResult | Promise<StepResult>;
}

/** A step on the dispatch result (a whole answer or a stream): it may pass it on or return another. */
export interface AnswerStep {
  readonly name: 'output checks' | 'cache store';
  run(call: ModelCall, result: DispatchResult): DispatchResult | Promise<DispatchResult>;
}

/** The steps every model call has. */
export interface CoreSteps {
  identify: Step;
  readBody: Step;
  admit: Step;
  reserve: Step;
  /** Dispatch with its attempts (answer.ts). */
  dispatch(call: ModelCall): Promise<DispatchResult>;
  /** The answer in the caller's wire; the usage commit when its last byte is out (answer.ts). */
  respond(call: ModelCall, result: DispatchResult): Response | Promise<Response>;
  /** A step's refusal, recorded and answered in the caller's wire. */
  refuse(call: ModelCall, e: ProxyError): Response;
}

/** The optional steps: each present only when its feature is configured. */
export interface FeatureSteps {
  /** Admission policies beyond the built-in checks (e.g. rate-limit policies). */
  policies?: Step;
  /** Checks of the request before it is sent (guardrails). */
  inputChecks?: Step;
  /** An answer from the response cache instead of a dispatch. */
  cacheLookup?: Step;
  /** Checks of the answer before it goes out (guardrails). */
  outputChecks?: AnswerStep;
  /** Keeping the answer in the response cache. */
  cacheStore?: AnswerStep;
}

export interface Pipeline extends Pick<CoreSteps, 'dispatch' | 'respond' | 'refuse'> {
  /** Before dispatch, in order. */
  readonly steps: readonly Step[];
  /** On the dispatch result, in order. */
  readonly answerSteps: readonly AnswerStep[];
}

/** The pipeline of a proxy app, in the order of this file's header, without the steps not configured. */
export function buildPipeline(core: CoreSteps, features: FeatureSteps = {}): Pipeline {
  const steps = [core.identify, core.readBody, core.admit, features.policies, features.inputChecks];
  // The cache lookup after the reservation (AISIX): a cached answer has taken its request slots.
  steps.push(core.reserve, features.cacheLookup);
  const answerSteps = [features.outputChecks, features.cacheStore];
  return {
    steps: steps.filter((s): s is Step => s !== undefined),
    answerSteps: answerSteps.filter((s): s is AnswerStep => s !== undefined),
    dispatch: core.dispatch,
    respond: core.respond,
    refuse: core.refuse,
  };
}

/**
 * One model call through the pipeline: the steps before dispatch in order until one refuses or answers,
 * then dispatch, the answer steps, and the answer.
 */
export async function runModelCall(p: Pipeline, call: ModelCall): Promise<Response> {
  const steps = p.steps;
  for (let i = 0; i < steps.length; i++) {
    let r = steps[i]!.run(call);
    if (r instanceof Promise) r = await r;
    if (r !== undefined) return r instanceof ProxyError ? p.refuse(call, r) : r;
  }
  let result = await p.dispatch(call);
  for (let i = 0; i < p.answerSteps.length; i++) {
    const r = p.answerSteps[i]!.run(call, result);
    result = r instanceof Promise ? await r : r;
  }
  return p.respond(call, result);
}

/**
 * A step whose sub-steps come from the resources of the caller's snapshot (e.g. guardrails bound to models):
 * built once per snapshot, on its first request, and run in order. Needs the caller (after `identify`).
 */
export function perSnapshot(name: StepName, build: (snapshot: Snapshot) => readonly Step[]): Step {
  const built = new WeakMap<Snapshot, readonly Step[]>();
  return {
    name,
    async run(call) {
      const snapshot = call.caller.snapshot;
      let steps = built.get(snapshot);
      if (!steps) {
        steps = build(snapshot);
        built.set(snapshot, steps);
      }
      for (let i = 0; i < steps.length; i++) {
        let r = steps[i]!.run(call);
        if (r instanceof Promise) r = await r;
        if (r !== undefined) return r;
      }
      return undefined;
    },
  };
}
